// stitchc run: runs a model on ONNX test-data inputs and checks expected outputs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <regex>

#include "cli/common.h"
#include "cli/subcommands.h"
#include "importer/onnx_importer.h"
#include "importer/tensor_io.h"
#include "reference/compare.h"
#include "reference/interpreter.h"
#include "stitch/runtime.hpp"
#include "support/tolerances.h"

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

// A stand-in value for each of `fixed` (inputs fixed at compile time) that a data file names, so
// that the files still match the model by name; `holder` owns them.
void add_fixed_standins(const std::vector<NamedTensor>& files, const std::vector<std::string>& fixed,
                        std::vector<Value*>& ins, std::vector<std::unique_ptr<Value>>& holder) {
  for (const std::string& name : fixed)
    if (std::any_of(files.begin(), files.end(), [&](const NamedTensor& t) { return t.name == name; })) {
      holder.push_back(std::make_unique<Value>());
      holder.back()->name = name;
      ins.push_back(holder.back().get());
    }
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
  // As many files as values, each naming one of them: one value each, unless two name the same.
  if (by_name)
    for (size_t j = 0; j < tensors.size(); ++j)
      for (size_t l = j + 1; l < tensors.size(); ++l)
        if (tensors[j].name == tensors[l].name)
          return Status::user(
              fmt::format("'{0}': {1}_{2}.pb and {1}_{3}.pb both name {1} '{4}'; give each {1} one file", dir,
                          role, j, l, tensors[j].name));
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

// The narrower of two floating-point types (float16 and bfloat16 narrower than float32, float32
// than float64); kUndefined when neither is one of those.
DType narrower(DType a, DType b) {
  auto rank = [](DType t) {
    return t == DType::kBF16 ? 0 : t == DType::kF16 ? 1 : t == DType::kF32 ? 2 : t == DType::kF64 ? 3 : 4;
  };
  const DType n = rank(a) <= rank(b) ? a : b;
  return rank(n) < 4 ? n : DType::kUndefined;
}

// Compares outputs with --expect files and prints the table; returns the exit code. tf32: the
// artifact's float32 GEMMs and convolutions ran on TF32 tensor cores (compiled with --tf32).
// narrowest: the narrowest floating-point type the model computes in; a wider float output
// carries its rounding and is compared within its tolerance.
int check_outputs(const RunArgs& a, const std::vector<Value*>& outs, const TensorMap& result, DType narrowest,
                  bool tf32 = false) {
  auto exp_files = read_tensor_dir(a.expect, "output");
  if (!exp_files.is_ok()) return report(exp_files.status());
  auto expected = match(outs, std::move(*exp_files), a.expect, "output");
  if (!expected.is_ok()) return report(expected.status());
  // Each output's default follows its type (support/tolerances.h); --rtol/--atol override both.
  std::map<std::string, std::pair<double, double>> used;  // dtype name -> (rtol, atol)
  std::map<std::string, std::string> why;                 // dtype name -> the narrower type it took
  auto tolerance_for = [&](DType t) {
    // A float output of a model that computes in a narrower type: that type's tolerance.
    const DType n = is_float(t) ? narrower(t, narrowest) : t;
    if (n != t && n != DType::kUndefined && a.rtol < 0) why[std::string(dtype_name(t))] = dtype_name(n);
    const DType by = n == DType::kUndefined ? t : n;
    const Tolerance d = by == DType::kF16           ? kModelF16
                        : by == DType::kBF16        ? kModelBF16
                        : by == DType::kF32 && tf32 ? kModelTf32
                                                    : kRunDefault;
    std::pair<double, double> tol{a.rtol >= 0 ? a.rtol : d.rtol, a.atol >= 0 ? a.atol : d.atol};
    used[std::string(dtype_name(t))] = tol;
    return tol;
  };
  fmt::print("{:<24} {:<6} {:<14} {:>10} {:>10}  {}\n", "output", "dtype", "shape", "max_abs", "max_rel", "result");
  int bad = 0;
  for (const auto& [v, want] : *expected) {
    const auto [rtol, atol] = tolerance_for(v->dtype);
    CompareResult r = compare_tensors(result.at(v->name), want, rtol, atol);
    std::string verdict = r.ok ? "ok" : !r.problem.empty() ? "MISMATCH: " + r.problem
                                       : fmt::format("MISMATCH: {} element(s) out of tolerance, first at index {}",
                                                     r.mismatches, r.first_bad);
    fmt::print("{:<24} {:<6} {:<14} {:>10.3e} {:>10.3e}  {}\n", v->name, dtype_name(v->dtype),
               dims_to_string(*v->dims), r.max_abs, r.max_rel, verdict);
    bad += !r.ok;
  }
  // One line when every output had the same tolerance (the common case), else one per type.
  const bool one =
      std::all_of(used.begin(), used.end(), [&](const auto& e) { return e.second == used.begin()->second; });
  for (const auto& [t, tol] : used) {
    const auto w = why.find(t);
    fmt::print(
        "tolerance{}: rtol {} atol {}{}\n", one ? "" : fmt::format(" ({} outputs)", t), tol.first, tol.second,
        w == why.end() ? "" : fmt::format(" ({} outputs of a model that computes in {})", t, w->second));
    if (one) break;
  }
  if (bad) {
    std::fprintf(stderr, "stitchc: %d of %zu output(s) do not match the expected outputs\n", bad, expected->size());
    return 1;
  }
  fmt::print("all {} output(s) match\n", expected->size());
  return 0;
}

Status save_outputs(const RunArgs& a, const std::vector<Value*>& outs, const TensorMap& result) {
  std::error_code ec;
  fs::create_directories(a.save, ec);
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string& name = outs[i]->name;
    RETURN_IF_ERROR(write_tensor_file(fmt::format("{}/output_{}.pb", a.save, i), result.at(name), name));
  }
  fmt::print("saved {} output(s) to {}\n", outs.size(), a.save);
  return Status::ok();
}

