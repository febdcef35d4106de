// The parsed artifact: what the backends execute. Mirrors schedule.json (docs/artifact-format.md).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "stitch/runtime.hpp"

namespace stitch::rt {

enum class StorageKind { kArena, kWeights, kInput, kOutput, kFault };

struct BufferDesc {
  std::string name, dtype;
  std::vector<int64_t> dims;
  StorageKind storage = StorageKind::kArena;
  int64_t offset = 0;
  int index = 0;
  int64_t bytes = 0;
};

// A check a kernel makes on its input data at run time (an index inside its axis): when it fails,
// the kernel records `code` and the offending value in the session's fault word.
struct FaultDesc {
  uint64_t code = 0;
  std::string node, op, message;  // message: "{value}" stands for the offending value
};

struct KernelDesc {
  std::string name;
  std::array<unsigned, 3> grid{1, 1, 1}, block{1, 1, 1};
  int64_t smem = 0;
  bool cooperative = false;  // grid-wide barriers: launched cooperatively, every block resident
  std::vector<FaultDesc> faults;
};

struct GemmDesc {
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 0;
  std::vector<int64_t> batch, stride_a, stride_b, stride_c;
  bool bias = false;  // epilogue "bias": C[i][j] += bias[j], the bias is the step's fourth buffer
  bool gelu = false;  // epilogue "gelu"/"bias_gelu": then C[i][j] = GELU(C[i][j]), tanh form
  bool relu = false;  // epilogue "relu"/"bias_relu": then C[i][j] = max(C[i][j], 0)
  // epilogue "residual"/"bias_residual": C[i][j] += R[i][j], R laid out as C, the step's last buffer
  bool residual = false;
  int64_t offset_a = 0, offset_b = 0;  // elements into A's and B's buffers
  bool has_epilogue() const { return bias || gelu || relu || residual; }  // a cuBLASLt call
};

// A convolution, or (a conv_transpose step) the transposed convolution: Y [n, m, out] from
// X [n, c, in] and W [c, m / group, kernel], Y[o] the sum of X[i] W[k] over
// o = i * stride + k * dilation - pad (cuDNN's backward-data convolution); no bias or epilogue.
struct ConvDesc {
  int64_t n = 0, c = 0, m = 0, group = 1;
  std::vector<int64_t> in, kernel, out, strides, dilations, pads;
  bool has_bias = false;
  bool residual = false, relu = false;  // y = relu(conv(x) + bias + z): cuDNN's fused call
  bool has_epilogue() const { return residual || relu; }
};

struct StepDesc {
  enum Op { kKernel, kGemm, kConv, kConvTranspose, kCopy } op = kKernel;
  int kernel = -1;
  std::vector<int> args;  // buffer ids
  std::string dtype;      // library calls
  GemmDesc gemm;
  ConvDesc conv;
  int src = -1, dst = -1;
  int64_t bytes = 0;
  std::string node;  // first ONNX node, for messages
};

struct ModelData {
  std::string dir;
  std::vector<TensorInfo> inputs, outputs;
  // Graph inputs fixed when the artifact was compiled (--constant-input), and their bytes: not
  // inputs of a session, which checks a caller that still feeds one against them.
  std::vector<TensorInfo> fixed_inputs;
  std::vector<std::string> fixed_bytes;
  // Per output, the input whose buffer holds it (written in place: a KV cache update), or -1.
  std::vector<int> output_in_input;
  std::vector<std::string> archs, backends;
  int64_t arena_bytes = 0, weights_bytes = 0;
  // float32 GEMM and convolution calls on TF32 tensor cores (compiled with --tf32); else float32.
  bool tf32 = false;
  std::vector<BufferDesc> buffers;
  std::vector<KernelDesc> kernels;
  std::vector<StepDesc> steps;
  std::vector<uint8_t> weights;
  std::string step_text(size_t i) const;  // "step 12 (kernel k011_map_add, node '...')"
  bool has_faults = false;                // some kernel checks its input data (a buffer of storage "fault")
};

int64_t dtype_bytes(const std::string& dtype);  // 0 for unknown names

// Element offsets into A, B and C of every matrix of a GEMM step's batch, over its first `dims`
// batch dims (the rest are the caller's), row-major over the batch; A and B include their offsets.
struct BatchOffset {
  int64_t a, b, c;
};
std::vector<BatchOffset> batch_offsets(const GemmDesc& g, size_t dims);

[[noreturn]] void fail(int code, const std::string& msg);

}  // namespace stitch::rt
