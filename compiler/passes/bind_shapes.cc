// bind_shapes: gives every graph input a static shape.
//
// A --shape binding names either an input (its whole shape, e.g. input_ids=2x128) or a symbolic
// dimension (batch=2, binding it in every input that uses it). As in ONNX, one dim_param names
// one size in every input: an input bound whole binds the symbols of its dims for the others, and
// two bindings that give a symbol different sizes are an error naming both. A dim_param may be an
// expression of symbols (torch.export's `past + 1`, ir/dim_expr.h), fixed once they are bound.
// Static dims of the model must agree with a binding. Afterwards every input has a static shape;
// an input left with unknown dims is an error naming it and its symbolic dims, with the flag to add.
#include <fmt/format.h>

#include <set>
#include <utility>
#include <vector>

#include "ir/dim_expr.h"
#include "passes/pass.h"

namespace stitch {
namespace {

// What the symbols are bound to, and by what (for the message when two bindings disagree).
struct Symbols {
  std::map<std::string, int64_t> value;
  std::map<std::string, std::string> source;

  // Binds `name` to `v` unless bound already; a user error when bound to another size.
  Status bind(const std::string& name, int64_t v, const std::string& by) {
    auto [it, fresh] = value.emplace(name, v);
    if (fresh) {
      source[name] = by;
      return Status::ok();
    }
    if (it->second == v) return Status::ok();
    return Status::user(
        fmt::format("symbolic dimension '{}' is {} by {} but {} by {}; inputs that share a "
                    "dimension name must agree (fix the binding or the data)",
                    name, it->second, source[name], v, by));
  }
};

// "past=16 (by --shape past=16)" for each symbol expression `p` reads.
std::string bound_as(const std::string& p, const Symbols& s) {
  std::vector<std::string> with;
  for (const std::string& r : dim_expr_symbols(p).value_or(std::set<std::string>{}))
    with.push_back(fmt::format("{}={} (by {})", r, s.value.at(r), s.source.at(r)));
  return fmt::format("{}", fmt::join(with, ", "));
}

// The size of dim_param `p` with the symbols bound so far; nullopt when a symbol it needs is not.
StatusOr<std::optional<int64_t>> resolve(const std::string& p, const Symbols& s) {
  if (p.empty()) return std::optional<int64_t>();
  if (auto it = s.value.find(p); it != s.value.end()) return std::optional<int64_t>(it->second);
  const std::optional<std::set<std::string>> expr = dim_expr_symbols(p);
  if (!expr) return std::optional<int64_t>();
  const std::set<std::string>& reads = *expr;
  for (const std::string& r : reads)
    if (!s.value.count(r)) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t v, eval_dim_expr(p, s.value));
  if (v < 0)
    return Status::user(fmt::format("dimension '{}' is {} with {}: bind a size that makes it at least 0", p,
                                    v, bound_as(p, s)));
  return std::optional<int64_t>(v);
}

}  // namespace

