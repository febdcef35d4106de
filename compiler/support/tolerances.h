// Every numerical tolerance of the project, in one place, with its reason.
// A comparison passes when |actual - expected| <= atol + rtol * |expected|
// for every element (numpy.allclose); integer and bool outputs must match exactly.
#pragma once

namespace stitch {

struct Tolerance {
  double rtol;
  double atol;
  const char* reason;
};

// ONNX's own backend test runner (onnx/backend/test/runner) uses these
// defaults for its node tests; expected outputs there come from numpy.
inline constexpr Tolerance kOnnxNodeTest = {1e-3, 1e-7,
                                            "ONNX backend test runner defaults"};

// Some node tests have values near zero after cancellation (e.g. sums of
// random data), where atol 1e-7 is below float32 rounding of the inputs;
// ONNX's runner widens atol for such cases in the same way.
inline constexpr Tolerance kOnnxNodeTestLoose = {1e-3, 1e-5,
                                                 "float32 rounding of intermediate sums"};

// Node tests of several nodes after the front end (a composite op such as Attention expanded)
// with float16 or bfloat16 outputs: ONNX's reference implementation in numpy rounds every
// intermediate of the op (the scores, their scale, the mask, the softmax) to the half type, at
// other points than stitch's nodes do. Up to 8 roundings of 2^-11 (float16) or 2^-8 (bfloat16)
// each: measured 1.2e-3 relative (float16) and 1.1e-2 (bfloat16) on ONNX 1.23's causal Attention
// tests. A single node rounds once and keeps kOnnxNodeTest.
inline constexpr Tolerance kOnnxNodeTestF16 = {4e-3, 1e-4, "per-op float16 rounding in ONNX's reference, up to 8 steps"};
inline constexpr Tolerance kOnnxNodeTestBF16 = {3e-2, 1e-3,
                                                "per-op bfloat16 rounding in ONNX's reference, up to 8 steps"};

// Node tests of onnxruntime's contrib ops (tests/onnx_node/contrib), whose expected outputs are
// onnxruntime's float32 CPU kernels': their vectorized tanh, exp and erf approximations are off by
// about 1e-7 of their result's scale, which FastGelu's and QuickGelu's x * (...) multiplies by |x|
// where the output is near 0 (measured 6.0e-7 at |x| up to 9).
inline constexpr Tolerance kOnnxRuntimeNodeTest = {1e-3, 2e-6,
                                                   "onnxruntime's approximate float32 tanh, exp, erf"};

// Whole models against PyTorch or onnxruntime float32 outputs: float32
// kernels (reordered sums, fused multiply-add, approximate exp/erf) versus a
// double-accumulating reference differ by a few ulp per op, compounding over
// dozens of layers.
inline constexpr Tolerance kModelF32 = {1e-3, 1e-4,
                                        "f32 framework kernels vs double-accumulating reference"};

// Kernels that only move elements (gathers, scatters, copies) against the reference: the same
// values, bit for bit.
inline constexpr Tolerance kExact = {0, 0, "data movement copies elements"};

// Emulated CUDA kernels with float32 arithmetic against a double-precision
// reference: reordered float32 sums over rows of up to ~10^5 elements; the
// emulator computes fast-math intrinsics (__expf, rsqrtf) precisely.
inline constexpr Tolerance kEmuF32 = {1e-4, 1e-5,
                                      "f32 kernel sums vs double reference"};

// Emulated kernels whose outputs come from float32 sums over hundreds of products (a tiled GEMM's
// contraction) through a function that shrinks them (GELU's negative side): the sums' rounding is
// relative to the magnitude of their terms, not of the small output (measured: 1.5e-5 at an output
// of -0.041 for K = 272 over 2.1M outputs).
inline constexpr Tolerance kEmuF32LongSum = {1e-4, 5e-5,
                                             "f32 sums of hundreds of products, then a shrinking function"};

// Emulated kernels that store float16 outputs: one rounding to half
// (relative step 2^-11 = 4.9e-4) on top of the float32 error.
inline constexpr Tolerance kEmuF16Output = {1e-3, 1e-5,
                                            "one rounding to float16 of an f32 result"};

// A stitched float16 chain against the reference: the kernel keeps every intermediate in float32
// and rounds once, where the reference rounds each op's output to half (2^-11 relative each);
// for attention scores, their scaling, the mask and the softmax that is up to 8 such steps.
inline constexpr Tolerance kEmuF16Chain = {4e-3, 1e-4,
                                           "f32 intermediates vs per-op float16 rounding, up to 8 steps"};

// The same in bfloat16, whose step is 8 times float16's (2^-8 relative each rounding).
inline constexpr Tolerance kEmuBF16Chain = {3e-2, 1e-3,
                                            "f32 intermediates vs per-op bfloat16 rounding, up to 8 steps"};

// A float16 or bfloat16 output of sums whose terms reach magnitude 8 (a DFT of 8 points, attention
// over 6 keys, a group's statistics, as the type test draws them), where the reference rounds each
// op to the half type: one half step at the terms' magnitude (8 x 2^-11, 8 x 2^-8) apart, however
// small the output (measured: 9.8e-4 in float16 and 0.031 in bfloat16).
inline constexpr Tolerance kEmuF16Sums = {4e-3, 4e-3, "per-op float16 rounding of terms up to magnitude 8"};
inline constexpr Tolerance kEmuBF16Sums = {3e-2, 3.2e-2,
                                           "per-op bfloat16 rounding of terms up to magnitude 8"};

// A graph rewrite checked in the reference interpreter against the graph before it: both compute in
// float64, so only reordered or refactored sums differ (a rewrite that moves a half type's
// rounding is checked with kModelF16 or kModelBF16 instead).
inline constexpr Tolerance kRewriteReference = {1e-5, 1e-6, "float64 reference, sums reordered by a rewrite"};

// A rewrite that moves where float16 rounds (a layer scale folded into the weights: x (W c) + b c
// where the graph rounds x W + b, then its product with c), both sides computed by the float16
// reference, then a LayerNorm over 16 values: measured at most 0.0049 apart on a 2x5x16 block,
// a few float16 steps of the normalised values.
inline constexpr Tolerance kRewriteF16 = {1e-2, 1e-2,
                                          "float16 rounding moved by a rewrite, then a LayerNorm"};

// GELU's erf form run as its tanh form (--approximate-gelu: cuBLASLt's GELU epilogue): the two
// differ by at most 4.73e-4 (at x = -2.70), plus the f32 error of the GEMM around it.
inline constexpr Tolerance kGeluTanhForErf = {1e-3, 5e-4,
                                              "GELU tanh form vs erf form, max difference 4.73e-4"};

// Whole models in float16 against PyTorch's float16 outputs: the framework rounds every op's
// output to half (2^-10 relative step) where stitched kernels keep float32 inside and round once,
// and its GEMMs round their inputs and sums differently. Measured on 2-layer BERT, GPT-2 and LLaMA
// exports (bench/exports, values up to 4.3 after the last norm): at most 0.0059 apart, 3 half steps.
inline constexpr Tolerance kModelF16 = {1e-2, 1e-2,
                                        "per-op float16 rounding (2^-10 steps) vs f32 inside kernels"};

// The same in bfloat16 (2^-7 relative step, 8 times float16's): measured at most 0.047 apart on
// 2-layer BERT and LLaMA exports (outputs up to 4.3), 3 bfloat16 steps.
inline constexpr Tolerance kModelBF16 = {4e-2, 4e-2,
                                         "per-op bfloat16 rounding (2^-7 steps) vs f32 inside kernels"};

// Whole float32 models compiled with --tf32 against float32 outputs: every GEMM and convolution
// rounds its operands to TF32 (float16's 10-bit mantissa, 2^-11 relative) and sums in float32,
// compounding over the layers; the other ops stay float32.
inline constexpr Tolerance kModelTf32 = {
    1e-2, 5e-3, "TF32 operands (2^-11 relative) in every float32 GEMM and convolution"};

// Default for `stitchc run --expect` when the user gives no --rtol/--atol, for an output of
// float32 (or any other type); float16 and bfloat16 outputs get kModelF16 and kModelBF16, and
// float32 outputs of an artifact compiled with --tf32 kModelTf32. A float output of a model that
// stores or computes values in a narrower float type (float32 inputs and outputs around a float16
// model) gets that type's: its outputs carry that rounding.
inline constexpr Tolerance kRunDefault = kModelF32;

}  // namespace stitch
