// Shape-computing ops: Shape, Size, Range, ConstantOfShape, OneHot, EyeLike, NonZero. With
// static shapes they all fold to constants; their reference rows still exist
// so the folder can evaluate them and so a graph with run-time values works.
#include <algorithm>
#include <cmath>

#include "ops/op_util.h"

namespace stitch::ops {
namespace {

std::pair<int64_t, int64_t> shape_range(const Node& n, int64_t rank) {
  auto fix = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = fix(n.attr_int("start", 0));
  int64_t end = n.has_attr("end") ? fix(n.attr_int("end", rank)) : rank;
  return {start, std::max(start, end)};
}

Status infer_shape(InferContext& ctx) {
  auto [s, e] = shape_range(ctx.node(), ctx.rank(0));
  const Dims& d = ctx.dims(0);
  ctx.set_output_constant(0, Tensor::vector_i64(std::vector<int64_t>(d.begin() + s, d.begin() + e)));
  return Status::ok();
}

Status eval_shape(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  auto [s, e] = shape_range(n, in[0]->rank());
  out[0] = Tensor::vector_i64(std::vector<int64_t>(in[0]->dims().begin() + s, in[0]->dims().begin() + e));
  return Status::ok();
}

Status infer_size(InferContext& ctx) {
  ctx.set_output_constant(0, Tensor::scalar_i64(num_elements(ctx.dims(0))));
  return Status::ok();
}

Status eval_size(const Node&, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  out[0] = Tensor::scalar_i64(in[0]->size());
  return Status::ok();
}

// The element count of a Range of `start`, `limit` and `delta` (one value each, of one type):
// max(ceil((limit - start) / delta), 0), computed exactly for integers (through a double, values
// past 2^53 would lose the difference) and in double for floats.
StatusOr<int64_t> range_length(const Node& n, const Tensor& start, const Tensor& limit, const Tensor& delta) {
  constexpr int64_t kLongest = 1'000'000'000'000;
  if (!is_float(start.dtype())) {
    const __int128 s = start.get_i64(0), l = limit.get_i64(0), d = delta.get_i64(0);
    if (d == 0) return node_error(n, "delta cannot be 0");
    const __int128 span = l - s;
    __int128 len = span / d;
    if (span % d != 0 && (span > 0) == (d > 0)) ++len;  // rounded up, not toward zero
    if (len >= kLongest) return node_error(n, "the range is too long");
    return static_cast<int64_t>(std::max<__int128>(len, 0));
  }
  const double d = delta.get_f64(0);
  if (d == 0) return node_error(n, "delta cannot be 0");
  const double len = std::ceil((limit.get_f64(0) - start.get_f64(0)) / d);
  if (!(len < static_cast<double>(kLongest))) return node_error(n, "the range is too long");
  return std::max<int64_t>(0, static_cast<int64_t>(len));
}

Status infer_range(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.dtype(i) != ctx.dtype(0)) return ctx.error("start, limit and delta must share one type");
    if (!ctx.constant(i))
      return ctx.error("start, limit and delta must be known at compile time (bind dynamic "
                       "dimensions with --shape)");
    static const char* const kNames[] = {"start", "limit", "delta"};
    if (ctx.constant(i)->size() != 1)
      return ctx.error(fmt::format("input {} ({}) must be one value, not shape {}", i, kNames[i],
                                   dims_to_string(ctx.constant(i)->dims())));
  }
  // Opset 27's stash_type: half types step in float32 by default (1). The values are computed in
  // double and rounded once, which float32 steps match; a half-precision stash is not offered.
  const int64_t stash = ctx.node().attr_int("stash_type", 1);
  if ((ctx.dtype(0) == DType::kF16 || ctx.dtype(0) == DType::kBF16) && stash != 1)
    return ctx.error(fmt::format("stash_type {} is not supported; only 1 (float32 steps)", stash));
  ASSIGN_OR_RETURN(int64_t len,
                   range_length(ctx.node(), *ctx.constant(0), *ctx.constant(1), *ctx.constant(2)));
  ctx.set_output(0, ctx.dtype(0), {len});
  return Status::ok();
}

