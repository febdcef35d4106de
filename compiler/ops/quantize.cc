// Linear quantization, as QDQ models (ONNX Runtime's quantizer, quantization-aware exports) carry it
// around each quantized GEMM:
//   DequantizeLinear (11-25)  y = (x - zero_point) * scale, in float32, rounded to the scale's type
//                             (or output_dtype) at the end
//   QuantizeLinear (11-25)    y = clamp(round_half_even(x / scale) + zero_point) to the quantized
//                             type's range, the division in the scale's precision (or `precision`;
//                             float64 for an int32 scale)
//   DynamicQuantizeLinear (11+)  uint8 y with the scale and zero point of x's range widened to
//                             hold 0: scale = (max - min) / 255 (1 / 255 when max = min),
//                             zero_point = round(clamp(-min / scale, 0, 255))
// The scale and zero point cover x as one value, (opset 13) a vector along `axis`, or (opset 21) blocks of
// block_size along `axis` (quant_spec). The quantized types are int8, uint8, int16 and uint16 (and
// int32 for DequantizeLinear); 4-bit, 2-bit and 8-bit float tensors are refused when a model is read.
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

namespace {

bool quantized_int(DType t) {
  return t == DType::kI8 || t == DType::kU8 || t == DType::kI16 || t == DType::kU16;
}

// A float type named by an attribute (output_dtype, precision), 0 meaning "not given".
StatusOr<std::optional<DType>> float_attr(const Node& n, const char* name) {
  const int64_t code = n.attr_int(name, 0);
  if (code == 0) return std::optional<DType>{};
  auto t = dtype_from_onnx(static_cast<int>(code));
  if (!t || !is_float(*t) || *t == DType::kF64)
    return node_error(n, fmt::format("{} {} ({}) is not float, float16 or bfloat16", name, code,
                                     onnx_dtype_name(static_cast<int>(code))));
  return std::optional<DType>{*t};
}

// The grain of a scale of shape `s` over x of shape `x`; fills the spec's grain fields.
Status quant_grain(const Node& n, const Dims& x, const Dims& s, QuantSpec& q) {
  for (int64_t d : s)
    if (d < 0) return node_error(n, "needs its scale's shape known at compile time");
  const int64_t rank = static_cast<int64_t>(x.size());
  q.block = n.opset >= 21 ? n.attr_int("block_size", 0) : 0;
  if (q.block < 0) return node_error(n, fmt::format("block_size must be positive, got {}", q.block));
  if (num_elements(s) == 1) return Status::ok();  // one value for all of x (as ONNX's reference reads it)
  if (n.opset < 13)
    return node_error(n, fmt::format("its scale has shape {}; before opset 13 it is one value for all of x",
                                     dims_to_string(s)));
  ASSIGN_OR_RETURN(q.axis, norm_axis(n, n.attr_int("axis", 1), rank));
  const int64_t dim = x[static_cast<size_t>(q.axis)];
  const std::string shapes = fmt::format("the scale's shape {} against x's shape {} (axis {}",
                                         dims_to_string(s), dims_to_string(x), q.axis);
  if (q.block == 0) {
    if (s.size() != 1 || (dim >= 0 && s[0] != dim))
      return node_error(n, shapes +
                               "): a scale is one value, a vector of x's length along the axis, or (with "
                               "block_size) x's shape with the blocks along the axis");
    q.grain = QuantSpec::Grain::kAxis;
  } else {
    bool ok = static_cast<int64_t>(s.size()) == rank;
    for (int64_t i = 0; ok && i < rank; ++i) {
      const int64_t want = i != q.axis || x[i] < 0 ? x[i] : (x[i] + q.block - 1) / q.block;
      ok = want < 0 || s[i] == want;
    }
    if (!ok)
      return node_error(n, fmt::format("{}, block_size {}): a blocked scale has x's shape with ceil(D / "
                                       "block_size) along the axis",
                                       shapes, q.block));
    q.grain = QuantSpec::Grain::kBlocked;
  }
  return Status::ok();
}

}  // namespace

void QuantSpec::bind(const Dims& x) {
  if (grain == Grain::kTensor) return;
  dim = x[static_cast<size_t>(axis)];
  inner = 1;
  for (size_t i = static_cast<size_t>(axis) + 1; i < x.size(); ++i) inner *= x[i];
  blocks = block > 0 ? (dim + block - 1) / block : dim;
}

int64_t QuantSpec::param_index(int64_t i) const {
  if (grain == Grain::kTensor) return 0;
  const int64_t d = i / inner % dim;
  if (grain == Grain::kAxis) return d;
  return (i / (inner * dim) * blocks + d / block) * inner + i % inner;
}

