// Lowering of single ONNX nodes to kernels or library calls: the unfused back end.
//
// Every memory-intensive node becomes one generated kernel (lower_node); MatMul, Gemm and Conv
// become library calls (lower_library in library.h); views (Reshape, Flatten, Squeeze,
// Unsqueeze, Identity, inference Dropout) become no step at all, their output sharing the
// input's storage. supports_node tells which nodes the back end can handle, so every
// unsupported node of a model is reported at once before any code is emitted.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel.h"
#include "support/status.h"

namespace stitch::codegen {

enum class NodeLowering { kKernel, kLibrary, kView, kUnsupported };

// How the back end implements `n`; `why` receives the reason when unsupported.
NodeLowering classify_node(const Node& n, std::string* why = nullptr);

// One kernel for `n` (classify_node(n) == kKernel). `index` numbers the kernel in the schedule
// and prefixes its name. It indexes in 32 bits when n's tensors have at most `index32_limit`
// elements (kernel.h); tests lower the limit to get the 64-bit form of a small kernel.
StatusOr<Kernel> lower_node(const Node& n, int index, int64_t index32_limit = kIndex32Limit);
// TensorScatter's kernel; `in_place`: its output shares past_cache's storage (schedule.cc), so only
// the update is written (lower_node gives the form that writes the whole output).
StatusOr<Kernel> lower_tensor_scatter(const Node& n, int index, bool in_place,
                                      int64_t index32_limit = kIndex32Limit);

// ---- shared by the lowering files ----
// The header comment and includes every generated file starts with.
std::string kernel_header(const Kernel& k, const std::string& extra = "");
// Opens the kernel's definition: extern "C" __global__ with launch bounds `block` (and
// k.min_blocks_per_sm when given) and one
// restrict pointer per parameter (const for inputs), in k.params order.
class CudaWriter;
void open_kernel(CudaWriter& w, const Kernel& k, int64_t block);
// ptxas feedback: ptxas may spill a kernel declared with its block size alone while using fewer
// registers than it could (measured with nvcc 13.0 for sm_90: a packed kernel whose parts took
// 32 to 40 registers each compiled at 32 registers with 24 bytes spilled, and at 48 with none
// given a minimum of 2 blocks of 256 per SM). register_room: the minimum number of blocks per SM
// that leaves each of k's threads `registers` (kRegistersPerSm / (block x registers), at least
// 1), or none when k's launch bounds already allow that many. give_register_room declares k's
// entry with it, rewriting its launch bounds in k.source; false when there is none.
inline constexpr int64_t kRegistersPerSm = 65536;  // sm_80 and sm_90 (CUDA C programming guide)
std::optional<int64_t> register_room(const Kernel& k, int registers);
bool give_register_room(Kernel& k, int registers);
// What one SM holds: registers, threads and shared memory (sm_90's by default; the cost model's
// device spec has a part's own).
struct SmLimits {
  int64_t registers = kRegistersPerSm;
  int64_t threads = 2048;
  int64_t smem = 228 * 1024;
};
// Blocks of k that one SM holds at once when each thread uses `registers`: registers go to a
// warp in units of 256 (8 per thread), each block's shared memory comes with 1 KB the system
// reserves, and an SM holds at most kMaxBlocksPerSm blocks (CUDA C++ Programming Guide, "Compute
// Capabilities", and its occupancy calculator, for compute capabilities 8.0 and 9.0). 0 when one
// block does not fit.
inline constexpr int64_t kMaxBlocksPerSm = 32;
inline constexpr int64_t kSmemReservedPerBlock = 1024;
int64_t resident_blocks_per_sm(const Kernel& k, int registers, const SmLimits& sm);
// Whether every block of k's grid is resident at once on `sms` SMs at `registers` per thread: then
// fewer registers would not run more of its blocks at a time, and registers over a budget set for
// occupancy cost it nothing (xLSTM's element kernels of 100 to 250 nodes run in 1 or 2 blocks).
bool grid_resident(const Kernel& k, int registers, int64_t sms, const SmLimits& sm);
// The parameter list of k's entry: "const float* __restrict__ x0, float* __restrict__ y0".
std::string kernel_signature(const Kernel& k);
// A C identifier fragment from an op type: "LayerNormalization" -> "layernormalization".
std::string snake(const std::string& s);
// Launch bounds used by the element-parallel kernels.
inline constexpr int kMapBlock = 256;
// Grid-stride kernels launch at most this many blocks (enough waves for 132 SMs x 8 blocks).
inline constexpr int64_t kMaxMapBlocks = 4096;

// Column reductions (an inner axis kept) with few long segments are tiled: a block of kTileBlock
// threads takes kTileSegments neighbouring segments, whose elements lie side by side in each row
// (coalesced), and splits each segment over kTileBlock / kTileSegments threads that combine
// through shared memory. Thread per segment otherwise: with fewer than kTileMaxSegments threads
// (1/16 of the 270336 an H100's 132 SMs hold) each looping over a segment of kTileMinLength or
// more, the kernel is a chain of dependent loads on a few SMs.
inline constexpr int64_t kTileBlock = 256;
inline constexpr int64_t kTileSegments = 32;
inline constexpr int64_t kTileMaxSegments = 16384;
inline constexpr int64_t kTileMinLength = 64;
inline bool column_tiled(int64_t segments, int64_t length) {
  return segments < kTileMaxSegments && length >= kTileMinLength;
}
// The start of a tiled kernel's body: `var` is the segment (column) of this thread, clamped to
// the last of `count` so that threads past it compute a copy and reach every barrier of
// stitch_dev::tile_column_reduce; `live` says whether it is a real one (only those store);
// `lane` and `step` walk down the segment. `block` is the block's index expression,
// `index_type` the type of first and var (int or long long).
void open_tile(CudaWriter& w, const std::string& block, const std::string& var, int64_t count,
               const std::string& index_type = "long long");

// 128-bit accesses: 4-byte types move 4 at a time as float4 or int4.
inline bool is_word(DType t) { return t == DType::kF32 || t == DType::kI32; }
inline const char* vec4_type(DType t) { return t == DType::kF32 ? "float4" : "int4"; }

// The segments (sets of elements that reduce together) of a reduction, softmax or
// normalization node as its segment kernel maps them, for the cost model: how many and how long,
// the loops over each (`reductions` of them end in a combine across the segment's threads), and
// the threads per segment (`lanes`) and in all.
struct SegmentShape {
  int64_t count = 0, length = 0;
  int loops = 0, reductions = 0;
  int64_t lanes = 1, threads = 0;
  bool tiled = false;
};
StatusOr<SegmentShape> segment_shape(const Node& n);

// Elementwise, broadcast, layout.
StatusOr<Kernel> lower_map(const Node& n, int index, IndexWidth ix);
// ScatterElements and ScatterND; TensorScatter (`in_place`: only its update is written).
// (lower_scatter.cc)
StatusOr<Kernel> lower_scatter(const Node& n, int index, IndexWidth ix);
StatusOr<Kernel> lower_tensor_scatter(const Node& n, int index, IndexWidth ix, bool in_place,
                                      const std::string& part_name = "");
// The fault of a TensorScatter `n` whose write index `first` (an expression) the reference
// interpreter refuses, for an axis of `len` cache positions and `count` updates: its message and
// the condition that finds it; both empty for a constant write index that is fine.
std::pair<std::string, std::string> tensor_scatter_check(const Node& n, const std::string& first, int64_t len,
                                                         int64_t count);
// A Transpose `n` (permutation `perm`) through 32x32 shared-memory tiles when it moves the
// input's inner axis and both sides of the tile are long enough; nothing otherwise.
std::optional<Kernel> lower_transpose_tiled(const Node& n, int index, const std::vector<int64_t>& perm,
                                            IndexWidth ix);
// Reductions, softmax, norms, global pools (fused groups with them: stitch.h).
StatusOr<Kernel> lower_reduce(const Node& n, int index, IndexWidth ix);
// MaxPool and AveragePool (lower_pool.cc).
StatusOr<Kernel> lower_pool(const Node& n, int index, IndexWidth ix);

}  // namespace stitch::codegen
