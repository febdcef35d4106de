// Kernel IR: what the back end knows about one generated kernel. It is small on purpose
// (DESIGN.md): it carries the launch configuration, the parameter list (which graph values the
// kernel reads and writes, in order), the ONNX nodes it implements, and the emitted source. The
// schedule writer turns it into a launch step; the artifact writer into a .cu file.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace stitch::codegen {

// A value's dims: every value the back end sees has them (shape inference ran).
inline const Dims& dims(const Value* v) { return *v->dims; }

struct KernelParam {
  std::string name;           // in the kernel signature
  const Value* value = nullptr;
  bool output = false;
};

// A check a kernel makes at run time on its input data (an index inside its axis): when it fails,
// the kernel goes on with a safe value and records `code` in the session's fault word
// (stitch_dev::fault), and the runtime reports the node and `message` after the run, with the
// text "{value}" in it replaced by the offending value. The code hashes the node's name and the
// message: the same in every kernel that makes the check, and nonzero. The node is the one checked
// (ops/index_check.h's checked_node: for a StitchIndexCheck, the node its rewrite replaced).
struct KernelFault {
  uint64_t code = 0;
  std::string node, op;
  std::string message;
};

struct Kernel {
  std::string name;                 // deterministic: k012_map_add, k013_row_softmax...
  std::vector<const Node*> nodes;   // the ONNX nodes it implements
  std::string mapping;              // thread mapping in words, for the header and report
  std::string scheme = "single node";  // or "local", "regional", "global", "independent" (stitched kernels)
  std::vector<KernelParam> params;  // kernel arguments, all device pointers
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t smem_bytes = 0;  // dynamic shared memory
  int64_t static_smem_bytes = 0;  // __shared__ arrays the source declares (stitched kernels)
  int64_t bytes_moved = 0;  // global memory bytes read + written, ideal caching
  // __launch_bounds__'s second argument when > 0: ptxas keeps registers within what this many
  // blocks per SM allow. Tiled GEMMs give 2: without it ptxas aims at more resident blocks than
  // their accumulators fit and spills (measured with nvcc 13.0 for sm_90: 48 registers and 60
  // bytes spilled for 4 x 4 accumulators, 126 registers and none for 8 x 8 with 2).
  int64_t min_blocks_per_sm = 0;
  std::string source;      // the whole .cu file
  // Global stitching: the kernel waits at grid-wide barriers, so it must be launched cooperatively
  // (every block resident at once), and it exchanges per-block partials through `workspace`, a
  // scratch buffer of its own (an output parameter the schedule gives arena storage for this step).
  bool cooperative = false;
  std::shared_ptr<Value> workspace;
  std::vector<KernelFault> faults;  // its run-time checks, when it takes the fault word
  // Stitched kernels: how many times its code computes a node's value (views aside). Each node
  // once per vector lane and pass, and once more at each further position its value is read at
  // (through gathers, slices, transposes...): chains of such reads multiply the copies.
  int64_t evaluations = 0;
  std::map<const Node*, int64_t> node_evaluations;  // the same per node (looked up, not iterated)
  // Element kernels: values read from the lane that computed them (warp shuffles within a tile)
  // instead of computed again (stitch.h).
  int64_t lane_exchanges = 0;
};

// The session's fault word: two uint64 (a fault's code, then its value), one for the whole
// schedule, a parameter of every kernel with faults. The schedule gives it storage of its own
// (Storage::kFault), never the arena. Shared by every graph; nothing writes to it at compile time.
const Value* fault_word();
// Adds a check of `n` to `k` (once per code) and returns the code to pass to stitch_dev::fault.
uint64_t add_fault(Kernel& k, const Node& n, const std::string& message);
// The statement that reports a failed check of `n` with `value` the offending value (add_fault);
// the kernel takes the fault word as parameter `fault`, added to k.params at the first check.
std::string fault_call(Kernel& k, const Node& n, const std::string& message, const std::string& value);
// The expression of StitchIndexCheck `n` (ops/index_check.h) on index `x`: x, with a fault of the node
// it checks recorded when x lies outside the check's bounds (stitch_dev::checked).
std::string index_check_expr(Kernel& k, const Node& n, const std::string& x);
// The statement that checks index `j` (a long long read from the indices, input 1, of gather `n`)
// against axis `data_axis` of its data (input 0) and makes it non-negative: out of range it becomes
// 0 (a read inside the data) and reports a fault of `n`. `component`: the element of each index
// tuple `j` is (GatherND), or -1. Only the wrap where the indices are known to lie inside the axis
// (known_in_range).
std::string index_check(Kernel& k, const Node& n, const std::string& j, int64_t data_axis,
                        int64_t component = -1);
// Whether the elements offset, offset + stride, ... of index tensor `ind` are known at compile time
// to lie in [-dim, dim): a constant's (the front end refuses a constant index out of range with the
// node's name), or every element's by the bounds of what computes it (ops/value_range.h: the
// clamped positions of an expanded TensorScatter, say). Then its kernel needs no run-time check.
bool known_in_range(const Value* ind, int64_t dim, int64_t stride = 1, int64_t offset = 0);

// Generated kernels index in 32 bits (int offsets, coordinates and loop counters; fewer registers
// and no 64-bit multiplies or divisions) when every tensor they touch has at most this many
// elements: an index, its products with strides and a grid-stride loop's next index (at most
// 2^22 past the last: kMaxMapBlocks x kMapBlock x 4 lanes) then stay below 2^31. Larger ones
// index in 64 bits.
inline constexpr int64_t kIndex32Limit = int64_t{1} << 30;

// The integer type of a kernel's index arithmetic, and its literals.
struct IndexWidth {
  bool narrow = false;
  const char* type() const { return narrow ? "int" : "long long"; }
  const char* suffix() const { return narrow ? "" : "LL"; }
  std::string lit(int64_t v) const { return std::to_string(v) + suffix(); }
};
// Narrow when every input and output of `nodes` has at most `limit` elements.
inline IndexWidth index_width(const std::vector<const Node*>& nodes, int64_t limit) {
  for (const Node* n : nodes)
    for (const auto* vs : {&n->inputs, &n->outputs})
      for (const Value* v : *vs)
        if (v && v->dims && num_elements(*v->dims) > limit) return {false};
  return {true};
}

// The C type a tensor of `t` is stored as in device memory, and the type kernels compute in
// (half and bfloat16 compute in float, integers in 64 bits).
std::string storage_type(DType t);
std::string compute_type(DType t);
// Bytes of one value of compute type `ct` in shared memory: 8 for double and the 64-bit integers,
// 4 for float (and for bool, an over-estimate).
int compute_bytes(const std::string& ct);
// A letter naming compute type `ct` in a kernel's shared buffers (scratch_f, tile_d, outer_i...).
std::string type_tag(const std::string& ct);

}  // namespace stitch::codegen