// Runs an artifact directory on the emu or cuda backend.
int run_artifact(const RunArgs& a) {
  std::shared_ptr<const rt::Model> model;
  std::unique_ptr<rt::Session> session;
  // Stand-in values so the data can be matched and compared like the graph's.
  std::vector<std::unique_ptr<Value>> holder;
  std::vector<Value*> ins, outs;
  try {
    model = rt::Model::load(a.model);
    for (const auto& [list, vec] : {std::pair{&model->inputs(), &ins}, std::pair{&model->outputs(), &outs}})
      for (const rt::TensorInfo& t : *list) {
        auto v = std::make_unique<Value>();
        v->name = t.name;
        v->dtype = dtype_from_name(t.dtype).value_or(DType::kUndefined);
        v->dims = Dims(t.dims.begin(), t.dims.end());
        vec->push_back(v.get());
        holder.push_back(std::move(v));
      }
    auto in_files = read_tensor_dir(a.inputs, "input");
    if (!in_files.is_ok()) return report(in_files.status());
    // Data for an input fixed at compile time goes to the session too, which checks its value.
    std::vector<std::string> fixed;
    for (const rt::TensorInfo& t : model->fixed_inputs()) fixed.push_back(t.name);
    add_fixed_standins(*in_files, fixed, ins, holder);
    auto inputs = match(ins, std::move(*in_files), a.inputs, "input");
    if (!inputs.is_ok()) return report(inputs.status());
    session = std::make_unique<rt::Session>(model, rt::parse_backend(a.backend));
    for (const auto& [v, t] : *inputs)
      session->set_input(v->name, std::string(dtype_name(t.dtype())), std::vector<int64_t>(t.dims().begin(), t.dims().end()),
                         t.data(), static_cast<size_t>(t.byte_size()));
    auto t0 = std::chrono::steady_clock::now();
    session->run();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("ran {} in {:.3f} s\n", session->describe(), secs);
    TensorMap result;
    for (const Value* v : outs) {
      Tensor t(v->dtype, *v->dims);
      session->get_output(v->name, t.data(), static_cast<size_t>(t.byte_size()));
      result[v->name] = std::move(t);
    }
    if (!a.save.empty()) {
      Status st = save_outputs(a, outs, result);
      if (!st.is_ok()) return report(st);
    }
    if (a.expect.empty()) {
      for (const Value* v : outs) fmt::print("  {:<24} {}\n", v->name, v->type_string());
      return 0;
    }
    return check_outputs(a, outs, result,
                         dtype_from_name(model->narrowest_float()).value_or(DType::kUndefined),
                         model->tf32());
  } catch (const rt::Error& e) {
    return report(e.code() == 2 ? Status::user(e.what()) : Status::internal(e.what()));
  }
}

}  // namespace

