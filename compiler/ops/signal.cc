// DFT (opsets 17 and 20): the transform's parameters resolved once (dft_spec), its weights as a
// matrix (dft_matrix) that the front end's expand_dft pass multiplies by and the reference
// interpreter sums with, so both compute the same definition:
//   forward  y[k] = sum_n x[n] e^(-2 pi i k n / L),      k < L (onesided: k <= L / 2)
//   inverse  y[n] = 1/L sum_k x[k] e^(2 pi i k n / L),   n < L
//   IRFFT    (inverse and onesided) the real signal whose one-sided spectrum is x: numpy's irfft.
// L is dft_length (by default the axis's length, or 2 (m - 1) for IRFFT); the input is cut to
// its first L values (L / 2 + 1 for IRFFT) or padded with zeros. Values are complex as pairs in
// the last axis (real, imaginary), or real with a last axis of 1.
#include <cmath>
#include <numbers>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

StatusOr<DftSpec> dft_spec(const Node& n, const Dims& x, std::optional<int64_t> length,
                           std::optional<int64_t> axis) {
  const int64_t r = static_cast<int64_t>(x.size());
  if (r < 2 || (x.back() != 1 && x.back() != 2))
    return node_error(n, fmt::format("its input {} must end in an axis of 1 (real values) or 2 (real and "
                                     "imaginary parts)",
                                     dims_to_string(x)));
  DftSpec s;
  s.inverse = n.attr_int("inverse", 0) != 0;
  s.onesided = n.attr_int("onesided", 0) != 0;
  s.complex_in = x.back() == 2;
  if (n.opset < 20 && axis) return node_error(n, "takes its axis as an attribute before opset 20");
  const int64_t a = n.opset >= 20 ? axis.value_or(-2) : n.attr_int("axis", 1);
  if (a < -r || a > r - 2 || a == -1)
    return node_error(n, fmt::format("axis {} is not a signal axis of the rank-{} input (the last axis holds "
                                     "the real and imaginary parts)",
                                     a, r));
  s.axis = a < 0 ? a + r : a;
  s.in = x[s.axis];
  const bool irfft = s.inverse && s.onesided;
  if (irfft && !s.complex_in)
    return node_error(n, "an inverse one-sided DFT (IRFFT) takes complex input: a last axis of 2");
  s.length = length.value_or(irfft ? 2 * (s.in - 1) : s.in);
  if (s.length < 1)
    return node_error(n, fmt::format("dft_length is {}; it must be positive{}", s.length,
                                     irfft && !length ? " (IRFFT's default 2 (m - 1) of an axis of 1)" : ""));
  s.out = s.onesided && !s.inverse ? s.length / 2 + 1 : s.length;
  s.complex_out = !irfft;
  s.out_dims = x;
  s.out_dims[s.axis] = s.out;
  s.out_dims.back() = s.complex_out ? 2 : 1;
  return s;
}

std::vector<double> dft_matrix(const DftSpec& s) {
  const int64_t ci = s.complex_in ? 2 : 1, co = s.complex_out ? 2 : 1;
  std::vector<double> w(static_cast<size_t>(s.in * ci * s.out * co), 0.0);
  const bool irfft = s.inverse && s.onesided;
  // Input positions past the transform's (cut) are zero rows; positions it pads read nothing.
  const int64_t used = std::min(s.in, irfft ? s.length / 2 + 1 : s.length);
  const double scale = s.inverse ? 1.0 / static_cast<double>(s.length) : 1.0;
  const double sign = s.inverse ? 1.0 : -1.0;
  for (int64_t i = 0; i < used; ++i)
    for (int64_t o = 0; o < s.out; ++o) {
      // e^(sign 2 pi i k n / L) with k n reduced mod L first, so large products keep their precision.
      const double t =
          2.0 * std::numbers::pi * static_cast<double>((i * o) % s.length) / static_cast<double>(s.length);
      double c = scale * std::cos(t), sn = scale * sign * std::sin(t);
      if (irfft) {
        // x[n] = 1/L sum_k a_k (Re X_k cos - Im X_k sin), a_k = 2 for the bins whose conjugates the
        // one-sided spectrum leaves out (0 < k < L / 2), else 1.
        const double twice = (i > 0 && 2 * i < s.length) ? 2.0 : 1.0;
        w[static_cast<size_t>((i * 2) * s.out + o)] = twice * c;
        w[static_cast<size_t>((i * 2 + 1) * s.out + o)] = -twice * sn;
        continue;
      }
      // Row i * ci + p (part p of input i) times column o * co + q (part q of output o):
      // (xr + i xi)(c + i sn) = (xr c - xi sn) + i (xr sn + xi c).
      w[static_cast<size_t>((i * ci) * s.out * co + o * co)] = c;
      w[static_cast<size_t>((i * ci) * s.out * co + o * co + 1)] = sn;
      if (ci == 2) {
        w[static_cast<size_t>((i * ci + 1) * s.out * co + o * co)] = -sn;
        w[static_cast<size_t>((i * ci + 1) * s.out * co + o * co + 1)] = c;
      }
    }
  return w;
}

