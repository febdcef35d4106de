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
// end does not claim are skipped. --nvcc-dir DIR also gathers every generated kernel (renamed
// per test) into DIR/node_kernels.cu for one nvcc check of them all.
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

// Compiles the prepared graph and runs it on the emu backend.
StatusOr<TensorMap> run_emu(const Graph& original, const TensorMap& feed, const fs::path& test_dir) {
  for (const auto& n : original.nodes()) {
    std::string why;
    if (codegen::classify_node(*n, &why) == codegen::NodeLowering::kUnsupported)
      return backend_skip(fmt::format("{}: {}", n->describe(), why));
  }
  codegen::NodeGroups groups;
  std::vector<int> packs;
  codegen::FoldOptions folds;
  // With a planner: its rewrites (Gemms as MatMuls, ...), groups, packs and GEMM folds, as
  // stitchc compile uses them, on a copy of the graph.
  std::unique_ptr<Graph> rewritten = clone_graph(original);
  fusion::FusionOptions fo;
  fo.mode = g_fusion;
  if (g_fusion != "none") RETURN_IF_ERROR(fusion::rewrite_for_planning(rewritten, fo).status());
  const Graph& g = *rewritten;  // after the rewrites, which may replace the graph
  if (g_fusion != "none") {
    ASSIGN_OR_RETURN(fusion::FusionPlan plan, fusion::make_plan(g, fo));
    for (const auto& grp : plan.groups) {
      groups.push_back(grp.nodes);
      packs.push_back(grp.pack);
    }
    folds = plan.gemm_folds;
  }
  ASSIGN_OR_RETURN(codegen::Schedule s, g_fusion != "none" ? codegen::build_schedule(g, &groups, &packs, folds)
                                                           : codegen::build_schedule(g));
  codegen::CompileOptions o;
  o.run_nvcc = false;
  o.model_path = (test_dir / "model.onnx").string();
  const fs::path out = fs::temp_directory_path() / fmt::format("stitch_node_{}_{}", getpid(), test_dir.filename().string());
  codegen::ArtifactSummary summary;
  RETURN_IF_ERROR(codegen::write_artifact(g, s, o, out.string(), &summary));
  if (!g_nvcc_dir.empty()) {
    const std::string prefix = fmt::format("t{:04d}_", g_kernel_sets++);
    for (const codegen::Kernel& k : s.kernels) {
      std::string src = k.source;
      for (size_t at = src.find(k.name); at != std::string::npos; at = src.find(k.name, at + prefix.size() + 1))
        src.insert(at, prefix);
      g_all_kernels += fmt::format("// from {}\n{}\n", test_dir.filename().string(), src);
    }
  }
  TensorMap got;
  try {
    auto model = rt::Model::load(out.string());
    rt::Session session(model, rt::Backend::kEmu);
    for (const rt::TensorInfo& t : model->inputs()) {
      const Tensor& x = feed.at(t.name);
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

// Runs one test directory; returns ok or the reason it failed. stitch needs
// shape operands (Reshape's shape, Slice's starts...) at compile time, while
// node tests feed them as inputs: `freeze` turns integer inputs (1), every input
// but the first (2: Resize's roi and float scales, with its data still fed at run
// time) or all inputs (3) into constants, as a user's model would have them.
Status run_test_once(const fs::path& dir, int freeze);

Status run_test(const fs::path& dir) {
  Status st = run_test_once(dir, 0);
  for (int level = 1; level <= 3 && !st.is_ok() && needs_constant(st); ++level) {
    st = run_test_once(dir, level);
    if (st.is_ok()) ++g_frozen_runs;
  }
  return st;
}

Status run_test_once(const fs::path& dir, int freeze) {
  std::string model = (dir / "model.onnx").string();
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return Status::user("no test_data_set_* directory");
  const bool by_onnxruntime = imports_onnxruntime_domain(model);
  for (const auto& set : sets) {
    ASSIGN_OR_RETURN(auto g, import_onnx_file(model));
    ASSIGN_OR_RETURN(auto inputs, read_set(set, "input"));
    ASSIGN_OR_RETURN(auto expected, read_set(set, "output"));
    if (inputs.size() != g->inputs.size())
      return Status::user(fmt::format("{} inputs in data, {} in model", inputs.size(), g->inputs.size()));
    PassContext ctx;
    TensorMap feed;
    std::vector<Value*> kept;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Value* v = g->inputs[i];
      Tensor t = as_model_type(std::move(inputs[i]), v->dtype);
      if (freeze == 3 || (freeze == 2 && i > 0) || (freeze == 1 && !is_float(t.dtype()))) {
        v->dtype = t.dtype();
        v->dims = t.dims();
        v->constant = std::move(t);
        continue;
      }
      kept.push_back(v);
      ctx.bindings.by_input[v->name] = t.dims();
      feed[v->name] = std::move(t);
    }
    g->inputs = kept;
    RETURN_IF_ERROR(run_frontend(*g, ctx));
    TensorMap got;
    if (g_emu) {
      ASSIGN_OR_RETURN(got, run_emu(*g, feed, dir));
    } else {
      ASSIGN_OR_RETURN(got, run_reference(*g, feed));
    }
    if (expected.size() != g->outputs.size())
      return Status::user(fmt::format("{} outputs in data, {} in model", expected.size(), g->outputs.size()));
    for (size_t i = 0; i < expected.size(); ++i) {
      const std::string& name = g->outputs[i]->name;
      Tensor want = as_model_type(std::move(expected[i]), g->outputs[i]->dtype);
      // Several nodes after the front end (a composite op expanded, or a function body) round
      // half-type intermediates at other points than ONNX's reference; one node rounds once.
      const bool steps = g->nodes().size() > 1;
      const Tolerance& tol = steps && want.dtype() == DType::kF16    ? kOnnxNodeTestF16
                             : steps && want.dtype() == DType::kBF16 ? kOnnxNodeTestBF16
                             : by_onnxruntime                        ? kOnnxRuntimeNodeTest
                                                                     : kOnnxNodeTest;
      CompareResult r = compare_tensors(got.at(name), want, tol.rtol, tol.atol);
      if (!r.ok)
        return Status::mismatch(fmt::format("{}: output '{}' {}", set.filename().string(), name,
                                            !r.problem.empty() ? r.problem
                                            : fmt::format("{} element(s) out of tolerance, max abs err {:.3g}, max rel err {:.3g}",
                                                          r.mismatches, r.max_abs, r.max_rel)));
    }
  }
  return Status::ok();
}

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
      const auto start = std::chrono::steady_clock::now();
      Status st = run_test(dir);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      total_seconds += seconds;
      times.emplace_back(seconds, name);
      if (is_backend_skip(st)) {
        ++g_backend_skipped;
        if (verbose) fmt::print("SKIP {} ({})\n", name, st.message());
        continue;
      }
      bool is_known = known.count(name) != 0;
      if (is_known) seen_known.insert(name);
      if (st.is_ok() && !is_known) {
        ++passed;
        if (verbose) fmt::print("PASS {} ({:.2f} s)\n", name, seconds);
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
  }
  for (const auto& [name, why] : known)
    if (!seen_known.count(name) && filter.empty() && shard_n == 1)
      fmt::print("note: known failure '{}' did not run (not found or its ops are unclaimed)\n", name);
  if (verbose && !skipped_ops.empty()) {
    fmt::print("skipped for unsupported ops:\n");
    for (const auto& [op, n] : skipped_ops) fmt::print("  {:<32} {}\n", op, n);
  }
  fmt::print("known failures (listed with reasons): {}\n", xfail);
  fmt::print("tests run with shape operands frozen into constants: {}\n", g_frozen_runs);
  if (g_emu) fmt::print("skipped because the back end does not claim a node: {}\n", g_backend_skipped);
  if (!g_nvcc_dir.empty()) {
    // One translation unit with every kernel the node tests generated, for nvcc.
    fs::create_directories(g_nvcc_dir);
    std::ofstream f(fs::path(g_nvcc_dir) / "node_kernels.cu");
    f << "// Every kernel generated for the ONNX node tests, renamed per test.\n" << g_all_kernels;
    for (const char* h : {"stitch_device.cuh", "compat.cuh"})
      fs::copy_file(fs::path(STITCH_DEVICE_INCLUDE_DIR) / "stitch" / "device" / h, fs::path(g_nvcc_dir) / h,
                    fs::copy_options::overwrite_existing);
    fmt::print("wrote the kernels of {} tests to {}/node_kernels.cu\n", g_kernel_sets, g_nvcc_dir);
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
