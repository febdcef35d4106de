// expand_integer_gemms: each MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv becomes a
// float MatMul or Conv whose sums are exact, with the element-wise work around it that the planner
// fuses into the kernels before and after the call:
//   operands    Cast to the float type, Sub the zero point (computed here for a constant operand:
//               weights become float constants), once per operand: GEMMs of one activation (Q, K
//               and V) read one centered value, so that merge_gemms can join them
//   product     MatMul or Conv, then Round: its result is the exact integer whatever order the
//               library sums in, and no float rewrite (scale folding) reaches through it
//   output      MatMulInteger, ConvInteger: Cast to int32. QLinear*: Add the bias, Mul by
//               a_scale * b_scale / y_scale (computed here when constant), Add y's zero point,
//               Round, Clip to y's range and Cast, in float64 as ONNX's reference does
// A MatMul computes in float32 when every partial sum is an integer float32 holds exactly: K times
// the largest |operand - zero point| of each side (a constant's own values, else its type's range)
// under 2^24 (BERT-tiny's, K up to 512 against ONNX Runtime's 8-bit weights); otherwise, and for
// every convolution (cuDNN's Winograd and FFT algorithms do not sum exactly), in float64.
// Runs after fold_constants; nodes without static shapes are left alone.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "ops/op_params.h"
#include "ops/op_util.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

constexpr double kExactFloat = 16777216.0;  // 2^24: float32 holds every integer of smaller magnitude

// The smallest and largest value `v` may hold: a constant's own, else its type's range.
std::pair<double, double> value_range(const Value* v) {
  if (!v->constant) return ops::int_range(v->dtype);
  const std::vector<double> x = v->constant->to_f64();
  if (x.empty()) return {0.0, 0.0};
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  return {*lo, *hi};
}

// The largest |x - zero point| operand `x` (with zero point `zp`, or none) may hold.
double largest_term(const Value* x, const Value* zp) {
  const auto [xlo, xhi] = value_range(x);
  const auto [zlo, zhi] = zp ? value_range(zp) : std::pair{0.0, 0.0};
  return std::max(std::fabs(xhi - zlo), std::fabs(xlo - zhi));
}

// Parameter `p` of the spec as a value of type `t` and shape `d` (a constant when `p` is one).
Value* param(NodeBuilder& b, Value* p, const Dims& d, DType t, const std::string& hint) {
  if (p->constant) return b.constant(hint, Tensor::from_f64(t, d, p->constant->to_f64()));
  Value* v = d == *p->dims ? p : b.reshape(p, d, hint + "_broadcast");
  return v->dtype == t ? v : b.cast(v, t, hint + "_cast");
}

// Operand `x` less its zero point `zp` (or 0; shape `zd` against x), as type `t`.
Value* centered(NodeBuilder& b, Value* x, Value* zp, const Dims& zd, DType t, const std::string& hint) {
  const Dims& xd = *x->dims;
  if (x->constant && (!zp || zp->constant)) {
    std::vector<double> v = x->constant->to_f64();
    if (zp) {
      const std::vector<double> z = zp->constant->to_f64();
      ops::BroadcastWalker(xd, {ops::broadcast_strides(zd, xd)})
          .run([&](int64_t i, const std::vector<int64_t>& o) {
            v[static_cast<size_t>(i)] -= z[static_cast<size_t>(o[0])];
          });
    }
    return b.constant(hint, Tensor::from_f64(t, xd, v));
  }
  Value* v = b.cast(x, t, hint + "_real");
  if (!zp || (zp->constant && value_range(zp) == std::pair{0.0, 0.0})) return v;
  return b.node("Sub", hint + "_centred", {v, param(b, zp, zd, t, hint + "_zero_point")}, t, xd);
}

// a_scale * b_scale / y_scale in the scales' type (float32 when they differ), as float64 of a shape
// that broadcasts against the output: a constant when the scales are.
Value* scale_ratio(NodeBuilder& b, const Node& n, const ops::IntegerGemmSpec& s) {
  Value *as = n.input(s.a_scale), *bs = n.input(s.b_scale), *ys = n.input(s.y_scale);
  const DType st = as->dtype == bs->dtype && as->dtype == ys->dtype ? as->dtype : DType::kF32;
  const Dims &ad = s.on_output.at(s.a_scale), &bd = s.on_output.at(s.b_scale),
             &yd = s.on_output.at(s.y_scale);
  const Dims d = *ops::broadcast_dims(*ops::broadcast_dims(ad, bd), yd);
  if (as->constant && bs->constant && ys->constant) {
    std::vector<double> r(static_cast<size_t>(num_elements(d)));
    const std::vector<double> av = as->constant->to_f64(), bv = bs->constant->to_f64(),
                              yv = ys->constant->to_f64();
    ops::BroadcastWalker(
        d, {ops::broadcast_strides(ad, d), ops::broadcast_strides(bd, d), ops::broadcast_strides(yd, d)})
        .run([&](int64_t i, const std::vector<int64_t>& o) {
          const double ab = ops::round_to(st, av[size_t(o[0])] * bv[size_t(o[1])]);
          r[static_cast<size_t>(i)] = ops::round_to(st, ab / yv[size_t(o[2])]);
        });
    return b.constant("ratio", Tensor::from_f64(DType::kF64, d, r));
  }
  Value* ab = b.node("Mul", "scales", {param(b, as, ad, st, "a_scale"), param(b, bs, bd, st, "b_scale")}, st,
                     *ops::broadcast_dims(ad, bd));
  Value* r = b.node("Div", "ratio", {ab, param(b, ys, yd, st, "y_scale")}, st, d);
  return b.cast(r, DType::kF64, "ratio_f64");
}