Status eval_range(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  DType t = in[0]->dtype();
  ASSIGN_OR_RETURN(int64_t len, range_length(n, *in[0], *in[1], *in[2]));
  Tensor y(t, {len});
  for (int64_t i = 0; i < len; ++i) {
    if (is_float(t)) y.set_f64(i, in[0]->get_f64(0) + double(i) * in[2]->get_f64(0));
    else y.set_i64(i, in[0]->get_i64(0) + i * in[2]->get_i64(0));
  }
  out[0] = std::move(y);
  return Status::ok();
}

// NonZero: the coordinates of the input's nonzero elements, one column each in row-major order.
// Its output's length is a count of values, so the input must be known at compile time: TorchScript
// writes repeat_interleave as a NonZero of a mask built from shapes alone (Cohere's rotary
// embedding), which folds; a NonZero of run-time data (Longformer's global tokens) cannot have a
// static shape.
Tensor nonzero_of(const Tensor& x) {
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.size(); ++i)
    if (x.get_f64(i) != 0) hits.push_back(i);
  const Dims& d = x.dims();
  const int64_t rank = x.rank(), count = static_cast<int64_t>(hits.size());
  Tensor y(DType::kI64, {rank, count});
  for (int64_t k = 0; k < count; ++k)
    for (int64_t a = rank - 1, rest = hits[static_cast<size_t>(k)]; a >= 0; --a) {
      y.set_i64(a * count + k, rest % d[static_cast<size_t>(a)]);
      rest /= d[static_cast<size_t>(a)];
    }
  return y;
}

Status infer_nonzero(InferContext& ctx) {
  const Tensor* x = ctx.constant(0);
  if (!x)
    return ctx.error(
        fmt::format("its output's length is the number of nonzero values of input '{}', which is computed at "
                    "run time; an "
                    "artifact has static shapes, so stitch compiles a NonZero only when its input is known "
                    "at compile time "
                    "(built from shapes and constants)",
                    ctx.node().input(0)->name));
  ctx.set_output_constant(0, nonzero_of(*x));
  return Status::ok();
}

Status eval_nonzero(const Node&, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  out[0] = nonzero_of(*in[0]);
  return Status::ok();
}

Status infer_constant_of_shape(InferContext& ctx) {
  ASSIGN_OR_RETURN(auto shape, const_ints(ctx, 0, "shape"));
  for (int64_t d : shape)
    if (d < 0) return ctx.error(fmt::format("shape [{}] has a negative dimension", fmt::join(shape, ", ")));
  const Tensor* v = ctx.node().attr_tensor("value");
  if (v && v->size() != 1) return ctx.error("value must hold exactly one element");
  ctx.set_output(0, v ? v->dtype() : DType::kF32, shape);
  return Status::ok();
}

Status eval_constant_of_shape(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor* v = n.attr_tensor("value");
  Tensor y(v ? v->dtype() : DType::kF32, in[0]->to_i64());
  if (v) {
    const int esz = dtype_size(y.dtype());
    for (int64_t i = 0; i < y.size(); ++i) std::memcpy(y.data() + i * esz, v->data(), esz);
  }
  out[0] = std::move(y);
  return Status::ok();
}

Status infer_onehot(InferContext& ctx) {
  const Tensor* depth = ctx.constant(1);
  if (!depth) return ctx.error("depth must be known at compile time");
  if (depth->size() != 1)
    return ctx.error(fmt::format("depth must be one value, not shape {}", dims_to_string(depth->dims())));
  if (!(depth->get_f64(0) >= 1 && depth->get_f64(0) < 1e9))
    return ctx.error(fmt::format("depth must be a positive count, not {}", depth->get_f64(0)));
  if (ctx.dims(2) != Dims{2}) return ctx.error("values must hold [off, on]");
  int64_t r = ctx.rank(0) + 1;
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(ctx.node(), ctx.node().attr_int("axis", -1), r));
  Dims d = ctx.dims(0);
  d.insert(d.begin() + axis, static_cast<int64_t>(depth->get_f64(0)));
  ctx.set_output(0, ctx.dtype(2), d);
  return Status::ok();
}

