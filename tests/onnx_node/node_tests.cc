// Runs ONNX's own backend node tests (Debian's libonnx-testdata) through the
// importer, the front-end passes and the reference interpreter.
//
// A test whose ops are all claimed by the op table at the model's opset must
// pass every one of its data sets, unless known_failures.txt lists it with a
// reason; a listed test that passes is itself a failure (keep the list true).
// Tests using ops the table does not claim are skipped. Prints one line per
// failure and closes with "node-tests: N passed, N failed, N skipped".
//
// With --backend emu, each test is instead compiled by the back end (schedule, generated
// kernels, emulation library) and run on the runtime's emu backend; tests with nodes the back
// end does not claim are skipped. Tests run in batches of 32, their kernels renamed apart, with
// one emulation library a batch. --nvcc-dir DIR also gathers every generated kernel into
// DIR/node_kernels.cu for one nvcc check of them all.
//
//   stitch_node_tests [--known FILE] [--filter SUBSTR] [--verbose] [--backend emu] [--nvcc-dir D]
//                     [--shard K/N] [--fusion none|greedy|beam|ilp] DIR...
// --shard K/N runs every N-th test starting at the K-th (so N processes can share the work).
// --fusion rewrites and plans the graph first (as stitchc compile does) so multi-node tests, e.g.
// the "_expanded" function bodies, run as stitched kernels, packs and GEMM folds, and Gemm tests as
// MatMuls where that is estimated no slower.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "codegen/artifact.h"
#include "codegen/build_tools.h"
#include "codegen/lower.h"
#include "codegen/schedule.h"
#include "fusion/plan.h"
#include "fusion/rewrites.h"
#include "importer/contrib_ops.h"
#include "importer/onnx_importer.h"
#include "importer/tensor_io.h"
#include "ir/legacy_forms.h"
#include "ir/op_table.h"
#include "node_test_dirs.h"
#include "passes/pass.h"
#include "reference/compare.h"
#include "reference/interpreter.h"
#include "stitch/runtime.hpp"
#include "support/tolerances.h"

namespace fs = std::filesystem;
using namespace stitch;
using node_tests::read_set;

