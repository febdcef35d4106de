#include "codegen/scalar_ops.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "codegen/kernel.h"
#include "codegen/node_facts.h"
#include "ops/index_check.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

using Args = std::vector<std::string>;
using ExprFn = std::string (*)(const Node& n, const Args& a, const std::string& ct);

// Math function name for the compute type: expf for float, exp for double.
std::string fn(const std::string& ct, const char* name) {
  return ct == "float" ? std::string(name) + "f" : std::string(name);
}

std::string f_attr(const Node& n, const char* k, float dflt, const std::string& ct) {
  return literal(n.attr_float(k, dflt), ct);
}

bool is_int_type(const std::string& ct) { return ct == "long long" || ct == "unsigned long long"; }

const std::map<std::string, ExprFn>& unary_table() {
  static const std::map<std::string, ExprFn> t = {
      {"Abs", [](const Node&, const Args& a, const std::string& ct) {
         return fmt::format("({0} < ({1})0 ? -{0} : {0})", a[0], ct); }},
      {"Neg", [](const Node&, const Args& a, const std::string&) { return fmt::format("(-{})", a[0]); }},
      {"Sign", [](const Node&, const Args& a, const std::string& ct) {
         return fmt::format("({0} != {0} ? {0} : ({1})(({0} > ({1})0) - ({0} < ({1})0)))", a[0], ct); }},
      {"Relu", [](const Node&, const Args& a, const std::string& ct) {
         return fmt::format("(({0} > ({1})0 || {0} != {0}) ? {0} : ({1})0)", a[0], ct); }},
      {"Reciprocal", [](const Node&, const Args& a, const std::string& ct) {
         return fmt::format("(({})1 / {})", ct, a[0]); }},
      {"Sqrt", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "sqrt") + "(" + a[0] + ")"; }},
      {"Exp", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "exp") + "(" + a[0] + ")"; }},
      {"Log", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "log") + "(" + a[0] + ")"; }},
      {"Erf", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "erf") + "(" + a[0] + ")"; }},
      {"Tanh", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "tanh") + "(" + a[0] + ")"; }},
      {"Sigmoid", [](const Node&, const Args& a, const std::string& ct) {
         return fmt::format("(({0})1 / (({0})1 + {1}(-{2})))", ct, fn(ct, "exp"), a[0]); }},
      {"Softplus", [](const Node&, const Args& a, const std::string& ct) {
         return fmt::format("({0} > ({1})30 ? {0} : {2}({3}({0})))", a[0], ct, fn(ct, "log1p"), fn(ct, "exp")); }},
      {"Softsign", [](const Node&, const Args& a, const std::string& ct) {
         return fmt::format("({0} / (({1})1 + {2}({0})))", a[0], ct, fn(ct, "fabs")); }},
      {"Floor", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "floor") + "(" + a[0] + ")"; }},
      {"Ceil", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "ceil") + "(" + a[0] + ")"; }},
      {"Round", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "rint") + "(" + a[0] + ")"; }},
      {"Sin", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "sin") + "(" + a[0] + ")"; }},
      {"Cos", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "cos") + "(" + a[0] + ")"; }},
      {"Tan", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "tan") + "(" + a[0] + ")"; }},
      {"Asin", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "asin") + "(" + a[0] + ")"; }},
      {"Acos", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "acos") + "(" + a[0] + ")"; }},
      {"Atan", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "atan") + "(" + a[0] + ")"; }},
      {"Sinh", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "sinh") + "(" + a[0] + ")"; }},
      {"Cosh", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "cosh") + "(" + a[0] + ")"; }},
      {"Asinh", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "asinh") + "(" + a[0] + ")"; }},
      {"Acosh", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "acosh") + "(" + a[0] + ")"; }},
      {"Atanh", [](const Node&, const Args& a, const std::string& ct) { return fn(ct, "atanh") + "(" + a[0] + ")"; }},
      {"LeakyRelu", [](const Node& n, const Args& a, const std::string& ct) {
         return fmt::format("({0} >= ({1})0 ? {0} : {2} * {0})", a[0], ct, f_attr(n, "alpha", 0.01f, ct)); }},
      {"Elu", [](const Node& n, const Args& a, const std::string& ct) {
         return fmt::format("({0} >= ({1})0 ? {0} : {2} * ({3}({0}) - ({1})1))", a[0], ct,
                            f_attr(n, "alpha", 1.0f, ct), fn(ct, "exp")); }},
      {"Selu", [](const Node& n, const Args& a, const std::string& ct) {
         return fmt::format("({0} > ({1})0 ? {2} * {0} : {2} * {3} * ({4}({0}) - ({1})1))", a[0], ct,
                            f_attr(n, "gamma", 1.05070102214813232421875f, ct),
                            f_attr(n, "alpha", 1.67326319217681884765625f, ct), fn(ct, "exp")); }},
      {"Celu", [](const Node& n, const Args& a, const std::string& ct) {
         std::string al = f_attr(n, "alpha", 1.0f, ct);
         return fmt::format("({2}(({1})0, {0}) + {3}(({1})0, {4} * ({5}({0} / {4}) - ({1})1)))", a[0], ct,
                            fn(ct, "fmax"), fn(ct, "fmin"), al, fn(ct, "exp")); }},
      {"ThresholdedRelu", [](const Node& n, const Args& a, const std::string& ct) {
         return fmt::format("({0} > {2} ? {0} : ({1})0)", a[0], ct, f_attr(n, "alpha", 1.0f, ct)); }},
      {"Shrink", [](const Node& n, const Args& a, const std::string& ct) {
         if (is_int_type(ct)) {  // in double, as the reference's shrink_int
           const std::string l = f_attr(n, "lambd", 0.5f, "double"), b = f_attr(n, "bias", 0.0f, "double");
           const std::string v = fmt::format("(double)({})", a[0]);
           const std::string r = fmt::format(
               "fmax(-9223372036854775808.0, fmin(({0} < -({1}) ? {0} + ({2}) : ({0} > ({1}) ? {0} - ({2}) : 0.0)), "
               "18446744073709549568.0))",
               v, l, b);
           return fmt::format("(({1})(({0}) < 0.0 ? (long long)({0}) : (long long)(unsigned long long)({0})))", r,
                              ct);
         }
         const std::string l = f_attr(n, "lambd", 0.5f, ct), b = f_attr(n, "bias", 0.0f, ct);
         return fmt::format("({0} < -({2}) ? {0} + ({3}) : ({0} > ({2}) ? {0} - ({3}) : ({1})0))", a[0], ct, l, b); }},
      {"HardSigmoid", [](const Node& n, const Args& a, const std::string& ct) {
         return fmt::format("{2}(({1})0, {3}(({1})1, {4} * {0} + {5}))", a[0], ct, fn(ct, "fmax"), fn(ct, "fmin"),
                            f_attr(n, "alpha", 0.2f, ct), f_attr(n, "beta", 0.5f, ct)); }},
      {"HardSwish", [](const Node&, const Args& a, const std::string& ct) {
         return fmt::format("({0} * {2}(({1})0, {3}(({1})1, {0} / ({1})6 + ({1})0.5)))", a[0], ct, fn(ct, "fmax"),
                            fn(ct, "fmin")); }},
      {"Mish", [](const Node&, const Args& a, const std::string& ct) {
         return fmt::format("({0} * {2}({0} > ({1})30 ? {0} : {3}({4}({0}))))", a[0], ct, fn(ct, "tanh"),
                            fn(ct, "log1p"), fn(ct, "exp")); }},
      {"Swish", [](const Node& n, const Args& a, const std::string& ct) {
         const float alpha = n.attr_float("alpha", 1.0f);
         const std::string ax = alpha == 1.0f ? a[0] : fmt::format("{} * {}", literal(alpha, ct), a[0]);
         return fmt::format("({0} / (({1})1 + {2}(-({3}))))", a[0], ct, fn(ct, "exp"), ax); }},
      {"Gelu", [](const Node& n, const Args& a, const std::string& ct) {
         if (n.attr_string("approximate", "none") == "tanh")
           return fmt::format("(({1})0.5 * {0} * (({1})1 + {2}({3} * ({0} + {4} * {0} * {0} * {0}))))", a[0], ct,
                              fn(ct, "tanh"), literal(std::sqrt(2 / M_PI), ct), literal(0.044715, ct));
         return fmt::format("(({1})0.5 * {0} * (({1})1 + {2}({0} * {3})))", a[0], ct, fn(ct, "erf"),
                            literal(1 / std::sqrt(2.0), ct)); }},
      {"Not", [](const Node&, const Args& a, const std::string&) { return fmt::format("(!{})", a[0]); }},
      {"BitwiseNot", [](const Node&, const Args& a, const std::string&) { return fmt::format("(~{})", a[0]); }},
      {"IsNaN", [](const Node&, const Args& a, const std::string&) { return fmt::format("({0} != {0})", a[0]); }},
      {"IsInf", [](const Node& n, const Args& a, const std::string&) {
         bool neg = n.attr_int("detect_negative", 1) != 0, pos = n.attr_int("detect_positive", 1) != 0;
         return fmt::format("(isinf({0}) && ({0} > 0 ? {1} : {2}))", a[0], pos ? "true" : "false",
                            neg ? "true" : "false"); }},
  };
  return t;
}

