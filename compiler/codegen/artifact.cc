#include "codegen/artifact.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <utility>

#include "codegen/build_tools.h"
#include "codegen/embedded_headers.h"
#include "codegen/emu_build.h"
#include "codegen/stitch.h"
#include "stitch/artifact_format.h"
#include "support/check.h"

namespace stitch::codegen {
namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

// A file's size and checksum, read a chunk at a time (a model can be gigabytes).
std::pair<size_t, uint64_t> file_digest(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> chunk(size_t{1} << 20);
  size_t n = 0;
  artifact::Checksum h;
  while (f) {
    f.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<size_t>(f.gcount());
    h.update(chunk.data(), got);
    n += got;
  }
  return {n, h.digest()};
}

std::string hex64(uint64_t h) { return fmt::format("{:016x}", h); }

ordered_json dims_json(const Dims& d) { return ordered_json(std::vector<int64_t>(d.begin(), d.end())); }

ordered_json tensor_json(const Value* v) {
  return {{"name", v->name}, {"dtype", std::string(dtype_name(v->dtype))}, {"dims", dims_json(*v->dims)}};
}

// "sm_90" -> "90"; error for anything else.
StatusOr<std::string> arch_number(const std::string& arch) {
  static const std::regex re("sm_([0-9]{2,3}[a-z]?)");
  std::smatch m;
  if (!std::regex_match(arch, m, re))
    return Status::user(fmt::format("--arch '{}' is not of the form sm_XY (for example sm_80,sm_90)", arch));
  return m[1].str();
}

// Where an nvcc error points into a generated file, show that line.
std::string annotate_nvcc_errors(const std::string& log) {
  static const std::regex loc(R"(([^\s:]+\.cu)\((\d+)\): error)");
  std::string extra;
  for (std::sregex_iterator it(log.begin(), log.end(), loc), end; it != end; ++it) {
    const std::string file = (*it)[1].str();
    const int line = std::stoi((*it)[2].str());
    std::ifstream f(file);
    std::string text;
    for (int i = 1; std::getline(f, text); ++i)
      if (i == line) {
        extra += fmt::format("\n  {}:{}: {}", file, line, text);
        break;
      }
    if (!extra.empty()) break;  // the first error is enough
  }
  return extra;
}

}  // namespace

StatusOr<std::string> find_nvcc() {
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) {
    // An explicit CUDA_HOME is the user's choice: no silent fallback to another toolkit.
    const fs::path nvcc = fs::path(home) / "bin" / "nvcc";
    if (access(nvcc.c_str(), X_OK) == 0) return nvcc.string();
    return Status::user(fmt::format("nvcc not found at {} (from CUDA_HOME): point CUDA_HOME at a CUDA toolkit, or "
                                    "pass --no-nvcc to emit sources only", nvcc.string()));
  }
  if (std::string found = on_path("nvcc"); !found.empty()) return found;
  if (executable("/usr/local/cuda/bin/nvcc")) return std::string("/usr/local/cuda/bin/nvcc");
  return Status::user("nvcc not found (looked in $CUDA_HOME/bin, PATH and /usr/local/cuda/bin): install the CUDA "
                      "toolkit, set CUDA_HOME, or pass --no-nvcc to emit sources only");
}

std::vector<KernelResources> parse_ptxas(const std::string& log) {
  std::vector<KernelResources> out;
  static const std::regex entry(R"(Compiling entry function '([^']+)' for '([^']+)')");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::stringstream ss(log);
  std::string line;
  std::smatch m;
  while (std::getline(ss, line)) {
    if (std::regex_search(line, m, entry)) {
      out.push_back({m[1].str(), m[2].str()});
      continue;
    }
    if (out.empty()) continue;
    KernelResources& r = out.back();
    if (std::regex_search(line, m, frame)) {
      r.stack_bytes = std::stoi(m[1].str());
      r.spill_stores = std::stoi(m[2].str());
      r.spill_loads = std::stoi(m[3].str());
    }
    if (std::regex_search(line, m, used)) r.registers = std::stoi(m[1].str());
    if (line.find("Used") != std::string::npos && std::regex_search(line, m, smem)) r.smem_bytes = std::stoi(m[1].str());
  }
  return out;
}

