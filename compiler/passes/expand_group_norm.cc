// expand_group_norm: a GroupNormalization becomes the nodes PyTorch's opset-18 exports spell it
// with, which the back end already generates and fuses:
//   Reshape x [N, C, S...] -> [N, G, C/G x S...], InstanceNormalization over each group,
//   Reshape back to [N, C, S...], then (opset 21: the scale and bias per channel) Mul by the scale
//   and Add the bias, each as [C, 1, ...]; before opset 21 the scale and bias are per group and
//   the InstanceNormalization applies them itself.
// The rewrite before planning (fusion/group_norms.h) then puts the norm, its scale and bias and the
// activation after them in one kernel. Half inputs: the InstanceNormalization computes its
// statistics in float32 (the opset-21 stash_type default) and rounds its result to the input's
// type, as the op's definition does before the scale and bias. Runs after fold_constants and
// leaves nodes without static shapes alone; the last node writes the op's output value, and the new
// nodes are named after it ("G/norm").
#include <fmt/format.h>

#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> expand_group_norm_node(Graph& g, Node& n) {
  Value *x = n.input(0), *scale = n.input(1), *bias = n.input(2), *y = n.output(0);
  if (!x || !scale || !bias || !y || !x->has_static_shape() || !scale->has_static_shape() ||
      !bias->has_static_shape())
    return false;
  const Dims& xd = *x->dims;
  const int64_t groups = n.attr_int("num_groups", 1), c = xd[1];
  int64_t rest = 1;
  for (size_t k = 2; k < xd.size(); ++k) rest *= xd[k];
  const bool per_channel = n.opset >= 21;
  NodeBuilder b{g, n};
  auto shape = [&](const std::string& hint, const Dims& d) {
    return b.constant(hint, Tensor::vector_i64(std::vector<int64_t>(d.begin(), d.end())));
  };
  const Dims grouped{xd[0], groups, c / groups * rest};
  Value* r = b.node("Reshape", "groups", {x, shape("groups_shape", grouped)}, x->dtype, grouped);
  Value *in_scale = scale, *in_bias = bias;
  if (per_channel) {
    in_scale = b.constant("ones", Tensor::from_f64(x->dtype, {groups}, std::vector<double>(groups, 1.0)));
    in_bias = b.constant("zeros", Tensor::from_f64(x->dtype, {groups}, std::vector<double>(groups, 0.0)));
  }
  Value* norm = b.node("InstanceNormalization", "norm", {r, in_scale, in_bias}, x->dtype, grouped,
                       {{"epsilon", n.attr_float("epsilon", 1e-5f)}});
  Value* last = b.node("Reshape", "channels", {norm, shape("channels_shape", xd)}, x->dtype, xd);
  if (per_channel) {
    // The scale and bias [C] as [C, 1, ...], to broadcast over the spatial axes.
    Dims pd(xd.size() - 1, 1);
    pd[0] = c;
    auto channel = [&](Value* p, const std::string& hint) -> Value* {
      if (p->constant) return b.constant(hint, p->constant->reshaped(pd));
      return b.node("Reshape", hint, {p, shape(hint + "_shape", pd)}, p->dtype, pd);
    };
    last = b.node("Mul", "scale", {last, channel(scale, "scale_per_channel")}, x->dtype, xd);
    last = b.node("Add", "bias", {last, channel(bias, "bias_per_channel")}, x->dtype, xd);
  }
  b.finish(last, y);
  return true;
}

}  // namespace

StatusOr<bool> expand_group_norm(Graph& g, PassContext&) {
  return expand_each(g, "GroupNormalization", expand_group_norm_node);
}

}  // namespace stitch
