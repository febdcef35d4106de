// Resize (opsets 11 to 21): nearest, N-linear and N-cubic resampling with every coordinate
// transformation mode, antialiasing, axes and keep_aspect_ratio_policy.
//
// resize_spec turns the node into per-axis sampling tables (ResizeAxis): for each output position
// of a resized axis, the input positions it reads and their weights. The reference implementation
// below applies them one axis at a time in double precision, and the front end's expand_resize
// pass writes the same tables as Gathers, Muls and Adds the back end fuses. The formulas are the
// operator's specification (onnx.ai, Resize-19), with two points where the specification leaves
// room and ONNX's own reference implementation and test data decide:
//  - the output length from `scales` is floor(input length * scale), roi not applied;
//  - align_corners and tf_crop_and_resize divide by (scale * input length - 1), the fractional
//    output length (test_resize_downsample_scales_linear_align_corners expects it).
#include <algorithm>
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

bool ResizeAxis::any_outside() const { return std::find(outside.begin(), outside.end(), 1) != outside.end(); }

namespace {

// The values of an optional float input (roi, scales): null when omitted or empty.
const Tensor* present(const Tensor* t) { return t && t->size() > 0 ? t : nullptr; }

// Keys' cubic convolution kernel with coefficient a (Keys 1981, equation 4), at distance x.
double cubic_kernel(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

struct Sampling {
  std::string mode, coord, nearest;
  double cubic_a = -0.75;
  bool exclude_outside = false, antialias = false;
};

// The source coordinate of output position o on an axis of `in` positions resized to `out`
// (out_f: scale * in, fractional when the output length came from a scale).
double source_coordinate(const Sampling& s, int64_t o, int64_t in, int64_t out, double out_f, double scale,
                         double roi_start, double roi_end) {
  const double x = static_cast<double>(o);
  const double l = static_cast<double>(in);
  if (s.coord == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (s.coord == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out) / out_f;
    const double offset = l / 2 * (1 - adjustment);
    return offset + (x + 0.5) / scale - 0.5;
  }
  if (s.coord == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
  if (s.coord == "align_corners") return out_f == 1 ? 0 : x * (l - 1) / (out_f - 1);
  if (s.coord == "asymmetric") return x / scale;
  if (s.coord == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  // tf_crop_and_resize
  if (out_f == 1) return 0.5 * (roi_start + roi_end) * (l - 1);
  return roi_start * (l - 1) + x * (roi_end - roi_start) * (l - 1) / (out_f - 1);
}

// Fills the taps of output position o from source coordinate x.
void sample(const Sampling& s, ResizeAxis& a, int64_t o, double x, double scale) {
  const double f = std::floor(x);
  const double r = x - f;
  const int64_t base = static_cast<int64_t>(f);
  const size_t at = static_cast<size_t>(o * a.taps);
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, a.in - 1); };
  if (s.mode == "nearest") {
    int64_t i = base;
    if (r > 0) {
      if (s.nearest == "round_prefer_floor")
        i = r <= 0.5 ? base : base + 1;
      else if (s.nearest == "round_prefer_ceil")
        i = r < 0.5 ? base : base + 1;
      else if (s.nearest == "ceil")
        i = base + 1;
    }
    a.index[at] = clamp(i);
    a.weight[at] = 1;
    return;
  }
  // Linear and cubic: taps first..first + taps - 1 around x, weighted by the kernel at their
  // distance (stretched by 1 / scale when antialiasing a downscale, and normalised then).
  const bool linear = s.mode == "linear";
  const double stretch = s.antialias ? std::min(scale, 1.0) : 1.0;
  const int64_t first = base + 1 - a.taps / 2;
  double sum = 0;
  for (int64_t t = 0; t < a.taps; ++t) {
    const double d = (static_cast<double>(first + t) - x) * stretch;
    const double w = linear ? std::max(0.0, 1 - std::abs(d)) : cubic_kernel(d, s.cubic_a);
    a.weight[at + t] = w;
    sum += w;
  }
  if (s.antialias && sum != 0)
    for (int64_t t = 0; t < a.taps; ++t) a.weight[at + t] /= sum;
  if (s.exclude_outside) {
    sum = 0;
    for (int64_t t = 0; t < a.taps; ++t) {
      const int64_t i = first + t;
      if (i < 0 || i >= a.in) a.weight[at + t] = 0;
      sum += a.weight[at + t];
    }
    if (sum != 0)
      for (int64_t t = 0; t < a.taps; ++t) a.weight[at + t] /= sum;
  }
  for (int64_t t = 0; t < a.taps; ++t) a.index[at + t] = clamp(first + t);
}

// Taps per output position: 1 (nearest), 2 (linear), 4 (cubic), more when antialiasing widens
// the kernel by 1 / scale.
int64_t tap_count(const Sampling& s, double scale) {
  if (s.mode == "nearest") return 1;
  const double support = s.mode == "linear" ? 1 : 2;
  if (!s.antialias || scale >= 1) return 2 * static_cast<int64_t>(support);
  return 2 * (static_cast<int64_t>(std::ceil(support / scale)));
}

bool is_identity(const ResizeAxis& a) {
  if (a.in != a.out || a.any_outside()) return false;
  for (int64_t o = 0; o < a.out; ++o)
    for (int64_t t = 0; t < a.taps; ++t) {
      const size_t k = static_cast<size_t>(o * a.taps + t);
      const double w = a.weight[k];
      if (w != 0 && !(w == 1 && a.index[k] == o)) return false;
    }
  return true;
}

}  // namespace

StatusOr<ResizeSpec> resize_spec(const Node& n, const Dims& in, const Tensor* roi, const Tensor* scales,
                                 const Tensor* sizes) {
  const int64_t r = static_cast<int64_t>(in.size());
  if (r == 0) return node_error(n, "cannot resize a scalar");
  Sampling s;
  s.mode = n.attr_string("mode", "nearest");
  s.coord = n.attr_string("coordinate_transformation_mode", "half_pixel");
  s.nearest = n.attr_string("nearest_mode", "round_prefer_floor");
  s.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  s.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  s.antialias = n.attr_int("antialias", 0) != 0 && s.mode != "nearest";
  if (s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic")
    return node_error(n, fmt::format("unknown mode '{}' (nearest, linear or cubic)", s.mode));
  static const char* kCoords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                  "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kCoords), std::end(kCoords), s.coord) == std::end(kCoords))
    return node_error(n, fmt::format("unknown coordinate_transformation_mode '{}'", s.coord));
  if (s.mode == "nearest" && s.nearest != "round_prefer_floor" && s.nearest != "round_prefer_ceil" &&
      s.nearest != "floor" && s.nearest != "ceil")
    return node_error(n,
                      fmt::format("unknown nearest_mode '{}' (round_prefer_floor, round_prefer_ceil, floor "
                                  "or ceil)",
                                  s.nearest));
  const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return node_error(
        n, fmt::format("unknown keep_aspect_ratio_policy '{}' (stretch, not_larger or not_smaller)", policy));

  std::vector<int64_t> axes;
  if (n.has_attr("axes")) {
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (int64_t a : n.attr_ints("axes")) {
      ASSIGN_OR_RETURN(int64_t ax, norm_axis(n, a, r));
      if (seen[static_cast<size_t>(ax)])
        return node_error(n, fmt::format("axis {} is listed twice in axes", a));
      seen[static_cast<size_t>(ax)] = true;
      axes.push_back(ax);
    }
  } else {
    for (int64_t a = 0; a < r; ++a) axes.push_back(a);
  }
  const size_t k = axes.size();
  scales = present(scales);
  sizes = present(sizes);
  roi = present(roi);
  if ((scales != nullptr) == (sizes != nullptr))
    return node_error(n, scales ? "give either scales or sizes, not both (leave the other input empty)"
                                : "needs scales or sizes: both are omitted or empty");
  const Tensor* given = scales ? scales : sizes;
  if (given->size() != static_cast<int64_t>(k))
    return node_error(
        n, fmt::format("{} has {} values for {} axes", scales ? "scales" : "sizes", given->size(), k));
  if (scales && !is_float(scales->dtype()))
    return node_error(n, fmt::format("scales must be a float tensor, got {}", dtype_name(scales->dtype())));
  if (sizes && sizes->dtype() != DType::kI64)
    return node_error(n, fmt::format("sizes must be an int64 tensor, got {}", dtype_name(sizes->dtype())));
  if (s.coord == "tf_crop_and_resize") {
    if (!roi) return node_error(n, "coordinate_transformation_mode tf_crop_and_resize needs roi (input 1)");
    if (roi->size() != static_cast<int64_t>(2 * k))
      return node_error(n, fmt::format("roi has {} values; it needs 2 per axis ({})", roi->size(), 2 * k));
  }

  // Per resized axis: the scale the coordinates use and the output length.
  std::vector<double> scale(static_cast<size_t>(r), 1.0);
  ResizeSpec spec;
  spec.out = in;
  spec.extrapolation = n.attr_float("extrapolation_value", 0.0f);
  bool known = true;
  if (scales) {
    for (size_t i = 0; i < k; ++i) {
      const double sc = scales->get_f64(static_cast<int64_t>(i));
      if (!(sc > 0) || !std::isfinite(sc))
        return node_error(n, fmt::format("scale {} of axis {} must be positive", sc, axes[i]));
      const int64_t d = in[static_cast<size_t>(axes[i])];
      scale[static_cast<size_t>(axes[i])] = sc;
      spec.out[static_cast<size_t>(axes[i])] =
          d < 0 ? -1 : static_cast<int64_t>(std::floor(sc * static_cast<double>(d)));
      known = known && d >= 0;
    }
  } else {
    for (size_t i = 0; i < k; ++i)
      if (sizes->get_i64(static_cast<int64_t>(i)) <= 0)
        return node_error(n, fmt::format("size {} of axis {} must be positive",
                                         sizes->get_i64(static_cast<int64_t>(i)), axes[i]));
    for (int64_t a : axes) known = known && in[static_cast<size_t>(a)] >= 0;
    if (known && policy == "stretch") {
      for (size_t i = 0; i < k; ++i) {
        const size_t a = static_cast<size_t>(axes[i]);
        spec.out[a] = sizes->get_i64(static_cast<int64_t>(i));
        scale[a] = static_cast<double>(spec.out[a]) / static_cast<double>(in[a]);
      }
    } else if (known) {
      double sc = policy == "not_larger" ? INFINITY : 0;
      for (size_t i = 0; i < k; ++i) {
        const double q = static_cast<double>(sizes->get_i64(static_cast<int64_t>(i))) /
                         static_cast<double>(in[static_cast<size_t>(axes[i])]);
        sc = policy == "not_larger" ? std::min(sc, q) : std::max(sc, q);
      }
      for (int64_t a : axes) {
        scale[static_cast<size_t>(a)] = sc;
        spec.out[static_cast<size_t>(a)] =
            static_cast<int64_t>(std::floor(sc * static_cast<double>(in[static_cast<size_t>(a)]) + 0.5));
      }
    } else {
      for (size_t i = 0; i < k; ++i)
        spec.out[static_cast<size_t>(axes[i])] =
            policy == "stretch" ? sizes->get_i64(static_cast<int64_t>(i)) : -1;
    }
  }
  if (!known) return spec;
  for (size_t i = 0; i < k; ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    if (spec.out[a] <= 0 || in[a] == 0)
      return node_error(n,
                        fmt::format("axis {} of length {} would be resized to {}: give a scale or size that "
                                    "keeps at least one element",
                                    a, in[a], spec.out[a]));
    // Each resized axis keeps a table of taps per output element (index and weight), built here.
    constexpr int64_t kMaxResized = int64_t{1} << 24;
    if (spec.out[a] > kMaxResized)
      return node_error(n, fmt::format("axis {} of length {} would be resized to {}, past the {} elements an "
                                       "axis may have here; check the model's scales or sizes",
                                       a, in[a], spec.out[a], kMaxResized));
    ResizeAxis ax;
    ax.axis = static_cast<int64_t>(a);
    ax.in = in[a];
    ax.out = spec.out[a];
    ax.taps = tap_count(s, scale[a]);
    const size_t m = static_cast<size_t>(ax.out * ax.taps);
    ax.index.assign(m, 0);
    ax.weight.assign(m, 0.0);
    ax.outside.assign(static_cast<size_t>(ax.out), 0);
    const double out_f = scale[a] * static_cast<double>(ax.in);
    const double roi_start = roi ? roi->get_f64(static_cast<int64_t>(i)) : 0;
    const double roi_end = roi ? roi->get_f64(static_cast<int64_t>(i + k)) : 1;
    for (int64_t o = 0; o < ax.out; ++o) {
      const double x = source_coordinate(s, o, ax.in, ax.out, out_f, scale[a], roi_start, roi_end);
      if (s.coord == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(ax.in - 1))) {
        ax.outside[static_cast<size_t>(o)] = 1;  // weights stay 0: the output is the extrapolation value
        continue;
      }
      sample(s, ax, o, x, scale[a]);
    }
    if (!is_identity(ax)) spec.axes.push_back(std::move(ax));
  }
  return spec;
}

namespace {

// roi, scales and sizes: input 1, 2 and 3, each optional (an empty name or an empty tensor).
Status infer_resize(InferContext& ctx) {
  const Node& n = ctx.node();
  const Tensor* parts[3] = {nullptr, nullptr, nullptr};
  static const char* kNames[3] = {"roi", "scales", "sizes"};
  for (size_t i = 1; i <= 3; ++i) {
    if (!ctx.has_input(i)) continue;
    parts[i - 1] = ctx.constant(i);
    if (!parts[i - 1] &&
        !(i == 1 && n.attr_string("coordinate_transformation_mode", "") != "tf_crop_and_resize"))
      return run_time_operand_error(ctx, i, kNames[i - 1]);
  }
  const DType t = ctx.dtype(0);
  if (!is_float(t) && !is_int(t) && t != DType::kBool)
    return ctx.error(fmt::format("cannot resize a {} tensor", dtype_name(t)));
  if (!is_float(t) && n.attr_string("mode", "nearest") != "nearest")
    return ctx.error(
        fmt::format("mode '{}' on a {} tensor is not supported: interpolating integers needs a "
                    "rounding rule; Cast to float first, or use mode 'nearest'",
                    n.attr_string("mode", "nearest"), dtype_name(t)));
  ASSIGN_OR_RETURN(ResizeSpec spec, resize_spec(n, ctx.dims(0), parts[0], parts[1], parts[2]));
  ctx.set_output(0, t, spec.out);
  return Status::ok();
}

// One axis at a time; T is double for float tensors, int64_t for the others (nearest only, so
// every weight is 1 and the copies are exact).
template <typename T>
std::vector<T> apply_axes(const ResizeSpec& spec, Dims d, std::vector<T> v) {
  for (const ResizeAxis& a : spec.axes) {
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < a.axis; ++i) outer *= d[static_cast<size_t>(i)];
    for (size_t i = static_cast<size_t>(a.axis) + 1; i < d.size(); ++i) inner *= d[i];
    std::vector<T> w(static_cast<size_t>(outer * a.out * inner), T{0});
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t p = 0; p < a.out; ++p) {
        T* dst = &w[static_cast<size_t>((o * a.out + p) * inner)];
        if (a.outside[static_cast<size_t>(p)]) {
          std::fill(dst, dst + inner, static_cast<T>(spec.extrapolation));
          continue;
        }
        for (int64_t t = 0; t < a.taps; ++t) {
          const size_t k = static_cast<size_t>(p * a.taps + t);
          const double wt = a.weight[k];
          if (wt == 0) continue;
          const T* src = &v[static_cast<size_t>((o * a.in + a.index[k]) * inner)];
          if (wt == 1)
            for (int64_t j = 0; j < inner; ++j) dst[j] += src[j];
          else
            for (int64_t j = 0; j < inner; ++j) dst[j] += static_cast<T>(wt * static_cast<double>(src[j]));
        }
      }
    v = std::move(w);
    d[static_cast<size_t>(a.axis)] = a.out;
  }
  return v;
}

Status eval_resize(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  auto at = [&](size_t i) { return i < in.size() ? in[i] : nullptr; };
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(ResizeSpec spec, resize_spec(n, x.dims(), at(1), at(2), at(3)));
  if (is_float(x.dtype()))
    out[0] = Tensor::from_f64(x.dtype(), spec.out, apply_axes(spec, x.dims(), x.to_f64()));
  else
    out[0] = Tensor::from_i64(x.dtype(), spec.out, apply_axes(spec, x.dims(), x.to_i64()));
  return Status::ok();
}

}  // namespace

void register_resize(std::vector<OpDef>& t) {
  t.push_back({"Resize", kMinOpset, kMaxOpset, OpCategory::kLayout, infer_resize, eval_resize});
}

}  // namespace stitch::ops
