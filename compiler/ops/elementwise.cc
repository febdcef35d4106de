// Elementwise and broadcasting ops: binary arithmetic, comparisons and logic, variadic
// Sum/Mean/Min/Max, SwiGLU, Where, Clip (the unary ops are in unary.cc, the casts in cast.cc). Floating types
// compute in double (Min and Max of the narrower ones in float), integer and bool types in int64 (uint64 as
// unsigned where the order matters), then store back to the output type.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "ops/op_util.h"

namespace stitch::ops {
namespace {

// ---- shared evaluation helpers -------------------------------------------

// out[i] = f(inputs at broadcast positions), in double or int64.
template <typename T, typename Get, typename Set, typename F>
void broadcast_apply(std::span<const Tensor* const> ins, Tensor& out, Get get, Set set, F f) {
  std::vector<Dims> strides;
  std::vector<std::vector<T>> vals;
  for (const Tensor* t : ins) {
    strides.push_back(broadcast_strides(t->dims(), out.dims()));
    vals.push_back(get(*t));
  }
  std::vector<T> args(ins.size());
  BroadcastWalker(out.dims(), strides).run([&](int64_t i, const std::vector<int64_t>& off) {
    for (size_t k = 0; k < ins.size(); ++k) args[k] = vals[k][off[k]];
    set(out, i, f(args));
  });
}

StatusOr<Dims> broadcast_all(const InferContext& ctx, size_t first = 0) {
  Dims out = ctx.dims(first);
  for (size_t i = first + 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    auto b = broadcast_dims(out, ctx.dims(i));
    if (!b)
      return ctx.error(fmt::format("input shapes {} and {} do not broadcast",
                                   dims_to_string(out), dims_to_string(ctx.dims(i))));
    out = *b;
  }
  return out;
}

Dims broadcast_eval(std::span<const Tensor* const> ins) {
  Dims out = ins[0]->dims();
  for (size_t i = 1; i < ins.size(); ++i) out = *broadcast_dims(out, ins[i]->dims());
  return out;
}

Status require_same_dtype(const InferContext& ctx, size_t from = 0, size_t to = SIZE_MAX) {
  for (size_t i = from + 1; i < std::min(to, ctx.num_inputs()); ++i) {
    if (ctx.has_input(i) && ctx.dtype(i) != ctx.dtype(from))
      return ctx.error(fmt::format("inputs must share one element type, got {} and {}",
                                   dtype_name(ctx.dtype(from)), dtype_name(ctx.dtype(i))));
  }
  return Status::ok();
}

// ---- binary and variadic ---------------------------------------------------

enum class Bin {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMod,
  kMin,
  kMax,
  kEq,
  kLt,
  kGt,
  kLe,
  kGe,
  kAnd,
  kOr,
  kXor,
  kPRelu,
  kBitAnd,
  kBitOr,
  kBitXor,
  kShiftLeft,
  kShiftRight,
  kShiftRightSigned
};

struct BinaryRow {
  const char* name;
  int since;
  Bin op;
};
const BinaryRow kBinary[] = {
    {"Add", 1, Bin::kAdd},   {"Sub", 1, Bin::kSub},          {"Mul", 1, Bin::kMul},
    {"Div", 1, Bin::kDiv},   {"Pow", 1, Bin::kPow},          {"Mod", 10, Bin::kMod},
    {"Equal", 1, Bin::kEq},  {"Less", 1, Bin::kLt},          {"Greater", 1, Bin::kGt},
    {"LessOrEqual", 12, Bin::kLe}, {"GreaterOrEqual", 12, Bin::kGe},
    {"And", 1, Bin::kAnd},   {"Or", 1, Bin::kOr},            {"Xor", 1, Bin::kXor},
    {"PRelu", 1, Bin::kPRelu}, {"BitwiseAnd", 18, Bin::kBitAnd},
    {"BitwiseOr", 18, Bin::kBitOr}, {"BitwiseXor", 18, Bin::kBitXor},
    {"BitShift", 11, Bin::kShiftLeft},  // direction RIGHT: kShiftRight (binary_op)
};
const BinaryRow& binary_row(const Node& n) {
  for (const auto& r : kBinary)
    if (n.op_type == r.name) return r;
  STITCH_UNREACHABLE("no binary row for {}", n.op_type);
}

bool is_compare(Bin b) { return b == Bin::kEq || b == Bin::kLt || b == Bin::kGt || b == Bin::kLe || b == Bin::kGe; }
bool is_logic(Bin b) { return b == Bin::kAnd || b == Bin::kOr || b == Bin::kXor; }
bool is_bitwise(Bin b) { return b == Bin::kBitAnd || b == Bin::kBitOr || b == Bin::kBitXor; }

// The row's op, BitShift's by its direction (a right shift of a signed type, from opset 28, is
// arithmetic).
Bin binary_op(const Node& n, const BinaryRow& r) {
  if (r.op == Bin::kShiftLeft && n.attr_string("direction", "") == "RIGHT")
    return is_signed_int(n.input(0)->dtype) ? Bin::kShiftRightSigned : Bin::kShiftRight;
  return r.op;
}

// Min and Max of floats as the kernels take them (stitch_dev::Min and Max): a NaN operand itself
// with its bits (a where both are NaN), as numpy's minimum and maximum give it, and b between two
// zeros of opposite signs.
template <typename F>
F min_max(F a, F b, bool max) {
  return std::isnan(a) || (max ? a > b : a < b) ? a : b;
}

double apply_f(Bin op, double a, double b, bool fmod_mode) {
  switch (op) {
    case Bin::kAdd: return a + b;
    case Bin::kSub: return a - b;
    case Bin::kMul: return a * b;
    case Bin::kDiv: return a / b;
    case Bin::kPow: return std::pow(a, b);
    case Bin::kMod: {  // fmod 0 (opset 28): the sign of b, a zero included
      double r = std::fmod(a, b);
      if (!fmod_mode && r != 0 && ((r < 0) != (b < 0))) r += b;
      if (!fmod_mode && r == 0) r = std::copysign(0.0, b);
      return r;
    }
    case Bin::kMin:
      return min_max(a, b, false);
    case Bin::kMax:
      return min_max(a, b, true);
    case Bin::kEq: return a == b;
    case Bin::kLt: return a < b;
    case Bin::kGt: return a > b;
    case Bin::kLe: return a <= b;
    case Bin::kGe: return a >= b;
    case Bin::kPRelu: return a < 0 ? a * b : a;
    default: STITCH_UNREACHABLE();
  }
}

// `a` to the power `b`, exactly, wrapping as 64-bit products do (by squaring; through doubles,
// 3^39 came out 11 short and a power past 2^63 was undefined). A negative exponent (`b_signed` and
// below 0) gives 1 / a^b truncated: 1 for a base of 1, 1 or -1 for a signed base of -1, else 0.
// The kernels compute the same (stitch_dev::int_pow).
int64_t int_pow(int64_t a, int64_t b, bool a_unsigned, bool b_signed) {
  if (b_signed && b < 0) {
    if (a == 1) return 1;
    if (!a_unsigned && a == -1) return (b & 1) ? -1 : 1;
    return 0;
  }
  uint64_t base = static_cast<uint64_t>(a), r = 1;
  for (uint64_t e = static_cast<uint64_t>(b); e != 0; e >>= 1) {
    if (e & 1) r *= base;
    base *= base;
  }
  return static_cast<int64_t>(r);
}

// uint64 values held as int64s (those above 2^63 - 1 negative), where the order matters: division,
// remainder, comparisons, extremes; the other ops are the same bits either way (powers: int_pow).
std::optional<int64_t> apply_u64(Bin op, uint64_t a, uint64_t b) {
  auto bits = [](uint64_t v) { return static_cast<int64_t>(v); };
  switch (op) {
    case Bin::kDiv:
      return bits(b == 0 ? 0 : a / b);  // division by zero gives 0, as for signed
    case Bin::kMod:
      return bits(b == 0 ? 0 : a % b);
    case Bin::kMin:
      return bits(std::min(a, b));
    case Bin::kMax:
      return bits(std::max(a, b));
    case Bin::kLt:
      return a < b;
    case Bin::kGt:
      return a > b;
    case Bin::kLe:
      return a <= b;
    case Bin::kGe:
      return a >= b;
    case Bin::kPRelu:
      return bits(a);  // never negative
    default:
      return std::nullopt;
  }
}

int64_t apply_i(Bin op, int64_t a, int64_t b, bool fmod_mode) {
  switch (op) {
    case Bin::kAdd: return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    case Bin::kSub: return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
    case Bin::kMul: return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    case Bin::kDiv:  // truncating; division by zero gives 0 rather than a trap, by -1 the wrapped -a
      if (b == 0) return 0;
      if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
      return a / b;
    case Bin::kPow:
      return int_pow(a, b, false, true);
    case Bin::kMod: {
      if (b == 0 || b == -1) return 0;  // -2^63 % -1 would trap
      int64_t r = a % b;
      if (!fmod_mode && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case Bin::kMin: return std::min(a, b);
    case Bin::kMax: return std::max(a, b);
    case Bin::kEq: return a == b;
    case Bin::kLt: return a < b;
    case Bin::kGt: return a > b;
    case Bin::kLe: return a <= b;
    case Bin::kGe: return a >= b;
    case Bin::kAnd: return a && b;
    case Bin::kOr: return a || b;
    case Bin::kXor: return (a != 0) != (b != 0);
    case Bin::kPRelu: return a < 0 ? a * b : a;
    case Bin::kBitAnd: return a & b;
    case Bin::kBitOr: return a | b;
    case Bin::kBitXor: return a ^ b;
    // Unsigned values (uint64's above 2^63 held as negative int64s); a shift past 63 gives 0, one
    // past the type's width the store's truncation does. Signed values (opset 28): a left shift
    // drops the bits past the sign bit (the store's truncation), a right shift fills with the sign
    // bit; a negative amount, or one of the width or more, gives what the fill alone does (ONNX's
    // BitShift-28). Held as int64s, amounts from the width to 63 already do.
    case Bin::kShiftLeft:
      return static_cast<uint64_t>(b) >= 64 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(a) << b);
    case Bin::kShiftRight:
      return static_cast<uint64_t>(b) >= 64 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(a) >> b);
    case Bin::kShiftRightSigned:
      return static_cast<uint64_t>(b) >= 64 ? (a < 0 ? -1 : 0) : a >> b;
  }
  STITCH_UNREACHABLE();
}

Status infer_binary(InferContext& ctx) {
  const BinaryRow& r = binary_row(ctx.node());
  if (r.op != Bin::kPow) RETURN_IF_ERROR(require_same_dtype(ctx));
  DType t = ctx.dtype(0);
  if (is_logic(r.op) && t != DType::kBool)
    return ctx.error(fmt::format("expects bool inputs, got {}", dtype_name(t)));
  if (is_bitwise(r.op) && !is_int(t))
    return ctx.error(fmt::format("expects integer inputs, got {}", dtype_name(t)));
  if (r.op == Bin::kShiftLeft) {
    if (!is_unsigned_int(t) && ctx.node().opset < 28)
      return ctx.error(
          fmt::format("expects unsigned integer inputs before opset 28 (the model's is {}), got {}; signed "
                      "ones need opset 28",
                      ctx.node().opset, dtype_name(t)));
    const std::string dir = ctx.node().attr_string("direction", "");
    if (dir != "LEFT" && dir != "RIGHT")
      return ctx.error(fmt::format("direction is '{}'; it must be LEFT or RIGHT", dir));
  }
  if (!is_logic(r.op) && !is_compare(r.op) && t == DType::kBool)
    return ctx.error("does not take bool inputs; cast them first");
  if (r.op == Bin::kMod && is_float(t) && ctx.node().attr_int("fmod", 0) == 0 && ctx.node().opset < 28)
    return ctx.error(fmt::format("needs fmod=1 for floating-point inputs before opset 28 (the model's is {})",
                                 ctx.node().opset));
  ASSIGN_OR_RETURN(Dims d, broadcast_all(ctx));
  ctx.set_output(0, is_compare(r.op) || is_logic(r.op) ? DType::kBool : t, d);
  return Status::ok();
}

Status eval_binary_op(Bin op, bool fmod_mode, DType out_t, std::span<const Tensor* const> ins,
                      Tensor& result) {
  result = Tensor(out_t, broadcast_eval(ins));
  bool use_float = false;
  for (const Tensor* t : ins) use_float |= is_float(t->dtype());
  // Min and Max of float32, float16 and bfloat16 in float: a double would quiet a signaling NaN,
  // which the kernels pass on with its bits.
  const bool narrow_float =
      use_float && out_t != DType::kF64 &&
      std::all_of(ins.begin(), ins.end(), [&](const Tensor* t) { return t->dtype() == out_t; });
  if ((op == Bin::kMin || op == Bin::kMax) && narrow_float) {
    broadcast_apply<float>(
        ins, result,
        [](const Tensor& t) {
          std::vector<float> v(static_cast<size_t>(t.size()));
          for (int64_t i = 0; i < t.size(); ++i) v[static_cast<size_t>(i)] = t.get_f32(i);
          return v;
        },
        [](Tensor& o, int64_t i, float v) { o.set_f32(i, v); },
        [&](const std::vector<float>& a) { return min_max(a[0], a[1], op == Bin::kMax); });
    return Status::ok();
  }
  // Pow with an integer base and float exponent: compute in double.
  if (use_float) {
    broadcast_apply<double>(
        ins, result, [](const Tensor& t) { return t.to_f64(); },
        [](Tensor& o, int64_t i, double v) { o.set_f64(i, v); },
        [&](const std::vector<double>& a) { return apply_f(op, a[0], a[1], fmod_mode); });
  } else if (op == Bin::kPow) {
    const bool base_u64 = ins[0]->dtype() == DType::kU64, exp_signed = ins[1]->dtype() != DType::kU64;
    broadcast_apply<int64_t>(
        ins, result, [](const Tensor& t) { return t.to_i64(); },
        [](Tensor& o, int64_t i, int64_t v) { o.set_i64(i, v); },
        [&](const std::vector<int64_t>& a) { return int_pow(a[0], a[1], base_u64, exp_signed); });
  } else {
    const bool u64 = ins[0]->dtype() == DType::kU64;
    broadcast_apply<int64_t>(
        ins, result, [](const Tensor& t) { return t.to_i64(); },
        [](Tensor& o, int64_t i, int64_t v) { o.set_i64(i, v); },
        [&](const std::vector<int64_t>& a) {
          if (u64)
            if (auto v = apply_u64(op, static_cast<uint64_t>(a[0]), static_cast<uint64_t>(a[1]))) return *v;
          return apply_i(op, a[0], a[1], fmod_mode);
        });
  }
  return Status::ok();
}

Status eval_binary(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const BinaryRow& r = binary_row(n);
  DType t = is_compare(r.op) || is_logic(r.op) ? DType::kBool : in[0]->dtype();
  return eval_binary_op(binary_op(n, r), n.attr_int("fmod", 0) != 0, t, in, out[0]);
}

// Sum, Mean, Min, Max: any number of inputs, broadcast together.
Status infer_variadic(InferContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.error("needs at least one input");
  RETURN_IF_ERROR(require_same_dtype(ctx));
  if (ctx.dtype(0) == DType::kBool) return ctx.error("does not take bool inputs");
  if (ctx.node().op_type == "Mean" && !is_float(ctx.dtype(0)))
    return ctx.error("expects floating-point inputs");
  ASSIGN_OR_RETURN(Dims d, broadcast_all(ctx));
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_variadic(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  Bin op = n.op_type == "Min" ? Bin::kMin : n.op_type == "Max" ? Bin::kMax : Bin::kAdd;
  // Half-precision inputs add up in float32 and are rounded once at the end, as a kernel computes
  // them (rounding every partial sum to the half type would round up to n - 1 times more).
  const DType t = in[0]->dtype();
  const bool half = t == DType::kF16 || t == DType::kBF16;
  auto widened = [&](const Tensor& x) {  // in float: every value, NaNs with their bits, exactly
    if (!half) return x;
    Tensor w(DType::kF32, x.dims());
    for (int64_t i = 0; i < x.size(); ++i) w.set_f32(i, x.get_f32(i));
    return w;
  };
  Tensor acc = widened(*in[0]);
  for (size_t i = 1; i < in.size(); ++i) {
    const Tensor x = widened(*in[i]);
    const Tensor* pair[] = {&acc, &x};
    Tensor next;
    RETURN_IF_ERROR(eval_binary_op(op, false, acc.dtype(), pair, next));
    acc = std::move(next);
  }
  if (n.op_type == "Mean") {
    for (int64_t i = 0; i < acc.size(); ++i) acc.set_f64(i, acc.get_f64(i) / double(in.size()));
  }
  if (half) {
    Tensor y(t, acc.dims());
    for (int64_t i = 0; i < acc.size(); ++i) y.set_f32(i, acc.get_f32(i));
    acc = std::move(y);
  }
  out[0] = std::move(acc);
  return Status::ok();
}

// SwiGLU (opset 28): Swish_alpha(A) * B, A and B of one shape (no broadcasting). The front end
// writes it as Swish and Mul before planning (passes/expand_attention.cc).
Status infer_swiglu(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs inputs A and B");
  RETURN_IF_ERROR(require_same_dtype(ctx));
  if (!is_float(ctx.dtype(0)))
    return ctx.error(fmt::format("expects floating-point inputs, got {}", dtype_name(ctx.dtype(0))));
  const Dims &a = ctx.dims(0), &b = ctx.dims(1);
  bool same = a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i) same = a[i] < 0 || b[i] < 0 || a[i] == b[i];
  if (!same)
    return ctx.error(fmt::format("A {} and B {} must have the same shape (SwiGLU does not broadcast)",
                                 dims_to_string(a), dims_to_string(b)));
  ctx.set_output(0, ctx.dtype(0), a);
  return Status::ok();
}

Status eval_swiglu(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor &a = *in[0], &b = *in[1];
  if (a.dims() != b.dims())
    return node_error(
        n, fmt::format("A {} and B {} differ in shape", dims_to_string(a.dims()), dims_to_string(b.dims())));
  const double alpha = n.attr_float("alpha", 1.0f);
  Tensor y(a.dtype(), a.dims());
  for (int64_t i = 0; i < a.size(); ++i) {
    const double x = a.get_f64(i);
    y.set_f64(i, x * (1.0 / (1.0 + std::exp(-alpha * x))) * b.get_f64(i));  // Swish: x times sigmoid(alpha x)
  }
  out[0] = std::move(y);
  return Status::ok();
}

// ---- Where, Clip, Cast -----------------------------------------------------

Status infer_where(InferContext& ctx) {
  if (ctx.dtype(0) != DType::kBool)
    return ctx.error(fmt::format("condition must be bool, got {}", dtype_name(ctx.dtype(0))));
  RETURN_IF_ERROR(require_same_dtype(ctx, 1));
  ASSIGN_OR_RETURN(Dims d, broadcast_all(ctx));
  ctx.set_output(0, ctx.dtype(1), d);
  return Status::ok();
}

Status eval_where(const Node&, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  Tensor y(in[1]->dtype(), broadcast_eval(in));
  std::vector<Dims> strides;
  for (const Tensor* t : in) strides.push_back(broadcast_strides(t->dims(), y.dims()));
  const uint8_t* c = in[0]->data();
  const int esz = dtype_size(y.dtype());
  BroadcastWalker(y.dims(), strides).run([&](int64_t i, const std::vector<int64_t>& off) {
    const Tensor* src = c[off[0]] ? in[1] : in[2];
    std::memcpy(y.data() + i * esz, src->data() + off[c[off[0]] ? 1 : 2] * esz, esz);
  });
  out[0] = std::move(y);
  return Status::ok();
}

Status infer_clip(InferContext& ctx) {
  DType t = ctx.dtype(0);
  if (t == DType::kBool) return ctx.error("does not take bool inputs");
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    if (ctx.dtype(i) != t) return ctx.error("min and max must have the input's element type");
    if (num_elements(ctx.dims(i)) != 1) return ctx.error("min and max must be scalars");
  }
  ctx.set_output(0, t, ctx.dims(0));
  return Status::ok();
}

Status eval_clip(const Node&, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  Tensor y(x.dtype(), x.dims());
  if (is_float(x.dtype())) {
    double lo = in.size() > 1 && in[1] ? in[1]->get_f64(0) : -INFINITY;
    double hi = in.size() > 2 && in[2] ? in[2]->get_f64(0) : INFINITY;
    for (int64_t i = 0; i < x.size(); ++i) {
      double v = x.get_f64(i);
      y.set_f64(i, std::isnan(v) ? v : std::min(std::max(v, lo), hi));
    }
  } else if (x.dtype() == DType::kU64) {  // held as int64s: those past 2^63 - 1 compare as unsigned
    const uint64_t lo = in.size() > 1 && in[1] ? static_cast<uint64_t>(in[1]->get_i64(0)) : 0;
    const uint64_t hi = in.size() > 2 && in[2] ? static_cast<uint64_t>(in[2]->get_i64(0))
                                               : std::numeric_limits<uint64_t>::max();
    for (int64_t i = 0; i < x.size(); ++i)
      y.set_i64(i, static_cast<int64_t>(std::min(std::max(static_cast<uint64_t>(x.get_i64(i)), lo), hi)));
  } else {
    int64_t lo = in.size() > 1 && in[1] ? in[1]->get_i64(0) : std::numeric_limits<int64_t>::min();
    int64_t hi = in.size() > 2 && in[2] ? in[2]->get_i64(0) : std::numeric_limits<int64_t>::max();
    for (int64_t i = 0; i < x.size(); ++i) y.set_i64(i, std::min(std::max(x.get_i64(i), lo), hi));
  }
  out[0] = std::move(y);
  return Status::ok();
}

}  // namespace

void register_elementwise(std::vector<OpDef>& t) {
  for (const auto& r : kBinary)
    t.push_back({r.name, std::max(r.since, kMinOpset), kMaxOpset, OpCategory::kBroadcast, infer_binary, eval_binary});
  for (const char* v : {"Sum", "Mean", "Min", "Max"})
    t.push_back({v, kMinOpset, kMaxOpset, OpCategory::kBroadcast, infer_variadic, eval_variadic});
  t.push_back({"SwiGLU", 28, kMaxOpset, OpCategory::kOpaque, infer_swiglu, eval_swiglu});
  t.push_back({"Where", kMinOpset, kMaxOpset, OpCategory::kBroadcast, infer_where, eval_where});
  t.push_back({"Clip", kMinOpset, kMaxOpset, OpCategory::kElementwise, infer_clip, eval_clip});
}

}  // namespace stitch::ops
