// Layout ops: they move bytes and never change values, so they work on raw
// elements of any dtype. Reshape Flatten Squeeze Unsqueeze Transpose Concat
// Split Slice Expand Tile Pad Trilu, plus Identity and inference-mode Dropout.
#include <algorithm>
#include <numeric>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {
namespace {

Status copy_input0(const Node&, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  out[0] = *in[0];
  return Status::ok();
}

// ---- Reshape family -------------------------------------------------------------

StatusOr<Dims> reshape_target(const Node& n, const Dims& in, std::vector<int64_t> shape) {
  bool allowzero = n.attr_int("allowzero", 0) != 0;
  int64_t infer_at = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= in.size())
        return node_error(n, fmt::format("shape entry {} is 0 (copy) but the input has rank {}", i, in.size()));
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (infer_at >= 0) return node_error(n, "the target shape has more than one -1");
      infer_at = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      return node_error(n, fmt::format("the target shape has an invalid entry {}", shape[i]));
    } else {
      known *= shape[i];
    }
  }
  int64_t total = num_elements(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      return node_error(n, fmt::format("cannot reshape {} elements ({}) to [{}]", total,
                                       dims_to_string(in), fmt::join(shape, ", ")));
    shape[infer_at] = total / known;
  }
  if (num_elements(shape) != total)
    return node_error(n, fmt::format("cannot reshape {} ({} elements) to {}", dims_to_string(in),
                                     total, dims_to_string(shape)));
  return shape;
}

Status infer_reshape(InferContext& ctx) {
  ASSIGN_OR_RETURN(auto shape, const_ints(ctx, 1, "target shape"));
  ASSIGN_OR_RETURN(Dims d, reshape_target(ctx.node(), ctx.dims(0), shape));
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_reshape(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(Dims d, reshape_target(n, in[0]->dims(), in[1]->to_i64()));
  out[0] = in[0]->reshaped(d);
  return Status::ok();
}

StatusOr<Dims> flatten_dims(const Node& n, const Dims& in) {
  int64_t r = static_cast<int64_t>(in.size());
  int64_t axis = n.attr_int("axis", 1);
  if (axis < -r || axis > r) return node_error(n, fmt::format("axis {} is out of range for rank {}", axis, r));
  if (axis < 0) axis += r;
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= in[i];
  return Dims{a, b};
}

StatusOr<Dims> squeeze_dims(const Node& n, const Dims& in, std::optional<std::vector<int64_t>> axes) {
  int64_t r = static_cast<int64_t>(in.size());
  std::vector<bool> drop(in.size(), false);
  if (!axes) {
    for (int64_t i = 0; i < r; ++i) drop[i] = in[i] == 1;
  } else {
    for (int64_t a : *axes) {
      ASSIGN_OR_RETURN(int64_t ax, norm_axis(n, a, r));
      if (in[ax] != 1)
        return node_error(n, fmt::format("cannot squeeze axis {} of size {} (shape {})", a, in[ax],
                                         dims_to_string(in)));
      drop[ax] = true;
    }
  }
  Dims out;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[i]) out.push_back(in[i]);
  return out;
}

StatusOr<Dims> unsqueeze_dims(const Node& n, const Dims& in, const std::vector<int64_t>& axes) {
  int64_t r = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> ins(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t ax, norm_axis(n, a, r));
    if (ins[ax]) return node_error(n, fmt::format("axis {} is listed twice", a));
    ins[ax] = true;
  }
  Dims out;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(ins[i] ? 1 : in[k++]);
  return out;
}

StatusOr<Dims> view_dims(const Node& n, const Dims& in, std::optional<std::vector<int64_t>> axes) {
  if (n.op_type == "Flatten") return flatten_dims(n, in);
  if (n.op_type == "Squeeze") return squeeze_dims(n, in, axes);
  if (!axes) return node_error(n, "needs axes");
  return unsqueeze_dims(n, in, *axes);
}

