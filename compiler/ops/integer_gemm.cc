// Integer GEMMs and convolutions, as ONNX Runtime's quantizer writes them: MatMulInteger after a
// DynamicQuantizeLinear (its dynamic quantization of transformers), QLinearMatMul and QLinearConv
// (its static quantization in the operator format), ConvInteger. Their shape rules, the checks of
// their scales and zero points (IntegerGemmSpec), and a reference that subtracts the zero points,
// multiplies with MatMul's or Conv's reference (float64 sums of integers: exact), and requantizes
// as ONNX's reference does, in float64 with the scales' ratio rounded in their type.
#include <cmath>
#include <tuple>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

namespace {

bool int8_type(DType t) { return t == DType::kI8 || t == DType::kU8; }

// What a scale or zero point covers.
enum class Along { kTensor, kRows, kColumns, kChannels };

// Input `i`'s role name in node `n`, for errors.
std::string input_name(const Node& n, int i) {
  static const char* const kMatMul[] = {"A", "B", "a_zero_point", "b_zero_point"};
  static const char* const kConv[] = {"x", "w", "x_zero_point", "w_zero_point"};
  static const char* const kQMatMul[] = {"a",       "a_scale",      "a_zero_point", "b",
                                         "b_scale", "b_zero_point", "y_scale",      "y_zero_point"};
  static const char* const kQConv[] = {
      "x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point", "B"};
  if (n.op_type == "MatMulInteger") return kMatMul[i];
  if (n.op_type == "ConvInteger") return kConv[i];
  if (n.op_type == "QLinearMatMul") return kQMatMul[i];
  return kQConv[i];
}

// Checks parameter `i` of shape `p` (`len` values along `along`: M rows, N columns or M channels)
// and records its broadcast shapes against its operand (rank `operand_rank`) and the output.
Status param_shapes(const Node& n, int i, const Dims& p, Along along, int64_t len, size_t operand_rank,
                    const Dims& out, IntegerGemmSpec& s) {
  for (int64_t d : p)
    if (d < 0)
      return node_error(n, fmt::format("needs the shape of {} known at compile time", input_name(n, i)));
  if (num_elements(p) == 1) {
    s.on_operand[i] = s.on_output[i] = {};
    return Status::ok();
  }
  const bool vector = p.size() == 1 && (len < 0 || p[0] == len);
  if (along == Along::kChannels && vector) {
    s.on_operand[i] = Dims(operand_rank, 1);
    s.on_operand[i][0] = p[0];
    s.on_output[i] = Dims(out.size() - 1, 1);
    s.on_output[i][0] = p[0];
    return Status::ok();
  }
  if (along == Along::kRows && vector) {
    s.on_operand[i] = s.on_output[i] = {p[0], 1};
    return Status::ok();
  }
  if (along == Along::kColumns && vector) {
    s.on_operand[i] = s.on_output[i] = p;
    return Status::ok();
  }
  // The N-D forms: [..., M, 1] per row, [..., 1, N] per column, broadcasting over the batch.
  const size_t r = p.size();
  const bool rows = along == Along::kRows && r >= 2 && p[r - 1] == 1 && (len < 0 || p[r - 2] == len);
  const bool cols = along == Along::kColumns && r >= 2 && p[r - 2] == 1 && (len < 0 || p[r - 1] == len);
  if ((rows || cols) && r <= out.size() && broadcast_dims(p, out) == out) {
    s.on_operand[i] = s.on_output[i] = p;
    return Status::ok();
  }
  if (along == Along::kTensor)
    return node_error(n, fmt::format("{} has shape {}; it must be one value (per tensor)", input_name(n, i),
                                     dims_to_string(p)));
  static const char* const kPer[] = {"", "row of the product", "column of the product", "output channel"};
  return node_error(n, fmt::format("{} has shape {}; it must be one value, or one per {} ({} values)",
                                   input_name(n, i), dims_to_string(p), kPer[static_cast<int>(along)], len));
}

}  // namespace