namespace {

constexpr const char* kNvccLog = "kernels/nvcc.log";

struct Writer {
  const Graph& g;
  const Schedule& s;
  const CompileOptions& o;
  fs::path tmp;
  ArtifactSummary* summary;
  std::map<const Value*, int> buffer_ids;
  ordered_json buffers = ordered_json::array();
  std::map<std::string, std::pair<size_t, uint64_t>> written;  // relative path -> bytes, checksum
  std::string log;                                             // nvcc's, once it ran

  // Writes a file of the artifact and remembers its size and checksum for the manifest.
  Status put(const std::string& rel, const std::string& text) {
    RETURN_IF_ERROR(write_file(tmp / rel, text));
    written[rel] = {text.size(), artifact::checksum(text.data(), text.size())};
    return Status::ok();
  }

  int buffer_id(const Value* v) {
    if (auto it = buffer_ids.find(v); it != buffer_ids.end()) return it->second;
    const BufferRef& r = buffer_of(s, v);
    ordered_json b = tensor_json(v);
    b["storage"] = storage_name(r.storage);
    if (r.storage == Storage::kArena || r.storage == Storage::kWeights) b["offset"] = r.offset;
    if (r.storage == Storage::kInput || r.storage == Storage::kOutput) b["index"] = r.index;
    b["bytes"] = num_elements(*v->dims) * dtype_size(v->dtype);
    buffers.push_back(b);
    return buffer_ids[v] = static_cast<int>(buffers.size()) - 1;
  }
  int output_slot_id(const Value* v, int slot) {
    ordered_json b = tensor_json(v);
    b["storage"] = "output";
    b["index"] = slot;
    b["bytes"] = num_elements(*v->dims) * dtype_size(v->dtype);
    buffers.push_back(b);
    return static_cast<int>(buffers.size()) - 1;
  }

  Status kernels_dir() {
    fs::create_directories(tmp / artifact::kKernelsDir);
    std::string unity = "// Every kernel of this artifact in one translation unit (one nvcc run).\n";
    for (const Kernel& k : s.kernels) {
      RETURN_IF_ERROR(put(std::string(artifact::kKernelsDir) + "/" + k.name + ".cu", k.source));
      unity += fmt::format("#include \"{}.cu\"\n", k.name);
    }
    RETURN_IF_ERROR(put(artifact::kUnityFile, unity));
    // The device headers the kernels include by name, next to them (from those stitchc carries).
    return write_headers(tmp / artifact::kKernelsDir, "stitch/device/");
  }

