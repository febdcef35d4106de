// Library calls: MatMul and Gemm through cuBLAS (CPU GEMM on the emu backend), Conv through
// cuDNN (CPU convolution on the emu backend), ConvTranspose through cuDNN's backward-data
// convolution (a CPU transposed convolution on the emu backend). Parameters are row-major and
// library-neutral; the runtime maps them to each library. Transposes of Gemm are folded into the call;
// MatMul's batch dimensions broadcast through per-operand batch strides (0 where an operand is broadcast).
#pragma once

#include <string>
#include <vector>

#include "codegen/gemm_folds.h"
#include "codegen/kernel.h"
#include "ops/op_params.h"
#include "support/status.h"

namespace stitch::codegen {

struct GemmParams {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;  // row-major: A is k x m when trans_a
  int64_t lda = 0, ldb = 0, ldc = 0;      // row-major leading dimensions
  double alpha = 1, beta = 0;             // C = alpha * op(A) op(B) + beta * C
  // "bias": then C[i][j] += bias[j] for a bias vector of n elements (args[3]); a cuBLASLt epilogue
  // on the GPU, so a Gemm whose C is a row vector needs no broadcast kernel. "gelu" and
  // "bias_gelu": then C = GELU (tanh form) of that (CUBLASLT_EPILOGUE_GELU / GELU_BIAS); "relu"
  // and "bias_relu": C = max(that, 0) (CUBLASLT_EPILOGUE_RELU / RELU_BIAS).
  // "residual" and "bias_residual": C += R, a tensor laid out as C (the last arg; beta is 0, and
  // on the GPU R is cuBLASLt's C input with beta 1 and C is its D).
  std::string epilogue;
  Dims batch;                             // batch dims of C (may be empty)
  Dims stride_a, stride_b, stride_c;      // per batch dim, in elements
  int64_t offset_a = 0, offset_b = 0;     // elements from the buffer's start (an operand read out of a Split)
};

// A convolution, or (kind "conv_transpose") the transposed convolution that is the forward one's
// gradient with respect to its input: Y [n, m, out] from X [n, c, in] and W [c, m / group,
// kernel] with Y[o] the sum of X[i] W[k] over o = i * stride + k * dilation - pad. `pads` and
// `out` are the transposed op's; no bias or epilogue.
struct ConvParams {
  int64_t n = 0, c = 0, m = 0, group = 1;  // batch, input channels, output channels
  Dims in, kernel, out;                    // spatial sizes
  Dims strides, dilations, pads;           // pads: symmetric, one per spatial axis
  bool has_bias = false;
  // "residual": then Y += Z, a tensor laid out as Y (the last arg); "relu" and "residual_relu":
  // then Y = max(that, 0). cuDNN's fused call (cudnnConvolutionBiasActivationForward) on the GPU.
  std::string epilogue;
};

struct LibraryCall {
  std::string kind;  // "gemm", "conv" or "conv_transpose"
  const Node* node = nullptr;
  DType dtype = DType::kF32;
  std::vector<const Value*> args;  // gemm: A, B, C, then the bias ("bias*" epilogues), then R ("*residual");
                                   // conv: X, W, Y, then B if has_bias, then Z ("residual*");
                                   // conv_transpose: X, W, Y
  GemmParams gemm;
  ConvParams conv;
  int64_t flops = 0;
};

// The steps that implement a library node: for a Gemm whose C is a vector of n elements and
// beta 1, the call with the bias epilogue; for any other C, a broadcast kernel that fills Y with
// C first (then beta accumulates onto it) and the call.
struct LibraryLowering {
  std::vector<Kernel> kernels;  // run before the call
  LibraryCall call;
};
// True when Gemm `n` adds its C through the bias epilogue: C is a vector of the output's n columns
// (shape [n] or [1,n]) and beta is 1. Any other C is broadcast by a kernel before the call.
bool gemm_bias_epilogue(const Node& n);

// Whether the runtime's transposed-convolution call runs ConvTranspose `n` (static shapes): cuDNN's
// backward-data convolution takes one pad per axis, so the op's begin pad p must lie in
// [0, d (k - 1)] and its output must be the extent whose forward convolution (pad p at both ends)
// gives the input back, which holds when output_padding + p - end pad lies in [0, stride). A bias
// is not part of the call (expand_conv_transpose moves it to an Add). Where it does not, the
// reason (without the node's name).
Status conv_transpose_call(const Node& n);
// Per spatial axis of a ConvTranspose's window: how far the op's output runs past the end of the
// call's with the op's begin pad at both ends, r = out + 2 pad - d (k - 1) - 1 - s (in - 1) (r < 0:
// it ends before the call's); and whether that begin pad lies in the call's [0, d (k - 1)]. The call
// takes the axis when the pad fits and 0 <= r < stride.
int64_t conv_transpose_excess(const ops::Window& w, int64_t axis);
bool conv_transpose_pad_fits(const ops::Window& w, int64_t axis);

// `fold`: what the call takes over from its neighbours (find_gemm_folds), or null.
StatusOr<LibraryLowering> lower_library(const Node& n, int first_kernel_index, const GemmFolds::Fold* fold = nullptr);

}  // namespace stitch::codegen