StatusOr<IntegerGemmSpec> integer_gemm_spec(const Node& n, const std::vector<QuantOperand>& in) {
  IntegerGemmSpec s;
  s.conv = n.op_type == "ConvInteger" || n.op_type == "QLinearConv";
  s.linear = n.op_type == "QLinearMatMul" || n.op_type == "QLinearConv";
  if (s.linear) {
    s.a_scale = 1, s.a_zp = 2, s.b = 3, s.b_scale = 4, s.b_zp = 5, s.y_scale = 6, s.y_zp = 7;
    s.bias = n.op_type == "QLinearConv" ? 8 : -1;
  } else {
    s.a_zp = 2, s.b_zp = 3;
  }
  auto given = [&](int i) { return i >= 0 && static_cast<size_t>(i) < in.size() && in[i].dims; };
  for (int* role : {&s.a_scale, &s.a_zp, &s.b_scale, &s.b_zp, &s.y_scale, &s.y_zp, &s.bias})
    if (!given(*role)) *role = -1;
  for (int i : {s.a, s.b})
    if (!given(i)) return node_error(n, fmt::format("needs its input {}", input_name(n, i)));
  if (s.linear)
    for (int i : {s.a_scale, s.b_scale})
      if (i < 0) return node_error(n, "needs its scales");
  if (s.linear && s.y_scale < 0) return node_error(n, "needs its input y_scale");

  // Types: int8 or uint8 operands, zero points of their operand's type, float scales, int32 bias.
  for (int i : {s.a, s.b})
    if (!int8_type(in[i].type))
      return node_error(n, fmt::format("{} is {}; {} multiplies int8 or uint8 tensors (a float tensor is "
                                       "quantized first, e.g. by DynamicQuantizeLinear)",
                                       input_name(n, i), dtype_name(in[i].type), n.op_type));
  for (auto [zp, of] : {std::pair{s.a_zp, s.a}, std::pair{s.b_zp, s.b}})
    if (zp >= 0 && in[zp].type != in[of].type)
      return node_error(
          n, fmt::format("{} is {} but {} is {}; a zero point has its tensor's type", input_name(n, zp),
                         dtype_name(in[zp].type), input_name(n, of), dtype_name(in[of].type)));
  // QLinearMatMul-21 takes float16 and bfloat16 scales too; QLinearConv has one version, float32.
  const bool half_scales = n.op_type == "QLinearMatMul" && n.opset >= 21;
  for (int i : {s.a_scale, s.b_scale, s.y_scale})
    if (i >= 0 &&
        (!is_float(in[i].type) || in[i].type == DType::kF64 || (!half_scales && in[i].type != DType::kF32)))
      return node_error(n, fmt::format("{} is {}; scales are float32{}", input_name(n, i),
                                       dtype_name(in[i].type), half_scales ? ", float16 or bfloat16" : ""));
  if (s.y_zp >= 0 && !int8_type(in[s.y_zp].type))
    return node_error(
        n, fmt::format("y_zero_point is {}; the output is int8 or uint8", dtype_name(in[s.y_zp].type)));
  if (s.bias >= 0 && (in[s.bias].type != DType::kI32 || in[s.bias].dims->size() != 1))
    return node_error(n, fmt::format("its bias B is {} of shape {}; it must be a 1-D int32 tensor (the "
                                     "bias quantized with scale x_scale * w_scale)",
                                     dtype_name(in[s.bias].type), dims_to_string(*in[s.bias].dims)));

  // Shapes, and what each parameter covers.
  const Dims &ad = *in[s.a].dims, &bd = *in[s.b].dims;
  int64_t rows = 1, cols = 1;
  if (s.conv) {
    ASSIGN_OR_RETURN(Window w, conv_window(n, ad, bd));
    s.out_dims = {ad[0], bd[0]};
    s.out_dims.insert(s.out_dims.end(), w.out.begin(), w.out.end());
    s.k = bd[1] * num_elements(w.kernel);
    cols = bd[0];
  } else {
    ASSIGN_OR_RETURN(MatMulShape m, matmul_shape(n, ad, bd));
    s.out_dims = m.out;
    s.k = m.k;
    rows = ad.size() > 1 ? m.m : 1;
    cols = bd.size() > 1 ? m.n : 1;
  }
  const Along a_along = s.conv ? Along::kTensor : Along::kRows;
  const Along b_along = s.conv ? Along::kChannels : Along::kColumns;
  for (int i : {s.a_scale, s.a_zp})
    if (i >= 0) RETURN_IF_ERROR(param_shapes(n, i, *in[i].dims, a_along, rows, ad.size(), s.out_dims, s));
  for (int i : {s.b_scale, s.b_zp, s.bias})
    if (i >= 0) RETURN_IF_ERROR(param_shapes(n, i, *in[i].dims, b_along, cols, bd.size(), s.out_dims, s));
  for (int i : {s.y_scale, s.y_zp})
    if (i >= 0)
      RETURN_IF_ERROR(param_shapes(n, i, *in[i].dims, a_along, rows, s.out_dims.size(), s.out_dims, s));
  if (s.bias >= 0 && s.on_output[s.bias].empty() && cols != 1)
    return node_error(n, fmt::format("its bias B has shape {}; it holds one value per output channel ({})",
                                     dims_to_string(*in[s.bias].dims), cols));

  if (s.linear) {
    s.out = s.y_zp >= 0 ? in[s.y_zp].type : in[s.a].type;
    std::tie(s.lo, s.hi) = int_range(s.out);
  }
  return s;
}