namespace {

// Ops of the model that the table does not claim, as "Op@opset".
std::vector<std::string> unclaimed_ops(const std::string& model_path) {
  onnx::ModelProto m;
  std::ifstream f(model_path, std::ios::binary);
  if (!m.ParseFromIstream(&f)) return {"<unparseable model>"};
  int opset = 0;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  std::vector<std::string> out;
  for (const auto& n : m.graph().node()) {
    if (n.op_type() == "Constant" && n.domain().empty()) continue;
    Node probe;
    probe.op_type = n.op_type();
    probe.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    probe.opset = opset;
    if (!find_model_op(n.domain(), n.op_type(), opset) && !is_contrib_op(probe))
      out.push_back(fmt::format("{}@{}", n.op_type(), opset));
  }
  return out;
}

// Whether the model imports onnxruntime's contrib domain: its expected outputs are then onnxruntime's
// (tests/onnx_node/make_contrib.py).
bool imports_onnxruntime_domain(const std::string& model_path) {
  onnx::ModelProto m;
  std::ifstream f(model_path, std::ios::binary);
  if (!m.ParseFromIstream(&f)) return false;
  for (const auto& o : m.opset_import())
    if (o.domain() == "com.microsoft") return true;
  return false;
}

// ONNX 1.12's test data stores bfloat16 tensors as UINT16 (same bits); read
// them as the model's bf16.
Tensor as_model_type(Tensor t, DType want) {
  if (t.dtype() == DType::kU16 && want == DType::kBF16) {
    Tensor b(DType::kBF16, t.dims());
    std::memcpy(b.data(), t.data(), t.byte_size());
    return b;
  }
  return t;
}

bool needs_constant(const Status& st) {
  return st.message().find("computed at run time") != std::string::npos ||
         st.message().find("known at compile time") != std::string::npos;
}

// How many tests ran with some inputs frozen into constants.
int g_frozen_runs = 0;

// Back-end mode.
bool g_emu = false;
std::string g_nvcc_dir;
std::string g_fusion = "none";  // planner for the emu backend: none, greedy, beam, ilp
std::string g_all_kernels;  // every generated kernel, renamed per test
int g_kernel_sets = 0;
int g_backend_skipped = 0;

// A Status that marks "the back end does not claim a node of this test".
Status backend_skip(const std::string& why) { return Status::internal("backend-skip: " + why); }
bool is_backend_skip(const Status& st) { return st.message().rfind("backend-skip: ", 0) == 0; }

// One data set of a test, read and through the front end; with the emu backend also rewritten,
// planned and scheduled, waiting for the emulation library of its batch.
struct SetRun {
  std::string set_name;
  fs::path test_dir;
  bool by_onnxruntime = false;
  std::unique_ptr<Graph> g;        // after the front end
  std::unique_ptr<Graph> planned;  // emu: after the planner's rewrites; the schedule's graph
  codegen::Schedule schedule;      // emu
  TensorMap feed;
  std::vector<Tensor> expected;
};

// Rewrites, plans and schedules `r.g` for the emu backend, as stitchc compile does.
Status schedule_for_emu(SetRun& r) {
  for (const auto& n : r.g->nodes()) {
    std::string why;
    if (codegen::classify_node(*n, &why) == codegen::NodeLowering::kUnsupported)
      return backend_skip(fmt::format("{}: {}", n->describe(), why));
  }
  codegen::NodeGroups groups;
  std::vector<int> packs;
  codegen::FoldOptions folds;
  // With a planner: its rewrites (Gemms as MatMuls, ...), groups, packs and GEMM folds, as
  // stitchc compile uses them, on a copy of the graph.
  r.planned = clone_graph(*r.g);
  fusion::FusionOptions fo;
  fo.mode = g_fusion;
  if (g_fusion != "none") RETURN_IF_ERROR(fusion::rewrite_for_planning(r.planned, fo).status());
  const Graph& g = *r.planned;  // after the rewrites, which may replace the graph
  if (g_fusion != "none") {
    ASSIGN_OR_RETURN(fusion::FusionPlan plan, fusion::make_plan(g, fo));
    for (const auto& grp : plan.groups) {
      groups.push_back(grp.nodes);
      packs.push_back(grp.pack);
    }
    folds = plan.gemm_folds;
  }
  ASSIGN_OR_RETURN(r.schedule, g_fusion != "none" ? codegen::build_schedule(g, &groups, &packs, folds)
                                                  : codegen::build_schedule(g));
  return Status::ok();
}

// Writes the artifact of `r` (its emulation library `library` when one was built for its batch,
// else built here) and runs it on the emu backend.
StatusOr<TensorMap> run_emu(const SetRun& r, const std::string& library) {
  const Graph& g = *r.planned;
  codegen::CompileOptions o;
  o.run_nvcc = false;
  o.model_path = (r.test_dir / "model.onnx").string();
  o.emu_library = library;
  const fs::path out =
      fs::temp_directory_path() / fmt::format("stitch_node_{}_{}", getpid(), r.test_dir.filename().string());
  codegen::ArtifactSummary summary;
  RETURN_IF_ERROR(codegen::write_artifact(g, r.schedule, o, out.string(), &summary));
  TensorMap got;
  try {
    auto model = rt::Model::load(out.string());
    rt::Session session(model, rt::Backend::kEmu);
    for (const rt::TensorInfo& t : model->inputs()) {
      const Tensor& x = r.feed.at(t.name);
      session.set_input(t.name, std::string(dtype_name(x.dtype())), std::vector<int64_t>(x.dims().begin(), x.dims().end()),
                        x.data(), static_cast<size_t>(x.byte_size()));
    }
    session.run();
    for (const Value* v : g.outputs) {
      Tensor t(v->dtype, *v->dims);
      session.get_output(v->name, t.data(), static_cast<size_t>(t.byte_size()));
      got[v->name] = std::move(t);
    }
  } catch (const rt::Error& e) {
    std::error_code ec;
    fs::remove_all(out, ec);
    return Status::internal(e.what());
  }
  std::error_code ec;
  fs::remove_all(out, ec);
  return got;
}

// Reads every data set of one test directory and takes each through the front end (and with the
// emu backend, the planner and the schedule). stitch needs shape operands (Reshape's shape,
// Slice's starts...) at compile time, while node tests feed them as inputs: `freeze` turns integer
// inputs (1), every input but the first (2: Resize's roi and float scales, with its data still
// fed at run time) or all inputs (3) into constants, as a user's model would have them.
StatusOr<std::vector<SetRun>> prepare_test_once(const fs::path& dir, int freeze) {
  std::string model = (dir / "model.onnx").string();
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return Status::user("no test_data_set_* directory");
  const bool by_onnxruntime = imports_onnxruntime_domain(model);
  std::vector<SetRun> runs;
  for (const auto& set : sets) {
    SetRun r;
    r.set_name = set.filename().string();
    r.test_dir = dir;
    r.by_onnxruntime = by_onnxruntime;
    ASSIGN_OR_RETURN(r.g, import_onnx_file(model));
    ASSIGN_OR_RETURN(auto inputs, read_set(set, "input"));
    ASSIGN_OR_RETURN(r.expected, read_set(set, "output"));
    Graph& g = *r.g;
    if (inputs.size() != g.inputs.size())
      return Status::user(fmt::format("{} inputs in data, {} in model", inputs.size(), g.inputs.size()));
    PassContext ctx;
    std::vector<Value*> kept;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Value* v = g.inputs[i];
      Tensor t = as_model_type(std::move(inputs[i]), v->dtype);
      if (freeze == 3 || (freeze == 2 && i > 0) || (freeze == 1 && !is_float(t.dtype()))) {
        v->dtype = t.dtype();
        v->dims = t.dims();
        v->constant = std::move(t);
        continue;
      }
      kept.push_back(v);
      ctx.bindings.by_input[v->name] = t.dims();
      r.feed[v->name] = std::move(t);
    }
    g.inputs = kept;
    RETURN_IF_ERROR(run_frontend(g, ctx));
    if (r.expected.size() != g.outputs.size())
      return Status::user(
          fmt::format("{} outputs in data, {} in model", r.expected.size(), g.outputs.size()));
    if (g_emu) RETURN_IF_ERROR(schedule_for_emu(r));
    runs.push_back(std::move(r));
  }
  return runs;
}

