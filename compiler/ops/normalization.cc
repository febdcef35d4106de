// Normalizations: LayerNormalization (with its optional Mean and InvStdDev
// outputs), BatchNormalization in inference mode, InstanceNormalization,
// GroupNormalization (its scale and bias per group at opsets 18-20, per channel from 21),
// RMSNormalization (opset 23), LRN (local response normalization across channels),
// MeanVarianceNormalization.
// Statistics are computed in double.
#include <algorithm>
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {
namespace {

Status infer_layernorm(InferContext& ctx) {
  const Node& n = ctx.node();
  if (!is_float(ctx.dtype(0))) return ctx.error("expects a floating-point input");
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, n.attr_int("axis", -1), ctx.rank(0)));
  Dims norm(ctx.dims(0).begin() + axis, ctx.dims(0).end());
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    auto b = broadcast_dims(norm, ctx.dims(i));
    if (!b || *b != norm)
      return ctx.error(fmt::format("{} of shape {} does not broadcast to the normalized shape {}",
                                   i == 1 ? "Scale" : "B", dims_to_string(ctx.dims(i)),
                                   dims_to_string(norm)));
  }
  ctx.set_output(0, ctx.dtype(0), ctx.dims(0));
  Dims stat = ctx.dims(0);
  for (size_t i = axis; i < stat.size(); ++i) stat[i] = 1;
  int64_t stash = n.attr_int("stash_type", 1);
  DType st = dtype_from_onnx(static_cast<int>(stash)).value_or(DType::kF32);
  ctx.set_output(1, st, stat);
  ctx.set_output(2, st, stat);
  return Status::ok();
}

Status eval_layernorm(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  int64_t axis = *norm_axis(n, n.attr_int("axis", -1), x.rank());
  double eps = n.attr_float("epsilon", 1e-5f);
  Dims norm(x.dims().begin() + axis, x.dims().end());
  int64_t inner = num_elements(norm), outer = x.size() / std::max<int64_t>(inner, 1);
  std::vector<double> xv = x.to_f64(), yv(xv.size());
  auto param = [&](size_t i) {
    std::vector<double> full(static_cast<size_t>(inner), i == 1 ? 1.0 : 0.0);
    if (i < in.size() && in[i]) {
      std::vector<double> p = in[i]->to_f64();
      Dims s = broadcast_strides(in[i]->dims(), norm);
      BroadcastWalker(norm, {s}).run([&](int64_t k, const std::vector<int64_t>& o) { full[k] = p[o[0]]; });
    }
    return full;
  };
  std::vector<double> scale = param(1), bias = param(2);
  DType st = dtype_from_onnx(static_cast<int>(n.attr_int("stash_type", 1))).value_or(DType::kF32);
  Dims stat = x.dims();
  for (size_t i = axis; i < stat.size(); ++i) stat[i] = 1;
  std::vector<double> means(outer), inv(outer);
  for (int64_t o = 0; o < outer; ++o) {
    const double* row = xv.data() + o * inner;
    double mean = 0, var = 0;
    for (int64_t k = 0; k < inner; ++k) mean += row[k];
    mean /= double(inner);
    for (int64_t k = 0; k < inner; ++k) var += (row[k] - mean) * (row[k] - mean);
    var /= double(inner);
    double r = 1.0 / std::sqrt(var + eps);
    means[o] = mean;
    inv[o] = r;
    for (int64_t k = 0; k < inner; ++k) yv[o * inner + k] = (row[k] - mean) * r * scale[k] + bias[k];
  }
  out[0] = Tensor::from_f64(x.dtype(), x.dims(), yv);
  if (out.size() > 1) out[1] = Tensor::from_f64(st, stat, means);
  if (out.size() > 2) out[2] = Tensor::from_f64(st, stat, inv);
  return Status::ok();
}

Status check_channel_params(InferContext& ctx, size_t first, size_t last) {
  if (ctx.rank(0) < 2) return ctx.error("expects an input of shape N x C x ...");
  int64_t c = ctx.dims(0)[1];
  for (size_t i = first; i <= last; ++i) {
    if (ctx.dims(i) != Dims{c})
      return ctx.error(fmt::format("input {} must have shape [{}] (the channel count), got {}",
                                   i, c, dims_to_string(ctx.dims(i))));
  }
  return Status::ok();
}

Status infer_batchnorm(InferContext& ctx) {
  const Node& n = ctx.node();
  if (n.attr_int("training_mode", 0) != 0 ||
      (n.outputs.size() > 1 && std::any_of(n.outputs.begin() + 1, n.outputs.end(),
                                           [](Value* v) { return v != nullptr; })))
    return ctx.error("training-mode BatchNormalization is not supported; export the model in "
                     "eval mode (model.eval())");
  if (!is_float(ctx.dtype(0))) return ctx.error("expects a floating-point input");
  RETURN_IF_ERROR(check_channel_params(ctx, 1, 4));
  return same_as_input0(ctx);
}