Status infer_view(InferContext& ctx) {
  std::optional<std::vector<int64_t>> axes;
  if (ctx.node().op_type != "Flatten") {
    ASSIGN_OR_RETURN(axes, axes_operand(ctx, 1, "axes"));
  }
  ASSIGN_OR_RETURN(Dims d, view_dims(ctx.node(), ctx.dims(0), axes));
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_view(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(Dims d, view_dims(n, in[0]->dims(), axes_operand_eval(n, in, 1, "axes")));
  out[0] = in[0]->reshaped(d);
  return Status::ok();
}

// ---- Transpose --------------------------------------------------------------------

}  // namespace

StatusOr<std::vector<int64_t>> transpose_perm(const Node& n, int64_t rank) {
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (perm.empty() && !n.has_attr("perm")) {
    perm.resize(rank);
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> want(rank);
  std::iota(want.begin(), want.end(), 0);
  if (sorted != want)
    return node_error(n, fmt::format("perm [{}] is not a permutation of the {} axes", fmt::join(perm, ", "), rank));
  return perm;
}

namespace {

Status infer_transpose(InferContext& ctx) {
  ASSIGN_OR_RETURN(auto perm, transpose_perm(ctx.node(), ctx.rank(0)));
  Dims d;
  for (int64_t p : perm) d.push_back(ctx.dims(0)[p]);
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_transpose(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(auto perm, transpose_perm(n, x.rank()));
  Dims s = strides_of(x.dims()), d, st;
  for (int64_t p : perm) d.push_back(x.dims()[p]), st.push_back(s[p]);
  out[0] = copy_strided(x, d, 0, st);
  return Status::ok();
}

// ---- Concat / Split -------------------------------------------------------------------

Status infer_concat(InferContext& ctx) {
  const Node& n = ctx.node();
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, n.attr_int("axis", 0), ctx.rank(0)));
  Dims d = ctx.dims(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Dims& e = ctx.dims(i);
    if (ctx.dtype(i) != ctx.dtype(0)) return ctx.error("inputs must share one element type");
    bool ok = e.size() == d.size();
    for (size_t k = 0; ok && k < d.size(); ++k) ok = static_cast<int64_t>(k) == axis || e[k] == d[k];
    if (!ok)
      return ctx.error(fmt::format("input {} has shape {}, which does not match {} outside axis {}",
                                   i, dims_to_string(e), dims_to_string(ctx.dims(0)), axis));
    d[axis] += e[axis];
  }
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_concat(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  int64_t axis = *norm_axis(n, n.attr_int("axis", 0), in[0]->rank());
  Dims d = in[0]->dims();
  d[axis] = 0;
  for (const Tensor* t : in) d[axis] += t->dims()[axis];
  Tensor y(in[0]->dtype(), d);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= d[i];
  const int64_t esz = dtype_size(y.dtype());
  int64_t out_row = y.size() / std::max<int64_t>(outer, 1) * esz, at = 0;
  for (const Tensor* t : in) {
    int64_t row = t->size() / std::max<int64_t>(outer, 1) * esz;
    for (int64_t o = 0; o < outer; ++o) std::memcpy(y.data() + o * out_row + at, t->data() + o * row, row);
    at += row;
  }
  out[0] = std::move(y);
  return Status::ok();
}

}  // namespace

StatusOr<std::vector<int64_t>> split_sizes(const Node& n, int64_t dim, size_t num_outputs,
                                           std::optional<std::vector<int64_t>> split) {
  if (split && !split->empty()) {
    if (split->size() != num_outputs)
      return node_error(n, fmt::format("split has {} entries for {} outputs", split->size(), num_outputs));
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0) return node_error(n, "split sizes must be non-negative");
      sum += s;
    }
    if (sum != dim)
      return node_error(n, fmt::format("split sizes sum to {} but the axis has {}", sum, dim));
    return *split;
  }
  int64_t k = static_cast<int64_t>(num_outputs);
  int64_t chunk = (dim + k - 1) / k;  // opset 18: the last chunk may be smaller
  if (n.opset < 18 && dim % k != 0)
    return node_error(n, fmt::format("axis of size {} does not split evenly into {} outputs", dim, k));
  std::vector<int64_t> sizes;
  for (int64_t i = 0, left = dim; i < k; ++i) {
    sizes.push_back(std::min(chunk, left));
    left -= sizes.back();
  }
  return sizes;
}