// Pow by a constant 2 of a floating-point base (RMSNorm's square, a variance by hand).
bool pow_is_square(const Node& n) {
  const Value* e = n.op_type == "Pow" ? n.input(1) : nullptr;
  return e && e->is_constant() && e->constant->size() == 1 && e->constant->get_f64(0) == 2.0 &&
         !is_int_type(compute_type(n.input(0)->dtype));
}

// Binary ops by name; `ct` is the compute type of the operands.
StatusOr<std::string> binary(const Node& n, const std::string& op, const std::string& a, const std::string& b,
                             const std::string& ct) {
  const bool ints = is_int_type(ct);
  if (op == "Add" || op == "Sum") return fmt::format("({} + {})", a, b);
  if (op == "Sub") return fmt::format("({} - {})", a, b);
  if (op == "Mul") return fmt::format("({} * {})", a, b);
  // Integer division by zero gives 0 (as the reference does), and a signed one by -1 the wrapped
  // negation: -2^63 / -1 would trap on the emulator's CPU and is undefined on a GPU.
  if (op == "Div" && ints && ct == "long long")
    return fmt::format(
        "({1} == 0 ? 0LL : {1} == -1LL ? (long long)(0ULL - (unsigned long long){0}) : {0} / {1})", a, b);
  if (op == "Div")
    return ints ? fmt::format("({1} == 0 ? ({2})0 : {0} / {1})", a, b, ct) : fmt::format("({} / {})", a, b);
  // x * x is the correctly rounded square; powf's general path is some 125 more PTX instructions
  // (a logarithm and an exponential as fma polynomials, special-case branches) and may be off by
  // an ulp.
  if (pow_is_square(n)) return fmt::format("({0} * {0})", a);
  // An integer base: to an integer power exactly (stitch_dev::int_pow), to a float one through
  // double, stored as a float is.
  if (op == "Pow" && ints && is_int(n.input(1)->dtype))
    return fmt::format("stitch_dev::int_pow({}, {})", a, b);
  if (op == "Pow" && ints)
    return float_to_int(fmt::format("pow((double){}, (double){})", a, b), n.output(0)->dtype);
  if (op == "Pow") return fmt::format("{}({}, {})", fn(ct, "pow"), a, b);
  if (op == "Mod") {
    bool fmod_mode = n.attr_int("fmod", 0) != 0;
    // Floating-point fmod 0 (opset 28): fmod's remainder moved to the sign of b, a zero too.
    if (!ints && !fmod_mode) return fmt::format("stitch_dev::floor_mod({}, {})", a, b);
    if (!ints) return fmt::format("{}({}, {})", fn(ct, "fmod"), a, b);
    // A remainder by 0 is 0 (as the reference gives), by -1 always 0 (-2^63 % -1 would trap).
    if (ct == "unsigned long long") return fmt::format("({1} == 0 ? ({2})0 : {0} % {1})", a, b, ct);
    if (fmod_mode) return fmt::format("(({1} == 0 || {1} == -1LL) ? 0LL : {0} % {1})", a, b);
    return fmt::format(
        "(({1} == 0 || {1} == -1LL) ? 0LL : (({0} % {1} != 0 && (({0} % {1} < 0) != ({1} < 0))) ? {0} % {1} "
        "+ {1} : {0} % {1}))",
        a, b);
  }
  if (op == "Max") return fmt::format("stitch_dev::Max()({}, {})", a, b);
  if (op == "Min") return fmt::format("stitch_dev::Min()({}, {})", a, b);
  if (op == "Equal") return fmt::format("({} == {})", a, b);
  if (op == "Less") return fmt::format("({} < {})", a, b);
  if (op == "Greater") return fmt::format("({} > {})", a, b);
  if (op == "LessOrEqual") return fmt::format("({} <= {})", a, b);
  if (op == "GreaterOrEqual") return fmt::format("({} >= {})", a, b);
  if (op == "And") return fmt::format("({} && {})", a, b);
  if (op == "Or") return fmt::format("({} || {})", a, b);
  if (op == "Xor") return fmt::format("({} != {})", a, b);
  if (op == "PRelu") return fmt::format("({0} < ({2})0 ? {0} * {1} : {0})", a, b, ct);
  if (op == "BitwiseAnd") return fmt::format("({} & {})", a, b);
  if (op == "BitwiseOr") return fmt::format("({} | {})", a, b);
  if (op == "BitwiseXor") return fmt::format("({} ^ {})", a, b);
  if (op == "BitShift") {
    // A shift past 63 (or a negative amount) is 0, one past the width the store truncates; a
    // signed right shift is arithmetic and fills with the sign past 63 (the reference's apply_i).
    const bool right = n.attr_string("direction", "") == "RIGHT";
    if (right && is_signed_int(n.input(0)->dtype))
      return fmt::format(
          "((unsigned long long)({1}) >= 64ull ? ({2})({0} < 0 ? -1 : 0) : ({2})((long long)({0}) >> ({1})))",
          a, b, ct);
    return fmt::format(
        "((unsigned long long)({1}) >= 64ull ? ({2})0 : ({2})((unsigned long long)({0}) {3} ({1})))", a, b,
        ct, right ? ">>" : "<<");
  }
  return Status::user(fmt::format("{}: no CUDA expression for this op", n.describe()));
}

