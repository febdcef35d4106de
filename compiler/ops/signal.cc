// DFT (opsets 17 and 20), STFT, the window functions and MelWeightMatrix (opset 17; an audio model's
// spectrogram front end, as torch.stft exports and Whisper's feature extractor write it).
// DFT: the transform's parameters resolved once (dft_spec), its weights as a
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

namespace {
// The most values a window or a mel matrix is computed with: 64 MiB of float32.
constexpr int64_t kMaxSignalConstant = int64_t{1} << 24;
}  // namespace

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

StatusOr<StftSpec> stft_spec(const Node& n, const Dims& x, int64_t step, const Dims* window,
                             std::optional<int64_t> frame_length) {
  // [batch, length] is read as real values too, as PyTorch's exports write it and onnxruntime reads it.
  if (x.size() != 2 && (x.size() != 3 || (x[2] != 1 && x[2] != 2)))
    return node_error(
        n, fmt::format("its signal {} must be [batch, length, 1] (real values) or [batch, length, 2] "
                       "(real and imaginary parts)",
                       dims_to_string(x)));
  if (window && window->size() != 1)
    return node_error(n, fmt::format("its window has shape {}; it must be 1-D", dims_to_string(*window)));
  if (step < 1) return node_error(n, fmt::format("frame_step is {}; it must be positive", step));
  StftSpec s;
  s.step = step;
  s.frame = frame_length.value_or(window ? (*window)[0] : x[1]);
  if (s.frame < 1 || s.frame > x[1])
    return node_error(
        n, fmt::format("frame_length is {}; it must be between 1 and the signal's length {}", s.frame, x[1]));
  if (window && (*window)[0] != s.frame)
    return node_error(n,
                      fmt::format("its window has {} values, but frame_length is {}", (*window)[0], s.frame));
  s.frames = (x[1] - s.frame) / step + 1;
  DftSpec& d = s.dft;
  d.axis = 2;
  d.in = d.length = s.frame;
  d.onesided = n.attr_int("onesided", 1) != 0;
  d.complex_in = x.size() == 3 && x[2] == 2;
  if (d.onesided && d.complex_in)
    return node_error(n,
                      "onesided=1 takes a real signal (a last axis of 1); a complex signal's spectrum has no "
                      "conjugate half to leave out: set onesided=0");
  d.out = d.onesided ? s.frame / 2 + 1 : s.frame;
  d.out_dims = {x[0], s.frames, d.out, 2};
  return s;
}

StatusOr<std::vector<double>> mel_weight_matrix(const Node& n, int64_t mel_bins, int64_t dft_length,
                                                int64_t sample_rate, double lower_hz, double upper_hz) {
  if (mel_bins < 1 || dft_length < 1 || sample_rate < 1)
    return node_error(n, fmt::format("num_mel_bins {}, dft_length {} and sample_rate {} must be positive",
                                     mel_bins, dft_length, sample_rate));
  if (!(lower_hz >= 0 && lower_hz < upper_hz))
    return node_error(
        n, fmt::format("the band [{}, {}] Hz must start at 0 or above and be non-empty", lower_hz, upper_hz));
  const int64_t rows = dft_length / 2 + 1;
  if (rows > kMaxSignalConstant / mel_bins)
    return node_error(n, fmt::format("a {} x {} matrix is more than the {} values stitch computes one with",
                                     rows, mel_bins, kMaxSignalConstant));
  // The band edges evenly spaced in mel (2595 log10(1 + f / 700)), num_mel_bins + 2 of them (the
  // step divides by that count, as ONNX's reference does), each turned into a DFT bin.
  const auto mel = [](double hz) { return 2595.0 * std::log1p(hz / 700.0) / std::log(10.0); };
  const double lo = mel(lower_hz), step = (mel(upper_hz) - lo) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> bin(static_cast<size_t>(mel_bins + 2));
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    const double hz = 700.0 * std::expm1((static_cast<double>(i) * step + lo) / 2595.0 * std::log(10.0));
    bin[static_cast<size_t>(i)] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
  }
  if (bin.back() > rows)
    return node_error(n,
                      fmt::format("upper_edge_hertz {} lies past the {} bins of a {}-point DFT at {} Hz (the "
                                  "highest is {} Hz)",
                                  upper_hz, rows, dft_length, sample_rate, sample_rate / 2));
  // Triangle i rises from bin i to its peak of 1 at bin i + 1 and falls to 0 at bin i + 2.
  std::vector<double> w(static_cast<size_t>(rows * mel_bins), 0.0);
  const auto at = [&](int64_t j, int64_t i) -> double& { return w[static_cast<size_t>(j * mel_bins + i)]; };
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t left = bin[static_cast<size_t>(i)], center = bin[static_cast<size_t>(i + 1)],
                  right = bin[static_cast<size_t>(i + 2)];
    if (center >= rows)
      return node_error(
          n, fmt::format("mel band {} peaks at bin {}, past the DFT's {} bins; lower upper_edge_hertz", i,
                         center, rows));
    if (center == left) at(center, i) = 1.0;
    for (int64_t j = left; j <= center && center > left; ++j)
      at(j, i) = static_cast<double>(j - left) / static_cast<double>(center - left);
    for (int64_t j = center; j < right; ++j)
      at(j, i) = static_cast<double>(right - j) / static_cast<double>(right - center);
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