StatusOr<std::vector<SetRun>> prepare_test(const fs::path& dir) {
  auto runs = prepare_test_once(dir, 0);
  for (int level = 1; level <= 3 && !runs.is_ok() && needs_constant(runs.status()); ++level) {
    runs = prepare_test_once(dir, level);
    if (runs.is_ok()) ++g_frozen_runs;
  }
  return runs;
}

// Runs one prepared data set (on the reference, or on emu with `library` when its batch has one)
// and compares its outputs with the expected ones.
Status finish_set(const SetRun& r, const std::string& library) {
  TensorMap got;
  if (g_emu) {
    ASSIGN_OR_RETURN(got, run_emu(r, library));
  } else {
    ASSIGN_OR_RETURN(got, run_reference(*r.g, r.feed));
  }
  const Graph& g = *r.g;
  for (size_t i = 0; i < r.expected.size(); ++i) {
    const std::string& name = g.outputs[i]->name;
    Tensor want = as_model_type(r.expected[i], g.outputs[i]->dtype);
    // Several nodes after the front end (a composite op expanded, or a function body) round
    // half-type intermediates at other points than ONNX's reference; one node rounds once.
    const bool steps = g.nodes().size() > 1;
    const Tolerance& tol = steps && want.dtype() == DType::kF16    ? kOnnxNodeTestF16
                           : steps && want.dtype() == DType::kBF16 ? kOnnxNodeTestBF16
                           : r.by_onnxruntime                      ? kOnnxRuntimeNodeTest
                                                                   : kOnnxNodeTest;
    CompareResult c = compare_tensors(got.at(name), want, tol.rtol, tol.atol);
    if (!c.ok)
      return Status::mismatch(fmt::format(
          "{}: output '{}' {}", r.set_name, name,
          !c.problem.empty()
              ? c.problem
              : fmt::format("{} element(s) out of tolerance, max abs err {:.3g}, max rel err {:.3g}",
                            c.mismatches, c.max_abs, c.max_rel)));
  }
  return Status::ok();
}

// The emulation libraries built for batches of tests, their seconds, and the batches whose
// library did not build (each of their tests then built its own).
int g_libraries = 0, g_library_fallbacks = 0;
double g_library_seconds = 0;

// Builds in `work` one emulation library for every kernel of `runs`; its path, or empty when it
// did not build, and each test then builds its own, so that a kernel that does not compile fails
// its own test.
std::string build_batch_library(const std::vector<const SetRun*>& runs, const fs::path& work) {
  std::string code;
  std::vector<const codegen::Kernel*> kernels;
  for (const SetRun* r : runs)
    for (const codegen::Kernel& k : r->schedule.kernels) {
      code += k.source + "\n";
      kernels.push_back(&k);
    }
  if (kernels.empty()) return "";
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  fs::create_directories(work, ec);
  const std::string unit = codegen::emu_translation_unit(code, kernels);
  const fs::path unit_path = work / "kernels_emu.cc", library = work / "kernels_emu.so";
  const Status wrote = codegen::write_file(unit_path, unit);
  auto built = wrote.is_ok() ? codegen::build_emu_library(unit_path, unit, kernels, library, {})
                             : StatusOr<codegen::EmuBuild>(wrote);
  g_library_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (built.is_ok()) {
    ++g_libraries;
    return library.string();
  }
  ++g_library_fallbacks;
  const std::string why = built.status().message();
  fmt::print(
      "note: a batch's emulation library did not build, so each of its {} test runs builds its own: {}\n",
      runs.size(), why.size() > 2000 ? why.substr(0, 2000) + "..." : why);
  return "";
}

