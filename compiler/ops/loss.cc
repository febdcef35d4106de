// NegativeLogLikelihoodLoss (opsets 12 to 28) and SoftmaxCrossEntropyLoss (13 to 28; at 12 the
// LogSoftmax it is written with would flatten the trailing axes), as a model exported with
// its loss (a classifier's cross-entropy head) carries them:
//   NLL   loss[n, d...] = -x[n, t, d...] * w[t] with t = target[n, d...] (w = 1 without weights),
//         0 where t is ignore_index; reduction none keeps it, sum adds it up, mean divides the
//         sum by the sum of the weights read (the count of targets not ignored, without weights)
//   SCE   the NLL of LogSoftmax(scores) over axis 1, which is its optional second output.
// x is [N, C, d1...], the target [N, d1...] of integers. A target outside [0, C) that is not
// ignored is refused, naming the node (ONNX leaves it undefined; PyTorch refuses it).
#include <cmath>

#include "ops/index_check.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

std::string LossSpec::target_message(const std::string& target) const {
  std::string m =
      fmt::format("target {{value}} of '{}' is outside the {} classes [0, {})", target, classes, classes);
  if (ignore_index) m += fmt::format(" and is not the ignore_index {}", *ignore_index);
  return m;
}

StatusOr<LossSpec> loss_spec(const Node& n, const Dims& x, const Dims& target, const Dims* weight) {
  LossSpec s;
  const std::string r = n.attr_string("reduction", "mean");
  if (r == "none")
    s.reduction = LossSpec::Reduction::kNone;
  else if (r == "sum")
    s.reduction = LossSpec::Reduction::kSum;
  else if (r == "mean")
    s.reduction = LossSpec::Reduction::kMean;
  else
    return node_error(n, fmt::format("reduction '{}' is not none, sum or mean", r));
  if (n.has_attr("ignore_index")) s.ignore_index = n.attr_int("ignore_index", 0);
  Dims want{x.empty() ? 0 : x[0]};
  if (x.size() > 2) want.insert(want.end(), x.begin() + 2, x.end());
  if (x.size() < 2 || target != want)
    return node_error(n,
                      fmt::format("its input has shape {} and its target {}; for an input N x C x d1... the "
                                  "target is N x d1...",
                                  dims_to_string(x), dims_to_string(target)));
  if (weight && *weight != Dims{x[1]})
    return node_error(n, fmt::format("its weights have shape {}; they are one per class, [{}]",
                                     dims_to_string(*weight), x[1]));
  s.classes = x[1];
  return s;
}

namespace {

Status check_types(const InferContext& ctx) {
  if (!is_float(ctx.dtype(0))) return ctx.error("expects a floating-point input");
  if (!is_int(ctx.dtype(1))) return ctx.error("expects an integer target");
  if (ctx.has_input(2) && ctx.dtype(2) != ctx.dtype(0))
    return ctx.error("expects weights of the input's type");
  return Status::ok();
}

Status infer_loss(InferContext& ctx) {
  if (ctx.num_inputs() < 2 || !ctx.has_input(1)) return ctx.error("takes its input and its target");
  RETURN_IF_ERROR(check_types(ctx));
  ASSIGN_OR_RETURN(
      LossSpec s, loss_spec(ctx.node(), ctx.dims(0), ctx.dims(1), ctx.has_input(2) ? &ctx.dims(2) : nullptr));
  ctx.set_output(0, ctx.dtype(0), s.reduction == LossSpec::Reduction::kNone ? ctx.dims(1) : Dims{});
  ctx.set_output(1, ctx.dtype(0), ctx.dims(0));  // SoftmaxCrossEntropyLoss's log_prob
  return Status::ok();
}

// The loss of log-probabilities `lp` (x's shape) against the target.
Status loss_of(const Node& n, const std::vector<double>& lp, std::span<const Tensor* const> in, DType t,
               Tensor& out) {
  const Tensor &x = *in[0], &target = *in[1];
  const Tensor* weight = in.size() > 2 ? in[2] : nullptr;
  ASSIGN_OR_RETURN(LossSpec s, loss_spec(n, x.dims(), target.dims(), weight ? &weight->dims() : nullptr));
  const int64_t batch = x.dims()[0], inner = target.size() / std::max<int64_t>(batch, 1);
  const std::vector<double> w = weight ? weight->to_f64() : std::vector<double>(size_t(s.classes), 1.0);
  std::vector<double> loss(static_cast<size_t>(target.size()));
  double sum = 0, weights = 0;
  for (int64_t i = 0; i < target.size(); ++i) {
    const int64_t c = target.get_i64(i);
    if (s.ignore_index && c == *s.ignore_index) continue;
    if (c < 0 || c >= s.classes) return node_error(n, with_value(s.target_message(n.input(1)->name), c));
    const int64_t k = c;
    const int64_t b = i / std::max<int64_t>(inner, 1), d = i % std::max<int64_t>(inner, 1);
    const double wk = w[static_cast<size_t>(k)];
    loss[static_cast<size_t>(i)] = -lp[static_cast<size_t>((b * s.classes + k) * inner + d)] * wk;
    sum += loss[static_cast<size_t>(i)];
    weights += wk;
  }
  if (s.reduction == LossSpec::Reduction::kNone)
    out = Tensor::from_f64(t, target.dims(), loss);
  else
    out = Tensor::from_f64(t, {}, {s.reduction == LossSpec::Reduction::kSum ? sum : sum / weights});
  return Status::ok();
}

Status eval_nll(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  return loss_of(n, in[0]->to_f64(), in, in[0]->dtype(), out[0]);
}

Status eval_sce(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const int64_t batch = x.dims()[0], classes = x.dims()[1];
  const int64_t inner = x.size() / std::max<int64_t>(batch * classes, 1);
  std::vector<double> lp = x.to_f64();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t d = 0; d < inner; ++d) {
      double top = -INFINITY, sum = 0;
      for (int64_t c = 0; c < classes; ++c) top = std::max(top, lp[size_t((b * classes + c) * inner + d)]);
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(lp[size_t((b * classes + c) * inner + d)] - top);
      for (int64_t c = 0; c < classes; ++c) lp[size_t((b * classes + c) * inner + d)] -= top + std::log(sum);
    }
  RETURN_IF_ERROR(loss_of(n, lp, in, x.dtype(), out[0]));
  if (out.size() > 1) out[1] = Tensor::from_f64(x.dtype(), x.dims(), lp);
  return Status::ok();
}

}  // namespace

void register_loss(std::vector<OpDef>& t) {
  t.push_back({"NegativeLogLikelihoodLoss", 12, kMaxOpset, OpCategory::kReduction, infer_loss, eval_nll});
  t.push_back({"SoftmaxCrossEntropyLoss", 13, kMaxOpset, OpCategory::kReduction, infer_loss, eval_sce});
}

}  // namespace stitch::ops
