// Loading an artifact directory: the manifest first (format and version), then every listed
// file's size and checksum, then the schedule and weights. Any mismatch is a user error that
// names the file and says to recompile.
#include "model.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "stitch/artifact_format.h"

namespace stitch::rt {
namespace fs = std::filesystem;
using nlohmann::json;

void fail(int code, const std::string& msg) { throw Error(code, msg); }

int64_t dtype_bytes(const std::string& t) {
  if (t == "f32" || t == "i32" || t == "u32") return 4;
  if (t == "f16" || t == "bf16" || t == "i16" || t == "u16") return 2;
  if (t == "f64" || t == "i64" || t == "u64") return 8;
  if (t == "i8" || t == "u8" || t == "bool") return 1;
  return 0;
}

std::vector<BatchOffset> batch_offsets(const GemmDesc& g, size_t dims) {
  int64_t count = 1;
  for (size_t d = 0; d < dims; ++d) count *= g.batch[d];
  std::vector<BatchOffset> out;
  out.reserve(static_cast<size_t>(count));
  std::vector<int64_t> idx(dims, 0);
  for (int64_t i = 0; i < count; ++i) {
    BatchOffset o{g.offset_a, g.offset_b, 0};
    for (size_t d = 0; d < dims; ++d)
      o.a += idx[d] * g.stride_a[d], o.b += idx[d] * g.stride_b[d], o.c += idx[d] * g.stride_c[d];
    out.push_back(o);
    for (size_t d = dims; d-- > 0;) {
      if (++idx[d] < g.batch[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::string ModelData::step_text(size_t i) const {
  const StepDesc& s = steps[i];
  std::string what = s.op == StepDesc::kKernel          ? "kernel " + kernels[s.kernel].name
                     : s.op == StepDesc::kGemm          ? std::string("gemm")
                     : s.op == StepDesc::kConv          ? std::string("conv")
                     : s.op == StepDesc::kConvTranspose ? std::string("conv_transpose")
                                                        : std::string("copy");
  return s.node.empty() ? fmt::format("step {} ({})", i, what) : fmt::format("step {} ({}, node '{}')", i, what, s.node);
}

namespace {

// A file's bytes, read in one call into a buffer of its size: weights.bin can be gigabytes, and a
// string stream grown to it copied them several times (about 1.3 s of loading BERT-base's 440 MB).
std::vector<uint8_t> read_file(const fs::path& p, const std::string& dir) {
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  if (!f) fail(2, fmt::format("artifact '{}': missing file '{}'; recompile the model with stitchc compile", dir,
                              fs::relative(p, dir).string()));
  const std::streamoff n = f.tellg();
  std::vector<uint8_t> data(n > 0 ? static_cast<size_t>(n) : 0);
  f.seekg(0);
  if (n < 0 || !f.read(reinterpret_cast<char*>(data.data()), n))
    fail(2,
         fmt::format("artifact '{}': cannot read '{}'; check the file's permissions, or recompile the model",
                     dir, fs::relative(p, dir).string()));
  return data;
}

json parse_json(const std::vector<uint8_t>& text, const std::string& what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(2, fmt::format("{} is not valid JSON ({}); the artifact is damaged, recompile it", what, e.what()));
  }
}

TensorInfo tensor_info(const json& j) {
  TensorInfo t;
  t.name = j.at("name").get<std::string>();
  t.dtype = j.at("dtype").get<std::string>();
  t.dims = j.at("dims").get<std::vector<int64_t>>();
  t.bytes = dtype_bytes(t.dtype);
  for (int64_t d : t.dims) t.bytes *= d;
  return t;
}

StorageKind storage_of(const std::string& s) {
  if (s == "arena") return StorageKind::kArena;
  if (s == "weights") return StorageKind::kWeights;
  if (s == "input") return StorageKind::kInput;
  if (s == "output") return StorageKind::kOutput;
  if (s == "fault") return StorageKind::kFault;
  fail(2, fmt::format("schedule.json: unknown storage '{}'", s));
}

void parse_schedule(ModelData& m, const json& j) {
  m.arena_bytes = j.at("arena_bytes").get<int64_t>();
  m.weights_bytes = j.at("weights_bytes").get<int64_t>();
  m.tf32 = j.at("tf32").get<bool>();
  for (const json& b : j.at("buffers")) {
    BufferDesc d;
    d.name = b.at("name").get<std::string>();
    d.dtype = b.at("dtype").get<std::string>();
    d.dims = b.at("dims").get<std::vector<int64_t>>();
    d.storage = storage_of(b.at("storage").get<std::string>());
    d.offset = b.value("offset", int64_t{0});
    d.index = b.value("index", 0);
    d.bytes = b.at("bytes").get<int64_t>();
    const int64_t limit = d.storage == StorageKind::kArena     ? m.arena_bytes
                          : d.storage == StorageKind::kWeights ? m.weights_bytes
                          : d.storage == StorageKind::kFault   ? artifact::kFaultWordBytes
                                                               : INT64_MAX;
    const size_t slots = d.storage == StorageKind::kInput ? m.inputs.size() : m.outputs.size();
    if (d.offset < 0 || d.bytes < 0 || d.offset + d.bytes > limit ||
        ((d.storage == StorageKind::kInput || d.storage == StorageKind::kOutput) &&
         (d.index < 0 || static_cast<size_t>(d.index) >= slots)) ||
        (d.storage == StorageKind::kFault && d.bytes != artifact::kFaultWordBytes))
      fail(2, fmt::format("schedule.json: buffer '{}' lies outside its storage; the artifact is damaged, recompile it",
                          d.name));
    m.buffers.push_back(d);
  }
  for (const json& k : j.at("kernels")) {
    KernelDesc d;
    d.name = k.at("name").get<std::string>();
    auto g = k.at("grid").get<std::vector<unsigned>>(), b = k.at("block").get<std::vector<unsigned>>();
    for (int i = 0; i < 3; ++i) d.grid[i] = g.at(i), d.block[i] = b.at(i);
    d.smem = k.at("smem").get<int64_t>();
    d.cooperative = k.at("cooperative").get<bool>();
    for (const json& f : k.value("faults", json::array())) {
      FaultDesc fd;
      const std::string code = f.at("code").get<std::string>();
      char* end = nullptr;
      fd.code = std::strtoull(code.c_str(), &end, 16);
      if (code.empty() || *end != '\0' || fd.code == 0)
        fail(2, fmt::format(
                    "schedule.json: kernel '{}' has a fault code '{}' that is not a nonzero hex number; the "
                    "artifact is damaged, recompile it",
                    d.name, code));
      fd.node = f.at("node").get<std::string>();
      fd.op = f.at("op").get<std::string>();
      fd.message = f.at("message").get<std::string>();
      d.faults.push_back(fd);
      m.has_faults = true;
    }
    m.kernels.push_back(d);
  }
  auto check_buf = [&](int id) {
    if (id < 0 || static_cast<size_t>(id) >= m.buffers.size())
      fail(2, fmt::format("schedule.json: buffer id {} out of range; the artifact is damaged, recompile it", id));
    return id;
  };
  for (const json& s : j.at("steps")) {
    StepDesc d;
    const std::string op = s.at("op").get<std::string>();
    if (s.contains("nodes") && !s.at("nodes").empty()) d.node = s.at("nodes")[0].get<std::string>();
    if (op == "kernel") {
      d.op = StepDesc::kKernel;
      d.kernel = s.at("kernel").get<int>();
      if (d.kernel < 0 || static_cast<size_t>(d.kernel) >= m.kernels.size())
        fail(2, "schedule.json: kernel index out of range; the artifact is damaged, recompile it");
      for (const json& a : s.at("args")) d.args.push_back(check_buf(a.get<int>()));
    } else if (op == "gemm" || op == "conv" || op == "conv_transpose") {
      d.op = op == "gemm" ? StepDesc::kGemm : op == "conv" ? StepDesc::kConv : StepDesc::kConvTranspose;
      d.dtype = s.at("dtype").get<std::string>();
      for (const json& a : s.at("args")) d.args.push_back(check_buf(a.get<int>()));
      const json& p = s.at("params");
      if (d.op == StepDesc::kGemm) {
        GemmDesc& g = d.gemm;
        g.m = p.at("m"); g.n = p.at("n"); g.k = p.at("k");
        g.lda = p.at("lda"); g.ldb = p.at("ldb"); g.ldc = p.at("ldc");
        g.trans_a = p.at("trans_a"); g.trans_b = p.at("trans_b");
        g.alpha = p.at("alpha"); g.beta = p.at("beta");
        g.batch = p.at("batch").get<std::vector<int64_t>>();
        g.stride_a = p.at("stride_a").get<std::vector<int64_t>>();
        g.stride_b = p.at("stride_b").get<std::vector<int64_t>>();
        g.stride_c = p.at("stride_c").get<std::vector<int64_t>>();
        g.offset_a = p.at("offset_a");
        g.offset_b = p.at("offset_b");
        const std::string epi = p.at("epilogue").get<std::string>();
        if (epi != "none" && epi != "bias" && epi != "gelu" && epi != "bias_gelu" && epi != "relu" &&
            epi != "bias_relu" && epi != "residual" && epi != "bias_residual")
          fail(2, fmt::format("schedule.json: unknown gemm epilogue '{}'; the artifact is damaged, recompile it", epi));
        g.bias = epi == "bias" || epi == "bias_gelu" || epi == "bias_relu" || epi == "bias_residual";
        g.gelu = epi == "gelu" || epi == "bias_gelu";
        g.relu = epi == "relu" || epi == "bias_relu";
        g.residual = epi == "residual" || epi == "bias_residual";
        if (g.residual && g.beta != 0)
          fail(2,
               "schedule.json: a gemm step with a residual epilogue has a beta; the artifact is damaged, "
               "recompile it");
        if ((g.gelu || g.relu) && d.dtype != "f32" && d.dtype != "f16" && d.dtype != "bf16")
          fail(
              2,
              fmt::format(
                  "schedule.json: a gemm step of {} has a {} epilogue (only f32, f16 and bf16 have one); the "
                  "artifact is damaged, recompile it",
                  d.dtype, g.gelu ? "GELU" : "ReLU"));
        const size_t want = 3u + (g.bias ? 1u : 0u) + (g.residual ? 1u : 0u);
        if (d.args.size() != want)
          fail(2, fmt::format("schedule.json: a gemm step with epilogue '{}' needs {} buffers", epi, want));
      } else {
        ConvDesc& c = d.conv;
        c.n = p.at("n"); c.c = p.at("c"); c.m = p.at("m"); c.group = p.at("group");
        c.in = p.at("in").get<std::vector<int64_t>>();
        c.kernel = p.at("kernel").get<std::vector<int64_t>>();
        c.out = p.at("out").get<std::vector<int64_t>>();
        c.strides = p.at("strides").get<std::vector<int64_t>>();
        c.dilations = p.at("dilations").get<std::vector<int64_t>>();
        c.pads = p.at("pads").get<std::vector<int64_t>>();
        c.has_bias = p.at("has_bias");
        const std::string epi = p.at("epilogue").get<std::string>();
        if (epi != "none" && epi != "residual" && epi != "relu" && epi != "residual_relu")
          fail(2,
               fmt::format("schedule.json: unknown conv epilogue '{}'; the artifact is damaged, recompile it",
                           epi));
        c.residual = epi == "residual" || epi == "residual_relu";
        c.relu = epi == "relu" || epi == "residual_relu";
        if (c.has_epilogue() && d.dtype != "f32" && d.dtype != "f16")
          fail(2, fmt::format(
                      "schedule.json: a conv step of {} has a {} epilogue (only f32 and f16 have one); the "
                      "artifact is damaged, recompile it",
                      d.dtype, epi));
        if (d.args.size() != 3u + (c.has_bias ? 1u : 0u) + (c.residual ? 1u : 0u))
          fail(2, "schedule.json: a conv step has the wrong buffer count");
        const size_t sp = c.in.size();
        if (sp < 1 || sp > 3 || c.kernel.size() != sp || c.out.size() != sp || c.strides.size() != sp ||
            c.dilations.size() != sp || c.pads.size() != sp || c.group < 1 || c.c % c.group || c.m % c.group)
          fail(2, fmt::format(
                      "schedule.json: a {} step's sizes do not agree; the artifact is damaged, recompile it",
                      op));
        if (d.op == StepDesc::kConvTranspose && (c.has_bias || c.has_epilogue()))
          fail(2,
               "schedule.json: a conv_transpose step has a bias or an epilogue; the artifact is damaged, "
               "recompile it");
      }
    } else if (op == "copy") {
      d.op = StepDesc::kCopy;
      d.src = check_buf(s.at("src").get<int>());
      d.dst = check_buf(s.at("dst").get<int>());
      d.bytes = s.at("bytes").get<int64_t>();
    } else {
      fail(2, fmt::format("schedule.json: unknown step '{}'; was the artifact made by a newer stitchc?", op));
    }
    m.steps.push_back(std::move(d));
  }
}

}  // namespace

Model::Model(std::unique_ptr<ModelData> d) : data_(std::move(d)) {}
Model::~Model() = default;
const std::vector<TensorInfo>& Model::inputs() const { return data_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return data_->outputs; }
const std::vector<TensorInfo>& Model::fixed_inputs() const { return data_->fixed_inputs; }
bool Model::tf32() const { return data_->tf32; }
std::string Model::narrowest_float() const {
  static const std::vector<std::string> widening = {"bf16", "f16", "f32", "f64"};
  size_t best = widening.size();
  auto see = [&](const std::string& dtype) {
    for (size_t i = 0; i < best; ++i)
      if (widening[i] == dtype) best = i;
  };
  for (const BufferDesc& b : data_->buffers) see(b.dtype);
  for (const StepDesc& s : data_->steps) see(s.dtype);
  return best < widening.size() ? widening[best] : "";
}
const std::string& Model::dir() const { return data_->dir; }

std::shared_ptr<const Model> Model::load(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail(2, fmt::format("'{}' is not an artifact directory (make one with stitchc compile MODEL -o DIR)", dir));
  auto m = std::make_unique<ModelData>();
  m->dir = dir;
  const fs::path root(dir);
  std::vector<uint8_t> weights;
  std::optional<std::vector<uint8_t>> schedule;  // the bytes checked below are the bytes parsed
  json manifest = parse_json(read_file(root / artifact::kManifestFile, dir), fmt::format("'{}/manifest.json'", dir));
  try {
    if (manifest.value("format", std::string()) != artifact::kFormatName)
      fail(2, fmt::format("'{}/manifest.json' is not a stitch artifact manifest", dir));
    const int version = manifest.at("version").get<int>();
    if (version != artifact::kArtifactVersion)
      fail(2, fmt::format("artifact '{}' has format version {}, this runtime reads version {}: recompile the model "
                          "with the stitchc that matches this runtime", dir, version, artifact::kArtifactVersion));
    for (const auto& [rel, info] : manifest.at("files").items()) {
      std::vector<uint8_t> data = read_file(root / rel, dir);
      const auto bytes = info.at("bytes").get<size_t>();
      if (data.size() != bytes)
        fail(2, fmt::format("artifact '{}': '{}' has {} bytes, the manifest says {} (truncated or replaced?); recompile "
                            "the model", dir, rel, data.size(), bytes));
      const std::string sum = fmt::format("{:016x}", artifact::checksum(data.data(), data.size()));
      if (sum != info.at("xxh3").get<std::string>())
        fail(2, fmt::format("artifact '{}': '{}' does not match its checksum in the manifest (edited after "
                            "compilation?); recompile the model", dir, rel));
      if (rel == artifact::kWeightsFile) weights = std::move(data);  // read once: it can be hundreds of MiB
      if (rel == artifact::kScheduleFile) schedule = std::move(data);
    }
    for (const json& t : manifest.at("inputs")) m->inputs.push_back(tensor_info(t));
    for (const json& t : manifest.at("fixed_inputs")) {
      m->fixed_inputs.push_back(tensor_info(t));
      const std::string hex = t.at("data").get<std::string>();
      auto nibble = [](char c) {
        return std::isdigit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      };
      std::string bytes;
      bool ok = hex.size() % 2 == 0;
      for (size_t i = 0; ok && i < hex.size(); i += 2) {
        const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
        ok = hi >= 0 && lo >= 0;
        bytes += static_cast<char>(hi * 16 + lo);
      }
      if (!ok)
        fail(2,
             fmt::format(
                 "artifact '{}': fixed input '{}' has data that is not lower-case hex; recompile the model",
                 dir, m->fixed_inputs.back().name));
      if (static_cast<int64_t>(bytes.size()) != m->fixed_inputs.back().bytes)
        fail(2, fmt::format(
                    "artifact '{}': fixed input '{}' holds {} bytes, its shape needs {}; recompile the model",
                    dir, m->fixed_inputs.back().name, bytes.size(), m->fixed_inputs.back().bytes));
      m->fixed_bytes.push_back(std::move(bytes));
    }
    for (const json& t : manifest.at("outputs")) {
      m->outputs.push_back(tensor_info(t));
      const int j = t.value("in_place_of_input", -1);
      if (j != -1 &&
          (j < 0 || j >= static_cast<int>(m->inputs.size()) ||
           m->inputs[j].dtype != m->outputs.back().dtype || m->inputs[j].dims != m->outputs.back().dims))
        fail(2, fmt::format("artifact '{}': output '{}' is said to be written in place of input {}, which is "
                            "not an input of its type and shape; recompile the model",
                            dir, m->outputs.back().name, j));
      m->output_in_input.push_back(j);
    }
    m->archs = manifest.at("archs").get<std::vector<std::string>>();
    m->backends = manifest.at("backends").get<std::vector<std::string>>();
    if (!schedule) schedule = read_file(root / artifact::kScheduleFile, dir);  // a manifest not listing it
    json sched = parse_json(*schedule, "schedule.json");
    if (sched.value("version", -1) != artifact::kArtifactVersion)
      fail(2, fmt::format("artifact '{}': schedule.json has another format version than the manifest", dir));
    parse_schedule(*m, sched);
  } catch (const json::exception& e) {
    fail(2, fmt::format("artifact '{}' has a malformed manifest or schedule ({}); recompile the model", dir, e.what()));
  }
  if (!manifest.at("files").contains(artifact::kWeightsFile))
    fail(2, fmt::format("artifact '{}': the manifest does not list weights.bin; recompile the model", dir));
  if (static_cast<int64_t>(weights.size()) != m->weights_bytes)
    fail(2, fmt::format("artifact '{}': weights.bin has {} bytes, the schedule needs {}; recompile the model",
                        dir, weights.size(), m->weights_bytes));
  m->weights = std::move(weights);
  return std::shared_ptr<const Model>(new Model(std::move(m)));
}

Backend parse_backend(const std::string& name) {
  if (name == "emu") return Backend::kEmu;
  if (name == "cuda") return Backend::kCuda;
  fail(2, fmt::format("unknown backend '{}': use emu (CPU emulation) or cuda (GPU)", name));
}

}  // namespace stitch::rt
