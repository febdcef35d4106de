// expand_grid_sample: a GridSample becomes the arithmetic of its definition (ops/grid_sample.cc) and
// one GatherElements per tap, which the planner fuses into one kernel with the work that computes
// the grid (a deformable attention's offsets) and the work after it:
//   per spatial axis: the grid's coordinate (a Slice of its last axis), unnormalized, rounded for
//   nearest, clamped or reflected when outside the axis (border, reflection); the first tap at its
//   floor, the fraction past it; each tap's index and weight (a pixel outside reads weight 0 for
//   zeros padding, the clamped or reflected pixel otherwise);
//   per combination of the axes' taps: the pixel's flat index, Expanded over the channels, a
//   GatherElements from X viewed as [N, C, pixels], times the product of the axes' weights, summed.
// Weights and indices are computed in float32 per point ([N, 1, points]) and shared by every
// channel; the sum is [N, C, points] until a last Reshape. Runs after fold_constants; leaves alone a
// GridSample without static shapes, or one of more than 64 taps per point (cubic in more than 3 dimensions)
// or 2^24 pixels per plane, which the back end then refuses by name.
#include <fmt/format.h>

#include "ops/op_params.h"
#include "ops/op_util.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

constexpr size_t kMaxTaps = 64;
constexpr int64_t kMaxPixels = int64_t{1} << 24;  // exact as float32 indices

struct Builder {
  NodeBuilder b;
  Dims shape;  // [N, 1, points]: one value per point, shared by the channels

  Value* k(double v) { return b.constant("c", Tensor::from_f64(DType::kF32, {}, {v})); }
  Value* op(const char* type, std::vector<Value*> in, DType t = DType::kF32) {
    return b.node(type, fmt::format("{}", type), std::move(in), t, shape);
  }
  Value* add(Value* x, double v) { return v == 0 ? x : op("Add", {x, k(v)}); }
  Value* mul(Value* x, double v) { return v == 1 ? x : op("Mul", {x, k(v)}); }
  // x folded back between lo and hi (GridSampleSpec::reflect), node by node.
  Value* reflect(Value* x, double lo, double hi) {
    const double range = hi - lo;
    if (range <= 0) return op("Clip", {x, k(lo), k(lo)});
    Value* below = op("Less", {x, k(lo)}, DType::kBool);
    Value* above = op("Greater", {x, k(hi)}, DType::kBool);
    Value* dx = op("Where", {below, op("Sub", {k(lo), x}), op("Sub", {x, k(hi)})});
    Value* n = op("Floor", {mul(dx, 1 / range)});
    Value* r = op("Sub", {dx, mul(n, range)});
    Value* half = mul(n, 0.5);
    Value* even = op("Equal", {op("Floor", {half}), half}, DType::kBool);
    Value* from_lo = add(r, lo);
    Value* from_hi = op("Sub", {k(hi), r});
    Value* low = op("Where", {even, from_lo, from_hi});
    Value* high = op("Where", {even, from_hi, from_lo});
    return op("Where", {below, low, op("Where", {above, high, x})});
  }
};

// One axis's taps: each pixel index (float) and weight (null: 1).
struct Taps {
  std::vector<Value*> index, weight;
};

Taps axis_taps(Builder& s, const ops::GridSampleSpec& spec, Value* g, int64_t d) {
  using Mode = ops::GridSampleSpec::Mode;
  using Padding = ops::GridSampleSpec::Padding;
  const double len = static_cast<double>(d);
  const auto [lo, hi] = spec.bounds(d);
  // (g + 1) / 2 (D - 1), or ((g + 1) D - 1) / 2, as g k + (D - 1) / 2.
  Value* c = s.add(s.mul(g, spec.align_corners ? (len - 1) / 2 : len / 2), (len - 1) / 2);
  if (spec.mode == Mode::kNearest) c = s.op("Round", {c});
  if (spec.padding == Padding::kBorder) {
    Value* outside =
        s.op("Or", {s.op("Less", {c, s.k(lo)}, DType::kBool), s.op("Greater", {c, s.k(hi)}, DType::kBool)},
             DType::kBool);
    c = s.op("Where", {outside, s.op("Clip", {c, s.k(0), s.k(len - 1)}), c});
  } else if (spec.padding == Padding::kReflection) {
    c = s.reflect(c, lo, hi);
  }
  // Nearest's coordinate is a whole number here (rounded, then clamped or reflected by whole steps).
  Value* first = spec.mode == Mode::kNearest ? c : s.op("Floor", {c});
  Taps t;
  if (spec.mode == Mode::kNearest) {
    t.weight = {nullptr};
  } else {
    Value* f = s.op("Sub", {c, first});
    if (spec.mode == Mode::kLinear) {
      t.weight = {s.op("Sub", {s.k(1), f}), f};
    } else {
      // Keys' kernel (a = -0.75) at the distances 1 + f, f, 1 - f and 2 - f.
      const double a = -0.75;
      auto far = [&](Value* x) {  // ((a x - 5a) x + 8a) x - 4a
        return s.add(s.op("Mul", {s.add(s.op("Mul", {s.add(s.mul(x, a), -5 * a), x}), 8 * a), x}), -4 * a);
      };
      auto near = [&](Value* x) {  // ((a + 2) x - (a + 3)) x x + 1
        Value* inner = s.add(s.mul(x, a + 2), -(a + 3));
        return s.add(s.op("Mul", {s.op("Mul", {inner, x}), x}), 1);
      };
      Value* one_minus = s.op("Sub", {s.k(1), f});
      t.weight = {far(s.add(f, 1)), near(f), near(one_minus), far(s.op("Sub", {s.k(2), f}))};
    }
  }
  const double start = spec.mode == Mode::kCubic ? -1 : 0;
  // The taps reach at most `reach` past the axis's ends (the coordinate is within [lo, hi] unless
  // zeros padding left it outside); one reflection about the ends brings such a tap back when the
  // axis is at least that long: |D - 1 - |i|| folds about 0 and D - 1 (align_corners), and the
  // same about -0.5 and D - 0.5 on i + 0.5.
  const double reach = spec.mode == Mode::kCubic ? 2 : 1;
  const bool fold_once = len - 1 >= reach;
  for (size_t i = 0; i < t.weight.size(); ++i) {
    Value* idx = s.add(first, start + static_cast<double>(i));
    if (spec.padding == Padding::kReflection) {
      if (!fold_once) {
        idx = s.reflect(idx, lo, hi);
      } else if (spec.align_corners) {
        idx = s.op("Sub", {s.k(len - 1), s.op("Abs", {s.add(s.op("Abs", {idx}), -(len - 1))})});
      } else {
        Value* m = s.op("Abs", {s.add(s.op("Abs", {s.add(idx, 0.5)}), -len)});
        idx = s.op("Sub", {s.k(len - 0.5), m});
      }
    }
    Value* clipped = s.op("Clip", {idx, s.k(0), s.k(len - 1)});
    if (spec.padding == Padding::kZeros) {
      // A pixel outside the axis reads 0: the tap's weight is 0 where clipping moved it.
      Value* inside = s.op("Equal", {idx, clipped}, DType::kBool);
      t.weight[i] = s.op("Where", {inside, t.weight[i] ? t.weight[i] : s.k(1), s.k(0)});
    }
    t.index.push_back(clipped);
  }
  return t;
}