namespace {

Status infer_split(InferContext& ctx) {
  const Node& n = ctx.node();
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, n.attr_int("axis", 0), ctx.rank(0)));
  ASSIGN_OR_RETURN(auto split, axes_operand(ctx, 1, "split"));
  if (n.has_attr("num_outputs") && n.attr_int("num_outputs", 0) != static_cast<int64_t>(n.outputs.size()))
    return ctx.error("num_outputs does not match the number of outputs");
  ASSIGN_OR_RETURN(auto sizes, split_sizes(n, ctx.dims(0)[axis], n.outputs.size(), split));
  for (size_t i = 0; i < sizes.size(); ++i) {
    Dims d = ctx.dims(0);
    d[axis] = sizes[i];
    ctx.set_output(i, ctx.dtype(0), d);
  }
  return Status::ok();
}

Status eval_split(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  int64_t axis = *norm_axis(n, n.attr_int("axis", 0), x.rank());
  ASSIGN_OR_RETURN(auto sizes, split_sizes(n, x.dims()[axis], out.size(), axes_operand_eval(n, in, 1, "split")));
  Dims s = strides_of(x.dims());
  int64_t start = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Dims d = x.dims();
    d[axis] = sizes[i];
    out[i] = copy_strided(x, d, start * s[axis], s);
    start += sizes[i];
  }
  return Status::ok();
}

// ---- Slice ----------------------------------------------------------------------------


}  // namespace

StatusOr<SliceSpec> slice_spec(const Node& n, const Dims& in, std::vector<int64_t> starts,
                               std::vector<int64_t> ends, std::optional<std::vector<int64_t>> axes,
                               std::optional<std::vector<int64_t>> steps) {
  int64_t r = static_cast<int64_t>(in.size());
  if (starts.size() != ends.size())
    return node_error(n, "starts and ends must have the same length");
  if (!axes) {
    axes = std::vector<int64_t>(starts.size());
    std::iota(axes->begin(), axes->end(), 0);
  }
  if (!steps) steps = std::vector<int64_t>(starts.size(), 1);
  if (axes->size() != starts.size() || steps->size() != starts.size())
    return node_error(n, "starts, ends, axes and steps must have the same length");
  Dims s = strides_of(in);
  SliceSpec sp{in, 0, s};
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t ax, norm_axis(n, (*axes)[i], r));
    if (seen[ax]) return node_error(n, fmt::format("axis {} is sliced twice", ax));
    seen[ax] = true;
    int64_t dim = in[ax], step = (*steps)[i];
    if (step == 0) return node_error(n, "a slice step cannot be 0");
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    int64_t len = step > 0 ? (e > b ? (e - b + step - 1) / step : 0)
                           : (b > e ? (b - e + (-step) - 1) / (-step) : 0);
    sp.out[ax] = len;
    if (len > 0) sp.base += b * s[ax];
    sp.strides[ax] = s[ax] * step;
  }
  return sp;
}