// Centered operands already written, by operand, zero point and type: ONNX Runtime's quantizer
// gives Q, K and V one quantized activation, and one centered value lets their GEMMs merge.
using CenteredKey = std::tuple<const Value*, const Value*, DType>;
using Centered = std::map<CenteredKey, Value*>;

StatusOr<bool> expand_integer_gemm(Graph& g, Node& n, Centered& done) {
  std::vector<ops::QuantOperand> in;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* v = n.input(i);
    if (v && !v->has_static_shape()) return false;
    in.push_back(v ? ops::QuantOperand{v->dtype, &*v->dims} : ops::QuantOperand{});
  }
  if (!n.output(0)) return false;
  ASSIGN_OR_RETURN(ops::IntegerGemmSpec s, ops::integer_gemm_spec(n, in));
  auto input = [&](int i) { return i >= 0 ? n.input(static_cast<size_t>(i)) : nullptr; };
  Value *a = n.input(0), *b_op = input(s.b), *a_zp = input(s.a_zp), *b_zp = input(s.b_zp);
  const double bound = static_cast<double>(s.k) * largest_term(a, a_zp) * largest_term(b_op, b_zp);
  const DType t = s.conv || bound >= kExactFloat ? DType::kF64 : DType::kF32;

  NodeBuilder b{g, n};
  auto zd = [&](int i) { return i >= 0 ? s.on_operand.at(i) : Dims{}; };
  auto once = [&](Value* x, Value* zp, int zp_index, const std::string& hint) {
    Value*& v = done[CenteredKey{x, zp, t}];
    if (!v) v = centered(b, x, zp, zd(zp_index), t, hint);
    return v;
  };
  Value* ac = once(a, a_zp, s.a_zp, "a");
  Value* bc = once(b_op, b_zp, s.b_zp, "b");
  Value* c = s.conv ? b.node("Conv", "product", {ac, bc}, t, s.out_dims, n.attrs)
                    : b.node("MatMul", "product", {ac, bc}, t, s.out_dims);
  c = b.node("Round", "exact", {c}, t, s.out_dims);
  if (!s.linear) {
    b.finish(b.cast(c, DType::kI32, "int32"), n.output(0));
    return true;
  }
  if (t != DType::kF64) c = b.cast(c, DType::kF64, "product_f64");
  if (s.bias >= 0)
    c = b.node("Add", "biased", {c, param(b, input(s.bias), s.on_output.at(s.bias), DType::kF64, "bias")},
               DType::kF64, s.out_dims);
  c = b.node("Mul", "requantized", {c, scale_ratio(b, n, s)}, DType::kF64, s.out_dims);
  if (s.y_zp >= 0)
    c = b.node("Add", "shifted",
               {c, param(b, input(s.y_zp), s.on_output.at(s.y_zp), DType::kF64, "y_zero_point")}, DType::kF64,
               s.out_dims);
  c = b.node("Round", "round", {c}, DType::kF64, s.out_dims);
  c = b.node("Clip", "saturate",
             {c, b.constant("min", Tensor::from_f64(DType::kF64, {}, {s.lo})),
              b.constant("max", Tensor::from_f64(DType::kF64, {}, {s.hi}))},
             DType::kF64, s.out_dims);
  b.finish(b.cast(c, s.out, "quantized"), n.output(0));
  return true;
}

}  // namespace

StatusOr<bool> expand_integer_gemms(Graph& g, PassContext&) {
  bool changed = false;
  Centered done;
  for (const char* op : {"MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv"}) {
    ASSIGN_OR_RETURN(bool expanded, expand_each(g, op, [&](Graph& gr, Node& n) {
                       return expand_integer_gemm(gr, n, done);
                     }));
    changed = changed || expanded;
  }
  return changed;
}

}  // namespace stitch
