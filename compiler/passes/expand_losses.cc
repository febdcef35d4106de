// expand_losses: a NegativeLogLikelihoodLoss or SoftmaxCrossEntropyLoss becomes the ops it is
// defined by (ops/loss.cc), which the planner fuses (the class softmax's row kernel, the picked
// log-probabilities and the reduction to one value):
//   SoftmaxCrossEntropyLoss  LogSoftmax over the classes (its log_prob output), then the NLL
//   NLL   the target with ignored values made class 0 and checked to lie in [0, C), Reshaped to
//         [N, 1, d...], a GatherElements of the log-probabilities along the classes, negated, times
//         the weight of each target (a Gather of the weights) with 0 where it is ignored; then a
//         ReduceSum (sum), a ReduceSum divided by the weights' (mean with weights or an ignored
//         value) or a ReduceMean (mean otherwise), each keeping the reduced axes so that the
//         mean's Div may join their kernel, and a Reshape to the scalar loss.
// Runs after fold_constants and leaves nodes without static shapes alone; the new nodes are named
// after the op's.
#include "ops/index_check.h"
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> expand_losses_node(Graph& g, Node& n) {
  const bool softmax = n.op_type == "SoftmaxCrossEntropyLoss";
  Value *x = n.input(0), *target = n.input(1), *weight = n.input(2), *y = n.output(0);
  if (!x || !target || !y || !x->has_static_shape() || !target->has_static_shape() ||
      (weight && !weight->has_static_shape()))
    return false;
  ASSIGN_OR_RETURN(ops::LossSpec s,
                   ops::loss_spec(n, *x->dims, *target->dims, weight ? &*weight->dims : nullptr));
  const Dims &xd = *x->dims, &td = *target->dims;
  const DType t = x->dtype, it = target->dtype;
  NodeBuilder b{g, n};
  auto real = [&](double v) { return b.constant("c", Tensor::from_f64(t, {}, {v})); };
  auto index = [&](int64_t v) { return b.constant("i", Tensor::from_i64(it, {}, {v})); };
  Value* lp = x;
  std::vector<std::pair<Value*, Value*>> outs;
  if (softmax) {
    lp = b.node("LogSoftmax", "log_prob", {x}, t, xd, {{"axis", int64_t{1}}});
    if (n.outputs.size() > 1 && n.output(1)) outs.push_back({lp, n.output(1)});
  }
  Value* ignored = nullptr;
  Value* cls = target;
  if (s.ignore_index) {
    ignored = b.node("Equal", "ignored", {target, index(*s.ignore_index)}, DType::kBool, td);
    cls = b.node("Where", "target_or_0", {ignored, index(0), target}, it, td);
  }
  // A target outside the classes is refused, as the op refuses it: the reference stops, and a kernel
  // reports it after the run naming the loss and goes on with the nearest class (StitchIndexCheck).
  ASSIGN_OR_RETURN(
      cls, ops::checked_index(g, n, cls, {0, s.classes - 1, s.target_message(target->name)}, "class"));
  Dims one = xd;
  one[1] = 1;
  Value* picked = b.node("GatherElements", "picked", {lp, b.reshape(cls, one, "class_column")}, t, one,
                         {{"axis", int64_t{1}}});
  Value* loss = b.node("Neg", "nll", {b.reshape(picked, td, "picked_per_target")}, t, td);
  Value* w = weight ? b.node("Gather", "weight", {weight, cls}, t, td, {{"axis", int64_t{0}}}) : nullptr;
  if (ignored) w = b.node("Where", "weight_or_0", {ignored, real(0), w ? w : real(1)}, t, td);
  if (w) loss = b.node("Mul", "weighted", {loss, w}, t, td);
  // Reductions keep their axes (size 1), so the mean's Div may join their kernel; a Reshape makes
  // the loss the scalar it is.
  const Dims ones(td.size(), 1);
  if (s.reduction == ops::LossSpec::Reduction::kSum) {
    loss = b.node("ReduceSum", "sum", {loss}, t, ones);
  } else if (s.reduction == ops::LossSpec::Reduction::kMean && w) {
    loss = b.node("Div", "mean",
                  {b.node("ReduceSum", "sum", {loss}, t, ones), b.node("ReduceSum", "weights", {w}, t, ones)},
                  t, ones);
  } else if (s.reduction == ops::LossSpec::Reduction::kMean) {
    loss = b.node("ReduceMean", "mean", {loss}, t, ones);
  }
  if (s.reduction != ops::LossSpec::Reduction::kNone) loss = b.reshape(loss, {}, "loss");
  outs.insert(outs.begin(), {loss, y});
  b.finish_all(outs);
  return true;
}

}  // namespace

StatusOr<bool> expand_losses(Graph& g, PassContext&) {
  ASSIGN_OR_RETURN(bool nll, expand_each(g, "NegativeLogLikelihoodLoss", expand_losses_node));
  ASSIGN_OR_RETURN(bool sce, expand_each(g, "SoftmaxCrossEntropyLoss", expand_losses_node));
  return nll || sce;
}

}  // namespace stitch