// y = (x - mean) / sqrt(var + eps) * scale + bias, per channel.
void channel_affine(const Tensor& x, const std::vector<double>& mul, const std::vector<double>& add,
                    std::vector<double>& y, bool per_instance) {
  const Dims& d = x.dims();
  int64_t n = d[0], c = d[1], hw = x.size() / std::max<int64_t>(n * c, 1);
  std::vector<double> xv = x.to_f64();
  y.resize(xv.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) {
      size_t p = per_instance ? static_cast<size_t>(i * c + j) : static_cast<size_t>(j);
      for (int64_t k = 0; k < hw; ++k) {
        int64_t at = (i * c + j) * hw + k;
        y[at] = xv[at] * mul[p] + add[p];
      }
    }
}

Status eval_batchnorm(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  double eps = n.attr_float("epsilon", 1e-5f);
  std::vector<double> scale = in[1]->to_f64(), bias = in[2]->to_f64(), mean = in[3]->to_f64(),
                      var = in[4]->to_f64();
  std::vector<double> mul(scale.size()), add(scale.size()), y;
  for (size_t c = 0; c < scale.size(); ++c) {
    mul[c] = scale[c] / std::sqrt(var[c] + eps);
    add[c] = bias[c] - mean[c] * mul[c];
  }
  channel_affine(*in[0], mul, add, y, false);
  out[0] = Tensor::from_f64(in[0]->dtype(), in[0]->dims(), y);
  return Status::ok();
}

Status infer_instancenorm(InferContext& ctx) {
  if (!is_float(ctx.dtype(0))) return ctx.error("expects a floating-point input");
  RETURN_IF_ERROR(check_channel_params(ctx, 1, 2));
  return same_as_input0(ctx);
}

Status eval_instancenorm(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  double eps = n.attr_float("epsilon", 1e-5f);
  int64_t nb = x.dims()[0], c = x.dims()[1], hw = x.size() / std::max<int64_t>(nb * c, 1);
  std::vector<double> xv = x.to_f64(), scale = in[1]->to_f64(), bias = in[2]->to_f64();
  std::vector<double> mul(nb * c), add(nb * c), y;
  for (int64_t i = 0; i < nb * c; ++i) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < hw; ++k) mean += xv[i * hw + k];
    mean /= double(hw);
    for (int64_t k = 0; k < hw; ++k) var += (xv[i * hw + k] - mean) * (xv[i * hw + k] - mean);
    var /= double(hw);
    mul[i] = scale[i % c] / std::sqrt(var + eps);
    add[i] = bias[i % c] - mean * mul[i];
  }
  channel_affine(x, mul, add, y, true);
  out[0] = Tensor::from_f64(x.dtype(), x.dims(), y);
  return Status::ok();
}

// GroupNormalization: the channels in num_groups groups, each group's mean and variance over its
// channels and the spatial axes; the scale and bias per group before opset 21 (the definition it
// deprecated), per channel from it.
bool group_params_per_channel(const Node& n) { return n.opset >= 21; }

Status infer_groupnorm(InferContext& ctx) {
  const Node& n = ctx.node();
  if (!is_float(ctx.dtype(0))) return ctx.error("expects a floating-point input");
  if (ctx.rank(0) < 2) return ctx.error("expects an input of shape N x C x ...");
  if (!n.has_attr("num_groups")) return ctx.error("needs the num_groups attribute");
  const int64_t groups = n.attr_int("num_groups", 0), c = ctx.dims(0)[1];
  if (groups < 1) return ctx.error(fmt::format("num_groups must be positive, got {}", groups));
  if (c >= 0 && c % groups != 0)
    return ctx.error(fmt::format("the channel count {} is not a multiple of num_groups {}", c, groups));
  const bool per_channel = group_params_per_channel(n);
  for (size_t i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) return ctx.error(fmt::format("needs input {} ({})", i, i == 1 ? "scale" : "bias"));
    const Dims want{per_channel ? c : groups};
    if (want[0] >= 0 && ctx.dims(i) != want)
      return ctx.error(fmt::format("input {} must have shape [{}] ({} at opset {}), got {}", i, want[0],
                                   per_channel ? "the channel count" : "num_groups", n.opset,
                                   dims_to_string(ctx.dims(i))));
  }
  return same_as_input0(ctx);
}

