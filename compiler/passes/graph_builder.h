// Building nodes in a front-end pass that writes one node as several (expand_resize,
// expand_einsum): constants and nodes named after the node they replace, typed and shaped by the
// pass (shape inference has run), appended to the graph (the pass puts it back in order).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op_table.h"
#include "support/status.h"

namespace stitch {

struct NodeBuilder {
  Graph& g;
  const Node& replaced;

  // A constant value named "<replaced>/<hint>".
  Value* constant(const std::string& hint, Tensor t) {
    Value* v = g.add_value(g.unique_name(replaced.name + "/" + hint));
    v->dtype = t.dtype();
    v->dims = t.dims();
    v->constant = std::move(t);
    return v;
  }
  // A node "<replaced>/<name>" of the default domain at the graph's opset, or the replaced node's
  // where that is later (an op the importer wrote for an onnxruntime contrib op, at opset 23 in an
  // older model: importer/contrib_ops.h); returns its output.
  Value* node(const std::string& op, const std::string& name, std::vector<Value*> in, DType t, Dims d,
              std::map<std::string, AttrValue> attrs = {}) {
    auto n = std::make_unique<Node>();
    n->name = g.unique_name(replaced.name + "/" + name);
    n->op_type = op;
    n->opset = std::max(g.opset, replaced.opset);
    n->def = find_op("", op, n->opset);
    n->inputs = std::move(in);
    n->attrs = std::move(attrs);
    Value* y = g.add_value(g.unique_name(n->name + "_output"));
    y->dtype = t;
    y->dims = std::move(d);
    n->outputs = {y};
    g.add_node(std::move(n));
    return y;
  }
  // A Reshape of `x` to `d`, its target shape a constant "<name>_shape".
  Value* reshape(Value* x, const Dims& d, const std::string& name) {
    Value* shape = constant(name + "_shape", Tensor::vector_i64(std::vector<int64_t>(d.begin(), d.end())));
    return node("Reshape", name, {x, shape}, x->dtype, d);
  }
  // A Slice of `x` to [starts, ends) along `axes` (in range, non-negative), constants named after it.
  Value* slice(Value* x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
               const std::vector<int64_t>& axes, const std::string& name) {
    Dims d = *x->dims;
    for (size_t i = 0; i < axes.size(); ++i) d[static_cast<size_t>(axes[i])] = ends[i] - starts[i];
    return node("Slice", name,
                {x, constant(name + "_starts", Tensor::vector_i64(starts)),
                 constant(name + "_ends", Tensor::vector_i64(ends)),
                 constant(name + "_axes", Tensor::vector_i64(axes))},
                x->dtype, d);
  }
  Value* cast(Value* x, DType to, const std::string& name) {
    return node("Cast", name, {x}, to, *x->dims, {{"to", static_cast<int64_t>(dtype_to_onnx(to))}});
  }
  // Makes the node producing `last` write `out` (the replaced node's output value, so readers and
  // graph outputs keep it) after the replaced node is removed.
  void finish(Value* last, Value* out) {
    Node* p = last->producer;
    g.remove_nodes({const_cast<Node*>(&replaced)});
    p->outputs[0] = out;
    out->producer = p;
  }
  // finish() for a node of several outputs: each pair's first value (its producer's first output,
  // possibly read by the new nodes too) becomes the replaced node's output in the pair's second; an
  // omitted output (null) leaves its value to the new nodes.
  void finish_all(const std::vector<std::pair<Value*, Value*>>& outs) {
    g.remove_nodes({const_cast<Node*>(&replaced)});
    for (const auto& [last, out] : outs) {
      if (!out) continue;
      g.replace_uses(last, out);
      Node* p = last->producer;
      p->outputs[0] = out;
      out->producer = p;
    }
  }
};

// Runs `expand` on every node of the default domain's `op` (found before any is replaced; each
// returns whether it replaced its node), then drops what nothing reads and restores the order.
// (`expand` any callable, such as a lambda that passes on a PassContext's option.)
template <typename Expand>
StatusOr<bool> expand_each(Graph& g, const std::string& op, Expand expand) {
  std::vector<Node*> found;
  for (const auto& np : g.nodes())
    if (np->op_type == op && np->domain.empty()) found.push_back(np.get());
  bool changed = false;
  for (Node* n : found) {
    ASSIGN_OR_RETURN(bool done, expand(g, *n));
    changed = changed || done;
  }
  if (!changed) return false;
  g.remove_unused_values();
  RETURN_IF_ERROR(g.topo_sort());
  return true;
}

inline StatusOr<bool> expand_each(Graph& g, const std::string& op, StatusOr<bool> (*expand)(Graph&, Node&)) {
  return expand_each<StatusOr<bool> (*)(Graph&, Node&)>(g, op, expand);
}

}  // namespace stitch