namespace {

Status infer_slice(InferContext& ctx) {
  ASSIGN_OR_RETURN(auto starts, const_ints(ctx, 1, "starts"));
  ASSIGN_OR_RETURN(auto ends, const_ints(ctx, 2, "ends"));
  std::optional<std::vector<int64_t>> axes, steps;
  if (ctx.has_input(3)) { ASSIGN_OR_RETURN(axes, const_ints(ctx, 3, "axes")); }
  if (ctx.has_input(4)) { ASSIGN_OR_RETURN(steps, const_ints(ctx, 4, "steps")); }
  ASSIGN_OR_RETURN(SliceSpec sp, slice_spec(ctx.node(), ctx.dims(0), starts, ends, axes, steps));
  ctx.set_output(0, ctx.dtype(0), sp.out);
  return Status::ok();
}

Status eval_slice(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  auto opt = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    if (i < in.size() && in[i]) return in[i]->to_i64();
    return std::nullopt;
  };
  ASSIGN_OR_RETURN(SliceSpec sp, slice_spec(n, in[0]->dims(), in[1]->to_i64(), in[2]->to_i64(), opt(3), opt(4)));
  out[0] = copy_strided(*in[0], sp.out, sp.base, sp.strides);
  return Status::ok();
}

// ---- Expand / Tile ----------------------------------------------------------------------

Status infer_expand(InferContext& ctx) {
  ASSIGN_OR_RETURN(auto shape, const_ints(ctx, 1, "target shape"));
  if (std::any_of(shape.begin(), shape.end(), [](int64_t x) { return x < 0; }))
    return ctx.error(fmt::format("the target shape [{}] has a negative entry", fmt::join(shape, ", ")));
  auto d = broadcast_dims(ctx.dims(0), shape);
  if (!d)
    return ctx.error(fmt::format("cannot expand {} to [{}]", dims_to_string(ctx.dims(0)), fmt::join(shape, ", ")));
  ctx.set_output(0, ctx.dtype(0), *d);
  return Status::ok();
}

Status eval_expand(const Node&, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  Dims d = *broadcast_dims(in[0]->dims(), in[1]->to_i64());
  out[0] = copy_strided(*in[0], d, 0, broadcast_strides(in[0]->dims(), d));
  return Status::ok();
}

Status infer_tile(InferContext& ctx) {
  ASSIGN_OR_RETURN(auto reps, const_ints(ctx, 1, "repeats"));
  if (static_cast<int64_t>(reps.size()) != ctx.rank(0))
    return ctx.error(fmt::format("repeats has {} entries for an input of rank {}", reps.size(), ctx.rank(0)));
  Dims d = ctx.dims(0);
  for (size_t i = 0; i < d.size(); ++i) {
    if (reps[i] < 0) return ctx.error("repeats must be non-negative");
    d[i] *= reps[i];
  }
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

// Visits every output index with a callback computing the source offset (or -1 for a fill).
template <typename F>
Tensor gather_by_index(const Tensor& x, const Dims& out_dims, F src_offset, const Tensor* fill) {
  Tensor y(x.dtype(), out_dims);
  const int esz = dtype_size(x.dtype());
  const int64_t r = static_cast<int64_t>(out_dims.size());
  std::vector<int64_t> idx(out_dims.size(), 0);
  for (int64_t i = 0; i < y.size(); ++i) {
    int64_t off = src_offset(idx);
    if (off >= 0) std::memcpy(y.data() + i * esz, x.data() + off * esz, esz);
    else if (fill) std::memcpy(y.data() + i * esz, fill->data(), esz);
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < out_dims[d]) break;
      idx[d] = 0;
    }
  }
  return y;
}

Status eval_tile(const Node&, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  auto reps = in[1]->to_i64();
  Dims d = x.dims(), s = strides_of(x.dims());
  for (size_t i = 0; i < d.size(); ++i) d[i] *= reps[i];
  out[0] = gather_by_index(x, d, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += (idx[k] % x.dims()[k]) * s[k];
    return off;
  }, nullptr);
  return Status::ok();
}

// ---- Pad --------------------------------------------------------------------------------

}  // namespace

