// Lowering of single ONNX nodes to kernels or library calls: the unfused back end.
//
// Every memory-intensive node becomes one generated kernel (lower_node); MatMul, Gemm and Conv
// become library calls (lower_library in library.h); views (Reshape, Flatten, Squeeze,
// Unsqueeze, Identity, inference Dropout) become no step at all, their output sharing the
// input's storage. supports_node tells which nodes the back end can handle, so every
// unsupported node of a model is reported at once before any code is emitted.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "support/status.h"

namespace stitch::codegen {

enum class NodeLowering { kKernel, kLibrary, kView, kUnsupported };

// How the back end implements `n`; `why` receives the reason when unsupported.
NodeLowering classify_node(const Node& n, std::string* why = nullptr);

// One kernel for `n` (classify_node(n) == kKernel). `index` numbers the kernel in the schedule
// and prefixes its name.
StatusOr<Kernel> lower_node(const Node& n, int index);

// ---- shared by the lowering files ----
// The header comment and includes every generated file starts with.
std::string kernel_header(const Kernel& k, const std::string& extra = "");
// Opens the kernel's definition: extern "C" __global__ with launch bounds `block` and one
// restrict pointer per parameter (const for inputs), in k.params order.
class CudaWriter;
void open_kernel(CudaWriter& w, const Kernel& k, int64_t block);
// The parameter list of k's entry: "const float* __restrict__ x0, float* __restrict__ y0".
std::string kernel_signature(const Kernel& k);
// A C identifier fragment from an op type: "LayerNormalization" -> "layernormalization".
std::string snake(const std::string& s);
// Launch bounds used by the element-parallel kernels.
inline constexpr int kMapBlock = 256;
// Grid-stride kernels launch at most this many blocks (enough waves for 132 SMs x 8 blocks).
inline constexpr int64_t kMaxMapBlocks = 4096;

StatusOr<Kernel> lower_map(const Node& n, int index);     // elementwise, broadcast, layout
// Reductions, softmax, norms, pools (fused groups with them: stitch.h).
StatusOr<Kernel> lower_reduce(const Node& n, int index);

}  // namespace stitch::codegen