Status eval_groupnorm(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const double eps = n.attr_float("epsilon", 1e-5f);
  const int64_t nb = x.dims()[0], c = x.dims()[1], groups = n.attr_int("num_groups", 1);
  const int64_t hw = x.size() / std::max<int64_t>(nb * c, 1), per = c / groups * hw;
  const bool per_channel = group_params_per_channel(n);
  std::vector<double> xv = x.to_f64(), scale = in[1]->to_f64(), bias = in[2]->to_f64(), y(xv.size());
  for (int64_t i = 0; i < nb * groups; ++i) {
    const double* row = xv.data() + i * per;
    double mean = 0, var = 0;
    for (int64_t k = 0; k < per; ++k) mean += row[k];
    mean /= double(per);
    for (int64_t k = 0; k < per; ++k) var += (row[k] - mean) * (row[k] - mean);
    const double r = 1.0 / std::sqrt(var / double(per) + eps);
    for (int64_t k = 0; k < per; ++k) {
      const int64_t ch = (i % groups) * (c / groups) + k / hw;
      const size_t p = static_cast<size_t>(per_channel ? ch : i % groups);
      y[i * per + k] = (row[k] - mean) * r * scale[p] + bias[p];
    }
  }
  out[0] = Tensor::from_f64(x.dtype(), x.dims(), y);
  return Status::ok();
}

// RMSNormalization: x / sqrt(mean(x^2 over the axes from `axis` on) + epsilon) * scale, the scale
// broadcast to x (unidirectionally); Y has the scale's type.
Status infer_rmsnorm(InferContext& ctx) {
  const Node& n = ctx.node();
  if (!ctx.has_input(1)) return ctx.error("needs input 1 (scale)");
  if (!is_float(ctx.dtype(0)) || !is_float(ctx.dtype(1)))
    return ctx.error("expects a floating-point input and scale");
  RETURN_IF_ERROR(norm_axis(n, n.attr_int("axis", -1), ctx.rank(0)).status());
  auto b = broadcast_dims(ctx.dims(0), ctx.dims(1));
  if (!b || *b != ctx.dims(0) || ctx.rank(1) > ctx.rank(0))
    return ctx.error(fmt::format("scale of shape {} does not broadcast to the input's shape {}",
                                 dims_to_string(ctx.dims(1)), dims_to_string(ctx.dims(0))));
  ctx.set_output(0, ctx.dtype(1), ctx.dims(0));
  return Status::ok();
}

Status eval_rmsnorm(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const int64_t axis = *norm_axis(n, n.attr_int("axis", -1), x.rank());
  const double eps = n.attr_float("epsilon", 1e-5f);
  const int64_t inner = num_elements(Dims(x.dims().begin() + axis, x.dims().end()));
  const int64_t outer = x.size() / std::max<int64_t>(inner, 1);
  std::vector<double> xv = x.to_f64(), scale = in[1]->to_f64(), y(xv.size());
  std::vector<double> r(static_cast<size_t>(outer));
  for (int64_t o = 0; o < outer; ++o) {
    double sq = 0;
    for (int64_t k = 0; k < inner; ++k) sq += xv[o * inner + k] * xv[o * inner + k];
    r[o] = 1.0 / std::sqrt(sq / double(inner) + eps);
  }
  BroadcastWalker(x.dims(), {broadcast_strides(in[1]->dims(), x.dims())})
      .run([&](int64_t i, const std::vector<int64_t>& off) { y[i] = xv[i] * r[i / inner] * scale[off[0]]; });
  out[0] = Tensor::from_f64(in[1]->dtype(), x.dims(), y);
  return Status::ok();
}

}  // namespace

StatusOr<LrnSpec> lrn_spec(const Node& n, const Dims& x) {
  if (!n.has_attr("size")) return node_error(n, "needs its size attribute (the channels each sum spans)");
  LrnSpec s{n.attr_float("alpha", 1e-4f), n.attr_float("beta", 0.75f), n.attr_float("bias", 1.0f),
            n.attr_int("size", 1)};
  if (s.size < 1) return node_error(n, fmt::format("size must be positive, got {}", s.size));
  if (x.size() < 2) return node_error(n, fmt::format("X has shape {}; it is N x C x ...", dims_to_string(x)));
  return s;
}