StatusOr<std::vector<int64_t>> full_pads(const Node& n, int64_t rank, std::vector<int64_t> pads,
                                         std::optional<std::vector<int64_t>> axes) {
  if (!axes) {
    if (static_cast<int64_t>(pads.size()) != 2 * rank)
      return node_error(n, fmt::format("pads has {} entries; an input of rank {} needs {}", pads.size(), rank, 2 * rank));
    return pads;
  }
  if (pads.size() != 2 * axes->size()) return node_error(n, "pads must have two entries per axis");
  std::vector<int64_t> full(2 * rank, 0);
  for (size_t i = 0; i < axes->size(); ++i) {
    ASSIGN_OR_RETURN(int64_t ax, norm_axis(n, (*axes)[i], rank));
    full[ax] = pads[i];
    full[ax + rank] = pads[i + axes->size()];
  }
  return full;
}

namespace {

Status infer_pad(InferContext& ctx) {
  const Node& n = ctx.node();
  std::string mode = n.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return ctx.error(fmt::format("unknown pad mode '{}'", mode));
  ASSIGN_OR_RETURN(auto pads, const_ints(ctx, 1, "pads"));
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(3)) { ASSIGN_OR_RETURN(axes, const_ints(ctx, 3, "axes")); }
  int64_t r = ctx.rank(0);
  ASSIGN_OR_RETURN(auto full, full_pads(n, r, pads, axes));
  Dims d = ctx.dims(0);
  for (int64_t i = 0; i < r; ++i) {
    if (mode != "constant" && (d[i] == 0 || (mode == "reflect" && (full[i] >= d[i] || full[i + r] >= d[i]))) &&
        (full[i] > 0 || full[i + r] > 0))
      return ctx.error(fmt::format("{} padding of {} on axis {} of size {} is not possible", mode,
                                   std::max(full[i], full[i + r]), i, d[i]));
    d[i] += full[i] + full[i + r];
    if (d[i] < 0) return ctx.error("negative pads remove more than the axis holds");
  }
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_pad(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  std::string mode = n.attr_string("mode", "constant");
  std::optional<std::vector<int64_t>> axes;
  if (in.size() > 3 && in[3]) axes = in[3]->to_i64();
  int64_t r = x.rank();
  ASSIGN_OR_RETURN(auto p, full_pads(n, r, in[1]->to_i64(), axes));
  Dims d = x.dims(), s = strides_of(x.dims());
  for (int64_t i = 0; i < r; ++i) d[i] += p[i] + p[i + r];
  Tensor fill(x.dtype(), {});
  if (in.size() > 2 && in[2] && in[2]->size() > 0) std::memcpy(fill.data(), in[2]->data(), dtype_size(x.dtype()));
  out[0] = gather_by_index(x, d, [&](const std::vector<int64_t>& idx) -> int64_t {
    int64_t off = 0;
    for (int64_t k = 0; k < r; ++k) {
      int64_t j = idx[k] - p[k], dim = x.dims()[k];
      if (j < 0 || j >= dim) {
        if (mode == "constant") return -1;
        if (mode == "edge") j = std::clamp<int64_t>(j, 0, dim - 1);
        else if (mode == "wrap") j = ((j % dim) + dim) % dim;
        else {  // reflect without repeating the edge
          int64_t period = 2 * (dim - 1);
          if (period == 0) j = 0;
          else {
            j = ((j % period) + period) % period;
            if (j >= dim) j = period - j;
          }
        }
      }
      off += j * s[k];
    }
    return off;
  }, &fill);
  return Status::ok();
}

// ---- Trilu, Identity, Dropout -------------------------------------------------------------

Status infer_trilu(InferContext& ctx) {
  if (ctx.rank(0) < 2) return ctx.error("needs an input of rank 2 or more");
  if (ctx.has_input(1)) RETURN_IF_ERROR(const_ints(ctx, 1, "k").status());
  return same_as_input0(ctx);
}

Status eval_trilu(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  int64_t k = in.size() > 1 && in[1] ? in[1]->get_i64(0) : 0;
  bool upper = n.attr_int("upper", 1) != 0;
  int64_t rows = x.dims()[x.rank() - 2], cols = x.dims()[x.rank() - 1];
  Tensor y = x;
  const int esz = dtype_size(x.dtype());
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t c = i % cols, rr = (i / cols) % rows;
    bool keep = upper ? c - rr >= k : c - rr <= k;
    if (!keep) std::memset(y.data() + i * esz, 0, esz);
  }
  out[0] = std::move(y);
  return Status::ok();
}

