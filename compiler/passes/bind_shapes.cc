// bind_shapes: gives every graph input a static shape.
//
// A --shape binding names either an input (its whole shape, e.g.
// input_ids=2x128) or a symbolic dimension (batch=2, binding it in every
// input that uses it). Static dims of the model must agree with a binding.
// Afterwards every input has a static shape; an input left with unknown dims
// is an error naming it and its symbolic dims, with the flag to add.
#include <fmt/format.h>

#include <set>

#include "passes/pass.h"

namespace stitch {

StatusOr<bool> bind_shapes(Graph& g, PassContext& ctx) {
  bool changed = false;
  std::set<std::string> used;
  std::map<std::string, int64_t> symbols;
  std::set<std::string> input_names;
  for (const Value* in : g.inputs) input_names.insert(in->name);
  for (const auto& [name, d] : ctx.bindings.by_input) {
    if (input_names.count(name)) continue;
    if (d.size() != 1)
      return Status::user(fmt::format("--shape {}: no model input has that name; a symbolic dimension takes one "
                                      "value. Inputs: {}", name, fmt::join(input_names, ", ")));
    symbols[name] = d[0];
  }
  for (const auto& [k, v] : ctx.bindings.by_symbol) symbols[k] = v;

  for (Value* in : g.inputs) {
    auto it = ctx.bindings.by_input.find(in->name);
    if (it != ctx.bindings.by_input.end()) {
      used.insert(in->name);
      const Dims& want = it->second;
      if (in->dims) {
        bool ok = in->dims->size() == want.size();
        for (size_t i = 0; ok && i < want.size(); ++i) ok = (*in->dims)[i] < 0 || (*in->dims)[i] == want[i];
        if (!ok)
          return Status::user(fmt::format("--shape {}={} does not fit input '{}' of type {}", in->name,
                                          dims_to_string(want), in->name, in->type_string()));
      }
      changed |= !in->dims || *in->dims != want;
      in->dims = want;
      continue;
    }
    if (!in->dims)
      return Status::user(fmt::format("input '{}' has no shape in the model; give it with --shape {}=DxD...",
                                      in->name, in->name));
    std::vector<std::string> unbound;
    for (size_t i = 0; i < in->dims->size(); ++i) {
      if ((*in->dims)[i] >= 0) continue;
      std::string sym = i < in->dim_params.size() ? in->dim_params[i] : "";
      auto s = sym.empty() ? symbols.end() : symbols.find(sym);
      if (s != symbols.end()) {
        (*in->dims)[i] = s->second;
        used.insert(sym);
        changed = true;
      } else {
        unbound.push_back(sym.empty() ? fmt::format("dim {} (unnamed)", i) : "'" + sym + "'");
      }
    }
    if (!unbound.empty())
      return Status::user(fmt::format(
          "input '{}' has dynamic dimensions {} ({}); bind them with --shape {}=DxD... or by name, e.g. --shape "
          "{}=N", in->name, fmt::join(unbound, ", "), in->type_string(), in->name,
          unbound[0][0] == '\'' ? unbound[0].substr(1, unbound[0].size() - 2) : "SYMBOL"));
  }
  for (const auto& [name, v] : symbols)
    if (!used.count(name)) {
      std::set<std::string> all;
      for (const Value* in : g.inputs)
        for (const auto& p : in->dim_params)
          if (!p.empty()) all.insert(p);
      return Status::user(fmt::format("--shape {}: no input or symbolic dimension has that name (inputs: {}; "
                                      "symbols: {})", name, fmt::join(input_names, ", "),
                                      all.empty() ? "none" : fmt::format("{}", fmt::join(all, ", "))));
    }
  return changed;
}

}  // namespace stitch
