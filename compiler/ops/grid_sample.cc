// GridSample (opsets 16 to 28): X [N, C, D1..Dr] sampled at the points of grid [N, O1..Or, r], whose
// last axis holds each point's coordinates in [-1, 1], the last spatial axis's first (x, then y, then
// z). Opset 16 takes 4-D X only and names its modes bilinear and bicubic; opset 20 takes r spatial
// axes and names them linear and cubic (either spelling is read at any opset).
// Per spatial axis of length D, a normalized coordinate g becomes
//   align_corners 1: (g + 1) / 2 * (D - 1)      align_corners 0: ((g + 1) * D - 1) / 2
// (rounded half to even for nearest); outside [lo, hi] ([0, D - 1], or [-0.5, D - 0.5] without
// align_corners) the border mode clamps it to [0, D - 1] and the reflection mode reflects it
// between lo and hi. Nearest reads the one pixel, linear the 2 around it per axis, cubic 4 with
// Keys' weights (a = -0.75). A pixel index outside [0, D - 1] reads 0 (zeros), the nearest pixel
// (border) or its reflection (reflection). These are the operator's definition as ONNX's reference
// implementation reads it, which the node tests check.
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

double GridSampleSpec::unnormalize(double g, int64_t d) const {
  const double len = static_cast<double>(d);
  return align_corners ? (g + 1) / 2 * (len - 1) : ((g + 1) * len - 1) / 2;
}

double GridSampleSpec::reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x, n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi, n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

