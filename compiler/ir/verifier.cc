#include "ir/verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "ir/op_table.h"

namespace stitch {

Status verify_graph(const Graph& g, const VerifyOptions& opts) {
  auto fail = [](const std::string& m) { return Status::internal("IR verifier: " + m); };
  std::unordered_set<const Value*> owned, defined;
  for (const auto& v : g.values()) owned.insert(v.get());
  for (const Value* v : g.inputs) {
    if (!owned.count(v)) return fail("a graph input is not owned by the graph");
    if (v->producer || v->constant) return fail(fmt::format("graph input '{}' has a producer or constant", v->name));
    defined.insert(v);
  }
  for (const auto& v : g.values())
    if (v->constant && !v->producer) {
      defined.insert(v.get());
      if (v->constant->dtype() != v->dtype || !v->dims || *v->dims != v->constant->dims())
        return fail(fmt::format("constant '{}' has type {} but holds {}[{}]", v->name, v->type_string(),
                                dtype_name(v->constant->dtype()), dims_to_string(v->constant->dims())));
    }
  for (const auto& n : g.nodes()) {
    if (!n->def) return fail(fmt::format("{} has no op table row", n->describe()));
    for (const Value* in : n->inputs) {
      if (!in) continue;
      if (!owned.count(in)) return fail(fmt::format("{} reads a value the graph does not own", n->describe()));
      if (!defined.count(in))
        return fail(fmt::format("{} reads '{}' before it is defined", n->describe(), in->name));
    }
    for (const Value* out : n->outputs) {
      if (!out) continue;
      if (!owned.count(out)) return fail(fmt::format("{} writes a value the graph does not own", n->describe()));
      if (out->producer != n.get())
        return fail(fmt::format("'{}' does not record {} as its producer", out->name, n->describe()));
      if (!defined.insert(out).second) return fail(fmt::format("'{}' is defined twice", out->name));
    }
  }
  for (const Value* v : g.outputs)
    if (!defined.count(v)) return fail(fmt::format("graph output '{}' is never defined", v->name));
  if (opts.require_static_types) {
    for (const Value* v : defined) {
      if (v->dtype == DType::kUndefined) return fail(fmt::format("'{}' has no element type", v->name));
      if (!v->has_static_shape()) return fail(fmt::format("'{}' has no static shape: {}", v->name, v->type_string()));
    }
  }
  return Status::ok();
}

Status verify_node_types(Graph& g) {
  const auto known = [](const Value* v) {
    return !v || (v->dtype != DType::kUndefined && v->has_static_shape());
  };
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    if (!n.def || !n.def->infer) continue;
    if (!std::all_of(n.inputs.begin(), n.inputs.end(), known) ||
        std::any_of(n.outputs.begin(), n.outputs.end(), [](const Value* v) { return v && v->constant; }))
      continue;
    std::vector<std::pair<DType, std::optional<Dims>>> given;
    for (const Value* o : n.outputs)
      given.emplace_back(o ? o->dtype : DType::kUndefined, o ? o->dims : std::nullopt);
    InferContext ctx(n);
    const Status rule = n.def->infer(ctx);
    std::string wrong;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Value* o = n.outputs[i];
      if (!o) continue;
      if (rule.is_ok() && wrong.empty() && (o->dtype != given[i].first || o->dims != given[i].second))
        wrong =
            fmt::format("output '{}' is {}[{}] but the op's rule gives {}[{}]", o->name,
                        dtype_name(given[i].first), given[i].second ? dims_to_string(*given[i].second) : "?",
                        dtype_name(o->dtype), o->dims ? dims_to_string(*o->dims) : "?");
      o->dtype = given[i].first;
      o->dims = given[i].second;
      o->constant.reset();  // a rule may record a value computed from shapes alone
    }
    if (!rule.is_ok()) wrong = "the op's rule refuses it: " + rule.message();
    if (!wrong.empty()) return Status::internal(fmt::format("IR verifier: {}: {}", n.describe(), wrong));
  }
  return Status::ok();
}

}  // namespace stitch
