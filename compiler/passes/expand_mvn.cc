// expand_mvn: a MeanVarianceNormalization becomes the arithmetic of its definition over its axes,
// which the planner fuses as it fuses a layer norm's (one kernel when the axes are a row):
//   m = ReduceMean(x), d = x - m, v = ReduceMean(d * d), y = d / (Sqrt(v) + 1e-9),
// the reductions keeping their axes. Runs after fold_constants and leaves nodes without static
// shapes alone; the new nodes are named after the op's.
#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> expand_mvn_node(Graph& g, Node& n) {
  Value *x = n.input(0), *y = n.output(0);
  if (!x || !y || !x->has_static_shape()) return false;
  const Dims& xd = *x->dims;
  ASSIGN_OR_RETURN(const std::vector<int64_t> axes, ops::mvn_axes(n, xd));
  NodeBuilder b{g, n};
  Dims kept = xd;
  for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
  // ReduceMean takes its axes as an attribute before opset 18 and as an input from it.
  const auto mean = [&](Value* v, const std::string& name) {
    if (g.opset >= 18)
      return b.node("ReduceMean", name, {v, b.constant(name + "_axes", Tensor::vector_i64(axes))}, x->dtype,
                    kept, {{"keepdims", int64_t{1}}});
    return b.node("ReduceMean", name, {v}, x->dtype, kept, {{"axes", axes}, {"keepdims", int64_t{1}}});
  };
  Value* centered = b.node("Sub", "centered", {x, mean(x, "mean")}, x->dtype, xd);
  Value* var = mean(b.node("Mul", "square", {centered, centered}, x->dtype, xd), "variance");
  Value* sd = b.node("Sqrt", "std", {var}, x->dtype, kept);
  Value* den =
      b.node("Add", "std_eps", {sd, b.constant("eps", Tensor::from_f64(x->dtype, {}, {ops::kMvnEpsilon}))},
             x->dtype, kept);
  b.finish(b.node("Div", "normalized", {centered, den}, x->dtype, xd), y);
  return true;
}

}  // namespace

StatusOr<bool> expand_mvn(Graph& g, PassContext&) {
  return expand_each(g, "MeanVarianceNormalization", expand_mvn_node);
}

}  // namespace stitch