bool is_binary(const std::string& op) {
  static const char* names[] = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "Greater",
                                "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "PRelu",
                                "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift"};
  for (const char* s : names)
    if (op == s) return true;
  return false;
}

bool is_variadic(const std::string& op) { return op == "Sum" || op == "Mean" || op == "Max" || op == "Min"; }

}  // namespace

std::string literal(double v, const std::string& ct) {
  if (ct == "bool") return v != 0 ? "true" : "false";
  if (is_int_type(ct)) return fmt::format("{}LL", static_cast<long long>(v));
  if (std::isnan(v)) return ct == "float" ? "__int_as_float(0x7fc00000)" : "__longlong_as_double(0x7ff8000000000000LL)";
  if (std::isinf(v))
    return ct == "float" ? (v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)")
                         : (v > 0 ? "__longlong_as_double(0x7ff0000000000000LL)"
                                  : "__longlong_as_double(0xfff0000000000000LL)");
  std::string s = ct == "float" ? fmt::format("{}", static_cast<float>(v)) : fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return ct == "float" ? s + "f" : s;
}

std::string first_literal(const Tensor& t, const std::string& ct) {
  if (is_float(t.dtype())) return literal(t.get_f64(0), ct);
  const int64_t v = t.get_i64(0);
  const bool u64 = t.dtype() == DType::kU64;
  if (ct == "unsigned long long") return fmt::format("{}ULL", static_cast<uint64_t>(v));
  if (is_int_type(ct))  // "long long": the tensor is a signed or narrower unsigned type
    return v == std::numeric_limits<int64_t>::min() ? std::string("(-9223372036854775807LL - 1)")
                                                    : fmt::format("{}LL", v);
  if (ct == "float")
    return literal(u64 ? static_cast<float>(static_cast<uint64_t>(v)) : static_cast<float>(v), ct);
  return literal(u64 ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v), ct);
}

