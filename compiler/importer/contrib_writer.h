// What the contrib-op expansions share (contrib_ops.cc, contrib_attention.cc): the opset of the
// nodes they write, the refusal message, the rank of a value before shape inference, and the
// Writer that adds one contrib node's replacement nodes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op_table.h"
#include "passes/graph_builder.h"
#include "support/status.h"

namespace stitch::contrib {

// Every node written here is of this opset unless it asks for a later one (GroupQueryAttention's
// TensorScatter, 24): Attention, RMSNormalization and Split's num_outputs exist at it, and Gelu
// (20) and LayerNormalization (17) are unchanged since.
constexpr int kOpset = 23;

// A user error naming `n`: `why`, and what stitch reads instead.
Status refuse(const Node& n, const std::string& why);

// The rank of `v` where the model says it before shape inference: a graph input's or constant's
// declared shape, through the ops that keep their input's rank (element-wise ones, casts, norms,
// Transpose, Slice, Concat, Attention), broadcasting ops and MatMul (the largest of their
// inputs'), Gather, Shape, a Reshape to and a ConstantOfShape of a constant or of Shape(x)
// (MoE's output), Unsqueeze, and ReduceSum and Squeeze of constant axes (onnxruntime's mask index, this
// file's too). None where a link is not one of those.
std::optional<size_t> known_rank(const Value* v);
// known_rank(v), or a refusal of `c` naming `what` (its input's role) and `v`.
StatusOr<size_t> rank_or_refuse(const Node& c, const Value* v, const std::string& what);

// Adds the nodes one contrib node is written as, named "<node>/<part>"; the one that writes its
// main output keeps the node's own name, so that --explain-fusion and the fusion overrides name it.
class Writer {
 public:
  Writer(Graph& g, const Node& c) : g_(g), c_(c), constants_{g, c} {}

  // A constant named "<node>/<hint>", as the front-end passes name theirs.
  Value* constant(const std::string& hint, Tensor t) { return constants_.constant(hint, std::move(t)); }
  Value* ints(const std::string& hint, const std::vector<int64_t>& v) {
    return constant(hint, Tensor::vector_i64(v));
  }
  Value* i64(const std::string& hint, int64_t v) { return constant(hint, Tensor::scalar_i64(v)); }
  Value* f32(const std::string& hint, double v) {
    return constant(hint, Tensor::from_f64(DType::kF32, {}, {v}));
  }

  // A node writing `outs` (null: omitted); `name` empty gives it the contrib node's name.
  void node(const std::string& op, const std::string& name, std::vector<Value*> in, std::vector<Value*> outs,
            std::map<std::string, AttrValue> attrs = {}, int opset = kOpset) {
    auto n = std::make_unique<Node>();
    n->name = name.empty() ? c_.name : c_.name + "/" + name;
    n->op_type = op;
    n->opset = opset;
    n->def = find_op("", op, opset);
    n->inputs = std::move(in);
    while (!n->inputs.empty() && !n->inputs.back()) n->inputs.pop_back();
    n->outputs = std::move(outs);  // trailing omitted ones dropped: a one-output norm is a row op
    while (n->outputs.size() > 1 && !n->outputs.back()) n->outputs.pop_back();
    n->attrs = std::move(attrs);
    g_.add_node(std::move(n));
  }
  Value* fresh(const std::string& name) {
    return g_.add_value(g_.unique_name(c_.name + "/" + name + "_output"));
  }
  // A one-output node; its output is `out` when given, else a new value.
  Value* op(const std::string& op, const std::string& name, std::vector<Value*> in,
            std::map<std::string, AttrValue> attrs = {}, Value* out = nullptr, int opset = kOpset) {
    Value* y = out ? out : fresh(name);
    node(op, name, std::move(in), {y}, std::move(attrs), opset);
    return y;
  }
  // Element `i` of x's shape, a scalar.
  Value* dim(Value* x, int64_t i, const std::string& name) {
    Value* shape = op("Shape", name + "_shape", {x});
    return op("Gather", name, {shape, i64(name + "_index", i)}, {{"axis", int64_t{0}}});
  }

 private:
  Graph& g_;
  const Node& c_;
  NodeBuilder constants_;
};

// The attention ops (contrib_attention.cc).
Status attention(Writer& w, const Node& c);
Status multi_head_attention(Writer& w, const Node& c);
Status group_query_attention(Writer& w, const Node& c);
// MatMulNBits, its weight dequantized at compile time (contrib_matmul_nbits.cc).
Status matmul_nbits(Writer& w, const Node& c);
// MoE, every expert on every token, weighted by the routing (contrib_moe.cc).
Status moe(Writer& w, const Node& c);

}  // namespace stitch::contrib
