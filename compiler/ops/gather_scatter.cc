// Indexing ops: Gather, GatherElements, GatherND, ScatterND, ScatterElements, ReverseSequence,
// Compress, and the compiler's own StitchIndexCheck.
// Negative indices count from the end; an index out of range is an error at
// evaluation (never a read outside the tensor).
#include <algorithm>
#include <cstring>

#include "ops/index_check.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {
namespace {

StatusOr<int64_t> fix_index(const Node& n, int64_t i, int64_t dim) {
  if (i < -dim || i >= dim)
    return node_error(n, fmt::format("index {} is out of range for an axis of size {}", i, dim));
  return i < 0 ? i + dim : i;
}

Status require_int_indices(const InferContext& ctx, size_t i) {
  DType t = ctx.dtype(i);
  if (t != DType::kI64 && t != DType::kI32)
    return ctx.error(fmt::format("indices must be i32 or i64, got {}", dtype_name(t)));
  return Status::ok();
}

// ---- Gather ----------------------------------------------------------------------

Status infer_gather(InferContext& ctx) {
  RETURN_IF_ERROR(require_int_indices(ctx, 1));
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(ctx.node(), ctx.node().attr_int("axis", 0), ctx.rank(0)));
  if (ctx.rank(0) == 0) return ctx.error("cannot gather from a scalar");
  const Dims& x = ctx.dims(0);
  Dims d(x.begin(), x.begin() + axis);
  d.insert(d.end(), ctx.dims(1).begin(), ctx.dims(1).end());
  d.insert(d.end(), x.begin() + axis + 1, x.end());
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_gather(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const Tensor& idx = *in[1];
  int64_t axis = *norm_axis(n, n.attr_int("axis", 0), x.rank());
  int64_t outer = 1, inner = 1, dim = x.dims()[axis];
  for (int64_t i = 0; i < axis; ++i) outer *= x.dims()[i];
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.dims()[i];
  Dims d(x.dims().begin(), x.dims().begin() + axis);
  d.insert(d.end(), idx.dims().begin(), idx.dims().end());
  d.insert(d.end(), x.dims().begin() + axis + 1, x.dims().end());
  Tensor y(x.dtype(), d);
  const int64_t esz = dtype_size(x.dtype()), m = idx.size();
  std::vector<int64_t> iv = idx.to_i64();
  for (auto& i : iv) { ASSIGN_OR_RETURN(i, fix_index(n, i, dim)); }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j)
      std::memcpy(y.data() + ((o * m + j) * inner) * esz, x.data() + ((o * dim + iv[j]) * inner) * esz,
                  inner * esz);
  out[0] = std::move(y);
  return Status::ok();
}

// ---- GatherElements / ScatterElements -----------------------------------------------------

Status infer_gather_elements(InferContext& ctx) {
  RETURN_IF_ERROR(require_int_indices(ctx, 1));
  RETURN_IF_ERROR(norm_axis(ctx.node(), ctx.node().attr_int("axis", 0), ctx.rank(0)).status());
  if (ctx.rank(1) != ctx.rank(0)) return ctx.error("indices must have the data's rank");
  ctx.set_output(0, ctx.dtype(0), ctx.dims(1));
  return Status::ok();
}

// Offset in `x` of element `i` of `idx` (same rank), replacing the coordinate on `axis`.
template <typename F>
Status for_each_element_index(const Node& n, const Tensor& x, const Tensor& idx, int64_t axis, F f) {
  Dims xs = strides_of(x.dims());
  const int64_t r = idx.rank();
  std::vector<int64_t> pos(static_cast<size_t>(r), 0);
  for (int64_t i = 0; i < idx.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t k, fix_index(n, idx.get_i64(i), x.dims()[axis]));
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d) off += (d == axis ? k : pos[d]) * xs[d];
    f(i, off);
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++pos[d] < idx.dims()[d]) break;
      pos[d] = 0;
    }
  }
  return Status::ok();
}

Status eval_gather_elements(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  int64_t axis = *norm_axis(n, n.attr_int("axis", 0), x.rank());
  Tensor y(x.dtype(), in[1]->dims());
  const int esz = dtype_size(x.dtype());
  RETURN_IF_ERROR(for_each_element_index(n, x, *in[1], axis, [&](int64_t i, int64_t off) {
    std::memcpy(y.data() + i * esz, x.data() + off * esz, esz);
  }));
  out[0] = std::move(y);
  return Status::ok();
}

