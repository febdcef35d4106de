// Op parameters resolved the way the op rows resolve them (defaults, negative axes, auto_pad,
// clamping), shared with the back end so generated kernels and the reference interpreter read
// every attribute identically.
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::ops {

// Transpose: the permutation (attribute or the reversal default), validated.
StatusOr<std::vector<int64_t>> transpose_perm(const Node& n, int64_t rank);

// Split: the sizes of the outputs along the axis.
StatusOr<std::vector<int64_t>> split_sizes(const Node& n, int64_t dim, size_t num_outputs,
                                           std::optional<std::vector<int64_t>> split);

// Slice: output dims, and the input offset and per-axis input strides of output element 0..n.
struct SliceSpec {
  Dims out;
  int64_t base = 0;
  Dims strides;
};
StatusOr<SliceSpec> slice_spec(const Node& n, const Dims& in, std::vector<int64_t> starts,
                               std::vector<int64_t> ends, std::optional<std::vector<int64_t>> axes,
                               std::optional<std::vector<int64_t>> steps);

// Pad: begin pads for every axis then end pads for every axis.
StatusOr<std::vector<int64_t>> full_pads(const Node& n, int64_t rank, std::vector<int64_t> pads,
                                         std::optional<std::vector<int64_t>> axes);

// Reductions: which input axes are reduced.
struct ReduceAxes {
  std::vector<bool> reduced;  // per input axis
  bool identity = false;      // noop_with_empty_axes with no axes
};
StatusOr<ReduceAxes> reduce_axes(const Node& n, std::optional<std::vector<int64_t>> axes,
                                 int64_t rank);
// The same from the node itself (attribute or input 1 by opset); the input must be a constant
// (code generation).
StatusOr<ReduceAxes> constant_reduce_axes(const Node& n, int64_t rank);
// Softmax, LogSoftmax and Hardmax: the axes each normalization runs over. From opset 13 the one
// axis `axis` (default -1); before, the input flattened to 2-D at `axis` (default 1), so every axis
// from it on.
StatusOr<ReduceAxes> softmax_axes(const Node& n, int64_t rank);
// For each element of an input of dims `in` (row-major), the offset of its reduction's result in
// the output (`r`'s axes kept as size 1).
std::vector<int64_t> output_offsets(const Dims& in, const ReduceAxes& r);

// MatMul (numpy's matmul): the broadcast batch, the output's dims, M x K times K x N, and each
// operand's batch dims (a 1-D A is a row, a 1-D B a column, their axis dropped from the output).
struct MatMulShape {
  Dims batch, out;
  int64_t m = 0, k = 0, n = 0;
  Dims a_batch, b_batch;
};
StatusOr<MatMulShape> matmul_shape(const Node& node, const Dims& a, const Dims& b);

// Convolution and pooling windows over the spatial axes.
struct Window {
  int64_t spatial = 0;
  Dims kernel, strides, dilations, pad_begin, pad_end, in, out;
};
StatusOr<Window> forward_window(const Node& n, Dims in, Dims kernel, bool ceil_mode);
StatusOr<Window> conv_window(const Node& n, const Dims& x, const Dims& wt);
// ConvTranspose's window: `in` the input's extents, `out` the output's, pads resolved from pads,
// auto_pad or output_shape (negative where the output grows), output_padding inside `out`.
StatusOr<Window> convt_window(const Node& n, const Dims& x, const Dims& wt);
StatusOr<Window> pool_window(const Node& n, const Dims& x);
// Col2Im's blocks over the image (in: the image, kernel: the block, out: block positions per
// axis), checked against its input x [N, C x prod(block), L].
StatusOr<Window> col2im_window(const Node& n, const Dims& x, const Dims& image, const Dims& block);

// Resize: what each output position of each resized axis reads. Interpolation is separable, so a
// Resize is one 1-D resampling per axis, in axis order: output position o of axis `axis` is
// sum over t < taps of weight[o * taps + t] * input[index[o * taps + t]] (indices already clamped
// to the axis, as ONNX's edge padding does), or extrapolation_value where outside[o] is set
// (tf_crop_and_resize sampling outside the input).
struct ResizeAxis {
  int64_t axis = 0, in = 0, out = 0, taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
  bool any_outside() const;
};
struct ResizeSpec {
  Dims out;                      // the output's dims (-1 where an unbound input dim makes it unknown)
  std::vector<ResizeAxis> axes;  // the axes that change, in order; none when `out` is not static
  double extrapolation = 0;
};
// From the node's attributes, the input's dims and its constant roi, scales and sizes (null when
// omitted or empty). Errors name the node and say what to change.
StatusOr<ResizeSpec> resize_spec(const Node& n, const Dims& in, const Tensor* roi, const Tensor* scales,
                                 const Tensor* sizes);

// DepthToSpace and SpaceToDepth: the input as `split`, transposed by `perm`, read as `out`.
struct BlockMove {
  Dims split;
  std::vector<int64_t> perm;
  Dims out;
};
StatusOr<BlockMove> block_move(const Node& n, const Dims& x);

// DFT: the transform along `axis` of an input whose last axis holds 1 (real) or 2 (real and
// imaginary) parts: `in` values along the axis, a transform of `length` (dft_length) giving `out`
// values (length, or length / 2 + 1 one-sided forward), output dims `out_dims`. `length` and
// `axis` are the node's constant operands when it has them.
struct DftSpec {
  int64_t axis = 0, in = 0, length = 0, out = 0;
  bool inverse = false, onesided = false, complex_in = false, complex_out = true;
  Dims out_dims;
};
StatusOr<DftSpec> dft_spec(const Node& n, const Dims& x, std::optional<int64_t> length,
                           std::optional<int64_t> axis);
// The transform's weights as a row-major [in x (1 or 2), out x (1 or 2)] matrix: input value i's
// part p (real, imaginary) times it gives output o's part q at row i * parts_in + p and column
// o * parts_out + q. Inputs past the transform's length are zero rows.
std::vector<double> dft_matrix(const DftSpec& s);
// The largest weight matrix a DFT is written with (expand_dft): 64 MiB of float32. A longer
// transform stays a DFT, which the back end refuses.
inline constexpr int64_t kMaxDftWeights = int64_t{1} << 24;
// The most products an integer MatMul is written as (expand_integer_matmuls): outputs x K. The
// reference interpreter and an unfused plan hold them as one tensor (2^26 of int64 are 512 MiB).
inline constexpr int64_t kMaxIntegerProducts = int64_t{1} << 26;

// STFT (opset 17): the signal [batch, length, 1 or 2] (or [batch, length], real) cut into `frames` frames of
// `frame` values, one every `step`, each weighted by the window and transformed by `dft` (the forward DFT
// along axis 2 of [batch, frames, frame, parts]; one-sided on request, for a real signal only).
struct StftSpec {
  int64_t step = 0, frame = 0, frames = 0;
  DftSpec dft;
};
// `step` and `frame_length` as the node's constant inputs give them; `window`: its dims, if any.
StatusOr<StftSpec> stft_spec(const Node& n, const Dims& signal, int64_t step, const Dims* window,
                             std::optional<int64_t> frame_length);
// MelWeightMatrix's [dft_length / 2 + 1, num_mel_bins] weights, row-major, as ONNX's reference
// computes them (triangles between band edges evenly spaced in mel, each edge floored to a bin).
StatusOr<std::vector<double>> mel_weight_matrix(const Node& n, int64_t mel_bins, int64_t dft_length,
                                                int64_t sample_rate, double lower_hz, double upper_hz);

// LSTM, GRU and RNN (opsets 7 and 14): the layer's sizes and attributes, checked. Gates per step:
// 4 for LSTM (i, o, f, c), 3 for GRU (z, r, h), 1 for RNN; `acts[d]` the activations of direction d
// (LSTM f, g, h; GRU f, g; RNN f), each Sigmoid, Tanh, Relu, Softsign or Softplus (activations
// with alpha or beta parameters are refused by name). layout 1 puts the batch first in X, Y,
// the initial and the final states.
struct RecurrentSpec {
  int64_t gates = 1, hidden = 0, dirs = 1, seq = 0, batch = 0, input = 0;
  bool reverse_only = false;  // direction "reverse"
  int64_t layout = 0;
  std::optional<float> clip;
  bool input_forget = false, linear_before_reset = false;
  std::vector<std::vector<std::string>> acts;
  bool reversed(int64_t d) const { return reverse_only || d == 1; }
};
// `in` the dims of the node's inputs (null for an omitted one; -1 for a dimension not known yet),
// each checked against what X, W and the attributes make it; errors name the node and the input
// or attribute at fault.
StatusOr<RecurrentSpec> recurrent_spec(const Node& n, const std::vector<const Dims*>& in);
// The most time steps (over every direction) expand_recurrent writes out; a longer recurrence
// stays its op, which the back end refuses by name.
inline constexpr int64_t kMaxRecurrentSteps = 512;

// QuantizeLinear and DequantizeLinear (opsets 13 to 25): the quantized type `q` and its range, the
// float type `real` (DequantizeLinear's output; QuantizeLinear's division precision), and how the
// scale and zero point cover x: one value for all of it, a vector along `axis`, or (opset 21) x's
// shape with ceil(D / block) along `axis`. Errors name the node and the input or attribute at fault.
struct QuantOperand {
  DType type = DType::kF32;
  const Dims* dims = nullptr;  // null for an omitted input
};
struct QuantSpec {
  enum class Grain { kTensor, kAxis, kBlocked } grain = Grain::kTensor;
  int64_t axis = 0, block = 0;
  DType q = DType::kU8, real = DType::kF32;
  double lo = 0, hi = 255;
  // Set by bind(x's dims): x's size along the axis, the elements after it, the scale's blocks.
  int64_t dim = 1, inner = 1, blocks = 1;
  void bind(const Dims& x);
  // The scale's (and zero point's) element for x's element i (row-major; after bind).
  int64_t param_index(int64_t i) const;
};
StatusOr<QuantSpec> quant_spec(const Node& n, const std::vector<QuantOperand>& in, bool quantize);
// `v` rounded to float type `t`: float32 arithmetic's result, a half type's, or `v` itself for float64.
double round_to(DType t, double v);
// The range of quantized type `t` (int8, uint8, int16, uint16; int32's otherwise).
std::pair<double, double> int_range(DType t);

// MatMulInteger and ConvInteger (opset 10): the int32 product of A and B less their zero points;
// QLinearMatMul (10, 21) and QLinearConv (10): that product (plus QLinearConv's int32 bias) times
// a_scale * b_scale / y_scale, rounded half to even, plus y's zero point, saturated to y's type.
// Conv's X and W play A and B. The operands are int8 or uint8; each scale and zero point is one
// value, or per row of A (and y) and per column of B as ONNX lets it ([M], or [..., M, 1] and
// [..., 1, N]), or per output channel of W ([M]). `on_operand` and `on_output` hold, by input
// index, each scale's, zero point's and bias's shape made to broadcast against its operand and
// against the output (an [M] per row becomes [M, 1]; per channel [M, 1, ...]).
struct IntegerGemmSpec {
  bool conv = false, linear = false;
  // Input indices by role, -1 where the input is omitted (a zero point of 0).
  int a = 0, a_scale = -1, a_zp = -1, b = 1, b_scale = -1, b_zp = -1, y_scale = -1, y_zp = -1, bias = -1;
  DType out = DType::kI32;
  Dims out_dims;
  int64_t k = 0;          // products in each output's sum: MatMul's K, or C / group times the kernel's size
  double lo = 0, hi = 0;  // QLinear*: y's range
  std::map<int, Dims> on_operand, on_output;
};
StatusOr<IntegerGemmSpec> integer_gemm_spec(const Node& n, const std::vector<QuantOperand>& in);

// GridSample (opsets 16 to 28): the interpolation, the padding of points and pixels outside X, and
// the spatial rank r (grid's last axis). unnormalize maps a grid coordinate in [-1, 1] onto an axis
// of length d; reflect folds x back between lo and hi (lo when they meet); weights gives the taps'
// weights at fraction t past the first integer position (nearest 1, linear 2, cubic 4: Keys'
// kernel with a = -0.75, the first tap one before).
struct GridSampleSpec {
  enum class Mode { kNearest, kLinear, kCubic } mode = Mode::kLinear;
  enum class Padding { kZeros, kBorder, kReflection } padding = Padding::kZeros;
  bool align_corners = false;
  int64_t rank = 2;
  double unnormalize(double g, int64_t d) const;
  // The coordinates an axis of length d covers: [0, d - 1], or [-0.5, d - 0.5] without align_corners.
  std::pair<double, double> bounds(int64_t d) const {
    return align_corners ? std::pair<double, double>{0.0, double(d - 1)}
                         : std::pair<double, double>{-0.5, double(d) - 0.5};
  }
  static double reflect(double x, double lo, double hi);
  std::vector<double> weights(double t) const;
};
StatusOr<GridSampleSpec> grid_sample_spec(const Node& n, const Dims& x, const Dims& grid);

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12 to 28): the reduction, the
// ignored target value if any, and the class count; x [N, C, d1...] against a target [N, d1...] and
// optional weights [C], checked.
// A target outside [0, C) that is not the ignored value is refused (the reference stops; a kernel
// reports it, passes/expand_losses.cc's StitchIndexCheck): ONNX leaves it undefined, and PyTorch
// refuses it.
struct LossSpec {
  enum class Reduction { kNone, kSum, kMean } reduction = Reduction::kMean;
  std::optional<int64_t> ignore_index;
  int64_t classes = 0;
  // What a refused target reads as, "{value}" standing for it; `target` names the target input.
  std::string target_message(const std::string& target) const;
};
StatusOr<LossSpec> loss_spec(const Node& n, const Dims& x, const Dims& target, const Dims* weight);