double round_to(DType t, double v) {
  if (t == DType::kF64) return v;
  const float f = static_cast<float>(v);
  if (t == DType::kF16) return half_bits_to_float(float_to_half_bits(f));
  if (t == DType::kBF16) return bf16_bits_to_float(float_to_bf16_bits(f));
  return f;
}

std::pair<double, double> int_range(DType t) {
  switch (t) {
    case DType::kI8:
      return {-128, 127};
    case DType::kU8:
      return {0, 255};
    case DType::kI16:
      return {-32768, 32767};
    case DType::kU16:
      return {0, 65535};
    default:
      return {-2147483648.0, 2147483647.0};
  }
}

StatusOr<QuantSpec> quant_spec(const Node& n, const std::vector<QuantOperand>& in, bool quantize) {
  if (in.size() < 2 || !in[0].dims || !in[1].dims) return node_error(n, "takes its inputs x and a scale");
  QuantSpec q;
  const QuantOperand &x = in[0], &scale = in[1];
  const QuantOperand* zp = in.size() > 2 && in[2].dims ? &in[2] : nullptr;
  // QuantizeLinear's scale may be int32 (x's type at opset 21, one of its own from opset 23).
  const bool half_or_float = is_float(scale.type) && scale.type != DType::kF64;
  if (!half_or_float && !(quantize && scale.type == DType::kI32))
    return node_error(n, fmt::format("expects a float, float16 or bfloat16 scale{}, got {}",
                                     quantize ? " (or int32)" : "", dtype_name(scale.type)));
  // One value each may differ in rank (ONNX Runtime's quantizer writes a [1] scale and a scalar zero point).
  if (zp && *zp->dims != *scale.dims && !(num_elements(*zp->dims) == 1 && num_elements(*scale.dims) == 1))
    return node_error(n, fmt::format("its zero point's shape {} differs from its scale's {}",
                                     dims_to_string(*zp->dims), dims_to_string(*scale.dims)));
  if (quantize) {
    if (!is_float(x.type) && x.type != DType::kI32)
      return node_error(n, fmt::format("quantizes a float or int32 x, got {}", dtype_name(x.type)));
    const int64_t code = n.opset >= 21 ? n.attr_int("output_dtype", 0) : 0;
    q.q = zp ? zp->type : DType::kU8;
    if (code != 0) {
      auto t = dtype_from_onnx(static_cast<int>(code));
      if (!t)
        return node_error(
            n, fmt::format("output_dtype {} ({}) is not supported: int8, uint8, int16 or uint16", code,
                           onnx_dtype_name(static_cast<int>(code))));
      if (zp && *t != zp->type)
        return node_error(n, fmt::format("output_dtype {} ({}) differs from the zero point's type {}", code,
                                         onnx_dtype_name(static_cast<int>(code)), dtype_name(q.q)));
      q.q = *t;
    }
    if (!quantized_int(q.q))
      return node_error(
          n, fmt::format("quantizing to {} is not supported: int8, uint8, int16 or uint16", dtype_name(q.q)));
    ASSIGN_OR_RETURN(std::optional<DType> precision,
                     n.opset >= 23 ? float_attr(n, "precision") : std::optional<DType>{});
    // The division's precision: `precision`, else the scale's type when x has it too, float32 for
    // mixed float types, float64 for an int32 scale (ONNX's reference divides in numpy's promotion,
    // which gives float64 for int32 over anything, and float32 would round an int32 quotient).
    if (precision)
      q.real = *precision;
    else if (scale.type == DType::kI32)
      q.real = DType::kF64;
    else
      q.real = x.type == scale.type ? x.type : DType::kF32;
  } else {
    if (!quantized_int(x.type) && x.type != DType::kI32)
      return node_error(n,
                        fmt::format("dequantizing {} is not supported: int8, uint8, int16, uint16 or int32",
                                    dtype_name(x.type)));
    if (zp && zp->type != x.type)
      return node_error(n, fmt::format("its zero point is {} but x is {}; they must have one type",
                                       dtype_name(zp->type), dtype_name(x.type)));
    q.q = x.type;
    ASSIGN_OR_RETURN(std::optional<DType> out,
                     n.opset >= 23 ? float_attr(n, "output_dtype") : std::optional<DType>{});
    q.real = out ? *out : scale.type;
  }
  std::tie(q.lo, q.hi) = int_range(q.q);
  RETURN_IF_ERROR(quant_grain(n, *x.dims, *scale.dims, q));
  return q;
}