std::string extreme_literal(bool max, const std::string& ct) {
  if (ct == "unsigned long long") return max ? "0ULL" : "18446744073709551615ULL";
  if (is_int_type(ct)) return max ? "(-9223372036854775807LL - 1)" : "9223372036854775807LL";
  return literal(max ? -INFINITY : INFINITY, ct);
}

std::string magnitude(const std::string& e, const std::string& ct) {
  if (ct == "unsigned long long") return e;
  if (ct == "long long") return fmt::format("llabs({})", e);
  return fmt::format("{}({})", ct == "float" ? "fabsf" : "fabs", e);
}

bool reads_operand(const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.input(i) == nullptr) return false;
  if (n.op_type == "CastLike" && i == 1) return false;
  return !(i == 1 && pow_is_square(n));
}

bool has_scalar_expr(const Node& n) {
  const std::string& op = n.op_type;
  return unary_table().count(op) || is_binary(op) || is_variadic(op) || op == "Where" || op == "Clip" ||
         op == "Cast" || op == "CastLike" || op == "BitCast" || op == "BatchNormalization" ||
         op == ops::kIndexCheck;
}

namespace {

// BitCast between types of one width, from and to their compute types (float for 32- and 16-bit
// floats, double, long long for signed integers and uint8/16/32, unsigned long long for uint64,
// bool): through CUDA's bit reinterpretations, or the integers' C types of that width.
StatusOr<std::string> bit_cast(const Node& n, DType from, DType to, const std::string& a) {
  auto c_int = [](DType t) -> const char* {
    switch (t) {
      case DType::kI8: return "signed char";
      case DType::kU8: case DType::kBool: return "unsigned char";
      case DType::kI16: return "short";
      case DType::kU16: return "unsigned short";
      case DType::kI32: return "int";
      case DType::kU32: return "unsigned";
      case DType::kI64: return "long long";
      case DType::kU64: return "unsigned long long";
      default: return nullptr;
    }
  };
  const std::string ct = compute_type(to);
  if (from == to) return a;
  if (from == DType::kF32 && c_int(to))
    return fmt::format("(({})__float_as_{}({}))", ct, to == DType::kU32 ? "uint" : "int", a);
  if (to == DType::kF32 && c_int(from))
    return fmt::format("__{}_as_float(({}){})", from == DType::kU32 ? "uint" : "int", c_int(from), a);
  if (from == DType::kF64 && c_int(to)) return fmt::format("(({})__double_as_longlong({}))", ct, a);
  if (to == DType::kF64 && c_int(from)) return fmt::format("__longlong_as_double((long long){})", a);
  if (c_int(from) && c_int(to)) {
    if (to == DType::kBool) return fmt::format("(({})({}) != 0)", c_int(from), a);
    return fmt::format("(({})({})({}))", ct, c_int(to), a);
  }
  // 16-bit floats compute as float: their bits are those of the value converted back, exactly, NaNs
  // with their payloads too (stitch_dev::cvt keeps them both ways).
  std::string bits16 = c_int(from) ? fmt::format("((unsigned short){})", a)
                       : from == DType::kF16
                           ? fmt::format("__half_as_ushort(stitch_dev::cvt<__half>({}))", a)
                           : fmt::format("__bfloat16_as_ushort(stitch_dev::cvt<__nv_bfloat16>({}))", a);
  if (to == DType::kF16) return fmt::format("stitch_dev::cvt<float>(__ushort_as_half({}))", bits16);
  if (to == DType::kBF16) return fmt::format("stitch_dev::cvt<float>(__ushort_as_bfloat16({}))", bits16);
  if (!c_int(to) || (from != DType::kF16 && from != DType::kBF16))
    return Status::internal(fmt::format("{}: no BitCast from {} to {}", n.describe(), dtype_name(from),
                                        dtype_name(to)));
  return fmt::format("(({})({}){})", ct, c_int(to), bits16);
}

}  // namespace