Status check_reduction(const InferContext& ctx) {
  std::string r = ctx.node().attr_string("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return ctx.error(fmt::format("unknown reduction '{}'", r));
  return Status::ok();
}

void scatter_store(Tensor& y, int64_t off, const Tensor& upd, int64_t i, const std::string& red) {
  if (red == "none") {
    const int esz = dtype_size(y.dtype());
    std::memcpy(y.data() + off * esz, upd.data() + i * esz, esz);
    return;
  }
  if (is_float(y.dtype())) {
    double a = y.get_f64(off), b = upd.get_f64(i);
    y.set_f64(off, red == "add" ? a + b : red == "mul" ? a * b : red == "max" ? std::max(a, b) : std::min(a, b));
  } else {  // sums and products wrap; uint64 (held as int64) compares as unsigned
    const uint64_t a = static_cast<uint64_t>(y.get_i64(off)), b = static_cast<uint64_t>(upd.get_i64(i));
    const bool below = y.dtype() == DType::kU64 ? a < b : static_cast<int64_t>(a) < static_cast<int64_t>(b);
    const uint64_t r = red == "add"   ? a + b
                       : red == "mul" ? a * b
                       : red == "max" ? (below ? b : a)
                                      : (below ? a : b);
    y.set_i64(off, static_cast<int64_t>(r));
  }
}

Status infer_scatter_elements(InferContext& ctx) {
  RETURN_IF_ERROR(require_int_indices(ctx, 1));
  RETURN_IF_ERROR(check_reduction(ctx));
  RETURN_IF_ERROR(norm_axis(ctx.node(), ctx.node().attr_int("axis", 0), ctx.rank(0)).status());
  if (ctx.dims(1) != ctx.dims(2)) return ctx.error("indices and updates must have the same shape");
  if (ctx.rank(1) != ctx.rank(0)) return ctx.error("indices must have the data's rank");
  return same_as_input0(ctx);
}

Status eval_scatter_elements(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  Tensor y = *in[0];
  int64_t axis = *norm_axis(n, n.attr_int("axis", 0), y.rank());
  std::string red = n.attr_string("reduction", "none");
  RETURN_IF_ERROR(for_each_element_index(n, *in[0], *in[1], axis, [&](int64_t i, int64_t off) {
    scatter_store(y, off, *in[2], i, red);
  }));
  out[0] = std::move(y);
  return Status::ok();
}

// ---- GatherND / ScatterND -------------------------------------------------------------------

Status infer_gather_nd(InferContext& ctx) {
  RETURN_IF_ERROR(require_int_indices(ctx, 1));
  int64_t b = ctx.node().attr_int("batch_dims", 0);
  const Dims& x = ctx.dims(0);
  const Dims& ix = ctx.dims(1);
  if (ix.empty()) return ctx.error("indices must have rank 1 or more");
  int64_t k = ix.back();
  if (b < 0 || b >= static_cast<int64_t>(ix.size()) || b + k > static_cast<int64_t>(x.size()))
    return ctx.error("indices' last dimension and batch_dims do not fit the data's rank");
  if (!std::equal(x.begin(), x.begin() + b, ix.begin()))
    return ctx.error(fmt::format(
        "with batch_dims {} the data's leading axes {} and the indices' {} must be equal", b,
        dims_to_string(Dims(x.begin(), x.begin() + b)), dims_to_string(Dims(ix.begin(), ix.begin() + b))));
  Dims d(ix.begin(), ix.end() - 1);
  d.insert(d.end(), x.begin() + b + k, x.end());
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_gather_nd(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const Tensor& ix = *in[1];
  int64_t b = n.attr_int("batch_dims", 0), k = ix.dims().back();
  Dims xs = strides_of(x.dims());
  int64_t batch = 1;
  for (int64_t i = 0; i < b; ++i) batch *= x.dims()[i];
  int64_t slice = 1;
  for (int64_t i = b + k; i < x.rank(); ++i) slice *= x.dims()[i];
  int64_t tuples = ix.size() / std::max<int64_t>(k, 1) / std::max<int64_t>(batch, 1);
  if (k == 0) tuples = ix.size() == 0 ? num_elements(Dims(ix.dims().begin() + b, ix.dims().end() - 1)) : tuples;
  Dims d(ix.dims().begin(), ix.dims().end() - 1);
  d.insert(d.end(), x.dims().begin() + b + k, x.dims().end());
  Tensor y(x.dtype(), d);
  const int64_t esz = dtype_size(x.dtype());
  int64_t batch_stride = b > 0 ? xs[b - 1] : x.size();
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = bi * batch_stride;
      for (int64_t j = 0; j < k; ++j) {
        ASSIGN_OR_RETURN(int64_t c, fix_index(n, ix.get_i64((bi * tuples + t) * k + j), x.dims()[b + j]));
        off += c * xs[b + j];
      }
      std::memcpy(y.data() + (bi * tuples + t) * slice * esz, x.data() + off * esz, slice * esz);
    }
  out[0] = std::move(y);
  return Status::ok();
}

Status infer_scatter_nd(InferContext& ctx) {
  RETURN_IF_ERROR(require_int_indices(ctx, 1));
  RETURN_IF_ERROR(check_reduction(ctx));
  const Dims& x = ctx.dims(0);
  const Dims& ix = ctx.dims(1);
  if (ix.empty() || ix.back() > static_cast<int64_t>(x.size()))
    return ctx.error("indices' last dimension exceeds the data's rank");
  Dims want(ix.begin(), ix.end() - 1);
  want.insert(want.end(), x.begin() + ix.back(), x.end());
  if (ctx.dims(2) != want)
    return ctx.error(fmt::format("updates must have shape {}, got {}", dims_to_string(want),
                                 dims_to_string(ctx.dims(2))));
  return same_as_input0(ctx);
}

Status eval_scatter_nd(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  Tensor y = *in[0];
  const Tensor& ix = *in[1];
  const Tensor& upd = *in[2];
  std::string red = n.attr_string("reduction", "none");
  int64_t k = ix.dims().back();
  Dims xs = strides_of(y.dims());
  int64_t slice = 1;
  for (int64_t i = k; i < y.rank(); ++i) slice *= y.dims()[i];
  int64_t tuples = k ? ix.size() / k : 0;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      ASSIGN_OR_RETURN(int64_t c, fix_index(n, ix.get_i64(t * k + j), y.dims()[j]));
      off += c * xs[j];
    }
    for (int64_t e = 0; e < slice; ++e) scatter_store(y, off + e, upd, t * slice + e, red);
  }
  out[0] = std::move(y);
  return Status::ok();
}