  Status nvcc() {
    ASSIGN_OR_RETURN(std::string nvcc, find_nvcc());
    std::vector<std::string> argv = {nvcc, "-std=c++17", "-O3", "--fatbin", "-Xptxas", "-v"};
    std::string highest;
    for (const std::string& a : o.archs) {
      ASSIGN_OR_RETURN(std::string num, arch_number(a));
      argv.push_back(fmt::format("-gencode=arch=compute_{0},code=sm_{0}", num));
      highest = std::max(highest, num);
    }
    // PTX of the newest arch too, so newer GPUs can JIT it.
    argv.push_back(fmt::format("-gencode=arch=compute_{0},code=compute_{0}", highest));
    auto t0 = std::chrono::steady_clock::now();
    const fs::path fatbin = tmp / artifact::kFatbinFile;
    // The build's key: nvcc, its arguments (the paths aside, the environment's flags in), the
    // device headers and every kernel source. It names the directory nvcc builds in
    // (run_nvcc_by_content) and the build cache's entry (CompileOptions::nvcc_cache_dir: the fatbin
    // and nvcc's log of a build before).
    std::string key;
    {
      artifact::Checksum k;
      auto add = [&](std::string_view x) { k.update(x.data(), x.size() + 1); };  // with a separator
      add(tool_identity(nvcc));
      for (size_t i = 1; i < argv.size(); ++i) add(argv[i]);
      for (const char* var : {"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"})  // flags nvcc takes from them
        add(std::getenv(var) ? std::getenv(var) : "");
      add(embedded_headers_digest());
      for (const auto& [rel, sum] : written)
        if (rel.ends_with(".cu")) add(fmt::format("{} {:016x}", rel, sum.second));
      key = fmt::format("{:016x}", k.digest());
      if (!o.nvcc_cache_dir.empty() &&
          take_from_cache(o.nvcc_cache_dir, key, {{".fatbin", fatbin}, {".log", tmp / kNvccLog}})) {
        std::ifstream f(tmp / kNvccLog, std::ios::binary);
        const std::string cached((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        RETURN_IF_ERROR(put(kNvccLog, cached));
        this->log = cached;
        summary->nvcc_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        summary->nvcc_from_cache = true;
        summary->resources = parse_ptxas(cached);
        return Status::ok();
      }
    }
    std::string log;
    const fs::path unity = tmp / artifact::kUnityFile;
    int rc = run_nvcc_by_content(argv, unity.parent_path(), unity.filename().string(), fatbin, key, &log);
    summary->nvcc_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RETURN_IF_ERROR(put(kNvccLog, log));
    this->log = log;
    if (rc != 0)
      return Status::internal(fmt::format("nvcc failed on the generated kernels (exit {}):\n{}{}", rc, log,
                                          annotate_nvcc_errors(log)));
    summary->resources = parse_ptxas(log);
    if (!o.nvcc_cache_dir.empty())
      put_in_cache(o.nvcc_cache_dir, key, {{".fatbin", fatbin}, {".log", tmp / kNvccLog}});
    return Status::ok();
  }

  // The fatbin and ptxas's report of a build of the same kernel sources, in place of nvcc's run.
  Status take(const KernelBuild& b) {
    std::map<std::string, uint64_t> sources;
    for (const auto& [rel, sum] : written)
      if (rel.ends_with(".cu")) sources[rel] = sum.second;
    if (sources != b.sources)
      return Status::internal("the kernels built by nvcc are not this schedule's: build them again");
    std::error_code ec;
    fs::copy_file(fs::path(b.dir) / artifact::kFatbinFile, tmp / artifact::kFatbinFile, ec);
    if (ec)
      return Status::user(
          fmt::format("cannot copy the kernels' fatbin into '{}': {}", tmp.string(), ec.message()));
    RETURN_IF_ERROR(put(kNvccLog, b.log));
    summary->resources = b.resources;
    summary->nvcc_seconds = b.seconds;
    summary->nvcc_from_cache = b.from_cache;
    return Status::ok();
  }

  Status emu() {
    fs::create_directories(tmp / "emu");
    std::vector<const Kernel*> kernels;
    for (const Kernel& k : s.kernels) kernels.push_back(&k);
    const std::string unit = emu_translation_unit("#include \"../kernels/all_kernels.cu\"\n", kernels);
    RETURN_IF_ERROR(put("emu/kernels_emu.cc", unit));
    const fs::path library = tmp / artifact::kEmuLibrary;
    if (!o.emu_library.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      std::error_code ec;
      if (!fs::copy_file(o.emu_library, library, ec))
        return Status::user(fmt::format("cannot copy the emulation library '{}' into the artifact: {}",
                                        o.emu_library, ec.message()));
      summary->emu_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return Status::ok();
    }
    ASSIGN_OR_RETURN(const EmuBuild b,
                     build_emu_library(tmp / "emu" / "kernels_emu.cc", unit, kernels, library,
                                       EmuBuildOptions{o.emu_pch, o.emu_cache_dir}));
    summary->emu_seconds = b.seconds;
    summary->emu_precompiled_header = b.precompiled_header;
    summary->emu_from_cache = b.from_cache;
    return Status::ok();
  }

  // The weights file, written in offset order as it is hashed: no second copy of every weight in
  // memory (a model's weights can be most of the machine's).
  Status weights() {
    const fs::path path = tmp / artifact::kWeightsFile;
    std::ofstream f(path, std::ios::binary);
    artifact::Checksum h;
    int64_t at = 0;
    const std::vector<char> zeros(static_cast<size_t>(artifact::kAlignment), '\0');
    auto emit = [&](const void* p, int64_t n) {
      f.write(static_cast<const char*>(p), n);
      h.update(p, static_cast<size_t>(n));
      at += n;
    };
    auto pad_to = [&](int64_t offset) {
      STITCH_CHECK(offset >= at, "weights out of order: offset {} after {} bytes", offset, at);
      while (at < offset) emit(zeros.data(), std::min<int64_t>(offset - at, artifact::kAlignment));
    };
    for (const Value* v : s.weights) {
      const BufferRef& r = buffer_of(s, v);
      const Tensor& t = *v->constant;
      pad_to(r.offset);
      emit(t.data(), t.byte_size());
    }
    pad_to(s.weights_bytes);
    f.close();
    if (!f)
      return Status::user(fmt::format(
          "cannot write '{}': check the output directory is writable and has room", path.string()));
    written[artifact::kWeightsFile] = {static_cast<size_t>(at), h.digest()};
    return Status::ok();
  }

  ordered_json gemm_json(const LibraryCall& c) {
    const GemmParams& p = c.gemm;
    return {{"m", p.m}, {"n", p.n}, {"k", p.k}, {"trans_a", p.trans_a}, {"trans_b", p.trans_b},
            {"lda", p.lda}, {"ldb", p.ldb}, {"ldc", p.ldc}, {"alpha", p.alpha}, {"beta", p.beta},
            {"batch", dims_json(p.batch)}, {"stride_a", dims_json(p.stride_a)}, {"stride_b", dims_json(p.stride_b)},
            {"stride_c", dims_json(p.stride_c)}, {"offset_a", p.offset_a}, {"offset_b", p.offset_b},
            {"epilogue", p.epilogue.empty() ? "none" : p.epilogue}};
  }
  ordered_json conv_json(const LibraryCall& c) {
    const ConvParams& p = c.conv;
    return {{"n", p.n},
            {"c", p.c},
            {"m", p.m},
            {"group", p.group},
            {"in", dims_json(p.in)},
            {"kernel", dims_json(p.kernel)},
            {"out", dims_json(p.out)},
            {"strides", dims_json(p.strides)},
            {"dilations", dims_json(p.dilations)},
            {"pads", dims_json(p.pads)},
            {"has_bias", p.has_bias},
            {"epilogue", p.epilogue.empty() ? "none" : p.epilogue}};
  }

  ordered_json schedule() {
    ordered_json kernels = ordered_json::array(), steps = ordered_json::array();
    for (const Kernel& k : s.kernels) {
      kernels.push_back({{"name", k.name},
                         {"grid", k.grid},
                         {"block", k.block},
                         {"smem", k.smem_bytes},
                         {"cooperative", k.cooperative}});
      if (k.faults.empty()) continue;
      ordered_json faults = ordered_json::array();
      for (const KernelFault& f : k.faults)
        faults.push_back({{"code", hex64(f.code)}, {"node", f.node}, {"op", f.op}, {"message", f.message}});
      kernels.back()["faults"] = faults;
    }
    for (const Step& st : s.steps) {
      ordered_json j;
      if (st.kind == Step::kKernel) {
        const Kernel& k = s.kernels[st.item];
        ordered_json args = ordered_json::array();
        for (const KernelParam& p : k.params) args.push_back(buffer_id(p.value));
        j = {{"op", "kernel"}, {"kernel", st.item}, {"args", args}};
        ordered_json nodes = ordered_json::array();
        for (const Node* n : k.nodes) nodes.push_back(n->name);
        j["nodes"] = nodes;
      } else if (st.kind == Step::kLibrary) {
        const LibraryCall& c = s.calls[st.item];
        ordered_json args = ordered_json::array();
        for (const Value* v : c.args) args.push_back(buffer_id(v));
        j = {{"op", c.kind}, {"dtype", std::string(dtype_name(c.dtype))}, {"args", args},
             {"params", c.kind == "gemm" ? gemm_json(c) : conv_json(c)}, {"nodes", {c.node->name}}};
      } else {
        const int src = buffer_id(st.src);
        j = {{"op", "copy"}, {"src", src}, {"dst", output_slot_id(st.dst, st.dst_output)},
             {"bytes", num_elements(*st.src->dims) * dtype_size(st.src->dtype)}};
      }
      steps.push_back(j);
    }
    ordered_json sched = {{"format", artifact::kFormatName},
                          {"version", artifact::kArtifactVersion},
                          {"arena_bytes", s.plan.arena_bytes},
                          {"weights_bytes", s.weights_bytes},
                          {"tf32", o.tf32}};
    sched["buffers"] = buffers;  // filled while building the steps
    sched["kernels"] = kernels;
    sched["steps"] = steps;
    return sched;
  }

  ordered_json report() {
    ordered_json kernels = ordered_json::array(), calls = ordered_json::array();
    int64_t bytes = 0;
    size_t memory_intensive = 0;
    for (const Kernel& k : s.kernels) {
      ordered_json nodes = ordered_json::array();
      for (const Node* n : k.nodes) nodes.push_back({{"name", n->name}, {"op", n->op_type}});
      const bool gemm = is_gemm_kernel(k);
      memory_intensive += !gemm;
      ordered_json j = {{"name", k.name},
                        {"kind", gemm ? "gemm" : "memory-intensive"},
                        {"nodes", nodes},
                        {"mapping", k.mapping},
                        {"grid", k.grid},
                        {"block", k.block},
                        {"smem", k.smem_bytes},
                        {"bytes_moved", k.bytes_moved},
                        {"evaluations", k.evaluations},
                        {"lane_exchanges", k.lane_exchanges},
                        {"source_bytes", k.source.size()}};
      ordered_json res = ordered_json::array();
      for (const KernelResources& r : summary->resources)
        if (r.kernel == k.name)
          res.push_back({{"arch", r.arch}, {"registers", r.registers}, {"spill_stores", r.spill_stores},
                         {"spill_loads", r.spill_loads}, {"smem_bytes", r.smem_bytes}, {"stack_bytes", r.stack_bytes}});
      j["ptxas"] = res;
      kernels.push_back(j);
      bytes += k.bytes_moved;
    }
    for (const LibraryCall& c : s.calls)
      calls.push_back({{"kind", c.kind}, {"node", c.node->name}, {"op", c.node->op_type}, {"flops", c.flops}});
    ordered_json groups = ordered_json::array();
    for (const Kernel& k : s.kernels) {
      ordered_json names = ordered_json::array();
      for (const Node* n : k.nodes) names.push_back(n->name);
      auto why = o.group_reasons.find(k.nodes.front()->name);
      groups.push_back({{"kernel", k.name}, {"nodes", names},
                        {"scheme", k.scheme},
                        {"reason", why != o.group_reasons.end() ? why->second : "--fusion " + o.fusion}});
    }
    return {{"fusion", o.fusion},
            {"kernel_launches", s.kernels.size()},
            {"memory_intensive_kernels", memory_intensive},
            {"library_calls", s.calls.size()},
            {"views", s.views},
            {"estimated_bytes_moved", bytes},
            {"memory",
             {{"arena_bytes", s.plan.arena_bytes},
              {"intermediate_sum_bytes", s.plan.total_bytes},
              {"live_peak_bytes", s.plan.peak_live_bytes},
              {"in_place", s.plan.in_place},
              {"arena_buffers", s.requests.size()},
              {"weights_bytes", s.weights_bytes}}},
            {"nvcc_seconds", summary->nvcc_seconds},
            {"nvcc_from_cache", summary->nvcc_from_cache},
            {"emu_build_seconds", summary->emu_seconds},
            {"emu_precompiled_header", summary->emu_precompiled_header},
            {"emu_from_cache", summary->emu_from_cache},
            {"groups", groups},
            {"kernels", kernels},
            {"library_calls_detail", calls}};
  }

  Status manifest() {
    ordered_json ins = ordered_json::array(), outs = ordered_json::array();
    for (const Value* v : g.inputs) ins.push_back(tensor_json(v));
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      ordered_json t = tensor_json(g.outputs[i]);
      if (auto it = s.outputs_in_inputs.find(static_cast<int>(i)); it != s.outputs_in_inputs.end())
        t["in_place_of_input"] = it->second;  // the session's buffer of that input holds it
      outs.push_back(t);
    }
    // Inputs fixed at compile time, with their bytes, so that the runtime can check a caller that
    // still feeds them.
    ordered_json fixed = ordered_json::array();
    for (const FixedInput& f : g.fixed_inputs) {
      std::string hex;
      for (int64_t i = 0; i < f.value.byte_size(); ++i) hex += fmt::format("{:02x}", f.value.data()[i]);
      fixed.push_back({{"name", f.name},
                       {"dtype", std::string(dtype_name(f.value.dtype()))},
                       {"dims", dims_json(f.value.dims())},
                       {"data", hex}});
    }
    const auto [model_bytes, model_sum] = file_digest(o.model_path);
    ordered_json files = ordered_json::object();
    std::vector<fs::path> all;
    for (const auto& e : fs::recursive_directory_iterator(tmp))
      if (e.is_regular_file()) all.push_back(fs::relative(e.path(), tmp));
    std::sort(all.begin(), all.end());
    for (const fs::path& p : all) {
      const std::string rel = p.generic_string();
      auto it = written.find(rel);
      if (it == written.end())  // made by nvcc or the host compiler
        it = written.emplace(rel, file_digest(tmp / p)).first;
      files[rel] = {{"bytes", it->second.first}, {"xxh3", hex64(it->second.second)}};
    }
    ordered_json backends = ordered_json::array();
    if (o.run_nvcc) backends.push_back("cuda");
    if (o.build_emu) backends.push_back("emu");
    ordered_json m = {
        {"format", artifact::kFormatName},
        {"version", artifact::kArtifactVersion},
        {"compiler", "stitchc 0.1.0"},
        {"model", {{"path", o.model_path}, {"bytes", model_bytes}, {"xxh3", hex64(model_sum)}}},
        {"inputs", ins},
        {"outputs", outs},
        {"fixed_inputs", fixed},
        {"archs", o.archs},
        {"backends", backends},
        {"options",
         {{"fusion", o.fusion}, {"shapes", o.shape_bindings}, {"nvcc", o.run_nvcc}, {"tf32", o.tf32}}},
        {"files", files}};
    return write_file(tmp / artifact::kManifestFile, m.dump(2) + "\n");
  }
};

// A directory next to the artifact's `dir` (so that a rename moves it there), named after it with
// `suffix` and a unique tail. `dir` itself must be absent, empty or an artifact directory.
StatusOr<fs::path> sibling_directory(const std::string& dir, const std::string& suffix,
                                     const CompileOptions& o) {
  std::error_code ec;
  const fs::path out(dir);
  if (fs::exists(out, ec)) {
    const bool artifact = fs::exists(out / artifact::kManifestFile, ec);
    const bool empty = fs::is_directory(out, ec) && fs::is_empty(out, ec);
    if (!artifact && !empty)
      return Status::user(fmt::format("'{}' exists and is not a stitch artifact directory; choose another -o or "
                                      "remove it", dir));
  }
  for (const std::string& a : o.archs) RETURN_IF_ERROR(arch_number(a).status());
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec) return Status::user(fmt::format("cannot create '{}': {}", parent.string(), ec.message()));
  std::string templ = (parent / (out.filename().string() + suffix + "-XXXXXX")).string();
  if (mkdtemp(templ.data()) == nullptr)
    return Status::user(fmt::format("cannot create a directory next to '{}': check it is writable", dir));
  return fs::path(templ);
}

void remove_scratch(std::string& dir) {
  std::error_code ec;
  if (!dir.empty()) fs::remove_all(dir, ec);
  dir.clear();
}

}  // namespace