std::string float_to_int(const std::string& x, DType to) {
  const std::string ct = compute_type(to);
  const int64_t lo = int_min(to);
  const std::string lo_text =
      lo == std::numeric_limits<int64_t>::min() ? "(-9223372036854775807LL - 1)" : fmt::format("{}LL", lo);
  return fmt::format("stitch_dev::float_to_int<{0}>({1}, ({0}){2}, ({0}){3}ULL)", ct, x, lo_text,
                     int_max(to));
}

StatusOr<std::string> scalar_expr(const Node& n, const std::vector<std::string>& a, Kernel* k) {
  const std::string& op = n.op_type;
  if (op == ops::kIndexCheck) {
    if (!k)
      return Status::internal(fmt::format("{}: its expression needs the kernel's fault word", n.describe()));
    return index_check_expr(*k, n, a[0]);
  }
  const DType out_t = n.output(0)->dtype;
  const std::string ct = compute_type(out_t);
  if (auto it = unary_table().find(op); it != unary_table().end()) {
    // IsNaN/IsInf output bool but compute on the input's type.
    return it->second(n, a, compute_type(n.input(0)->dtype));
  }
  if (is_binary(op)) return binary(n, op, a[0], a[1], compute_type(n.input(0)->dtype));
  if (is_variadic(op)) {
    std::string acc = a[0];
    const std::string step = op == "Mean" ? "Sum" : op;
    for (size_t i = 1; i < a.size(); ++i) {
      ASSIGN_OR_RETURN(acc, binary(n, step, acc, a[i], ct));
    }
    if (op == "Mean") acc = fmt::format("({} / ({}){})", acc, ct, a.size());
    return acc;
  }
  if (op == "Where") return fmt::format("({} ? {} : {})", a[0], a[1], a[2]);
  if (op == "Clip") {
    std::string x = a[0];
    if (a.size() > 1 && !a[1].empty()) x = fmt::format("stitch_dev::Max()({}, {})", x, a[1]);
    if (a.size() > 2 && !a[2].empty()) x = fmt::format("stitch_dev::Min()({}, {})", x, a[2]);
    return x;
  }
  if (op == "Cast" || op == "CastLike") {
    // Float to bool is "non-zero". Float to an integer type saturates to the type's range, NaN
    // giving 0 (stitch_dev::float_to_int, as the reference does). An integer narrowed to a
    // type narrower than its compute type wraps, as its stored value would, since the kernel's
    // readers take the compute type. Every other conversion is C's, through the compute types.
    const DType in_t = n.input(0)->dtype;
    if (out_t == DType::kBool) return fmt::format("({} != 0)", a[0]);
    if (is_int(out_t) && is_float(in_t)) return float_to_int(a[0], out_t);
    if (is_int(out_t) && storage_type(out_t) != ct)
      return fmt::format("(({})({}){})", ct, storage_type(out_t), a[0]);
    return fmt::format("(({}){})", ct, a[0]);
  }
  if (op == "BitCast") return bit_cast(n, n.input(0)->dtype, out_t, a[0]);
  if (op == "BatchNormalization") {
    // y = (x - mean) / sqrt(var + eps) * scale + B, inference form.
    return fmt::format("(({0} - {3}) * ({1} / {5}({4} + {6})) + {2})", a[0], a[1], a[2], a[3], a[4], fn(ct, "sqrt"),
                       literal(n.attr_float("epsilon", 1e-5f), ct));
  }
  return Status::user(fmt::format("{}: no CUDA expression for this op", n.describe()));
}