Status infer_dropout(InferContext& ctx) {
  if (ctx.has_input(2)) {
    const Tensor* t = ctx.constant(2);
    if (!t || t->size() != 1 || t->get_i64(0) != 0)
      return ctx.error("training_mode must be a constant false; export the model in eval mode");
  }
  ctx.set_output(0, ctx.dtype(0), ctx.dims(0));
  ctx.set_output(1, DType::kBool, ctx.dims(0));
  return Status::ok();
}

Status eval_dropout(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  out[0] = *in[0];
  if (out.size() > 1 && n.output(1)) {
    Tensor mask(DType::kBool, in[0]->dims());
    std::memset(mask.data(), 1, mask.byte_size());
    out[1] = std::move(mask);
  }
  return Status::ok();
}

// ---- no-op tests ----------------------------------------------------------------------------

bool noop_view(const Node& n) { return same_type_as_input0(n); }
bool noop_transpose(const Node& n) {
  if (!same_type_as_input0(n)) return false;
  auto perm = n.attr_ints("perm");
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return n.has_attr("perm") || n.input(0)->dims->size() <= 1;
}
bool all_const_equal(const Value* v, int64_t want) {
  if (!v) return true;
  if (!v->constant) return false;
  for (int64_t x : v->constant->to_i64())
    if (x != want) return false;
  return true;
}
bool noop_slice(const Node& n) { return same_type_as_input0(n) && all_const_equal(n.input(4), 1); }
bool noop_pad(const Node& n) { return same_type_as_input0(n) && all_const_equal(n.input(1), 0); }
bool noop_concat(const Node& n) { return n.inputs.size() == 1 && same_type_as_input0(n); }

}  // namespace

void register_layout(std::vector<OpDef>& t) {
  const OpCategory L = OpCategory::kLayout;
  t.push_back({"Reshape", kMinOpset, kMaxOpset, L, infer_reshape, eval_reshape, noop_view});
  for (const char* v : {"Flatten", "Squeeze", "Unsqueeze"})
    t.push_back({v, kMinOpset, kMaxOpset, L, infer_view, eval_view, noop_view});
  t.push_back({"Transpose", kMinOpset, kMaxOpset, L, infer_transpose, eval_transpose, noop_transpose});
  t.push_back({"Concat", kMinOpset, kMaxOpset, L, infer_concat, eval_concat, noop_concat});
  t.push_back({"Split", kMinOpset, kMaxOpset, L, infer_split, eval_split});
  t.push_back({"Slice", kMinOpset, kMaxOpset, L, infer_slice, eval_slice, noop_slice});
  t.push_back({"Expand", kMinOpset, kMaxOpset, L, infer_expand, eval_expand, noop_view});
  t.push_back({"Tile", kMinOpset, kMaxOpset, L, infer_tile, eval_tile, noop_view});
  t.push_back({"Pad", kMinOpset, kMaxOpset, L, infer_pad, eval_pad, noop_pad});
  t.push_back({"Trilu", 14, kMaxOpset, OpCategory::kElementwise, infer_trilu, eval_trilu});
  t.push_back({"Identity", kMinOpset, kMaxOpset, L, same_as_input0, copy_input0, noop_view});
  t.push_back({"Dropout", kMinOpset, kMaxOpset, L, infer_dropout, eval_dropout, noop_view});
}

}  // namespace stitch::ops