KernelBuild& KernelBuild::operator=(KernelBuild&& o) noexcept {
  if (this != &o) {
    remove_scratch(dir);
    resources = std::move(o.resources);
    seconds = o.seconds;
    from_cache = o.from_cache;
    log = std::move(o.log);
    dir = std::exchange(o.dir, std::string());
    sources = std::move(o.sources);
  }
  return *this;
}

KernelBuild::~KernelBuild() { remove_scratch(dir); }

StatusOr<KernelBuild> build_kernels(const Graph& g, const Schedule& s, const CompileOptions& o,
                                    const std::string& dir) {
  ASSIGN_OR_RETURN(fs::path tmp, sibling_directory(dir, ".nvcc", o));
  KernelBuild b;
  b.dir = tmp.string();  // removed with `b`, on an error too
  ArtifactSummary summary;
  Writer w{g, s, o, tmp, &summary, {}, ordered_json::array(), {}, {}};
  RETURN_IF_ERROR(w.kernels_dir());
  RETURN_IF_ERROR(w.nvcc());
  for (const auto& [rel, sum] : w.written)
    if (rel.ends_with(".cu")) b.sources[rel] = sum.second;
  b.resources = std::move(summary.resources);
  b.seconds = summary.nvcc_seconds;
  b.from_cache = summary.nvcc_from_cache;
  b.log = w.log;
  return b;
}