// Tests prepared one after another, then run together. With the emu backend, one emulation
// library holds every kernel of the batch: most of a library's build is the host compiler's fixed
// cost (its precompiled header loaded and the library linked: 0.13 s of a one-kernel library's
// 0.2 s), paid here once a batch.
struct Batch {
  struct Test {
    std::string name;
    StatusOr<std::vector<SetRun>> runs = Status::internal("not prepared");
    Status result;
    double seconds = 0;  // its own: preparing it, writing its artifacts and running them
  };
  std::vector<Test> tests;

  void add(const fs::path& dir) {
    Test t;
    t.name = dir.filename().string();
    const auto start = std::chrono::steady_clock::now();
    t.runs = prepare_test(dir);
    t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tests.push_back(std::move(t));
  }

  // Runs every prepared test, with the batch's library built in `work` (removed after).
  void run(const fs::path& work) {
    std::vector<const SetRun*> runs;
    for (Test& t : tests)
      if (t.runs.is_ok())
        for (SetRun& r : *t.runs) {
          // Named apart from every other set's kernels, for one library and one nvcc check.
          if (g_emu)
            codegen::prefix_kernel_names(r.schedule.kernels, fmt::format("t{:04d}_", g_kernel_sets++));
          if (!g_nvcc_dir.empty())
            for (const codegen::Kernel& k : r.schedule.kernels)
              g_all_kernels += fmt::format("// from {}\n{}\n", t.name, k.source);
          runs.push_back(&r);
        }
    const std::string library = g_emu ? build_batch_library(runs, work) : "";
    for (Test& t : tests) {
      const auto start = std::chrono::steady_clock::now();
      t.result = t.runs.status();
      if (t.runs.is_ok())
        for (const SetRun& r : *t.runs) {
          t.result = finish_set(r, library);
          if (!t.result.is_ok()) break;
        }
      t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    std::error_code ec;
    fs::remove_all(work, ec);
  }
};

std::map<std::string, std::string> read_known(const std::string& path) {
  std::map<std::string, std::string> known;
  if (path.empty()) return known;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto sp = line.find_first_of(" \t");
    std::string name = line.substr(0, sp);
    std::string why = sp == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", sp));
    known[name] = why;
  }
  return known;
}

}  // namespace

