// Helpers for back-end unit tests: shipped models prepared at their test data's shapes, and a
// graph compiled (optionally with fusion groups) into an emu-only artifact, run on the emu
// backend and compared with the reference interpreter.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <regex>
#include <sstream>

#include "codegen/artifact.h"
#include "codegen/schedule.h"
#include "importer/onnx_importer.h"
#include "importer/tensor_io.h"
#include "reference/compare.h"
#include "stitch/runtime.hpp"
#include "support/tolerances.h"
#include "test_util.h"

namespace stitch::test {

// Integer literals with the 64-bit suffix in a kernel's text, outside lines holding any of
// `keep` (those that stay 64-bit by design, such as an index read from an index tensor).
inline size_t wide_literals(const std::string& src, const std::vector<std::string>& keep) {
  static const std::regex lit(R"(\b\d+LL\b)");
  size_t n = 0;
  std::istringstream in(src);
  for (std::string line; std::getline(in, line);) {
    bool kept = false;
    for (const std::string& k : keep) kept = kept || line.find(k) != std::string::npos;
    if (!kept)
      n += static_cast<size_t>(
          std::distance(std::sregex_iterator(line.begin(), line.end(), lit), std::sregex_iterator()));
  }
  return n;
}

// models/NAME imported and run through the front end, dynamic inputs bound from test_data_set_0.
inline std::unique_ptr<Graph> prepared_model(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(STITCH_SOURCE_DIR) / "models" / name;
  auto g = import_onnx_file((dir / "model.onnx").string());
  REQUIRE(g.is_ok());
  PassContext ctx;
  for (size_t i = 0; i < (*g)->inputs.size(); ++i) {
    auto t = read_tensor_file((dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")).string());
    REQUIRE(t.is_ok());
    ctx.bindings.by_input[(*g)->inputs[i]->name] = t->tensor.dims();
  }
  run_frontend_or_die(**g, ctx);
  return std::move(g).value();
}

// Imports ONNX's node test in `dir` with the inputs `constant(i)` picks made constants of their
// test data (as a model holds a Resize's scales or a scatter's indices); returns the graph and the
// other inputs' data.
inline std::pair<std::unique_ptr<Graph>, TensorMap> load_node_test(
    const std::filesystem::path& dir, const std::function<bool(size_t)>& constant) {
  auto g = import_onnx_file((dir / "model.onnx").string());
  INFO(g.status().message());
  REQUIRE(g.is_ok());
  TensorMap feed;
  std::vector<Value*> kept;
  for (size_t i = 0; i < (*g)->inputs.size(); ++i) {
    auto t = read_tensor_file((dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")).string());
    REQUIRE(t.is_ok());
    Value* v = (*g)->inputs[i];
    if (constant(i)) {
      v->dims = t->tensor.dims();
      v->constant = std::move(t->tensor);
    } else {
      kept.push_back(v);
      feed[v->name] = std::move(t->tensor);
    }
  }
  (*g)->inputs = kept;
  return {std::move(*g), std::move(feed)};
}

// The emulation libraries the unit tests have built, by everything their builds read
// (EmuBuildOptions::cache_dir): a test that runs one graph under each planner often gets the same
// kernels from each, and tests that CTest runs as processes of their own often share kernels too
// (about two in three of the [emu] tests' builds were repeats). In the build tree; CTest empties
// it before a run (tests/CMakeLists.txt).
inline const std::string& emu_cache_dir() {
  static const std::string path = STITCH_UNIT_EMU_CACHE_DIR;
  return path;
}

// Writes schedule `s` of `g` as an emu-only artifact (no nvcc) into `dir`; fails the test on error.
// The emulation library comes from emu_cache_dir() where the same kernels were built before.
inline void write_emu_artifact(const Graph& g, const codegen::Schedule& s, const std::filesystem::path& dir) {
  codegen::CompileOptions o;
  o.run_nvcc = false;
  o.model_path = "/dev/null";
  o.emu_cache_dir = emu_cache_dir();
  codegen::ArtifactSummary summary;
  Status st = codegen::write_artifact(g, s, o, dir.string(), &summary);
  INFO(st.message());
  REQUIRE(st.is_ok());
}

// Runs the artifact of `g` in `dir` on the emu backend with `feed`; its outputs by name.
inline TensorMap run_artifact_on_emu(const Graph& g, const std::filesystem::path& dir,
                                     const TensorMap& feed) {
  TensorMap out;
  rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
  for (const Value* v : g.inputs) {
    const Tensor& t = feed.at(v->name);
    session.set_input(v->name, std::string(dtype_name(t.dtype())), t.dims(), t.data(), t.byte_size());
  }
  session.run();
  for (const Value* v : g.outputs) {
    Tensor got(v->dtype, *v->dims);
    session.get_output(v->name, got.data(), got.byte_size());
    out.emplace(v->name, std::move(got));
  }
  return out;
}

// Compiles `g` (emu only; `groups` from a fusion plan, or every node alone) and runs it on `feed`;
// returns its outputs and sets `kernels` to the kernel count. `packs` (one id per group) packs
// independent groups into one launch, as the plan says; `fold_gemms` lets GEMM calls take over
// neighbouring work (the plan's gemm_folds); `edit`, when given, changes the schedule before it is
// written (another form of a kernel's text).
inline TensorMap emu_run(const Graph& g, const codegen::NodeGroups* groups, const TensorMap& feed,
                         size_t* kernels = nullptr, const std::vector<int>* packs = nullptr,
                         const codegen::FoldOptions& fold_gemms = {},
                         const std::function<void(codegen::Schedule&)>& edit = {}) {
  auto s = codegen::build_schedule(g, groups, packs, fold_gemms);
  INFO(s.status().message());
  REQUIRE(s.is_ok());
  if (edit) edit(*s);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("stitch_unit_emu_" + std::to_string(getpid()));
  write_emu_artifact(g, *s, dir);
  TensorMap out = run_artifact_on_emu(g, dir, feed);
  std::filesystem::remove_all(dir);
  if (kernels) *kernels = s->kernels.size();
  return out;
}

// emu_run on `feed`, every output checked against the reference within `tol`. Returns the kernel
// count. `max_abs`, when given, receives the largest absolute difference over all outputs.
inline size_t emu_matches_reference_on(const Graph& g, const codegen::NodeGroups* groups,
                                       const TensorMap& feed, const Tolerance& tol,
                                       const std::vector<int>* packs = nullptr,
                                       const codegen::FoldOptions& fold_gemms = {},
                                       const std::function<void(codegen::Schedule&)>& edit = {},
                                       double* max_abs = nullptr) {
  size_t kernels = 0;
  const TensorMap got = emu_run(g, groups, feed, &kernels, packs, fold_gemms, edit);
  auto want = run_reference(g, feed);
  REQUIRE(want.is_ok());
  for (const Value* v : g.outputs) {
    CompareResult r = compare_tensors(got.at(v->name), want->at(v->name), tol.rtol, tol.atol);
    if (max_abs) *max_abs = std::max(*max_abs, r.max_abs);
    INFO(v->name << ": max abs " << r.max_abs << ", max rel " << r.max_rel << ", " << r.mismatches
                 << " outside the tolerance"
                 << (r.first_bad >= 0
                         ? fmt::format(", first at {}: {} vs {}", r.first_bad,
                                       got.at(v->name).to_f64()[static_cast<size_t>(r.first_bad)],
                                       want->at(v->name).to_f64()[static_cast<size_t>(r.first_bad)])
                         : "")
                 << " " << r.problem);
    CHECK(r.ok);
  }
  return kernels;
}

// emu_matches_reference_on seeded inputs.
inline size_t emu_matches_reference(const Graph& g, const codegen::NodeGroups* groups, uint32_t seed,
                                    const Tolerance& tol = kEmuF32, const std::vector<int>* packs = nullptr,
                                    const codegen::FoldOptions& fold_gemms = {},
                                    const std::function<void(codegen::Schedule&)>& edit = {},
                                    double* max_abs = nullptr) {
  TensorMap feed;
  for (const Value* v : g.inputs) feed[v->name] = random_tensor(v->dtype, *v->dims, seed++);
  return emu_matches_reference_on(g, groups, feed, tol, packs, fold_gemms, edit, max_abs);
}

// Writes `s` as an artifact in a fresh temporary directory named after `tag`, every kernel
// compiled by nvcc for sm_80 and sm_90, and checks that ptxas reported each kernel for both
// archs without spills and with at most `max_registers` registers a thread. Returns the
// directory; the caller removes it.
inline std::filesystem::path compile_without_spills(const Graph& g, const codegen::Schedule& s,
                                                    const std::string& tag, int max_registers = 255) {
  codegen::CompileOptions o;
  o.archs = {"sm_80", "sm_90"};
  o.model_path = "/dev/null";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("stitch_unit_" + tag + "_" + std::to_string(getpid()));
  codegen::ArtifactSummary summary;
  const Status st = codegen::write_artifact(g, s, o, dir.string(), &summary);
  INFO(st.message());
  REQUIRE(st.is_ok());
  CHECK(summary.resources.size() == 2 * s.kernels.size());
  for (const auto& r : summary.resources) {
    INFO(r.kernel << " " << r.arch << ": " << r.registers << " registers");
    CHECK(r.spill_stores == 0);
    CHECK(r.registers > 0);
    CHECK(r.registers <= max_registers);
  }
  return dir;
}

// Compiles kernel `k` alone with nvcc for sm_90, warnings as errors (as the node tests' kernels
// are checked), in `dir`; checks it succeeds and shows nvcc's output when not.
inline void nvcc_compiles_cleanly(const codegen::Kernel& k, const std::filesystem::path& dir) {
  auto nvcc = codegen::find_nvcc();
  REQUIRE(nvcc.is_ok());
  std::filesystem::create_directories(dir);
  const std::filesystem::path cu = dir / (k.name + ".cu"), log = dir / (k.name + ".log");
  std::ofstream(cu) << k.source;
  const std::string cmd = fmt::format(
      "'{}' -arch=sm_90 -cubin -Werror all-warnings -I '{}/runtime/device/include/stitch/device' "
      "-o '{}' '{}' > '{}' 2>&1",
      *nvcc, STITCH_SOURCE_DIR, (dir / (k.name + ".cubin")).string(), cu.string(), log.string());
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  INFO(k.name << ": " << k.mapping << "\n" << k.source);
  INFO(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  CHECK(rc == 0);
}

}  // namespace stitch::test