std::vector<QuantOperand> quant_operands(const InferContext& ctx) {
  std::vector<QuantOperand> in;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    in.push_back(ctx.has_input(i) ? QuantOperand{ctx.dtype(i), &ctx.dims(i)} : QuantOperand{});
  return in;
}

std::vector<QuantOperand> quant_operands(std::span<const Tensor* const> in) {
  std::vector<QuantOperand> ops;
  for (const Tensor* t : in) ops.push_back(t ? QuantOperand{t->dtype(), &t->dims()} : QuantOperand{});
  return ops;
}

namespace {

Status infer_dequantize(InferContext& ctx) {
  ASSIGN_OR_RETURN(QuantSpec q, quant_spec(ctx.node(), quant_operands(ctx), false));
  ctx.set_output(0, q.real, ctx.dims(0));
  return Status::ok();
}

Status infer_quantize(InferContext& ctx) {
  ASSIGN_OR_RETURN(QuantSpec q, quant_spec(ctx.node(), quant_operands(ctx), true));
  ctx.set_output(0, q.q, ctx.dims(0));
  return Status::ok();
}

// Evaluates a QuantizeLinear (`quantize`) or DequantizeLinear element by element: f(x, scale,
// zero point) with the spec's parameters for each element of x.
template <typename F>
Status eval_linear(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out, bool quantize,
                   F f) {
  ASSIGN_OR_RETURN(QuantSpec q, quant_spec(n, quant_operands(in), quantize));
  const Tensor& x = *in[0];
  q.bind(x.dims());
  const std::vector<double> xv = x.to_f64(), scale = in[1]->to_f64();
  const std::vector<double> zp =
      in.size() > 2 && in[2] ? in[2]->to_f64() : std::vector<double>(scale.size(), 0.0);
  std::vector<double> y(xv.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const auto p = static_cast<size_t>(q.param_index(static_cast<int64_t>(i)));
    y[i] = f(q, xv[i], scale[p], zp[p]);
  }
  out[0] = Tensor::from_f64(quantize ? q.q : q.real, x.dims(), y);
  return Status::ok();
}

Status eval_dequantize(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  return eval_linear(n, in, out, false, [](const QuantSpec&, double x, double scale, double zp) {
    return round_to(DType::kF32, (x - zp) * round_to(DType::kF32, scale));
  });
}

Status eval_quantize(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  return eval_linear(n, in, out, true, [](const QuantSpec& q, double x, double scale, double zp) {
    const double ratio = round_to(q.real, round_to(q.real, x) / round_to(q.real, scale));
    return std::clamp(std::nearbyint(ratio) + zp, q.lo, q.hi);
  });
}

Status infer_dynamic_quantize(InferContext& ctx) {
  if (ctx.dtype(0) != DType::kF32)
    return ctx.error(fmt::format("quantizes a float32 x, got {}", dtype_name(ctx.dtype(0))));
  ctx.set_output(0, DType::kU8, ctx.dims(0));
  ctx.set_output(1, DType::kF32, {});
  ctx.set_output(2, DType::kU8, {});
  return Status::ok();
}

Status eval_dynamic_quantize(const Node&, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const std::vector<double> xv = x.to_f64();
  double lo = 0, hi = 0;
  for (double v : xv) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const double scale = round_to(DType::kF32, round_to(DType::kF32, hi == lo ? 1.0 : hi - lo) / 255.0);
  const double zp = std::nearbyint(std::clamp(round_to(DType::kF32, -lo / scale), 0.0, 255.0));
  std::vector<double> y(xv.size());
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = std::clamp(std::nearbyint(round_to(DType::kF32, xv[i] / scale)) + zp, 0.0, 255.0);
  out[0] = Tensor::from_f64(DType::kU8, x.dims(), y);
  if (out.size() > 1) out[1] = Tensor::from_f64(DType::kF32, {}, {scale});
  if (out.size() > 2) out[2] = Tensor::from_f64(DType::kU8, {}, {zp});
  return Status::ok();
}

}  // namespace

void register_quantize(std::vector<OpDef>& t) {
  t.push_back(
      {"DequantizeLinear", kMinOpset, kMaxOpset, OpCategory::kBroadcast, infer_dequantize, eval_dequantize});
  t.push_back(
      {"QuantizeLinear", kMinOpset, kMaxOpset, OpCategory::kBroadcast, infer_quantize, eval_quantize});
  t.push_back({"DynamicQuantizeLinear", kMinOpset, kMaxOpset, OpCategory::kReduction, infer_dynamic_quantize,
               eval_dynamic_quantize});
}

}  // namespace stitch::ops