Status infer_reverse_sequence(InferContext& ctx) {
  if (ctx.dtype(1) != DType::kI64)
    return ctx.error(fmt::format("its sequence_lens is {}; ONNX takes int64", dtype_name(ctx.dtype(1))));
  ASSIGN_OR_RETURN(ReverseSequenceSpec s, reverse_sequence_spec(ctx.node(), ctx.dims(0), ctx.dims(1)));
  if (const Tensor* lens = ctx.constant(1))
    RETURN_IF_ERROR(refuse_outside(
        ctx.node(), sequence_lens_bounds(ctx.dims(0)[static_cast<size_t>(s.time_axis)]), lens->to_i64()));
  return same_as_input0(ctx);
}

Status eval_reverse_sequence(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(ReverseSequenceSpec s, reverse_sequence_spec(n, x.dims(), in[1]->dims()));
  const std::vector<int64_t> lens = in[1]->to_i64();
  const int64_t steps = x.dims()[static_cast<size_t>(s.time_axis)];
  RETURN_IF_ERROR(refuse_outside(n, sequence_lens_bounds(steps), lens));
  const Dims xs = strides_of(x.dims());
  const int64_t inner = xs[1], esz = dtype_size(x.dtype());
  Tensor y(x.dtype(), x.dims());
  // Axes 0 and 1 are time and batch in some order; everything after them moves as one block.
  for (int64_t a = 0; a < x.dims()[0]; ++a)
    for (int64_t b = 0; b < x.dims()[1]; ++b) {
      const int64_t t = s.time_axis == 0 ? a : b, entry = s.time_axis == 0 ? b : a;
      const int64_t from = reversed_step(t, lens[static_cast<size_t>(entry)]);
      const int64_t src = s.time_axis == 0 ? from * xs[0] + b * xs[1] : a * xs[0] + from * xs[1];
      std::memcpy(y.data() + (a * xs[0] + b * xs[1]) * esz, x.data() + src * esz,
                  static_cast<size_t>(inner * esz));
    }
  out[0] = std::move(y);
  return Status::ok();
}

}  // namespace

StatusOr<ReverseSequenceSpec> reverse_sequence_spec(const Node& n, const Dims& x, const Dims& lens) {
  ReverseSequenceSpec s{n.attr_int("time_axis", 0), n.attr_int("batch_axis", 1)};
  if (!((s.time_axis == 0 && s.batch_axis == 1) || (s.time_axis == 1 && s.batch_axis == 0)))
    return node_error(n, fmt::format("time_axis {} and batch_axis {} must be 0 and 1, in either order",
                                     s.time_axis, s.batch_axis));
  if (x.size() < 2)
    return node_error(n, fmt::format("its input {} needs a time and a batch axis", dims_to_string(x)));
  if (lens.size() != 1 || lens[0] != x[static_cast<size_t>(s.batch_axis)])
    return node_error(n, fmt::format("sequence_lens has shape {}; it holds one length per batch entry ([{}])",
                                     dims_to_string(lens), x[static_cast<size_t>(s.batch_axis)]));
  return s;
}