// STFT's frame_step and, when given, frame_length: constants, one value each.
StatusOr<std::pair<int64_t, std::optional<int64_t>>> stft_operands(const InferContext& ctx) {
  ASSIGN_OR_RETURN(auto step, const_ints(ctx, 1, "frame_step"));
  if (step.size() != 1) return ctx.error("its frame_step must be one value");
  std::optional<int64_t> length;
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) {
    ASSIGN_OR_RETURN(auto v, const_ints(ctx, 3, "frame_length"));
    if (v.size() != 1) return ctx.error("its frame_length must be one value");
    length = v[0];
  }
  return std::pair{step[0], length};
}

Status infer_stft(InferContext& ctx) {
  if (!is_float(ctx.dtype(0)))
    return ctx.error(
        fmt::format("its signal is {}; STFT takes floating-point values", dtype_name(ctx.dtype(0))));
  const bool windowed = ctx.num_inputs() > 2 && ctx.has_input(2);
  if (windowed && ctx.dtype(2) != ctx.dtype(0))
    return ctx.error(fmt::format("its window is {} and its signal {}; they must be one type",
                                 dtype_name(ctx.dtype(2)), dtype_name(ctx.dtype(0))));
  ASSIGN_OR_RETURN(auto o, stft_operands(ctx));
  ASSIGN_OR_RETURN(StftSpec s,
                   stft_spec(ctx.node(), ctx.dims(0), o.first, windowed ? &ctx.dims(2) : nullptr, o.second));
  ctx.set_output(0, ctx.dtype(0), s.dft.out_dims);
  return Status::ok();
}

Status eval_stft(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor* window = in.size() > 2 ? in[2] : nullptr;
  std::optional<int64_t> length;
  if (in.size() > 3 && in[3]) length = in[3]->to_i64().at(0);
  ASSIGN_OR_RETURN(StftSpec s, stft_spec(n, in[0]->dims(), in[1]->to_i64().at(0),
                                         window ? &window->dims() : nullptr, length));
  const Dims& xd = in[0]->dims();
  const int64_t ci = s.dft.complex_in ? 2 : 1, cols = s.dft.out * 2;
  if (s.frame * ci * cols > kMaxDftWeights)
    return node_error(
        n, fmt::format("a {}-point transform needs more than the {} weights stitch evaluates one with",
                       s.frame, kMaxDftWeights));
  const std::vector<double> x = in[0]->to_f64(), w = dft_matrix(s.dft);
  const std::vector<double> win =
      window ? window->to_f64() : std::vector<double>(static_cast<size_t>(s.frame), 1.0);
  std::vector<double> y(static_cast<size_t>(xd[0] * s.frames * cols), 0.0);
  for (int64_t b = 0; b < xd[0]; ++b)
    for (int64_t f = 0; f < s.frames; ++f)
      for (int64_t o = 0; o < cols; ++o) {
        double acc = 0;
        for (int64_t i = 0; i < s.frame * ci; ++i)
          acc += x[static_cast<size_t>((b * xd[1] + f * s.step + i / ci) * ci + i % ci)] *
                 win[static_cast<size_t>(i / ci)] * w[static_cast<size_t>(i * cols + o)];
        y[static_cast<size_t>((b * s.frames + f) * cols + o)] = acc;
      }
  out[0] = Tensor::from_f64(in[0]->dtype(), s.dft.out_dims, y);
  return Status::ok();
}

