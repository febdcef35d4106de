// Unary element-wise ops: math, activations, logic (Not), bit flips (BitwiseNot). Floating types
// compute in double, integer and bool types in int64, then store back to the output type.
#include <cmath>
#include <functional>
#include <string_view>

#include "ops/op_util.h"

namespace stitch::ops {
namespace {

using F64 = std::function<double(double)>;
using I64 = std::function<int64_t(int64_t)>;

struct UnaryRow {
  const char* name;
  int since;
  F64 (*make_f)(const Node&);
  I64 (*make_i)(const Node&);  // null: floating types only
  bool bool_only = false;
  DType out = DType::kUndefined;  // fixed output type (IsNaN...), else input's
};

double erf_(double x) { return std::erf(x); }
// -x as the kernels' integer arithmetic gives it: -(-2^63) is -2^63 (undefined for int64_t).
int64_t wrapped_neg(int64_t x) { return static_cast<int64_t>(0 - static_cast<uint64_t>(x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }
// Shrink of an integer x (ONNX computes x + bias and x - bias in floating point, then converts
// back): in double, truncated toward zero, clamped to [-2^63, 2^64) so that the conversion is
// defined, then wrapped into the type by the store; uint64's above 2^63, held as negative int64s,
// are read as unsigned. The kernels compute the same (codegen/scalar_ops.cc).
I64 shrink_int(const Node& n) {
  const double l = n.attr_float("lambd", 0.5f), b = n.attr_float("bias", 0.0f);
  const bool u64 = n.input(0)->dtype == DType::kU64;
  return [l, b, u64](int64_t x) {
    const double v = u64 ? static_cast<double>(static_cast<uint64_t>(x)) : static_cast<double>(x);
    double r = v < -l ? v + b : (v > l ? v - b : 0.0);
    r = std::fmax(-9223372036854775808.0, std::fmin(r, 18446744073709549568.0));
    return r < 0 ? static_cast<int64_t>(r) : static_cast<int64_t>(static_cast<uint64_t>(r));
  };
}

const UnaryRow kUnary[] = {
    {"Abs", 1, [](const Node&) -> F64 { return [](double x) { return std::fabs(x); }; },
     [](const Node&) -> I64 { return [](int64_t x) { return x < 0 ? wrapped_neg(x) : x; }; }},
    {"Neg", 1, [](const Node&) -> F64 { return [](double x) { return -x; }; },
     [](const Node&) -> I64 { return [](int64_t x) { return wrapped_neg(x); }; }},
    {"Sign", 1,
     [](const Node&) -> F64 {
       return [](double x) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); };
     },
     [](const Node&) -> I64 { return [](int64_t x) { return int64_t((x > 0) - (x < 0)); }; }},
    {"Relu", 1, [](const Node&) -> F64 { return [](double x) { return x > 0 || std::isnan(x) ? x : 0.0; }; },
     [](const Node&) -> I64 { return [](int64_t x) { return x > 0 ? x : int64_t(0); }; }},
    {"Reciprocal", 1, [](const Node&) -> F64 { return [](double x) { return 1.0 / x; }; }, nullptr},
    // Integers only (no make_f): every bit flipped; a narrower type keeps the low bits.
    {"BitwiseNot", 18, nullptr, [](const Node&) -> I64 { return [](int64_t x) { return ~x; }; }},
    {"Sqrt", 1, [](const Node&) -> F64 { return [](double x) { return std::sqrt(x); }; }, nullptr},
    {"Exp", 1, [](const Node&) -> F64 { return [](double x) { return std::exp(x); }; }, nullptr},
    {"Log", 1, [](const Node&) -> F64 { return [](double x) { return std::log(x); }; }, nullptr},
    {"Erf", 1, [](const Node&) -> F64 { return erf_; }, nullptr},
    {"Tanh", 1, [](const Node&) -> F64 { return [](double x) { return std::tanh(x); }; }, nullptr},
    {"Sigmoid", 1, [](const Node&) -> F64 { return sigmoid; }, nullptr},
    {"Softplus", 1, [](const Node&) -> F64 { return softplus; }, nullptr},
    {"Softsign", 1, [](const Node&) -> F64 { return [](double x) { return x / (1 + std::fabs(x)); }; },
     nullptr},
    {"Floor", 1, [](const Node&) -> F64 { return [](double x) { return std::floor(x); }; }, nullptr},
    {"Ceil", 1, [](const Node&) -> F64 { return [](double x) { return std::ceil(x); }; }, nullptr},
    {"Round", 1, [](const Node&) -> F64 { return [](double x) { return std::nearbyint(x); }; }, nullptr},
    {"Sin", 1, [](const Node&) -> F64 { return [](double x) { return std::sin(x); }; }, nullptr},
    {"Cos", 1, [](const Node&) -> F64 { return [](double x) { return std::cos(x); }; }, nullptr},
    {"Tan", 1, [](const Node&) -> F64 { return [](double x) { return std::tan(x); }; }, nullptr},
    {"Asin", 1, [](const Node&) -> F64 { return [](double x) { return std::asin(x); }; }, nullptr},
    {"Acos", 1, [](const Node&) -> F64 { return [](double x) { return std::acos(x); }; }, nullptr},
    {"Atan", 1, [](const Node&) -> F64 { return [](double x) { return std::atan(x); }; }, nullptr},
    {"Sinh", 1, [](const Node&) -> F64 { return [](double x) { return std::sinh(x); }; }, nullptr},
    {"Cosh", 1, [](const Node&) -> F64 { return [](double x) { return std::cosh(x); }; }, nullptr},
    {"Asinh", 1, [](const Node&) -> F64 { return [](double x) { return std::asinh(x); }; }, nullptr},
    {"Acosh", 1, [](const Node&) -> F64 { return [](double x) { return std::acosh(x); }; }, nullptr},
    {"Atanh", 1, [](const Node&) -> F64 { return [](double x) { return std::atanh(x); }; }, nullptr},
    {"LeakyRelu", 1,
     [](const Node& n) -> F64 {
       double a = n.attr_float("alpha", 0.01f);
       return [a](double x) { return x >= 0 ? x : a * x; };
     },
     nullptr},
    {"Elu", 1,
     [](const Node& n) -> F64 {
       double a = n.attr_float("alpha", 1.0f);
       return [a](double x) { return x >= 0 ? x : a * (std::exp(x) - 1); };
     },
     nullptr},
    {"Selu", 1,
     [](const Node& n) -> F64 {
       double a = n.attr_float("alpha", 1.67326319217681884765625f);
       double g = n.attr_float("gamma", 1.05070102214813232421875f);
       return [a, g](double x) { return x > 0 ? g * x : g * a * (std::exp(x) - 1); };
     },
     nullptr},
    {"Celu", 12,
     [](const Node& n) -> F64 {
       double a = n.attr_float("alpha", 1.0f);
       return [a](double x) { return std::max(0.0, x) + std::min(0.0, a * (std::exp(x / a) - 1)); };
     },
     nullptr},
    {"ThresholdedRelu", 1,
     [](const Node& n) -> F64 {
       double a = n.attr_float("alpha", 1.0f);
       return [a](double x) { return x > a ? x : 0.0; };
     },
     nullptr},
    {"Shrink", 9,
     [](const Node& n) -> F64 {
       double l = n.attr_float("lambd", 0.5f), b = n.attr_float("bias", 0.0f);
       return [l, b](double x) { return x < -l ? x + b : (x > l ? x - b : 0.0); };
     },
     shrink_int},
    {"HardSigmoid", 1,
     [](const Node& n) -> F64 {
       double a = n.attr_float("alpha", 0.2f), b = n.attr_float("beta", 0.5f);
       return [a, b](double x) { return std::max(0.0, std::min(1.0, a * x + b)); };
     },
     nullptr},
    {"HardSwish", 14,
     [](const Node&) -> F64 {
       return [](double x) { return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5)); };
     },
     nullptr},
    {"Mish", 18, [](const Node&) -> F64 { return [](double x) { return x * std::tanh(softplus(x)); }; },
     nullptr},
    {"Swish", 24,
     [](const Node& n) -> F64 {
       double a = n.attr_float("alpha", 1.0f);
       return [a](double x) { return x * sigmoid(a * x); };
     },
     nullptr},
    {"Gelu", 20,
     [](const Node& n) -> F64 {
       if (n.attr_string("approximate", "none") == "tanh") {
         return [](double x) {
           return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
         };
       }
       return [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
     },
     nullptr},
    {"Not", 1, nullptr, [](const Node&) -> I64 { return [](int64_t x) { return int64_t(!x); }; }, true},
    {"IsNaN", 1, [](const Node&) -> F64 { return [](double x) { return double(std::isnan(x)); }; }, nullptr,
     false, DType::kBool},
    {"IsInf", 1,
     [](const Node& n) -> F64 {
       bool neg = n.attr_int("detect_negative", 1), pos = n.attr_int("detect_positive", 1);
       return [neg, pos](double x) { return double(std::isinf(x) && (x > 0 ? pos : neg)); };
     },
     nullptr, false, DType::kBool},
};

const UnaryRow& unary_row(const Node& n) {
  for (const auto& r : kUnary)
    if (n.op_type == r.name) return r;
  STITCH_UNREACHABLE("no unary row for {}", n.op_type);
}

// Abs and Sign of an unsigned integer: the value itself, and 1 unless 0.
bool unsigned_identity(const UnaryRow& r) {
  return std::string_view(r.name) == "Abs" || std::string_view(r.name) == "Sign";
}
// Abs, Sign and Shrink take unsigned integers too (ONNX's types for them are every numeric type),
// and an integer-only row (no make_f: BitwiseNot) every integer type.
bool takes_unsigned(const UnaryRow& r) {
  return !r.make_f || unsigned_identity(r) || std::string_view(r.name) == "Shrink";
}

Status infer_unary(InferContext& ctx) {
  const UnaryRow& r = unary_row(ctx.node());
  DType t = ctx.dtype(0);
  if (r.bool_only && t != DType::kBool)
    return ctx.error(fmt::format("expects a bool input, got {}", dtype_name(t)));
  if (!r.bool_only && !r.make_f && !is_int(t))
    return ctx.error(fmt::format("expects an integer input, got {}", dtype_name(t)));
  if (!r.bool_only && !is_float(t) && !(r.make_i && is_signed_int(t)) &&
      !(takes_unsigned(r) && is_unsigned_int(t)))
    return ctx.error(fmt::format("expects a {} input, got {}",
                                 r.make_i ? "floating-point or signed integer" : "floating-point",
                                 dtype_name(t)));
  ctx.set_output(0, r.out == DType::kUndefined ? t : r.out, ctx.dims(0));
  return Status::ok();
}

Status eval_unary(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const UnaryRow& r = unary_row(n);
  const Tensor& x = *in[0];
  Tensor y(r.out == DType::kUndefined ? x.dtype() : r.out, x.dims());
  if (is_float(x.dtype())) {
    F64 f = r.make_f(n);
    for (int64_t i = 0; i < x.size(); ++i) y.set_f64(i, f(x.get_f64(i)));
  } else if (is_unsigned_int(x.dtype()) && unsigned_identity(r)) {
    const bool sign = std::string_view(r.name) == "Sign";
    for (int64_t i = 0; i < x.size(); ++i) y.set_i64(i, sign ? x.get_i64(i) != 0 : x.get_i64(i));
  } else {
    I64 f = r.make_i(n);
    for (int64_t i = 0; i < x.size(); ++i) y.set_i64(i, f(x.get_i64(i)));
  }
  out[0] = std::move(y);
  return Status::ok();
}

}  // namespace

void register_unary(std::vector<OpDef>& t) {
  for (const auto& r : kUnary)
    t.push_back(
        {r.name, std::max(r.since, kMinOpset), kMaxOpset, OpCategory::kElementwise, infer_unary, eval_unary});
}

}  // namespace stitch::ops