std::vector<double> GridSampleSpec::weights(double t) const {
  if (mode == Mode::kNearest) return {1.0};
  if (mode == Mode::kLinear) return {1 - t, t};
  const double a = -0.75;
  auto far = [&](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  auto near = [&](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

StatusOr<GridSampleSpec> grid_sample_spec(const Node& n, const Dims& x, const Dims& grid) {
  GridSampleSpec s;
  const std::string mode = n.attr_string("mode", n.opset >= 20 ? "linear" : "bilinear");
  if (mode == "nearest")
    s.mode = GridSampleSpec::Mode::kNearest;
  else if (mode == "linear" || mode == "bilinear")
    s.mode = GridSampleSpec::Mode::kLinear;
  else if (mode == "cubic" || mode == "bicubic")
    s.mode = GridSampleSpec::Mode::kCubic;
  else
    return node_error(n, fmt::format("mode '{}' is not nearest, linear (bilinear) or cubic (bicubic)", mode));
  const std::string pad = n.attr_string("padding_mode", "zeros");
  if (pad == "zeros")
    s.padding = GridSampleSpec::Padding::kZeros;
  else if (pad == "border")
    s.padding = GridSampleSpec::Padding::kBorder;
  else if (pad == "reflection")
    s.padding = GridSampleSpec::Padding::kReflection;
  else
    return node_error(n, fmt::format("padding_mode '{}' is not zeros, border or reflection", pad));
  s.align_corners = n.attr_int("align_corners", 0) != 0;
  if (x.size() < 3)
    return node_error(n, fmt::format("X has shape {}; it is N x C x D1 x ...", dims_to_string(x)));
  s.rank = static_cast<int64_t>(x.size()) - 2;
  if (n.opset < 20 && s.rank != 2)
    return node_error(
        n, fmt::format("X has shape {}; before opset 20 it is 4-D (N x C x H x W)", dims_to_string(x)));
  const bool fits = grid.size() == x.size() && (grid[0] < 0 || x[0] < 0 || grid[0] == x[0]) &&
                    (grid.back() < 0 || grid.back() == s.rank);
  if (!fits)
    return node_error(n, fmt::format("grid has shape {}; for X of shape {} it is {} x ... x {} ({} points' "
                                     "coordinates per batch row)",
                                     dims_to_string(grid), dims_to_string(x), x[0], s.rank, s.rank));
  return s;
}

namespace {

Status infer_grid_sample(InferContext& ctx) {
  if (!ctx.has_input(1)) return ctx.error("needs input 1 (grid)");
  if (!is_float(ctx.dtype(0)) || !is_float(ctx.dtype(1)))
    return ctx.error("expects a floating-point X and grid");
  RETURN_IF_ERROR(grid_sample_spec(ctx.node(), ctx.dims(0), ctx.dims(1)).status());
  Dims out{ctx.dims(0)[0], ctx.dims(0)[1]};
  out.insert(out.end(), ctx.dims(1).begin() + 1, ctx.dims(1).end() - 1);
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::ok();
}

Status eval_grid_sample(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor &xt = *in[0], &gt = *in[1];
  ASSIGN_OR_RETURN(GridSampleSpec s, grid_sample_spec(n, xt.dims(), gt.dims()));
  const Dims& xd = xt.dims();
  const auto r = static_cast<size_t>(s.rank);
  const Dims spatial(xd.begin() + 2, xd.end());
  const int64_t batch = xd[0], channels = xd[1], pixels = num_elements(spatial);
  const int64_t points = gt.size() / std::max<int64_t>(batch * s.rank, 1);
  const Dims strides = strides_of(spatial);
  const std::vector<double> xv = xt.to_f64(), gv = gt.to_f64();
  std::vector<double> y(static_cast<size_t>(batch * channels * points));
  // Per axis of one point: the pixel indices read and their weights (0 for a pixel read as zero).
  std::vector<std::vector<int64_t>> idx(r);
  std::vector<std::vector<double>> w(r);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < points; ++p) {
      for (size_t a = 0; a < r; ++a) {
        const int64_t d = spatial[a];
        const auto [lo, hi] = s.bounds(d);
        double c = s.unnormalize(gv[static_cast<size_t>((b * points + p) * s.rank) + (r - 1 - a)], d);
        if (s.mode == GridSampleSpec::Mode::kNearest) c = std::nearbyint(c);
        if (c < lo || c > hi) {
          if (s.padding == GridSampleSpec::Padding::kBorder) c = std::clamp(c, 0.0, double(d - 1));
          if (s.padding == GridSampleSpec::Padding::kReflection) c = GridSampleSpec::reflect(c, lo, hi);
        }
        const double first = s.mode == GridSampleSpec::Mode::kNearest ? std::trunc(c) : std::floor(c);
        w[a] = s.weights(c - first);
        idx[a].assign(w[a].size(), 0);
        const int64_t start = static_cast<int64_t>(first) - (s.mode == GridSampleSpec::Mode::kCubic ? 1 : 0);
        for (size_t k = 0; k < w[a].size(); ++k) {
          int64_t i = start + static_cast<int64_t>(k);
          if (i < 0 || i >= d) {
            if (s.padding == GridSampleSpec::Padding::kZeros)
              w[a][k] = 0, i = 0;
            else if (s.padding == GridSampleSpec::Padding::kBorder)
              i = std::clamp<int64_t>(i, 0, d - 1);
            else
              i = static_cast<int64_t>(GridSampleSpec::reflect(double(i), lo, hi));
          }
          idx[a][k] = i;
        }
      }
      // Every combination of the axes' taps.
      std::vector<size_t> tap(r, 0);
      for (int64_t c = 0; c < channels; ++c) {
        const double* plane = xv.data() + (b * channels + c) * pixels;
        double sum = 0;
        std::fill(tap.begin(), tap.end(), 0);
        while (true) {
          double weight = 1;
          int64_t off = 0;
          for (size_t a = 0; a < r; ++a) {
            weight *= w[a][tap[a]];
            off += idx[a][tap[a]] * strides[a];
          }
          if (weight != 0) sum += weight * plane[off];
          size_t a = r;
          while (a > 0 && ++tap[a - 1] == w[a - 1].size()) tap[--a] = 0;
          if (a == 0) break;
        }
        y[static_cast<size_t>((b * channels + c) * points + p)] = sum;
      }
    }
  Dims od{batch, channels};
  od.insert(od.end(), gt.dims().begin() + 1, gt.dims().end() - 1);
  out[0] = Tensor::from_f64(xt.dtype(), od, y);
  return Status::ok();
}

}  // namespace

void register_grid_sample(std::vector<OpDef>& t) {
  t.push_back({"GridSample", 16, kMaxOpset, OpCategory::kLayout, infer_grid_sample, eval_grid_sample});
}

}  // namespace stitch::ops