// HannWindow, HammingWindow and BlackmanWindow (opset 17): `size` values of the window, computed
// once its size is known (a constant; the node folds away). Periodic (the default) spans size + 1
// points and drops the last; symmetric spans size. The coefficients are ONNX's reference's
// (Hamming's alpha is 25/46).
StatusOr<DType> output_datatype(const Node& n) {
  const int64_t code = n.attr_int("output_datatype", 1);
  const std::optional<DType> t = dtype_from_onnx(static_cast<int>(code));
  if (!t || *t == DType::kBool)
    return node_error(n, fmt::format("output_datatype {} is not a numeric ONNX type", code));
  return *t;
}

StatusOr<int64_t> window_size(const Node& n, const std::vector<int64_t>& v) {
  if (v.size() != 1 || v[0] < 1) return node_error(n, "its size must be one positive value");
  if (v[0] > kMaxSignalConstant)
    return node_error(n, fmt::format("its size {} is more than the {} values stitch computes a window with",
                                     v[0], kMaxSignalConstant));
  return v[0];
}

Status infer_window(InferContext& ctx) {
  ASSIGN_OR_RETURN(auto v, const_ints(ctx, 0, "size"));
  ASSIGN_OR_RETURN(int64_t size, window_size(ctx.node(), v));
  ASSIGN_OR_RETURN(DType t, output_datatype(ctx.node()));
  ctx.set_output(0, t, {size});
  return Status::ok();
}

Status eval_window(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(int64_t size, window_size(n, in[0]->to_i64()));
  ASSIGN_OR_RETURN(DType t, output_datatype(n));
  const double span = static_cast<double>(n.attr_int("periodic", 1) != 0 ? size : size - 1);
  std::vector<double> y(static_cast<size_t>(size), 1.0);  // a symmetric window of one point is 1
  for (int64_t i = 0; i < size && span > 0; ++i) {
    const double a = 2.0 * std::numbers::pi * static_cast<double>(i) / span;
    if (n.op_type == "HannWindow")
      y[static_cast<size_t>(i)] = std::pow(std::sin(a / 2), 2);
    else if (n.op_type == "HammingWindow")
      y[static_cast<size_t>(i)] = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(a);
    else
      y[static_cast<size_t>(i)] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
  }
  out[0] = Tensor::from_f64(t, {size}, y);
  return Status::ok();
}

// MelWeightMatrix (opset 17): [dft_length / 2 + 1, num_mel_bins] from constant scalars.
struct MelOperands {
  int64_t bins = 0, dft_length = 0, sample_rate = 0;
  double lower = 0, upper = 0;
};
MelOperands mel_operands(std::span<const Tensor* const> in) {
  return {in[0]->get_i64(0), in[1]->get_i64(0), in[2]->get_i64(0), in[3]->get_f64(0), in[4]->get_f64(0)};
}

Status infer_mel(InferContext& ctx) {
  std::vector<const Tensor*> in;
  for (size_t i = 0; i < 5; ++i) {
    const Tensor* t = ctx.constant(i);
    if (!t) return run_time_operand_error(ctx, i, "operand");
    if (t->size() != 1)
      return ctx.error(fmt::format("input {} must be one value, got shape {}", i, dims_to_string(t->dims())));
    in.push_back(t);
  }
  const MelOperands o = mel_operands(in);
  RETURN_IF_ERROR(
      mel_weight_matrix(ctx.node(), o.bins, o.dft_length, o.sample_rate, o.lower, o.upper).status());
  ASSIGN_OR_RETURN(DType t, output_datatype(ctx.node()));
  ctx.set_output(0, t, {o.dft_length / 2 + 1, o.bins});
  return Status::ok();
}

Status eval_mel(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const MelOperands o = mel_operands(in);
  ASSIGN_OR_RETURN(auto w, mel_weight_matrix(n, o.bins, o.dft_length, o.sample_rate, o.lower, o.upper));
  ASSIGN_OR_RETURN(DType t, output_datatype(n));
  out[0] = Tensor::from_f64(t, {o.dft_length / 2 + 1, o.bins}, w);
  return Status::ok();
}

}  // namespace

void register_signal(std::vector<OpDef>& t) {
  t.push_back({"DFT", 17, kMaxOpset, OpCategory::kLibrary, infer_dft, eval_dft});
  t.push_back({"STFT", 17, kMaxOpset, OpCategory::kLibrary, infer_stft, eval_stft});
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    t.push_back({w, 17, kMaxOpset, OpCategory::kShapeOnly, infer_window, eval_window});
  t.push_back({"MelWeightMatrix", 17, kMaxOpset, OpCategory::kShapeOnly, infer_mel, eval_mel});
}

}  // namespace stitch::ops
