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
// A C identifier fragment from an op type: "LayerNormalization" -> "layernormalization".
std::string snake(const std::string& s);
// Launch bounds used by the element-parallel kernels.
inline constexpr int kMapBlock = 256;
// Grid-stride kernels launch at most this many blocks (enough waves for 132 SMs x 8 blocks).
inline constexpr int64_t kMaxMapBlocks = 4096;

StatusOr<Kernel> lower_map(const Node& n, int index);     // elementwise, broadcast, layout
// One kernel for a group of per-element nodes with one output shape (local stitching); stores the
// outputs in `escaping` (read outside the group or graph outputs).
StatusOr<Kernel> lower_fused_map(const std::vector<const Node*>& nodes, const std::set<const Value*>& escaping,
                                 int index);
// A per-element chain inlined into the loads of a segment kernel (regional stitching): the
// segment kernel reads `value` (its input 0) by calling `function` on the flat index instead of
// loading it; `inputs` are the chain's external inputs in the function's parameter order.
// The same machinery serves as an epilogue: `bound` (the segment op's output) arrives as the
// function's second argument `v`, and `value` is what the chain computes from it and stores.
struct Prologue {
  std::vector<const Node*> nodes;
  const Value* value = nullptr;
  const Value* bound = nullptr;  // epilogues only
  std::string function;  // name
  std::string source;    // the device function's text
  std::vector<const Value*> inputs;
};
StatusOr<Prologue> lower_prologue(const std::vector<const Node*>& nodes, const Value* value, int index,
                                  const Value* bound = nullptr);

// Reductions, softmax, norms, pools; with a prologue, input 0 is computed on the fly.
StatusOr<Kernel> lower_reduce(const Node& n, int index, const Prologue* prologue = nullptr,
                              const Prologue* epilogue = nullptr);
// True when lower_reduce accepts a prologue for this node.
bool takes_prologue(const Node& n);

}  // namespace stitch::codegen