namespace {

Status infer_integer_gemm(InferContext& ctx) {
  ASSIGN_OR_RETURN(IntegerGemmSpec s, integer_gemm_spec(ctx.node(), quant_operands(ctx)));
  ctx.set_output(0, s.out, s.out_dims);
  return Status::ok();
}

// The values of `p` (shape `pd`) for each element of a tensor of shape `to`.
std::vector<double> broadcast_values(const Tensor& p, const Dims& pd, const Dims& to) {
  const std::vector<double> v = p.to_f64();
  std::vector<double> out(static_cast<size_t>(num_elements(to)));
  BroadcastWalker(to, {broadcast_strides(pd, to)}).run([&](int64_t i, const std::vector<int64_t>& o) {
    out[static_cast<size_t>(i)] = v[static_cast<size_t>(o[0])];
  });
  return out;
}

// Operand `i` less its zero point `zp` (or 0), as float64.
Tensor centered(const IntegerGemmSpec& s, std::span<const Tensor* const> in, int i, int zp) {
  std::vector<double> v = in[i]->to_f64();
  if (zp >= 0) {
    const std::vector<double> z = broadcast_values(*in[zp], s.on_operand.at(zp), in[i]->dims());
    for (size_t j = 0; j < v.size(); ++j) v[j] -= z[j];
  }
  return Tensor::from_f64(DType::kF64, in[i]->dims(), v);
}

Status eval_integer_gemm(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(IntegerGemmSpec s, integer_gemm_spec(n, quant_operands(in)));
  const Tensor a = centered(s, in, s.a, s.a_zp), b = centered(s, in, s.b, s.b_zp);
  std::vector<Tensor> product(1);
  const std::vector<const Tensor*> args{&a, &b};
  RETURN_IF_ERROR(find_op("", s.conv ? "Conv" : "MatMul", kMinOpset)->eval(n, args, product));
  std::vector<double> c = product[0].to_f64();
  if (!s.linear) {
    out[0] = Tensor::from_f64(DType::kI32, s.out_dims, c);
    return Status::ok();
  }
  if (s.bias >= 0) {
    const std::vector<double> bias = broadcast_values(*in[s.bias], s.on_output.at(s.bias), s.out_dims);
    for (size_t j = 0; j < c.size(); ++j) c[j] += bias[j];
  }
  // ONNX's reference: a_scale * b_scale / y_scale in the scales' type, then float64 arithmetic.
  auto values = [&](int i) { return broadcast_values(*in[i], s.on_output.at(i), s.out_dims); };
  const DType st =
      in[s.a_scale]->dtype() == in[s.b_scale]->dtype() && in[s.a_scale]->dtype() == in[s.y_scale]->dtype()
          ? in[s.a_scale]->dtype()
          : DType::kF32;
  const std::vector<double> as = values(s.a_scale), bs = values(s.b_scale), ys = values(s.y_scale);
  const std::vector<double> zp = s.y_zp >= 0 ? values(s.y_zp) : std::vector<double>(c.size(), 0.0);
  std::vector<double> y(c.size());
  for (size_t j = 0; j < c.size(); ++j) {
    const double ratio = round_to(st, round_to(st, as[j] * bs[j]) / ys[j]);
    y[j] = std::clamp(std::nearbyint(c[j] * ratio + zp[j]), s.lo, s.hi);
  }
  out[0] = Tensor::from_f64(s.out, s.out_dims, y);
  return Status::ok();
}

}  // namespace

void register_integer_gemm(std::vector<OpDef>& t) {
  for (const char* op : {"MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv"})
    t.push_back({op, kMinOpset, kMaxOpset, OpCategory::kLibrary, infer_integer_gemm, eval_integer_gemm});
}

}  // namespace stitch::ops
