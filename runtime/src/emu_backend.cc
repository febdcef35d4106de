// The emu backend: host memory for the arena, weights and inputs/outputs; the artifact's
// kernels built for the emulation layer (emu/kernels_emu.so, made by stitchc) and loaded with
// dlopen; library calls on the CPU (cpu_ops.h). Runs the schedule in order, synchronously.
#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "backend.h"
#include "cpu_ops.h"
#include "stitch/artifact_format.h"
#include "stitch/emu/launch.h"

namespace stitch::rt {
namespace {

struct AlignedBuffer {
  explicit AlignedBuffer(int64_t bytes) {
    size_t n = static_cast<size_t>(std::max<int64_t>(bytes, 1) + artifact::kAlignment - 1) /
               artifact::kAlignment * artifact::kAlignment;
    p = static_cast<uint8_t*>(std::aligned_alloc(artifact::kAlignment, n));
    if (!p) fail(2, fmt::format("out of host memory allocating {} bytes", bytes));
    std::memset(p, 0, n);
  }
  ~AlignedBuffer() { std::free(p); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  uint8_t* p = nullptr;
};

class EmuBackend final : public BackendImpl {
 public:
  explicit EmuBackend(const ModelData& m) : m_(m), arena_(m.arena_bytes), weights_(m.weights_bytes) {
    std::memcpy(weights_.p, m.weights.data(), m.weights.size());
    for (const TensorInfo& t : m.inputs) inputs_.push_back(std::make_unique<AlignedBuffer>(t.bytes));
    for (auto& b : inputs_) in_.push_back(b->p);
    for (size_t i = 0; i < m.outputs.size(); ++i) {  // an output written in place is its input's buffer
      const int j = m.output_in_input[i];
      if (j < 0) outputs_.push_back(std::make_unique<AlignedBuffer>(m.outputs[i].bytes));
      out_.push_back(j >= 0 ? in_[j] : outputs_.back()->p);
    }
    addr_ = buffer_addresses(m, arena_.p, weights_.p, in_, out_, fault_);
    args_ = kernel_launch_args(m, addr_);
    const std::string lib = (std::filesystem::path(m.dir) / artifact::kEmuLibrary).string();
    handle_ = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_)
      fail(2, fmt::format("cannot load the emulation kernels '{}': {}; recompile the model with stitchc on this "
                          "machine", lib, dlerror()));
    for (const KernelDesc& k : m.kernels) {
      auto* e = static_cast<const emu::KernelEntry*>(dlsym(handle_, ("stitch_emu_entry_" + k.name).c_str()));
      if (!e) fail(2, fmt::format("'{}' has no kernel '{}'; the artifact is damaged, recompile it", lib, k.name));
      entries_.push_back(e);
    }
  }
  ~EmuBackend() override {
    if (handle_) dlclose(handle_);
  }

  void upload(int i, const void* data, size_t bytes) override { std::memcpy(in_[i], data, bytes); }
  void download(int i, void* data, size_t bytes) override { std::memcpy(data, out_[i], bytes); }
  void carry(int output, int input, size_t bytes) override {
    if (out_[output] != in_[input]) std::memcpy(in_[input], out_[output], bytes);
  }
  std::string describe() const override {
    return fmt::format("emu: CPU emulation of {} kernels, {} arena", m_.kernels.size(), m_.arena_bytes);
  }

  void run() override {
    for (size_t i = 0; i < m_.steps.size(); ++i) run_step(i);
    check_faults(m_, fault_);
  }

  std::string clock() const override { return "host clock (CPU emulation: says nothing about a GPU)"; }
  double timed_run() override {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<double> timed_steps() override {
    std::vector<double> ms;
    for (size_t i = 0; i < m_.steps.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      run_step(i);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    check_faults(m_, fault_);
    return ms;
  }

 private:
  void run_step(size_t i) {
    {
      const StepDesc& s = m_.steps[i];
      switch (s.op) {
        case StepDesc::kKernel: {
          const KernelDesc& k = m_.kernels[s.kernel];
          dim3 grid(k.grid[0], k.grid[1], k.grid[2]), block(k.block[0], k.block[1], k.block[2]);
          emu::Result r = entries_[s.kernel]->launch(grid, block, static_cast<size_t>(k.smem),
                                                     args_[i].pointers.data(), k.cooperative);
          if (!r.ok()) fail(3, fmt::format("{} failed on the emu backend: {}", m_.step_text(i), r.message));
          break;
        }
        case StepDesc::kGemm:
          cpu_gemm(s.gemm, s.dtype, ptr(s.args[0]), ptr(s.args[1]), ptr(s.args[2]),
                   s.gemm.bias ? ptr(s.args[3]) : nullptr, s.gemm.residual ? ptr(s.args.back()) : nullptr,
                   m_.tf32);
          break;
        case StepDesc::kConv:
          cpu_conv(s.conv, s.dtype, ptr(s.args[0]), ptr(s.args[1]),
                   s.conv.has_bias ? ptr(s.args[3]) : nullptr, s.conv.residual ? ptr(s.args.back()) : nullptr,
                   ptr(s.args[2]), m_.tf32);
          break;
        case StepDesc::kConvTranspose:
          cpu_conv_transpose(s.conv, s.dtype, ptr(s.args[0]), ptr(s.args[1]), ptr(s.args[2]), m_.tf32);
          break;
        case StepDesc::kCopy:
          std::memcpy(ptr(s.dst), ptr(s.src), static_cast<size_t>(s.bytes));
          break;
      }
    }
  }

  void* ptr(int id) const { return addr_[id]; }

  const ModelData& m_;
  AlignedBuffer arena_, weights_;
  alignas(16) uint64_t fault_[2] = {0, 0};  // the session's fault word (check_faults)
  std::vector<std::unique_ptr<AlignedBuffer>> inputs_, outputs_;
  std::vector<uint8_t*> in_, out_;  // each input's and output's buffer (an output may be an input's)
  std::vector<void*> addr_;       // every buffer's address
  std::vector<LaunchArgs> args_;  // per kernel step
  void* handle_ = nullptr;
  std::vector<const emu::KernelEntry*> entries_;
};

}  // namespace

std::unique_ptr<BackendImpl> make_emu_backend(const ModelData& m) { return std::make_unique<EmuBackend>(m); }

}  // namespace stitch::rt