namespace {

// dft_length (input 1) and, from opset 20, the axis (input 2): constants, when given.
struct DftOperands {
  std::optional<int64_t> length, axis;
};
StatusOr<DftOperands> dft_operands(const InferContext& ctx) {
  DftOperands o;
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (i >= ctx.num_inputs() || !ctx.has_input(i)) continue;
    ASSIGN_OR_RETURN(auto v, const_ints(ctx, i, i == 1 ? "dft_length" : "axis"));
    if (v.size() != 1)
      return ctx.error(fmt::format("its {} must be one value", i == 1 ? "dft_length" : "axis"));
    (i == 1 ? o.length : o.axis) = v[0];
  }
  return o;
}

Status infer_dft(InferContext& ctx) {
  if (!is_float(ctx.dtype(0)))
    return ctx.error(fmt::format("input 0 is {}; DFT takes floating-point values", dtype_name(ctx.dtype(0))));
  ASSIGN_OR_RETURN(DftOperands o, dft_operands(ctx));
  ASSIGN_OR_RETURN(DftSpec s, dft_spec(ctx.node(), ctx.dims(0), o.length, o.axis));
  ctx.set_output(0, ctx.dtype(0), s.out_dims);
  return Status::ok();
}

Status eval_dft(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  std::optional<int64_t> length, axis;
  if (in.size() > 1 && in[1]) length = in[1]->to_i64().at(0);
  if (in.size() > 2 && in[2]) axis = in[2]->to_i64().at(0);
  ASSIGN_OR_RETURN(DftSpec s, dft_spec(n, in[0]->dims(), length, axis));
  const Dims& xd = in[0]->dims();
  const int64_t ci = s.complex_in ? 2 : 1, co = s.complex_out ? 2 : 1;
  // x as [outer, in, inner, ci] and y as [outer, out, inner, co] around the axis.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < s.axis; ++d) outer *= xd[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(s.axis) + 1; d + 1 < xd.size(); ++d) inner *= xd[d];
  const std::vector<double> x = in[0]->to_f64(), w = dft_matrix(s);
  std::vector<double> y(static_cast<size_t>(outer * s.out * inner * co), 0.0);
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t b = 0; b < inner; ++b)
      for (int64_t o = 0; o < s.out * co; ++o) {
        double acc = 0;
        for (int64_t i = 0; i < s.in * ci; ++i)
          acc += x[static_cast<size_t>(((a * s.in + i / ci) * inner + b) * ci + i % ci)] *
                 w[static_cast<size_t>(i * s.out * co + o)];
        y[static_cast<size_t>(((a * s.out + o / co) * inner + b) * co + o % co)] = acc;
      }
  out[0] = Tensor::from_f64(in[0]->dtype(), s.out_dims, y);
  return Status::ok();
}

}  // namespace

void register_signal(std::vector<OpDef>& t) {
  t.push_back({"DFT", 17, kMaxOpset, OpCategory::kLibrary, infer_dft, eval_dft});
}

}  // namespace stitch::ops