int run_run(const RunArgs& a) {
  std::error_code dir_ec;
  if (fs::is_directory(a.model, dir_ec)) {
    if (a.backend == "reference")
      return report(Status::user(fmt::format("'{}' is an artifact directory: run it with --backend emu or --backend "
                                             "cuda (the reference backend runs a model.onnx)", a.model)));
    if ((a.rtol >= 0) != (a.atol >= 0) && a.expect.empty())
      return report(Status::user("--rtol and --atol only apply with --expect"));
    return run_artifact(a);
  }
  if (a.backend != "reference")
    return report(Status::user(fmt::format("backend '{}' runs a compiled artifact: stitchc compile {} -o DIR first, "
                                           "then stitchc run DIR --backend {}", a.backend, a.model, a.backend)));
  if ((a.rtol >= 0) != (a.atol >= 0) && a.expect.empty())
    return report(Status::user("--rtol and --atol only apply with --expect"));
  // Match the data to the imported inputs, then bind dynamic dims from it.
  auto raw = import_onnx_file(a.model, {a.constant_inputs});
  if (!raw.is_ok()) return report(raw.status());
  auto in_files = read_tensor_dir(a.inputs, "input");
  if (!in_files.is_ok()) return report(in_files.status());
  // Data for an input fixed by --constant-input must hold that value; it is not fed.
  std::vector<Value*> ins = (*raw)->inputs;
  std::vector<std::unique_ptr<Value>> holder;
  std::vector<std::string> fixed;
  for (const FixedInput& f : (*raw)->fixed_inputs) fixed.push_back(f.name);
  add_fixed_standins(*in_files, fixed, ins, holder);
  auto inputs = match(ins, std::move(*in_files), a.inputs, "input");
  if (!inputs.is_ok()) return report(inputs.status());
  for (const FixedInput& f : (*raw)->fixed_inputs)
    for (auto it = inputs->begin(); it != inputs->end(); ++it) {
      if (it->first->name != f.name) continue;
      const Tensor& t = it->second;
      if (t.dtype() != f.value.dtype() || t.dims() != f.value.dims() ||
          !std::equal(t.data(), t.data() + t.byte_size(), f.value.data(),
                      f.value.data() + f.value.byte_size()))
        return report(
            Status::user(fmt::format("'{}': input '{}' holds another value than --constant-input fixes "
                                     "({}={}); give the value the data holds",
                                     a.inputs, f.name, f.name, fmt::join(f.value.to_f64(), ","))));
      inputs->erase(it);
      break;
    }
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
    Status st = save_outputs(a, g.outputs, *result);
    if (!st.is_ok()) return report(st);
  }
  if (a.expect.empty()) {
    for (const Value* v : g.outputs) fmt::print("  {:<24} {}\n", v->name, v->type_string());
    return 0;
  }
  DType narrowest = DType::kUndefined;
  for (const auto& v : g.values()) narrowest = narrower(narrowest, v->dtype);
  return check_outputs(a, g.outputs, *result, narrowest);
}

}  // namespace stitch::cli
