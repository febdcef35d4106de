// Runs ONNX's own backend node tests (Debian's libonnx-testdata) through the
// importer, the front-end passes and the reference interpreter.
//
// A test whose ops are all claimed by the op table at the model's opset must
// pass every one of its data sets, unless known_failures.txt lists it with a
// reason; a listed test that passes is itself a failure (keep the list true).
// Tests using ops the table does not claim are skipped. Prints one line per
// failure and closes with "node-tests: N passed, N failed, N skipped".
//
//   stitch_node_tests [--known FILE] [--filter SUBSTR] [--verbose] DIR...
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "importer/onnx_importer.h"
#include "importer/tensor_io.h"
#include "ir/op_table.h"
#include "passes/pass.h"
#include "reference/compare.h"
#include "reference/interpreter.h"
#include "support/tolerances.h"

namespace fs = std::filesystem;
using namespace stitch;

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
    if (!find_op(n.domain(), n.op_type(), opset)) out.push_back(fmt::format("{}@{}", n.op_type(), opset));
  }
  return out;
}

StatusOr<std::vector<Tensor>> read_set(const fs::path& dir, const char* prefix) {
  std::vector<Tensor> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / fmt::format("{}_{}.pb", prefix, i);
    if (!fs::exists(p)) break;
    ASSIGN_OR_RETURN(NamedTensor t, read_tensor_file(p.string()));
    out.push_back(std::move(t.tensor));
  }
  return out;
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

// Runs one test directory; returns ok or the reason it failed. stitch needs
// shape operands (Reshape's shape, Slice's starts...) at compile time, while
// node tests feed them as inputs: `freeze` turns integer inputs (1) or all
// inputs (2) into constants, as a user's model would have them.
Status run_test_once(const fs::path& dir, int freeze);

Status run_test(const fs::path& dir) {
  Status st = run_test_once(dir, 0);
  for (int level = 1; level <= 2 && !st.is_ok() && needs_constant(st); ++level) {
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
      if (freeze == 2 || (freeze == 1 && !is_float(t.dtype()))) {
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
    ASSIGN_OR_RETURN(TensorMap got, run_reference(*g, feed));
    if (expected.size() != g->outputs.size())
      return Status::user(fmt::format("{} outputs in data, {} in model", expected.size(), g->outputs.size()));
    for (size_t i = 0; i < expected.size(); ++i) {
      const std::string& name = g->outputs[i]->name;
      Tensor want = as_model_type(std::move(expected[i]), g->outputs[i]->dtype);
      CompareResult r = compare_tensors(got.at(name), want, kOnnxNodeTest.rtol, kOnnxNodeTest.atol);
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
  std::vector<std::string> roots;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--known" && i + 1 < argc) known_path = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--verbose") verbose = true;
    else roots.push_back(a);
  }
  if (roots.empty()) {
    fmt::print(stderr, "usage: stitch_node_tests [--known FILE] [--filter SUBSTR] [--verbose] DIR...\n");
    return 2;
  }
  auto known = read_known(known_path);
  std::set<std::string> seen_known;
  int passed = 0, failed = 0, skipped = 0, xfail = 0;
  std::map<std::string, int> skipped_ops;
  for (const auto& root : roots) {
    if (!fs::is_directory(root)) {
      fmt::print(stderr, "node-tests: '{}' is not a directory (is libonnx-testdata installed?)\n", root);
      return 2;
    }
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const auto& dir : dirs) {
      std::string name = dir.filename().string();
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      auto missing = unclaimed_ops((dir / "model.onnx").string());
      if (!missing.empty()) {
        ++skipped;
        for (const auto& op : std::set<std::string>(missing.begin(), missing.end())) ++skipped_ops[op];
        if (verbose) fmt::print("SKIP {} (unsupported: {})\n", name, fmt::join(missing, ", "));
        continue;
      }
      Status st = run_test(dir);
      bool is_known = known.count(name) != 0;
      if (is_known) seen_known.insert(name);
      if (st.is_ok() && !is_known) {
        ++passed;
        if (verbose) fmt::print("PASS {}\n", name);
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
    if (!seen_known.count(name) && filter.empty())
      fmt::print("note: known failure '{}' did not run (not found or its ops are unclaimed)\n", name);
  if (verbose && !skipped_ops.empty()) {
    fmt::print("skipped for unsupported ops:\n");
    for (const auto& [op, n] : skipped_ops) fmt::print("  {:<32} {}\n", op, n);
  }
  fmt::print("known failures (listed with reasons): {}\n", xfail);
  fmt::print("tests run with shape operands frozen into constants: {}\n", g_frozen_runs);
  fmt::print("node-tests: {} passed, {} failed, {} skipped\n", passed, failed, skipped + xfail);
  return failed ? 1 : 0;
}
