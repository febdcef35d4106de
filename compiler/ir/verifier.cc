#include "ir/verifier.h"

#include <fmt/format.h>

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

}  // namespace stitch
