// Cast and CastLike (every supported type to every other: from a float to an integer saturated,
// NaN as 0; integers wrapped into a narrower type) and BitCast (opset 26: the same bytes read as
// another type of the same width).
#include <cstring>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {
namespace {

Status infer_cast(InferContext& ctx) {
  DType to;
  if (ctx.node().op_type == "CastLike") {
    to = ctx.dtype(1);
  } else {
    int64_t code = ctx.node().attr_int("to", 0);
    auto t = dtype_from_onnx(static_cast<int>(code));
    if (!t)
      return ctx.error(
          fmt::format("casts to {}, which stitch does not support", onnx_dtype_name(static_cast<int>(code))));
    to = *t;
  }
  ctx.set_output(0, to, ctx.dims(0));
  return Status::ok();
}

Status eval_cast(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  DType to =
      n.op_type == "CastLike" ? in[1]->dtype() : *dtype_from_onnx(static_cast<int>(n.attr_int("to", 0)));
  const Tensor& x = *in[0];
  Tensor y(to, x.dims());
  const bool src_float = is_float(x.dtype()), u64 = x.dtype() == DType::kU64;
  // Between float32, float16 and bfloat16 through float alone, not double: a signaling NaN then
  // keeps its bits as the kernels keep them (stitch_device.cuh), where a double would quiet it.
  auto narrow_float = [](DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; };
  if (narrow_float(x.dtype()) && narrow_float(to)) {
    for (int64_t i = 0; i < x.size(); ++i) y.set_f32(i, x.get_f32(i));
    out[0] = std::move(y);
    return Status::ok();
  }
  for (int64_t i = 0; i < x.size(); ++i) {
    if (src_float) {
      y.set_f64(i, x.get_f64(i));  // to an integer: saturated, NaN as 0 (set_f64)
    } else if (is_float(to) && to != DType::kF64) {
      // An integer rounded once to float, as C's conversion (and the kernels, and PyTorch) round
      // it: through a double first, a value past 2^53 would be rounded twice. A float16 or bfloat16
      // is then that float rounded, as the kernels store it.
      const int64_t v = x.get_i64(i);
      y.set_f64(i, u64 ? static_cast<float>(static_cast<uint64_t>(v)) : static_cast<float>(v));
    } else if (u64 && is_float(to)) {
      y.set_f64(i, x.get_f64(i));
    } else {
      y.set_i64(i, x.get_i64(i));
    }
  }
  out[0] = std::move(y);
  return Status::ok();
}

Status infer_bitcast(InferContext& ctx) {
  const int64_t code = ctx.node().attr_int("to", 0);
  auto to = dtype_from_onnx(static_cast<int>(code));
  if (!to)
    return ctx.error(fmt::format("bit-casts to {}, which stitch does not support",
                                 onnx_dtype_name(static_cast<int>(code))));
  const DType from = ctx.dtype(0);
  if (dtype_size(from) != dtype_size(*to))
    return ctx.error(fmt::format("bit-casts {} ({} bytes) to {} ({} bytes): BitCast needs types of one width",
                                 dtype_name(from), dtype_size(from), dtype_name(*to), dtype_size(*to)));
  ctx.set_output(0, *to, ctx.dims(0));
  return Status::ok();
}

Status eval_bitcast(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const DType to = *dtype_from_onnx(static_cast<int>(n.attr_int("to", 0)));
  const Tensor& x = *in[0];
  Tensor y(to, x.dims());
  if (x.byte_size() > 0) std::memcpy(y.data(), x.data(), static_cast<size_t>(x.byte_size()));
  if (to == DType::kBool)  // a byte read as a bool: any bit set is true
    for (int64_t i = 0; i < y.size(); ++i) y.data()[i] = y.data()[i] != 0;
  out[0] = std::move(y);
  return Status::ok();
}

}  // namespace

void register_casts(std::vector<OpDef>& t) {
  t.push_back(
      {"Cast", kMinOpset, kMaxOpset, OpCategory::kElementwise, infer_cast, eval_cast, same_type_as_input0});
  t.push_back(
      {"CastLike", 15, kMaxOpset, OpCategory::kElementwise, infer_cast, eval_cast, same_type_as_input0});
  t.push_back(
      {"BitCast", 26, kMaxOpset, OpCategory::kElementwise, infer_bitcast, eval_bitcast, same_type_as_input0});
}

}  // namespace stitch::ops