StatusOr<bool> bind_shapes(Graph& g, PassContext& ctx) {
  bool changed = false;
  Symbols symbols;
  std::set<std::string> given;  // symbols named by --shape: each must be read by some input
  std::set<std::string> input_names;
  for (const Value* in : g.inputs) input_names.insert(in->name);
  for (const auto& [name, d] : ctx.bindings.by_input) {
    if (input_names.count(name)) continue;
    if (d.size() != 1)
      return Status::user(fmt::format("--shape {}: no model input has that name; a symbolic dimension takes one "
                                      "value. Inputs: {}", name, fmt::join(input_names, ", ")));
    RETURN_IF_ERROR(symbols.bind(name, d[0], fmt::format("--shape {}={}", name, d[0])));
    given.insert(name);
  }
  for (const auto& [k, v] : ctx.bindings.by_symbol) {
    RETURN_IF_ERROR(symbols.bind(k, v, fmt::format("--shape {}={}", k, v)));
    given.insert(k);
  }
  auto param = [](const Value* in, size_t i) { return i < in->dim_params.size() ? in->dim_params[i] : ""; };

  // Inputs bound whole first: their plain symbols bind the others', then their expressions are
  // checked against what the symbols make of them.
  std::vector<Value*> rest;
  std::vector<std::pair<Value*, const Dims*>> whole;
  for (Value* in : g.inputs) {
    auto it = ctx.bindings.by_input.find(in->name);
    if (it == ctx.bindings.by_input.end()) {
      rest.push_back(in);
      continue;
    }
    const Dims& want = it->second;
    whole.emplace_back(in, &want);
    if (in->dims) {
      bool ok = in->dims->size() == want.size();
      for (size_t i = 0; ok && i < want.size(); ++i) ok = (*in->dims)[i] < 0 || (*in->dims)[i] == want[i];
      if (!ok)
        return Status::user(fmt::format("--shape {}={} does not fit input '{}' of type {}", in->name,
                                        dims_to_string(want), in->name, in->type_string()));
      for (size_t i = 0; i < want.size(); ++i) {
        const std::string p = param(in, i);
        if ((*in->dims)[i] < 0 && !p.empty() && !dim_expr_symbols(p))
          RETURN_IF_ERROR(
              symbols.bind(p, want[i], fmt::format("input '{}' ({})", in->name, dims_to_string(want))));
      }
    }
  }
  for (auto [in, wanted] : whole) {
    const Dims& want = *wanted;
    for (size_t i = 0; in->dims && i < want.size(); ++i) {
      const std::string p = param(in, i);
      if ((*in->dims)[i] >= 0 || !dim_expr_symbols(p)) continue;
      ASSIGN_OR_RETURN(std::optional<int64_t> v, resolve(p, symbols));
      if (v && *v != want[i])
        return Status::user(
            fmt::format("input '{}' is bound to {}, but its dim {} is '{}', which is {} with {}; "
                        "fix the binding or the data",
                        in->name, dims_to_string(want), i, p, *v, bound_as(p, symbols)));
    }
    changed |= !in->dims || *in->dims != want;
    in->dims = want;
  }

  for (Value* in : rest) {
    if (!in->dims)
      return Status::user(fmt::format("input '{}' has no shape in the model; give it with --shape {}=DxD...",
                                      in->name, in->name));
    std::vector<std::string> unbound;
    std::set<std::string> missing;  // symbols the unbound expressions read
    for (size_t i = 0; i < in->dims->size(); ++i) {
      if ((*in->dims)[i] >= 0) continue;
      const std::string p = param(in, i);
      ASSIGN_OR_RETURN(std::optional<int64_t> v, resolve(p, symbols));
      if (v) {
        (*in->dims)[i] = *v;
        changed = true;
        continue;
      }
      unbound.push_back(p.empty() ? fmt::format("dim {} (unnamed)", i) : "'" + p + "'");
      const std::optional<std::set<std::string>> reads = dim_expr_symbols(p);
      if (!reads && !p.empty()) missing.insert(p);
      for (const std::string& r : reads.value_or(std::set<std::string>{}))
        if (!symbols.value.count(r)) missing.insert(r);
    }
    if (!unbound.empty())
      return Status::user(
          fmt::format("input '{}' has dynamic dimensions {} ({}); bind them with --shape {}=DxD... or by "
                      "name, e.g. --shape "
                      "{}=N",
                      in->name, fmt::join(unbound, ", "), in->type_string(), in->name,
                      missing.empty() ? "SYMBOL" : *missing.begin()));
  }

  std::set<std::string> all, read;
  for (const Value* in : g.inputs)
    for (const auto& p : in->dim_params) {
      if (p.empty()) continue;
      all.insert(p);
      read.insert(p);
      for (const std::string& r : dim_expr_symbols(p).value_or(std::set<std::string>{})) read.insert(r);
    }
  for (const std::string& name : given)
    if (!read.count(name))
      return Status::user(
          fmt::format("--shape {}: no input or symbolic dimension has that name (inputs: {}; "
                      "symbols: {})",
                      name, fmt::join(input_names, ", "),
                      all.empty() ? "none" : fmt::format("{}", fmt::join(all, ", "))));
  return changed;
}

}  // namespace stitch
