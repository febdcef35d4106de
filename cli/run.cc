// stitchc run: runs a model on ONNX test-data inputs and checks expected outputs.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <regex>

#include "cli/common.h"
#include "cli/subcommands.h"
#include "importer/onnx_importer.h"
#include "importer/tensor_io.h"
#include "reference/compare.h"
#include "support/tolerances.h"
#include "reference/interpreter.h"

namespace stitch::cli {
namespace fs = std::filesystem;
namespace {

// Reads PREFIX_0.pb, PREFIX_1.pb... from `dir` in index order.
StatusOr<std::vector<NamedTensor>> read_tensor_dir(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status::user(fmt::format("'{}' is not a directory (expected {}_0.pb, {}_1.pb... inside)", dir, prefix, prefix));
  std::map<int, std::string> files;
  std::regex re(prefix + "_([0-9]+)\\.pb");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    std::string name = e.path().filename().string();
    if (std::regex_match(name, m, re)) files[std::stoi(m[1])] = e.path().string();
  }
  std::vector<NamedTensor> out;
  int expect = 0;
  for (const auto& [i, path] : files) {
    if (i != expect) return Status::user(fmt::format("'{}': {}_{}.pb is missing", dir, prefix, expect));
    ++expect;
    ASSIGN_OR_RETURN(NamedTensor t, read_tensor_file(path));
    out.push_back(std::move(t));
  }
  return out;
}

// Pairs tensors with graph values: by name when every file names a value, else by position.
StatusOr<std::vector<std::pair<const Value*, Tensor>>> match(const std::vector<Value*>& values,
                                                             std::vector<NamedTensor> tensors,
                                                             const std::string& dir, const char* role) {
  if (tensors.size() != values.size())
    return Status::user(fmt::format("'{}' holds {} {} file(s) but the model has {} {}s", dir, tensors.size(), role,
                                    values.size(), role));
  bool by_name = std::all_of(tensors.begin(), tensors.end(), [&](const NamedTensor& t) {
    return std::any_of(values.begin(), values.end(), [&](const Value* v) { return v->name == t.name; });
  });
  std::vector<std::pair<const Value*, Tensor>> out;
  for (size_t i = 0; i < values.size(); ++i) {
    size_t k = i;
    if (by_name)
      for (size_t j = 0; j < tensors.size(); ++j)
        if (tensors[j].name == values[i]->name) k = j;
    out.emplace_back(values[i], std::move(tensors[k].tensor));
  }
  return out;
}

}  // namespace

int run_run(const RunArgs& a) {
  if (a.backend != "reference")
    return report(Status::user(fmt::format("backend '{}' is not available in this build; use --backend reference",
                                           a.backend)));
  if ((a.rtol >= 0) != (a.atol >= 0) && a.expect.empty())
    return report(Status::user("--rtol and --atol only apply with --expect"));
  // Match the data to the imported inputs, then bind dynamic dims from it.
  auto raw = import_onnx_file(a.model);
  if (!raw.is_ok()) return report(raw.status());
  auto in_files = read_tensor_dir(a.inputs, "input");
  if (!in_files.is_ok()) return report(in_files.status());
  auto inputs = match((*raw)->inputs, std::move(*in_files), a.inputs, "input");
  if (!inputs.is_ok()) return report(inputs.status());
  ShapeBindings from_data;
  for (const auto& [v, t] : *inputs) {
    Status st = check_input(*v, t);  // dtype and rank before any binding
    if (!st.is_ok()) return report(st.with_context(a.inputs));
    if (!v->has_static_shape()) from_data.by_input[v->name] = t.dims();
  }
  Status prepared = prepare_model(**raw, a.model, a.shapes, from_data, a.dump_dir);
  if (!prepared.is_ok()) return report(prepared);
  const Graph& g = **raw;

  TensorMap feed;
  for (auto& [v, t] : *inputs) feed[v->name] = std::move(t);
  auto t0 = std::chrono::steady_clock::now();
  auto result = run_reference(g, feed);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!result.is_ok()) return report(result.status().with_context(a.model));
  fmt::print("ran {} nodes on the reference backend in {:.3f} s\n", g.nodes().size(), secs);

  if (!a.save.empty()) {
    std::error_code ec;
    fs::create_directories(a.save, ec);
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const std::string& name = g.outputs[i]->name;
      Status st = write_tensor_file(fmt::format("{}/output_{}.pb", a.save, i), result->at(name), name);
      if (!st.is_ok()) return report(st);
    }
    fmt::print("saved {} output(s) to {}\n", g.outputs.size(), a.save);
  }
  if (a.expect.empty()) {
    for (const Value* v : g.outputs) fmt::print("  {:<24} {}\n", v->name, v->type_string());
    return 0;
  }
  auto exp_files = read_tensor_dir(a.expect, "output");
  if (!exp_files.is_ok()) return report(exp_files.status());
  auto expected = match(g.outputs, std::move(*exp_files), a.expect, "output");
  if (!expected.is_ok()) return report(expected.status());
  double rtol = a.rtol >= 0 ? a.rtol : kRunDefault.rtol, atol = a.atol >= 0 ? a.atol : kRunDefault.atol;
  fmt::print("{:<24} {:<6} {:<14} {:>10} {:>10}  {}\n", "output", "dtype", "shape", "max_abs", "max_rel", "result");
  int bad = 0;
  for (const auto& [v, want] : *expected) {
    CompareResult r = compare_tensors(result->at(v->name), want, rtol, atol);
    std::string verdict = r.ok ? "ok" : !r.problem.empty() ? "MISMATCH: " + r.problem
                                       : fmt::format("MISMATCH: {} element(s) out of tolerance, first at index {}",
                                                     r.mismatches, r.first_bad);
    fmt::print("{:<24} {:<6} {:<14} {:>10.3e} {:>10.3e}  {}\n", v->name, dtype_name(v->dtype),
               dims_to_string(*v->dims), r.max_abs, r.max_rel, verdict);
    bad += !r.ok;
  }
  fmt::print("tolerance: rtol {} atol {}\n", rtol, atol);
  if (bad) {
    std::fprintf(stderr, "stitchc: %d of %zu output(s) do not match the expected outputs\n", bad, expected->size());
    return 1;
  }
  fmt::print("all {} output(s) match\n", expected->size());
  return 0;
}

}  // namespace stitch::cli