StatusOr<std::vector<int64_t>> mvn_axes(const Node& n, const Dims& x) {
  const auto r = static_cast<int64_t>(x.size());
  std::vector<int64_t> axes = n.attr_ints("axes", {0, 2, 3});
  for (int64_t& a : axes) {
    if (a < -r || a >= r)
      return node_error(n, fmt::format("axis {} is outside X's shape {}", a, dims_to_string(x)));
    if (a < 0) a += r;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return node_error(n, "its axes name one axis twice");
  return axes;
}

namespace {

// MeanVarianceNormalization. ONNX's function body computes the variance as E x^2 - (E x)^2; the
// centered form here and in expand_mvn is the same quantity without that form's cancellation.
Status infer_mvn(InferContext& ctx) {
  if (!is_float(ctx.dtype(0))) return ctx.error("expects a floating-point input");
  RETURN_IF_ERROR(mvn_axes(ctx.node(), ctx.dims(0)).status());
  return same_as_input0(ctx);
}

Status eval_mvn(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(const std::vector<int64_t> axes, mvn_axes(n, x.dims()));
  const Dims& d = x.dims();
  // Each element's group: the offset of its statistics among the groups.
  ReduceAxes r;
  r.reduced.assign(d.size(), false);
  for (int64_t a : axes) r.reduced[static_cast<size_t>(a)] = true;
  const std::vector<int64_t> group = output_offsets(d, r);
  int64_t count = 1;
  for (int64_t a : axes) count *= d[static_cast<size_t>(a)];
  const auto groups = static_cast<size_t>(count ? x.size() / count : 0);
  const std::vector<double> xv = x.to_f64();
  std::vector<double> mean(groups, 0.0), var(groups, 0.0);
  for (int64_t i = 0; i < x.size(); ++i)
    mean[static_cast<size_t>(group[static_cast<size_t>(i)])] += xv[static_cast<size_t>(i)];
  for (double& m : mean) m /= static_cast<double>(count);
  for (int64_t i = 0; i < x.size(); ++i) {
    const double c = xv[static_cast<size_t>(i)] - mean[static_cast<size_t>(group[static_cast<size_t>(i)])];
    var[static_cast<size_t>(group[static_cast<size_t>(i)])] += c * c;
  }
  std::vector<double> y(xv.size());
  for (int64_t i = 0; i < x.size(); ++i) {
    const auto g = static_cast<size_t>(group[static_cast<size_t>(i)]);
    y[static_cast<size_t>(i)] = (xv[static_cast<size_t>(i)] - mean[g]) /
                                (std::sqrt(var[g] / static_cast<double>(count)) + kMvnEpsilon);
  }
  out[0] = Tensor::from_f64(x.dtype(), d, y);
  return Status::ok();
}

// LRN: y = x / (bias + alpha / size * sum of x^2 over the channels [c - (size - 1) / 2, c + size / 2],
// within the tensor)^beta.
Status infer_lrn(InferContext& ctx) {
  if (!is_float(ctx.dtype(0))) return ctx.error("expects a floating-point input");
  RETURN_IF_ERROR(lrn_spec(ctx.node(), ctx.dims(0)).status());
  return same_as_input0(ctx);
}

Status eval_lrn(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(LrnSpec s, lrn_spec(n, x.dims()));
  const int64_t batch = x.dims()[0], c = x.dims()[1], inner = x.size() / std::max<int64_t>(batch * c, 1);
  const std::vector<double> xv = x.to_f64();
  std::vector<double> y(xv.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t k = 0; k < inner; ++k) {
        double sq = 0;
        for (int64_t j = std::max<int64_t>(0, ch - s.lower()); j <= std::min(c - 1, ch + s.upper()); ++j) {
          const double v = xv[static_cast<size_t>((b * c + j) * inner + k)];
          sq += v * v;
        }
        const size_t at = static_cast<size_t>((b * c + ch) * inner + k);
        y[at] = xv[at] / std::pow(s.bias + s.alpha / double(s.size) * sq, s.beta);
      }
  out[0] = Tensor::from_f64(x.dtype(), x.dims(), y);
  return Status::ok();
}

}  // namespace

void register_normalization(std::vector<OpDef>& t) {
  t.push_back({"LayerNormalization", 17, kMaxOpset, OpCategory::kReduction, infer_layernorm,
               eval_layernorm});
  t.push_back({"BatchNormalization", kMinOpset, kMaxOpset, OpCategory::kBroadcast, infer_batchnorm,
               eval_batchnorm});
  t.push_back({"InstanceNormalization", kMinOpset, kMaxOpset, OpCategory::kReduction,
               infer_instancenorm, eval_instancenorm});
  t.push_back({"GroupNormalization", 18, kMaxOpset, OpCategory::kReduction, infer_groupnorm, eval_groupnorm});
  t.push_back({"RMSNormalization", 23, kMaxOpset, OpCategory::kReduction, infer_rmsnorm, eval_rmsnorm});
  t.push_back({"LRN", kMinOpset, kMaxOpset, OpCategory::kLayout, infer_lrn, eval_lrn});
  t.push_back(
      {"MeanVarianceNormalization", kMinOpset, kMaxOpset, OpCategory::kReduction, infer_mvn, eval_mvn});
}

}  // namespace stitch::ops
