// Nodes and values added by the graph rewrites before planning (merge_gemms, hoist_scales,
// split_slices, decompose_norm): the node's op definition looked up at the graph's opset, the value typed and
// shaped by the caller's knowledge (the front end's shape inference has already run).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/op_table.h"
#include "support/status.h"

namespace stitch::fusion {

inline Node* add_op_node(Graph& g, const std::string& op, const std::string& name) {
  auto n = std::make_unique<Node>();
  n->op_type = op;
  n->name = name;
  n->opset = g.opset;
  n->def = find_op("", op, g.opset);
  return g.add_node(std::move(n));
}

// A node doing what `n` does (op, domain, opset, attributes), named `name`, its inputs and
// outputs left to the caller: a copy for some of `n`'s readers.
inline Node* add_copy_node(Graph& g, const Node& n, const std::string& name) {
  auto c = std::make_unique<Node>();
  c->name = name;
  c->op_type = n.op_type;
  c->domain = n.domain;
  c->opset = n.opset;
  c->attrs = n.attrs;
  c->def = n.def;
  return g.add_node(std::move(c));
}

// A new value named after `hint` (made unique), of type `t` and dims `d`.
inline Value* add_typed_value(Graph& g, const std::string& hint, DType t, Dims d) {
  Value* v = g.add_value(g.unique_name(hint));
  v->dtype = t;
  v->dims = std::move(d);
  return v;
}

// A constant of `t` holding `v` (dims `d`).
inline Value* add_constant(Graph& g, const std::string& hint, DType t, Dims d, const std::vector<double>& v) {
  Value* c = add_typed_value(g, hint, t, d);
  c->constant = Tensor::from_f64(t, std::move(d), v);
  return c;
}

// Whether `n` is a view that keeps its input's element order (Reshape, Squeeze, Unsqueeze, Flatten
// of the default domain).
inline bool is_order_view(const Node* n) {
  return n && n->domain.empty() &&
         (n->op_type == "Reshape" || n->op_type == "Squeeze" || n->op_type == "Unsqueeze" ||
          n->op_type == "Flatten");
}

// An int64 constant holding `d`: a Reshape's shape input.
inline Value* add_shape_constant(Graph& g, const std::string& hint, const Dims& d) {
  Value* s = add_typed_value(g, hint, DType::kI64, {static_cast<int64_t>(d.size())});
  s->constant = Tensor::vector_i64(std::vector<int64_t>(d.begin(), d.end()));
  return s;
}

// A new node `op` of `inputs` writing a new value of `t` and `d`, which it returns.
inline Value* add_op(Graph& g, const std::string& op, const std::string& hint, std::vector<Value*> inputs,
                     DType t, Dims d) {
  Node* n = add_op_node(g, op, g.unique_name(hint));
  Value* out = add_typed_value(g, hint, t, std::move(d));
  n->inputs = std::move(inputs);
  n->outputs = {out};
  out->producer = n;
  return out;
}

// A new node `op` named after `name` (made unique) of `inputs` writing `out`, an existing value
// whose old producer the caller retires: a rewrite's last node, writing the replaced node's output.
inline Node* add_op_writing(Graph& g, const std::string& op, const std::string& name,
                            std::vector<Value*> inputs, Value* out) {
  Node* n = add_op_node(g, op, g.unique_name(name));
  n->inputs = std::move(inputs);
  n->outputs = {out};
  out->producer = n;
  return n;
}

// The positions 0 .. len-1 along an axis as a constant of type `t`, shaped [len] followed by
// `trailing` axes of one element, so that it broadcasts along the axis `trailing` from the end.
inline Value* add_positions(Graph& g, const std::string& hint, DType t, int64_t len, int64_t trailing = 0) {
  std::vector<double> pos(static_cast<size_t>(len));
  for (int64_t j = 0; j < len; ++j) pos[static_cast<size_t>(j)] = static_cast<double>(j);
  Dims d{len};
  d.insert(d.end(), static_cast<size_t>(trailing), 1);
  return add_constant(g, hint, t, std::move(d), pos);
}

// `x` cast to `to` (a new Cast node and value).
inline Value* add_cast(Graph& g, const std::string& hint, Value* x, DType to) {
  Value* c = add_op(g, "Cast", hint, {x}, to, *x->dims);
  c->producer->attrs["to"] = static_cast<int64_t>(dtype_to_onnx(to));
  return c;
}

// The Slice node `name` (made unique) writing `out` = x[start, end) along `axis`, its starts and
// ends int64 constants named after it, its axes `shared_axes` (one constant for the parts of one
// split) or a new constant; `out` is typed by the caller.
inline Node* add_slice(Graph& g, const std::string& name, Value* x, int64_t axis, int64_t start, int64_t end,
                       Value* out, Value* shared_axes = nullptr) {
  auto i64 = [&](const char* what, int64_t v) {
    return add_constant(g, name + what, DType::kI64, {1}, {static_cast<double>(v)});
  };
  Node* s = add_op_node(g, "Slice", g.unique_name(name));
  s->inputs = {x, i64("/starts", start), i64("/ends", end), shared_axes ? shared_axes : i64("/axes", axis)};
  s->outputs = {out};
  out->producer = s;
  return s;
}

// The one node reading `v` (per `users`, Graph::users()), or null when `v` is a graph output or
// has no reader or several.
inline Node* sole_reader(const Graph& g, const std::unordered_map<const Value*, std::vector<Node*>>& users,
                         const Value* v) {
  auto it = users.find(v);
  if (g.is_graph_output(v) || it == users.end() || it->second.size() != 1) return nullptr;
  return it->second.front();
}

// Whether `v` is read: a graph output, or some node's input (per `users`, Graph::users()).
inline bool is_read(const Graph& g, const std::unordered_map<const Value*, std::vector<Node*>>& users,
                    const Value* v) {
  if (v == nullptr) return false;
  auto it = users.find(v);
  return g.is_graph_output(v) || (it != users.end() && !it->second.empty());
}

// Reduction `op` (ReduceMean, ReduceMax, ...) of `x` over its last axis, kept (or dropped, without
// `keepdims`): axes an attribute before opset 18, an input from it. Into `out` when given (a
// rewrite's last node, add_op_writing), of x's type and that shape.
inline Value* add_row_reduce(Graph& g, const char* op, const std::string& hint, Value* x,
                             bool keepdims = true, Value* out = nullptr) {
  Dims d = *x->dims;
  if (keepdims)
    d.back() = 1;
  else
    d.pop_back();
  Value* r = out ? add_op_writing(g, op, hint, {x}, out)->output(0) : add_op(g, op, hint, {x}, x->dtype, d);
  Node* n = r->producer;
  n->attrs["keepdims"] = int64_t{keepdims ? 1 : 0};
  if (g.opset >= 18)
    n->inputs.push_back(add_shape_constant(g, hint + "_axes", {-1}));
  else
    n->attrs["axes"] = std::vector<int64_t>{-1};
  return r;
}

// The end of a rewrite: the replaced nodes go, then the values nothing reads any more, and the
// graph is put back in topological order.
inline Status remove_and_sort(Graph& g, const std::vector<Node*>& dead) {
  g.remove_nodes(dead);
  g.remove_unused_values();
  return g.topo_sort();
}

}  // namespace stitch::fusion