namespace {

int count_instructions(const Node& n) {
  if (!has_scalar_expr(n) || n.output(0) == nullptr) return 1;
  if (n.op_type == ops::kIndexCheck) return 3;  // two compares and a branch
  for (const Value* v : n.inputs)
    if (v == nullptr) return 1;  // an omitted optional operand: the expression needs ""
  std::vector<std::string> args;
  for (size_t i = 0; i < n.inputs.size(); ++i) args.push_back(fmt::format("a{}", i));
  auto expr = scalar_expr(n, args);
  if (!expr.is_ok()) return 1;
  // Measured on sm_90 with nvcc 13.0 (bench/op_costs/measure.py), float versions; "f" dropped.
  static const std::map<std::string, int> fns = {
      {"exp", 10},   {"log", 28},   {"log1p", 33}, {"erf", 30},  {"tanh", 17}, {"sqrt", 13}, {"sin", 137},
      {"cos", 138},  {"tan", 134},  {"asin", 25},  {"acos", 26}, {"atan", 19}, {"sinh", 25}, {"cosh", 16},
      {"asinh", 46}, {"acosh", 47}, {"atanh", 42}, {"pow", 95},  {"fmod", 74}, {"floor", 1}, {"ceil", 1},
      {"rint", 1},   {"fabs", 1},   {"fmax", 1},   {"fmin", 1}};
  constexpr int kDivision = 12;  // a / b: 13 instructions, one of them the 1 every node counts
  const std::string& e = *expr;
  int total = 1;
  for (size_t i = 0; i < e.size();) {
    if (e[i] == '/') {
      total += kDivision;
      ++i;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(e[i])) && e[i] != '_') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < e.size() && (std::isalnum(static_cast<unsigned char>(e[j])) || e[j] == '_' || e[j] == ':'))
      ++j;
    if (j < e.size() && e[j] == '(') {
      std::string name = e.substr(i, j - i);
      auto it = fns.find(name);
      if (it == fns.end() && name.size() > 1 && name.back() == 'f')
        it = fns.find(name.substr(0, name.size() - 1));
      if (it != fns.end()) total += it->second;
    }
    i = j;
  }
  return total;
}

}  // namespace

int op_instructions(const Node& n) { return remembered_instructions(n, count_instructions); }

bool reciprocal_safe(const Value& d) {
  if (d.producer && d.producer->op_type == "Sqrt") return true;
  if (!d.is_constant() || d.constant->size() != 1) return false;
  const double c = d.constant->get_f64(0);
  return std::isfinite(c) && c != 0 && std::isnormal(1.0f / static_cast<float>(c));
}

}  // namespace stitch::codegen
