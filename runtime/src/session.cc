// Session: validates inputs and outputs by name, dtype and shape, then hands bytes to the backend.
#include <fmt/format.h>

#include <cstring>

#include "backend.h"

namespace stitch::rt {
namespace {

std::string dims_text(const std::vector<int64_t>& d) {
  if (d.empty()) return "scalar";
  return fmt::format("{}", fmt::join(d, "x"));
}

template <typename List>
int find_by_name(const List& list, const std::string& name, const char* role) {
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].name == name) return static_cast<int>(i);
  std::string names;
  for (const auto& t : list) names += (names.empty() ? "'" : ", '") + t.name + "'";
  fail(2, fmt::format("the model has no {} named '{}' (its {}s: {})", role, name, role, names));
}

}  // namespace

std::vector<void*> buffer_addresses(const ModelData& m, void* arena, void* weights,
                                    const std::vector<uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                                    void* fault_word) {
  std::vector<void*> out;
  out.reserve(m.buffers.size());
  for (const BufferDesc& b : m.buffers) {
    switch (b.storage) {
      case StorageKind::kArena: out.push_back(static_cast<uint8_t*>(arena) + b.offset); break;
      case StorageKind::kWeights: out.push_back(static_cast<uint8_t*>(weights) + b.offset); break;
      case StorageKind::kInput: out.push_back(inputs[b.index]); break;
      case StorageKind::kOutput: out.push_back(outputs[b.index]); break;
      case StorageKind::kFault:
        out.push_back(fault_word);
        break;
    }
  }
  return out;
}

void check_faults(const ModelData& m, uint64_t* word) {
  const uint64_t code = word[0];
  const int64_t value = static_cast<int64_t>(word[1]);
  if (code == 0) return;
  word[0] = word[1] = 0;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    if (m.steps[i].op != StepDesc::kKernel) continue;
    for (const FaultDesc& f : m.kernels[m.steps[i].kernel].faults) {
      if (f.code != code) continue;
      std::string what = f.message;
      if (const size_t at = what.find("{value}"); at != std::string::npos)
        what.replace(at, 7, std::to_string(value));
      fail(2, fmt::format(
                  "step {} (kernel {}): node '{}' ({}): {}; the outputs of this run are not valid (check "
                  "the input data)",
                  i, m.kernels[m.steps[i].kernel].name, f.node, f.op, what));
    }
  }
  fail(2, fmt::format(
              "a kernel of '{}' recorded fault code {:016x} (value {}), which no kernel of its schedule.json "
              "declares; the artifact is damaged, recompile it",
              m.dir, code, value));
}

std::vector<LaunchArgs> kernel_launch_args(const ModelData& m, const std::vector<void*>& addresses) {
  std::vector<LaunchArgs> out(m.steps.size());
  for (size_t i = 0; i < m.steps.size(); ++i) {
    if (m.steps[i].op != StepDesc::kKernel) continue;
    LaunchArgs& a = out[i];
    for (int b : m.steps[i].args) a.values.push_back(addresses[b]);
    for (void*& v : a.values) a.pointers.push_back(&v);
  }
  return out;
}

Session::Session(std::shared_ptr<const Model> model, Backend backend, SessionOptions options)
    : model_(std::move(model)) {
  const ModelData& m = model_->data();
  const char* want = backend == Backend::kEmu ? "emu" : "cuda";
  bool built = false;
  for (const auto& b : m.backends) built |= b == want;
  if (!built)
    fail(2, fmt::format("artifact '{}' was compiled without the {} backend ({}); recompile without {}", m.dir, want,
                        backend == Backend::kEmu ? "--no-emu" : "--no-nvcc",
                        backend == Backend::kEmu ? "--no-emu" : "--no-nvcc"));
  impl_ = backend == Backend::kEmu ? make_emu_backend(m) : make_cuda_backend(m, options.cuda_graph);
  input_set_.assign(m.inputs.size(), false);
}

Session::~Session() = default;