// LRN: its attributes, checked (size required and positive, X at least N x C). Channel c's sum
// spans [c - lower(), c + upper()], clipped to the tensor (ONNX: floor((size - 1) / 2) below,
// ceil((size - 1) / 2) above).
struct LrnSpec {
  double alpha = 1e-4, beta = 0.75, bias = 1.0;
  int64_t size = 1;
  int64_t lower() const { return (size - 1) / 2; }
  int64_t upper() const { return size / 2; }
};
StatusOr<LrnSpec> lrn_spec(const Node& n, const Dims& x);

// ReverseSequence (opsets 10 to 28): x [T, B, ...] (or [B, T, ...]: time_axis and batch_axis are 0
// and 1 in either order), the first sequence_lens[b] steps of batch entry b reversed, the rest
// copied. Output step t of entry b reads step reversed_step(t, sequence_lens[b]).
struct ReverseSequenceSpec {
  int64_t time_axis = 0, batch_axis = 1;
};
StatusOr<ReverseSequenceSpec> reverse_sequence_spec(const Node& n, const Dims& x, const Dims& lens);
inline int64_t reversed_step(int64_t t, int64_t len) { return t < len ? len - 1 - t : t; }

// Compress (opsets 11 to 28): the positions a constant 1-D bool condition keeps, along the axis
// (or among the elements of x flattened, without one), `length` long (negative: not known); a
// condition shorter than that drops the rest, a longer one is an error naming the node.
StatusOr<std::vector<int64_t>> compress_positions(const Node& n, const Tensor& condition, int64_t length);

// MeanVarianceNormalization (opsets 9 and 13): (x - E x) / (sqrt(E (x - E x)^2) + 1e-9) with the
// expectations over `axes` (default 0, 2, 3: per channel of an N x C x H x W tensor), checked and
// made non-negative, sorted and distinct.
inline constexpr double kMvnEpsilon = 1e-9;  // ONNX's function body's
StatusOr<std::vector<int64_t>> mvn_axes(const Node& n, const Dims& x);

// Einsum: the equation with each subscript an id (letters by their character, the ellipsis's axes
// kEinsumEllipsis + j, right-aligned over the widest ellipsis), per input term and for the output
// (explicit, or implicit: the ellipsis, then the letters used once, in alphabetical order), and
// each id's size (an ellipsis axis of size 1 broadcasts).
inline constexpr int kEinsumEllipsis = 1000;
struct EinsumSpec {
  std::vector<std::vector<int>> terms;
  std::vector<int> out;
  std::map<int, int64_t> size;
  Dims out_dims;
};
StatusOr<EinsumSpec> einsum_spec(const Node& n, const std::vector<Dims>& inputs);

}  // namespace stitch::ops