StatusOr<std::vector<int64_t>> compress_positions(const Node& n, const Tensor& condition, int64_t length) {
  if (condition.dtype() != DType::kBool || condition.rank() != 1)
    return node_error(n, fmt::format("its condition is {} of shape {}; it must be a 1-D bool tensor",
                                     dtype_name(condition.dtype()), dims_to_string(condition.dims())));
  if (length >= 0 && condition.size() > length)
    return node_error(
        n, fmt::format("its condition has {} values, more than the {} {} it selects from", condition.size(),
                       length, n.has_attr("axis") ? "slices along its axis" : "elements of its input"));
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < condition.size(); ++i)
    if (condition.get_i64(i) != 0) kept.push_back(i);
  return kept;
}

namespace {

// The axis Compress selects along, or nullopt (x flattened), and the length there.
StatusOr<std::pair<std::optional<int64_t>, int64_t>> compress_axis(const Node& n, const Dims& x) {
  if (!n.has_attr("axis")) return std::pair<std::optional<int64_t>, int64_t>{std::nullopt, num_elements(x)};
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(x.size())));
  return std::pair<std::optional<int64_t>, int64_t>{axis, x[static_cast<size_t>(axis)]};
}

Status infer_compress(InferContext& ctx) {
  const Tensor* condition = ctx.constant(1);
  if (!condition) return run_time_operand_error(ctx, 1, "condition (it decides the output's shape)");
  const Dims& x = ctx.dims(0);
  ASSIGN_OR_RETURN(auto along, compress_axis(ctx.node(), x));
  ASSIGN_OR_RETURN(std::vector<int64_t> kept, compress_positions(ctx.node(), *condition, along.second));
  Dims d{static_cast<int64_t>(kept.size())};
  if (along.first) {
    d = x;
    d[static_cast<size_t>(*along.first)] = static_cast<int64_t>(kept.size());
  }
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

// A Gather of the kept positions along the axis, or of x flattened (Gather's axis, absent, is 0).
Status eval_compress(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(auto along, compress_axis(n, x.dims()));
  ASSIGN_OR_RETURN(std::vector<int64_t> kept, compress_positions(n, *in[1], along.second));
  const Tensor from = along.first ? x : x.reshaped({x.size()});
  const Tensor at = Tensor::vector_i64(kept);
  const std::vector<const Tensor*> args{&from, &at};
  return eval_gather(n, args, out);
}

// ---- StitchIndexCheck (index_check.h) -------------------------------------------------------

Status infer_index_check(InferContext& ctx) {
  if (ctx.node().attr_int("nonzero", 0) == 0)
    RETURN_IF_ERROR(require_int_indices(ctx, 0));
  else if (!is_int(ctx.dtype(0)) || ctx.dtype(0) == DType::kBool)  // a divisor: any integer type
    return Status::internal(
        fmt::format("{} checks a divisor of type {}", ctx.node().describe(), dtype_name(ctx.dtype(0))));
  for (const char* k : {"min", "max"})
    if (auto it = ctx.node().attrs.find(k);
        it == ctx.node().attrs.end() || !std::holds_alternative<int64_t>(it->second))
      return Status::internal(fmt::format("{} lacks its bound '{}'", ctx.node().describe(), k));
  return same_as_input0(ctx);
}

Status eval_index_check(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  RETURN_IF_ERROR(refuse_outside(n, index_check_bounds(n), in[0]->to_i64()));
  out[0] = *in[0];
  return Status::ok();
}

}  // namespace

void register_gather_scatter(std::vector<OpDef>& t) {
  t.push_back({"Compress", kMinOpset, kMaxOpset, OpCategory::kLayout, infer_compress, eval_compress});
  t.push_back({"Gather", kMinOpset, kMaxOpset, OpCategory::kLayout, infer_gather, eval_gather});
  t.push_back({"GatherElements", kMinOpset, kMaxOpset, OpCategory::kLayout, infer_gather_elements,
               eval_gather_elements});
  t.push_back({"GatherND", kMinOpset, kMaxOpset, OpCategory::kLayout, infer_gather_nd, eval_gather_nd});
  t.push_back({"ScatterElements", kMinOpset, kMaxOpset, OpCategory::kLayout, infer_scatter_elements,
               eval_scatter_elements});
  t.push_back({"ScatterND", kMinOpset, kMaxOpset, OpCategory::kLayout, infer_scatter_nd, eval_scatter_nd});
  t.push_back({"ReverseSequence", kMinOpset, kMaxOpset, OpCategory::kLayout, infer_reverse_sequence,
               eval_reverse_sequence});
  t.push_back({kIndexCheck, kMinOpset, kMaxOpset, OpCategory::kElementwise, infer_index_check,
               eval_index_check, nullptr, /*internal=*/true});
}

}  // namespace stitch::ops