StatusOr<bool> expand_grid_sample_node(Graph& g, Node& n) {
  Value *x = n.input(0), *grid = n.input(1), *y = n.output(0);
  if (!x || !grid || !y || !x->has_static_shape() || !grid->has_static_shape()) return false;
  const Dims &xd = *x->dims, &gd = *grid->dims;
  ASSIGN_OR_RETURN(ops::GridSampleSpec spec, ops::grid_sample_spec(n, xd, gd));
  const auto r = static_cast<size_t>(spec.rank);
  const Dims spatial(xd.begin() + 2, xd.end());
  const int64_t pixels = num_elements(spatial);
  size_t combos = 1;
  for (size_t a = 0; a < r; ++a) combos *= spec.mode == ops::GridSampleSpec::Mode::kCubic ? 4 : 2;
  if (combos > kMaxTaps || pixels >= kMaxPixels) return false;
  const Dims points(gd.begin() + 1, gd.end() - 1);
  const int64_t batch = xd[0], channels = xd[1], count = num_elements(points);
  const Dims per_point{batch, 1, count};
  Builder s{{g, n}, per_point};
  NodeBuilder& b = s.b;
  Value* gf = grid->dtype == DType::kF32 ? grid : b.cast(grid, DType::kF32, "grid_f32");
  const Dims strides = ops::strides_of(spatial);
  std::vector<Taps> taps;
  for (size_t a = 0; a < r; ++a) {
    // Axis a's coordinate is the grid's (r - 1 - a)-th: x (the last axis) first.
    const auto j = static_cast<int64_t>(r - 1 - a);
    Value* c =
        b.slice(gf, {j}, {j + 1}, {static_cast<int64_t>(gd.size()) - 1}, fmt::format("coordinate_{}", a));
    taps.push_back(
        axis_taps(s, spec, b.reshape(c, per_point, fmt::format("coordinate_{}_per_point", a)), spatial[a]));
    // Each tap's offset into a plane, once per tap.
    for (Value*& i : taps.back().index) i = s.mul(i, static_cast<double>(strides[a]));
  }
  const Dims flat_x{batch, channels, pixels}, gathered{batch, channels, count};
  Value* plane = b.reshape(x, flat_x, "planes");
  Value* each_channel = b.constant("channels_shape", Tensor::vector_i64(gathered));
  const DType real = is_float(x->dtype) && x->dtype != DType::kF32 ? DType::kF32 : x->dtype;
  Value* sum = nullptr;
  std::vector<size_t> tap(r, 0);
  while (true) {
    Value *index = nullptr, *weight = nullptr;
    for (size_t a = 0; a < r; ++a) {
      Value* term = taps[a].index[tap[a]];
      index = index ? s.op("Add", {index, term}) : term;
      if (Value* w = taps[a].weight[tap[a]]) weight = weight ? s.op("Mul", {weight, w}) : w;
    }
    Value* each = b.node("Expand", "pixel_per_channel", {b.cast(index, DType::kI64, "pixel"), each_channel},
                         DType::kI64, gathered);
    Value* v = b.node("GatherElements", "tap", {plane, each}, x->dtype, gathered, {{"axis", int64_t{2}}});
    if (v->dtype != real) v = b.cast(v, real, "tap_f32");
    if (weight) v = b.node("Mul", "weighted", {v, weight}, real, gathered);
    sum = sum ? b.node("Add", "sum", {sum, v}, real, gathered) : v;
    size_t a = r;
    while (a > 0 && ++tap[a - 1] == taps[a - 1].index.size()) tap[--a] = 0;
    if (a == 0) break;
  }
  if (sum->dtype != x->dtype) sum = b.cast(sum, x->dtype, "output");
  Dims out{batch, channels};
  out.insert(out.end(), points.begin(), points.end());
  sum = b.reshape(sum, out, "points");
  b.finish(sum, y);
  return true;
}

}  // namespace

StatusOr<bool> expand_grid_sample(Graph& g, PassContext&) {
  return expand_each(g, "GridSample", expand_grid_sample_node);
}

}  // namespace stitch