void Session::set_input(const std::string& name, const std::string& dtype, const std::vector<int64_t>& dims,
                        const void* data, size_t bytes) {
  const ModelData& m = model_->data();
  for (size_t f = 0; f < m.fixed_inputs.size(); ++f) {
    if (m.fixed_inputs[f].name != name) continue;
    const TensorInfo& t = m.fixed_inputs[f];
    const std::string& want = m.fixed_bytes[f];
    if (dtype != t.dtype || dims != t.dims || bytes != want.size() ||
        std::memcmp(data, want.data(), bytes) != 0)
      fail(2, fmt::format(
                  "input '{}' was fixed to another value ({} {}) when the artifact was compiled (stitchc "
                  "compile --constant-input {}=...): compile an artifact for this value, or do not set the "
                  "input",
                  name, t.dtype, dims_text(t.dims), name));
    return;  // the artifact computes with that value already
  }
  const int i = find_by_name(model_->inputs(), name, "input");
  const TensorInfo& t = model_->inputs()[i];
  if (dtype != t.dtype)
    fail(2, fmt::format("input '{}' has dtype {}, the artifact expects {}", name, dtype, t.dtype));
  if (dims != t.dims)
    fail(2, fmt::format("input '{}' has shape {}, the artifact was compiled for {} (recompile with --shape {}={})", name,
                        dims_text(dims), dims_text(t.dims), name, dims_text(dims)));
  if (bytes != static_cast<size_t>(t.bytes))
    fail(2, fmt::format("input '{}': {} bytes given, shape {} of {} needs {}", name, bytes, dims_text(t.dims), t.dtype,
                        t.bytes));
  impl_->upload(i, data, bytes);
  input_set_[i] = true;
}

void Session::run() {
  for (size_t i = 0; i < input_set_.size(); ++i)
    if (!input_set_[i]) fail(2, fmt::format("input '{}' was not set before run()", model_->inputs()[i].name));
  ran_ = false;
  failed_ = true;  // until the run returns: a fault (check_faults) or a failed launch leaves it set
  impl_->run();
  ran_ = true;
  failed_ = false;
}

void Session::carry(const std::string& output, const std::string& input) {
  const int o = find_by_name(model_->outputs(), output, "output");
  const int i = find_by_name(model_->inputs(), input, "input");
  const TensorInfo &from = model_->outputs()[o], &to = model_->inputs()[i];
  if (from.dtype != to.dtype || from.dims != to.dims)
    fail(2, fmt::format(
                "output '{}' ({} {}) cannot be carried into input '{}' ({} {}): dtype and shape must match",
                output, from.dtype, dims_text(from.dims), input, to.dtype, dims_text(to.dims)));
  if (!ran_)
    fail(2, fmt::format("carry('{}', '{}') before any run(): the output holds nothing yet", output, input));
  impl_->carry(o, i, static_cast<size_t>(to.bytes));
  input_set_[i] = true;
}

void Session::get_output(const std::string& name, void* data, size_t bytes) {
  if (failed_)
    fail(2, fmt::format(
                "get_output('{}'): the last run() failed, and the outputs it left are not valid; run again "
                "with valid inputs",
                name));
  const int i = find_by_name(model_->outputs(), name, "output");
  const TensorInfo& t = model_->outputs()[i];
  if (bytes != static_cast<size_t>(t.bytes))
    fail(2, fmt::format("output '{}' has {} bytes, the buffer given has {}", name, t.bytes, bytes));
  impl_->download(i, data, bytes);
}

std::vector<uint8_t> Session::output(const std::string& name) {
  const int i = find_by_name(model_->outputs(), name, "output");
  std::vector<uint8_t> out(static_cast<size_t>(model_->outputs()[i].bytes));
  get_output(name, out.data(), out.size());
  return out;
}

std::string Session::describe() const { return impl_->describe(); }

Profile Session::profile(int warmup, int iters, bool steps, bool copy) {
  if (warmup < 0 || iters < 1) fail(2, "profile: warm-up runs must be 0 or more and timed runs 1 or more");
  for (size_t i = 0; i < input_set_.size(); ++i)
    if (!input_set_[i])
      fail(2, fmt::format("input '{}' was not set before profile()", model_->inputs()[i].name));
  Profile p;
  p.clock = impl_->clock();
  for (int i = 0; i < warmup; ++i) impl_->run();
  for (int i = 0; i < iters; ++i) p.run_ms.push_back(impl_->timed_run());
  if (steps) {
    p.step_ms.assign(model_->data().steps.size(), {});
    for (int i = 0; i < iters; ++i) {
      const std::vector<double> t = impl_->timed_steps();
      for (size_t s = 0; s < t.size() && s < p.step_ms.size(); ++s) p.step_ms[s].push_back(t[s]);
    }
  }
  if (copy) p.copy_bytes_per_s = impl_->copy_bytes_per_s();
  return p;
}

}  // namespace stitch::rt