Status eval_onehot(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& idx = *in[0];
  int64_t depth = static_cast<int64_t>(in[1]->get_f64(0));
  int64_t axis = *norm_axis(n, n.attr_int("axis", -1), idx.rank() + 1);
  Dims d = idx.dims();
  d.insert(d.begin() + axis, depth);
  Tensor y(in[2]->dtype(), d);
  const int esz = dtype_size(y.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= idx.dims()[i];
  for (int64_t i = axis; i < idx.rank(); ++i) inner *= idx.dims()[i];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < depth; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t v = static_cast<int64_t>(idx.get_f64(o * inner + i));
        if (v < 0) v += depth;
        std::memcpy(y.data() + ((o * depth + k) * inner + i) * esz, in[2]->data() + (v == k ? esz : 0), esz);
      }
  out[0] = std::move(y);
  return Status::ok();
}

// ---- EyeLike: ones on a diagonal of a matrix shaped like the input, from its shape alone ----

StatusOr<Tensor> eye_like(const Node& n, DType in_type, const Dims& d) {
  if (d.size() != 2) return node_error(n, fmt::format("needs a 2-D input, got rank {}", d.size()));
  DType t = in_type;
  if (n.has_attr("dtype")) {
    auto dt = dtype_from_onnx(static_cast<int>(n.attr_int("dtype", 0)));
    if (!dt)
      return node_error(n, fmt::format("dtype {} is not a type stitch carries", n.attr_int("dtype", 0)));
    t = *dt;
  }
  const int64_t k = n.attr_int("k", 0);
  Tensor y(t, d);
  for (int64_t i = 0; i < d[0]; ++i)
    if (i + k >= 0 && i + k < d[1]) y.set_f64(i * d[1] + i + k, 1.0);
  return y;
}

Status infer_eye_like(InferContext& ctx) {
  const Dims& d = ctx.dims(0);
  if (std::any_of(d.begin(), d.end(), [](int64_t x) { return x < 0; })) {
    ctx.set_output(0, ctx.dtype(0), d);  // known once the input's dims are bound
    return Status::ok();
  }
  ASSIGN_OR_RETURN(Tensor y, eye_like(ctx.node(), ctx.dtype(0), d));
  ctx.set_output_constant(0, std::move(y));
  return Status::ok();
}

Status eval_eye_like(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(out[0], eye_like(n, in[0]->dtype(), in[0]->dims()));
  return Status::ok();
}

}  // namespace

void register_shape(std::vector<OpDef>& t) {
  t.push_back({"Shape", kMinOpset, kMaxOpset, OpCategory::kShapeOnly, infer_shape, eval_shape});
  t.push_back({"EyeLike", kMinOpset, kMaxOpset, OpCategory::kShapeOnly, infer_eye_like, eval_eye_like});
  t.push_back({"Size", kMinOpset, kMaxOpset, OpCategory::kShapeOnly, infer_size, eval_size});
  t.push_back({"Range", kMinOpset, kMaxOpset, OpCategory::kShapeOnly, infer_range, eval_range});
  t.push_back({"ConstantOfShape", kMinOpset, kMaxOpset, OpCategory::kShapeOnly,
               infer_constant_of_shape, eval_constant_of_shape});
  t.push_back({"OneHot", kMinOpset, kMaxOpset, OpCategory::kLayout, infer_onehot, eval_onehot});
  t.push_back({"NonZero", kMinOpset, kMaxOpset, OpCategory::kShapeOnly, infer_nonzero, eval_nonzero});
}

}  // namespace stitch::ops