int main(int argc, char** argv) {
  std::string known_path, filter;
  bool verbose = false;
  int shard_k = 0, shard_n = 1, ordinal = 0;
  std::vector<std::string> roots;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--known" && i + 1 < argc) known_path = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--verbose") verbose = true;
    else if (a == "--backend" && i + 1 < argc) g_emu = std::string(argv[++i]) == "emu";
    else if (a == "--nvcc-dir" && i + 1 < argc) g_nvcc_dir = argv[++i];
    else if (a == "--fusion" && i + 1 < argc) g_fusion = argv[++i];
    else if (a == "--shard" && i + 1 < argc) {
      if (!node_tests::parse_shard(argv[++i], &shard_k, &shard_n)) {
        fmt::print(stderr, "node-tests: --shard wants K/N with 0 <= K < N\n");
        return 2;
      }
    }
    else roots.push_back(a);
  }
  if (roots.empty()) {
    fmt::print(stderr, "usage: stitch_node_tests [--known FILE] [--filter SUBSTR] [--verbose] [--backend emu] [--shard K/N] "
                       "[--nvcc-dir DIR] [--fusion none|greedy|beam|ilp] DIR...\n");
    return 2;
  }
  auto known = read_known(known_path);
  std::set<std::string> seen_known;
  int passed = 0, failed = 0, skipped = 0, xfail = 0;
  std::map<std::string, int> skipped_ops;
  std::vector<std::pair<double, std::string>> times;  // seconds per test run, to find what makes a shard slow
  double total_seconds = 0;
  // Tests run in batches (Batch): a batch's results are reported once it has run.
  constexpr size_t kBatchTests = 32;
  Batch batch;
  int batches = 0;
  auto run_batch = [&] {
    batch.run(fs::temp_directory_path() / fmt::format("stitch_node_batch_{}_{}", getpid(), batches++));
    for (const Batch::Test& t : batch.tests) {
      const std::string& name = t.name;
      const Status& st = t.result;
      total_seconds += t.seconds;
      times.emplace_back(t.seconds, name);
      if (is_backend_skip(st)) {
        ++g_backend_skipped;
        if (verbose) fmt::print("SKIP {} ({})\n", name, st.message());
        continue;
      }
      bool is_known = known.count(name) != 0;
      if (is_known) seen_known.insert(name);
      if (st.is_ok() && !is_known) {
        ++passed;
        if (verbose) fmt::print("PASS {} ({:.2f} s)\n", name, t.seconds);
      } else if (st.is_ok()) {
        ++failed;
        fmt::print("FAIL {}: listed in known failures but passes; remove it from the list\n", name);
      } else if (is_known) {
        ++xfail;
        if (verbose) fmt::print("XFAIL {} ({}): {}\n", name, known[name], st.message());
      } else {
        ++failed;
        fmt::print("FAIL {}: {}\n", name, st.message());
      }
    }
    batch.tests.clear();
  };
  for (const auto& root : roots) {
    if (!fs::is_directory(root)) {
      fmt::print(stderr, "node-tests: '{}' is not a directory (is libonnx-testdata installed?)\n", root);
      return 2;
    }
    for (const auto& dir : node_tests::test_dirs(root)) {
      std::string name = dir.filename().string();
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      if (ordinal++ % shard_n != shard_k) continue;
      auto missing = unclaimed_ops((dir / "model.onnx").string());
      if (!missing.empty()) {
        ++skipped;
        for (const auto& op : std::set<std::string>(missing.begin(), missing.end())) ++skipped_ops[op];
        if (verbose) fmt::print("SKIP {} (unsupported: {})\n", name, fmt::join(missing, ", "));
        continue;
      }
      batch.add(dir);
      if (batch.tests.size() == kBatchTests) run_batch();
    }
  }
  run_batch();
  for (const auto& [name, why] : known)
    if (!seen_known.count(name) && filter.empty() && shard_n == 1)
      fmt::print("note: known failure '{}' did not run (not found or its ops are unclaimed)\n", name);
  if (verbose && !skipped_ops.empty()) {
    fmt::print("skipped for unsupported ops:\n");
    for (const auto& [op, n] : skipped_ops) fmt::print("  {:<32} {}\n", op, n);
  }
  fmt::print("known failures (listed with reasons): {}\n", xfail);
  fmt::print("tests run with shape operands frozen into constants: {}\n", g_frozen_runs);
  if (g_emu) {
    fmt::print("skipped because the back end does not claim a node: {}\n", g_backend_skipped);
    fmt::print(
        "emulation libraries: {} for batches of up to {} tests, {:.1f} s; {} batches fell back to a library "
        "per test run\n",
        g_libraries, kBatchTests, g_library_seconds, g_library_fallbacks);
  }
  if (!g_nvcc_dir.empty()) {
    // One translation unit with every kernel the node tests generated, for nvcc.
    fs::create_directories(g_nvcc_dir);
    std::ofstream f(fs::path(g_nvcc_dir) / "node_kernels.cu");
    f << "// Every kernel generated for the ONNX node tests, renamed per test.\n" << g_all_kernels;
    for (const char* h : {"stitch_device.cuh", "compat.cuh"})
      fs::copy_file(fs::path(STITCH_DEVICE_INCLUDE_DIR) / "stitch" / "device" / h, fs::path(g_nvcc_dir) / h,
                    fs::copy_options::overwrite_existing);
    fmt::print("wrote the kernels of {} test runs to {}/node_kernels.cu\n", g_kernel_sets, g_nvcc_dir);
  }
  const size_t slowest = std::min<size_t>(times.size(), 5);
  std::partial_sort(times.begin(), times.begin() + slowest, times.end(), std::greater<>());
  if (slowest > 0) {
    fmt::print("{:.1f} s in {} test runs; the slowest:", total_seconds, times.size());
    for (size_t i = 0; i < slowest; ++i)
      fmt::print(" {} {:.2f} s{}", times[i].second, times[i].first, i + 1 < slowest ? "," : "\n");
  }
  fmt::print("node-tests: {} passed, {} failed, {} skipped\n", passed, failed, skipped + xfail + g_backend_skipped);
  return failed ? 1 : 0;
}