Status write_artifact(const Graph& g, const Schedule& s, const CompileOptions& o, const std::string& dir,
                      ArtifactSummary* summary, const KernelBuild* built) {
  std::error_code ec;
  const fs::path out(dir);
  ASSIGN_OR_RETURN(const fs::path tmp, sibling_directory(dir, ".tmp", o));
  Writer w{g, s, o, tmp, summary, {}, ordered_json::array(), {}, {}};
  auto body = [&]() -> Status {
    RETURN_IF_ERROR(w.kernels_dir());
    RETURN_IF_ERROR(w.weights());
    if (o.run_nvcc) RETURN_IF_ERROR(built ? w.take(*built) : w.nvcc());
    if (o.build_emu) RETURN_IF_ERROR(w.emu());
    RETURN_IF_ERROR(w.put(artifact::kScheduleFile, w.schedule().dump(1) + "\n"));
    summary->report_json = w.report().dump(2) + "\n";
    RETURN_IF_ERROR(w.put(artifact::kReportFile, summary->report_json));
    if (!o.plan_text.empty()) RETURN_IF_ERROR(w.put("plan.txt", o.plan_text));
    return w.manifest();
  };
  Status st = body();
  if (!st.is_ok()) {
    fs::remove_all(w.tmp, ec);
    return st;
  }
  fs::remove_all(out, ec);
  fs::rename(w.tmp, out, ec);
  if (ec) {
    fs::remove_all(w.tmp, ec);
    return Status::user(fmt::format("cannot move the artifact into '{}'", dir));
  }
  return Status::ok();
}

}  // namespace stitch::codegen
