// Stitched kernels: one generated kernel for a group of memory-intensive nodes (DESIGN.md,
// "Fusion: what the planner must know").
//
// Every value of a group is computed by *pulling*: the value of node n at coordinates c is an
// expression of its inputs at coordinates that n's op derives from c (the same coordinates for
// elementwise ops, a broadcast for broadcasting reads, a permutation for Transpose, an affine map
// for Slice, a clamped shift and a select for Concat, a loaded index for Gather, a re-split of the
// flat index for views). Values a group reads from outside are loaded at those coordinates;
// values it computes are held in registers and shared (by exact coordinates) within a scope.
//
// Two kernel shapes, chosen by the group's dominant ops:
//  - element (local stitching): no row op; one thread per element of the stored values' shape
//    in a grid-stride loop. Layout ops inside the group cost index arithmetic, not a round trip
//    through global memory. A value read at other elements than its readers' own is computed
//    again at each; where those elements lie in a tile of the domain's trailing axes that a warp
//    holds whole (a 4 x 4 matrix per token, normalized by its row and column sums as Adds of
//    Slices), each lane computes its own element once and the others are read from their lanes
//    by warp shuffles (lower_stitched keeps that form when it evaluates less).
//  - row (regional stitching): one or more row ops (Reduce* over trailing axes, Softmax,
//    LogSoftmax, LayerNormalization, InstanceNormalization) over the same rows. A warp (rows shorter than
//    1024) or a block (longer rows) owns a row and runs one pass per statistic (max, sum, mean, variance...),
//    each a strided loop plus a warp-shuffle or shared-memory tree; statistics stay in registers
//    for every later pass, so a decomposed layer norm (two ReduceMeans) or RMSNorm is one kernel.
//    Reductions of one pass whose inputs need no statistic still to come (a tensor's maximum and
//    minimum, E[x] and E[x^2]) share one loop, each with its own tree (StitchInfo::shared_pass).
//    A value several passes read can be cached in shared memory by the first pass instead of
//    being recomputed and re-read (each thread reads back only what it wrote: no barrier).
//  - column (regional stitching): the row kernel for row ops that reduce axes before a kept
//    inner one (a column sum, softmax down the columns, a mean over the sequence axis): 32
//    neighbouring columns per block, 8 threads down each, combined through shared memory, so the
//    reads of each step are coalesced rows; statistics stay in registers as for rows.
//  - row split over blocks (global stitching): the row kernel above when a few long rows would
//    leave most SMs idle. Each block loops over its segment of a row, writes its partial of every
//    statistic to a workspace in global memory, waits at a grid-wide barrier (a cooperative
//    launch) and combines its row's partials in segment order, so every block sees the same value.
//    Reductions sharing a pass publish all their partials before one barrier.
//
// Tiled GEMMs (gemm_tile.h): a MatMul by a rank-2 operand whose contraction is too long for a loop
// per element is the dominant op of an element kernel of its own shape: a block per output tile
// accumulates in registers over shared-memory slices of both operands, and the group's
// element-wise nodes after it run on the accumulators as its epilogue.
//
// Fine-grained GEMMs (FusionStitching): a MatMul of two computed operands with a short
// contraction (attention's Q.K^T over the head dimension) can be a member of any of these
// kernels. Its value at c is a loop over the contraction axis that pulls both operands at c's
// row and column (so head transposes, scalings and rotary halves in front of it stay index maps
// and registers), and the scores never go through global memory. The planner weighs it against
// the library call (fusion/plan.h).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/gemm_tile.h"
#include "codegen/kernel.h"
#include "ops/op_params.h"
#include "support/status.h"

namespace stitch::codegen {

enum class StitchRole { kNone, kPointwise, kLayout, kView, kRow, kContraction, kTiledGemm, kScan };
// How `n` can take part in a stitched kernel.
StitchRole stitch_role(const Node& n);

// A kernel that is a GEMM with its prologue and epilogue: at least one MatMul as a loop or a tile,
// every other node element-wise, data movement or a view (Q/K/V + bias, FFN1 + GELU, P.V). Any
// other kernel (a reduction, a softmax, a norm, or element-wise work with no GEMM) is
// memory-intensive: those are what the per-layer kernel targets count.
bool is_gemm_kernel(const Kernel& k);

// A MatMul a generated kernel may compute (as a loop or a tile): at most one constant operand,
// both operands and the product of one floating-point type, static shapes, operands of rank 2 or
// more with matching contraction, a non-empty product.
bool generatable_matmul(const Node& n);

// A fine-grained GEMM: a MatMul with at most one constant operand (attention's Q.K^T, or a small
// projection by a constant weight), of rank 2 or more, floating point, with a static contraction
// length of 1 to kMaxContraction. Returns that length. Whether its loop beats the library call
// (which reads a weight once, the loop once per row) is the cost model's call.
inline constexpr int64_t kMaxContraction = 256;
std::optional<int64_t> contraction_length(const Node& n);

// A floating-point running sum or product (CumSum, CumProd) along one axis (a constant) of a
// static length up to kMaxScan, which an element kernel computes as a loop per element over the
// elements before it (after it, reversed; itself left out, exclusive), in the order the op's own
// kernel adds them (lower_cumsum): the same result bit for bit. The loop's length grows with the
// position, so a line of the axis costs len (len + 1) / 2 steps; the cost model weighs them. Row
// kernels do not take scans.
inline constexpr int64_t kMaxScan = 256;
struct ScanInfo {
  int64_t axis = 0, len = 0;
  bool exclusive = false, reverse = false, product = false;
};
std::optional<ScanInfo> scan_info(const Node& n);

// Row ops reduce the trailing `axes` axes of their input 0 (dims `in`) in `passes` passes; or,
// when `column`, axes before the innermost one of more than one element, which is kept (a column
// reduction: `reduced` marks the axes; `axes` is 0).
struct RowOpInfo {
  Dims in;
  int64_t axes = 0;
  int passes = 0;
  bool column = false;
  std::vector<bool> reduced;  // per axis of `in`
  int64_t rows = 1, cols = 1;  // elements of the kept and of the reduced axes
};
StatusOr<RowOpInfo> row_op_info(const Node& n);
// Row ops whose output has their input's shape, a value per element of the row (Softmax,
// LogSoftmax, LayerNormalization, InstanceNormalization), rather than one per row.
bool row_op_keeps_shape(const Node& n);

// Where an axis of a value computed from a row op lies in a row kernel's domain: `axis` is a kept
// axis of the domain (the whole of it), or a reduced one of which this axis is a piece: the row's
// coordinate along it divided by `div`, modulo the value's extent (a Reshape splitting the row into
// heads makes two pieces). -1: an axis of one element whose place is not known. kOwn: an axis of
// the value's own, outside the domain, that an element-wise op broadcast the row's values over
// (each expert's routing weight over that expert's activations): the value holds, per row, its
// elements along the row's pieces times those along its own axes, stored by a wide loop.
// `span` > 1: kept axes `axis` to `axis + span - 1` of the domain merged into one, row-major (a
// Reshape that flattens the batch and sequence axes, as an MoE block reads its tokens); the first
// and last of them have more than one element.
struct RowPiece {
  static constexpr int64_t kOwn = -2;
  int64_t axis = -1;
  int64_t div = 1;
  int64_t span = 1;
  bool operator==(const RowPiece&) const = default;
};

struct StitchInfo {
  bool row = false;
  bool column = false;    // row kernels whose "rows" are columns: tiled (column_mapping)
  Dims domain;            // element kernels: the stored shape; row kernels: the rows' input shape
  int64_t axes = 0;       // row kernels: trailing axes in a row
  std::vector<bool> reduced;  // row kernels: the axes of `domain` a row runs along
  int64_t rows = 1, cols = 1;
  int passes = 1;         // loops over each row (row kernels), 1 for element kernels
  // Row kernels: row ops of one pass (a sum, mean, maximum, minimum, product or norm of the row)
  // that run in the pass of an earlier one, each mapped to that one: their inputs need no row op
  // from it on, so one loop over the row evaluates all of them and, in a row split over blocks, one
  // grid barrier serves all their partials (DynamicQuantizeLinear's maximum and minimum of one
  // tensor). Not counted in `passes`. Looked up only, never iterated (keyed by address).
  std::map<const Node*, const Node*> shared_pass;
  // Row kernels: reductions of integers and of floating point over the kernel's rows together. A
  // row split over blocks keeps its partials in one type, so such a kernel is not split.
  bool mixed_partials = false;
  // Row kernels: the extents per row of the wide values it stores (analyze_stitch), ascending; a
  // store loop each after the passes. They set the blocks per row (RowMapping::replicas).
  std::vector<int64_t> wide_widths;
  std::vector<const Value*> stored;
  // Row kernels: stored values computed from a row op through Transposes and Reshapes (a head
  // transpose after a norm), with the place in the domain of each of their axes. The store pass
  // (or, for a moved wide value, its width's store loop) writes each element of the row at those
  // coordinates. Other stored values are in the domain's order.
  std::map<const Value*, std::vector<RowPiece>> permuted;
  // Row kernels: the elements per row of a moved value: its extents along pieces of reduced axes
  // and along axes of its own (RowPiece::kOwn).
  int64_t moved_width(const Value* v) const {
    int64_t w = 1;
    const auto& pieces = permuted.at(v);
    for (size_t k = 0; k < pieces.size(); ++k)
      if (pieces[k].axis == RowPiece::kOwn || (pieces[k].axis >= 0 && reduced[pieces[k].axis]))
        w *= (*v->dims)[k];
    return w;
  }
  // Row kernels: whether moved value `v` has axes of its own of more than one element.
  bool has_own_axes(const Value* v) const {
    auto it = permuted.find(v);
    if (it == permuted.end()) return false;
    for (size_t k = 0; k < it->second.size(); ++k)
      if (it->second[k].axis == RowPiece::kOwn && (*v->dims)[k] != 1) return true;
    return false;
  }
  // Row kernels: whether the store pass over the rows writes `v` (the rows' shape, maybe moved);
  // else a wide store loop (wide_widths) or the per-row store does.
  bool full_row(const Value* v) const {
    return permuted.count(v) ? moved_width(v) == cols && !has_own_axes(v) : *v->dims == domain;
  }
  int64_t recompute_elements = 0;  // evaluations beyond one per value element (element_evaluations), in
                                   // instructions (op_instructions)
  // Fine-grained GEMMs in the group: multiply-adds per evaluation of the kernel's values (per
  // pass in row kernels), and the bytes those loops load beyond the first read of each outside
  // value (each value the B operand is computed from once per element and step, the A operand's
  // shared by a warp's 32 lanes), served by the caches. A scan's steps count as multiply-adds.
  double contraction_macs = 0;
  double contraction_ops = 0;  // evaluations of the operands' producers inside those loops (instructions)
  int64_t contraction_reads = 0;
  // Row kernels: the fine-grained GEMMs whose A operand is computed once per row and step into
  // shared memory (the kernel's rows_per_block x K values, filled before the passes), instead of
  // once per output element and step: A computed in the group (not a plain read), the product of
  // the rows' shape with the last axis the only reduced one, read at the kernel's own coordinates
  // (by element-wise and row ops), not inside another product's operand, within
  // kARowCacheBudget. Their A operands are charged once per row and step above.
  std::vector<const Node*> a_row_cached;
  // A tiled GEMM (element kernels only): the MatMul whose output is the domain, read from outside
  // the group, with the group's other nodes its epilogue.
  std::optional<GemmTile> tile;
  // Row kernels: reductions over rows of their own, each holding whole rows of the kernel (an
  // RMSNorm's statistics over a token's hidden vector, in a kernel whose rows are the token's heads
  // after the norm's scale moved past the Q/K projection). Each kernel row runs such a reduction's
  // passes over its outer row itself, before the first value that reads it, and keeps the result
  // in a register: the outer row is read once per kernel row (from the caches after the first).
  // Their results are read at coordinates that depend on the row only (outer_reductions checks).
  struct Outer {
    const Node* node = nullptr;
    int64_t rows = 1, cols = 1;  // the outer rows and their length
    int passes = 1;
    // Warp-per-row kernels: the warps of a block that share the outer row (neighbouring rows that
    // differ only along inner kept axes its result does not read) and reduce it together, each
    // over a strided share, combined through shared memory; 1: each warp alone.
    int64_t group = 1;
  };
  std::vector<Outer> outer;
  // In-place TensorScatters in the group (a KV cache's update written into the storage of the
  // cache, a graph input: ops::tensor_scatter_in_place): each one's update, computed in the group,
  // is stored into the cache at the write position along the op's axis (the write index of its
  // batch plus its own coordinate; dropped past the cache's end, wrapped when circular) instead of
  // a tensor of its own. Keyed by the update; the TensorScatter itself computes nothing.
  std::map<const Value*, const Node*> scattered;
  bool is_outer(const Node* n) const {
    for (const Outer& o : outer)
      if (o.node == n) return true;
    return false;
  }
};

// Whether `nodes` (in topological order) can be one stitched kernel that stores `stored` (the
// group's values read outside it); the reason when not (a user-facing Status). A TensorScatter
// among them writes its update in place (StitchInfo::scattered): the caller (the planner, which
// sees the graph) lets only ops::tensor_scatter_in_place ones in.
StatusOr<StitchInfo> analyze_stitch(const std::vector<const Node*>& nodes, const std::set<const Value*>& stored);

// The tile within which an element kernel over `d` may exchange values between lanes: its trailing
// axes, from `axis` on, whose `elements` (the most of 2 to 32 that are a power of two) tile a warp
// exactly, a thread per element. elements 0: none.
struct ExchangeTile {
  int64_t elements = 0;
  size_t axis = 0;
};
inline ExchangeTile exchange_tile(const Dims& d) {
  ExchangeTile t;
  int64_t p = 1;
  for (size_t k = d.size(); k-- > 0;) {
    p *= d[k];
    if (p > 32) break;
    if (d[k] != 1 && (p & (p - 1)) == 0) t = {p, k};  // from an axis of more than one element
  }
  return t;
}

// The inner axis of an element kernel's vector form, 4 elements of it a thread: the domain's last
// axis of more than one element, a multiple of 4, with 128-bit access to a 4-byte value of the
// domain's shape stored or read from outside (and no in-place scatter); nullopt where the kernel
// has a lane per element. A packed part (lower_packed) has a lane per element too, which the
// group's nodes cannot tell. The stitcher (Stitcher::vectorizable) and the analysis both ask it.
std::optional<size_t> vector_axis(const std::vector<const Node*>& nodes, const StitchInfo& info);

// Whether the exchange form reads a value of type `t` from another lane (warp shuffles of its
// compute type: float, double, int, long long).
bool lane_exchangeable(DType t);

// The sets of coordinates an element kernel of `nodes` storing `stored` over `domain` evaluates
// each node at, in the order of `nodes`, followed from the stored values through each node's index
// maps as the stitcher computes them (a Slice's start and step, a Transpose, a Pad, a Concat's
// inputs, a Gather's index; a broadcast drops an axis): the stitcher computes a value once per
// distinct set of coordinates (Kernel::node_evaluations). `sets` counts them (at most
// kMaxCoordinateSets per value; 0 for a node only the operands of fine-grained GEMMs and scans
// read, whose loops count_contractions counts), `per_element` the evaluations per element of the
// domain: with `vector_inner` (the vector form's inner axis) a quarter for a set that does not
// depend on that axis, which the thread's 4 elements share. With `exchange` (the exchange form,
// a lane per element), a value of the domain's shape read at another element of its exchange tile
// comes from the lane that computed it instead (one of `exchanges`).
constexpr size_t kMaxCoordinateSets = 256;
struct CoordinateSets {
  std::vector<int64_t> sets;
  std::vector<double> per_element;
  int64_t exchanges = 0;
};
// With `rows`, a row kernel over `domain` (its rows' shape): each row op's input is read at the
// domain's coordinates too (its passes), a norm or softmax reads its input where it is read, and a
// statistic reads nothing where it is read.
CoordinateSets coordinate_sets(const std::vector<const Node*>& nodes, const std::vector<const Value*>& stored,
                               const Dims& domain, std::optional<size_t> vector_inner, bool exchange,
                               bool rows = false);

// An element kernel of `nodes` (info from analyze_stitch): how many times its code computes each
// node per element of the domain, in the order of `nodes` (coordinate_sets; StitchInfo::
// recompute_elements counts those beyond one per element of the node's value), in the vector form
// where the kernel takes it, and whether it takes the exchange form instead (as lower_stitched
// chooses: where its evaluations and shuffles are fewer), a lane per element.
struct ElementEvaluations {
  std::vector<double> per_element;
  bool exchange = false;
};
ElementEvaluations element_evaluations(const std::vector<const Node*>& nodes, const StitchInfo& info);

// analyze_stitch of a group without in-place TensorScatters (stitch_scatter.cc splits them off):
// the updates in `scattered` are stored values, which may be views' results. Another stored view's
// result is a tensor of its own in the view's shape, of a value the kernel computes and reads in
// that shape itself (a router's scores flattened for its top k and read by the next kernel).
StatusOr<StitchInfo> analyze_members(const std::vector<const Node*>& nodes,
                                     const std::set<const Value*>& stored,
                                     const std::map<const Value*, const Node*>& scattered);

// The kernel for such a group. `cache` lets a row kernel keep a value read by several passes in
// shared memory (the cost model's choice). It indexes in 32 bits when its tensors have at most
// `index32_limit` elements (kernel.h's kIndex32Limit); tests lower it to get the 64-bit form of a
// small kernel.
StatusOr<Kernel> lower_stitched(const std::vector<const Node*>& nodes, const std::set<const Value*>& stored,
                                int index, bool cache = true, int64_t index32_limit = kIndex32Limit);

// The slice a stitched kernel reads for Slice node `n` (its starts, ends, axes and steps must be
// constants).
StatusOr<ops::SliceSpec> stitch_slice(const Node& n);

// The begin pads of every axis then the end pads a stitched kernel applies for Pad node `n` (its
// pads, axes and constant value must be constants; modes constant, edge, reflect and wrap).
StatusOr<std::vector<int64_t>> stitch_pads(const Node& n);

// The outputs of `nodes` a kernel of them must store: graph outputs and values read by a node
// outside the group (`users` is Graph::users()).
std::set<const Value*> group_outputs(const Graph& g,
                                     const std::unordered_map<const Value*, std::vector<Node*>>& users,
                                     const std::vector<const Node*>& nodes);

// Independent (horizontal) stitching: several groups with no path between them in one launch.
// Part i is generated as a __device__ function over its own block range; the entry dispatches on
// blockIdx.x. Parts must share a block size; their shared-memory caches share one block's budget
// (a part whose cache would overflow it recomputes instead).
struct StitchPart {
  std::vector<const Node*> nodes;
  std::set<const Value*> stored;
  // A TensorScatter alone that writes its update into its cache input's storage
  // (ops::tensor_scatter_in_place): lowered by lower_tensor_scatter, not the stitcher.
  bool scatter_in_place = false;
};
StatusOr<Kernel> lower_packed(const std::vector<StitchPart>& parts, int index);
// One part of a packed kernel (for lower_packed): a static __device__ function `part_name`
// taking the kernel's parameters, then its block index and block count.
StatusOr<Kernel> lower_stitched_part(const std::vector<const Node*>& nodes, const StitchInfo& info, int index,
                                     bool cache, const std::string& part_name);

// How a row kernel maps rows to threads:
//  - warp per row, 8 rows per block (rows shorter than 1024);
//  - block per row (longer rows);
//  - a row split over `segments` blocks (global stitching), when so few rows are long that a
//    block per row would leave most SMs idle: each block reduces its segment, publishes the
//    partial in global memory, waits at a grid-wide barrier and combines its row's partials.
//    The kernel is cooperative and persistent: its grid (rows x segments, at most
//    kCooperativeBlocks) must be resident at once. Packed kernels (allow_split false) never split.
struct RowMapping {
  bool warp_per_row = true;
  int64_t block = 256;
  int64_t rows_per_block = 8;
  int64_t segments = 1;  // blocks per row; > 1: the row split over blocks
  int64_t segment = 0;   // elements per segment (the whole row when segments == 1)
  bool column = false;   // tiled columns: kTileSegments per block, kTileBlock / kTileSegments threads each
  // Row kernels with wide values: blocks per block's rows. Each replica runs the row's passes
  // itself (the statistics are recomputed, no block waits for another), then stores its share of
  // the row and of each wide value (wide_chunk): the wide loops, up to hundreds of elements per
  // row, are spread over more of the GPU than the rows alone would fill.
  int64_t replicas = 1;
  bool split() const { return segments > 1; }
  int64_t lanes() const { return warp_per_row ? 32 : column ? block / rows_per_block : block; }
};
RowMapping row_mapping(int64_t rows, int64_t cols, bool allow_split = true);
// Column row kernels (a reduction over axes before the kept innermost one): as the segment
// kernels' tiled mapping (lower.h), 32 neighbouring columns per block of 256 threads, 8 threads
// down each column, combined through shared memory.
RowMapping column_mapping(int64_t cols);
// The mapping a row kernel with this analysis uses. With wide values: the row's own mapping (never
// split) and replicas until each thread stores at most kWideLoadsPerThread elements of the widest
// wide value, within kWideMaxBlocks blocks.
RowMapping row_mapping(const StitchInfo& info, bool allow_split = true);
inline constexpr int64_t kWideLoadsPerThread = 4;  // one round trip with 4 loads in flight (cost.h)
inline constexpr int64_t kWideMaxBlocks = 1024;    // 8 blocks of 256 threads on each of 128 SMs
// The elements per row one replica stores of a value `width` long per row: a multiple of the
// mapping's lanes, so replica q's share starts at q * wide_chunk and every thread keeps its lane.
int64_t wide_chunk(const RowMapping& m, int64_t width);
// Words for the mapping ("warp per row, 8 rows per block", "row split over 24 blocks of 512
// threads"...).
std::string row_mapping_text(const RowMapping& m);
// A split row kernel runs kSplitBlock threads per block and at most kCooperativeBlocks blocks:
// 128 SMs' worth of blocks, co-resident on every sm_80 and sm_90 part with 64 or more SMs (at most
// 2 blocks of 128 threads per SM; the CUDA C++ Programming Guide allows 2048 threads and 32 blocks
// per SM). The emulator runs every thread of a cooperative grid at once on its own guarded stack
// (two memory mappings each; Linux allows 65530 per process by default), so 128 x 128 threads is
// also what it can hold with room to spare.
inline constexpr int64_t kSplitBlock = 128;
inline constexpr int64_t kCooperativeBlocks = 128;
// Rows are split only when they give fewer blocks than this (half of the smallest wave above)...
inline constexpr int64_t kSplitMaxRows = 64;
// ...and each segment keeps at least this many elements (8 per thread, two rounds of 4 loads).
inline constexpr int64_t kSplitMinSegment = 1024;
// Shared memory a row kernel would use to cache one value of element size `bytes`; 0 when the
// row (or the block's segment of it) is too long to cache within the per-block budget.
int64_t row_cache_bytes(const RowMapping& m, int64_t cols, int64_t elem_bytes);
// Shared memory for a fine-grained GEMM's A rows of `len` values of type `t` (compute type) in a
// row kernel mapped by `m`: one row per warp of a block (warp per row), else one.
int64_t a_row_cache_bytes(const RowMapping& m, int64_t len, DType t);
// Static shared memory a row kernel may use for caches: 32 KiB per block of 256 threads keeps 5
// blocks (40 warps) per SM on sm_80 (164 KiB) and 7 on sm_90 (228 KiB), within the 48 KiB static limit.
inline constexpr int64_t kRowCacheBudget = 32 * 1024;
// Static shared memory a row kernel may use for its fine-grained GEMMs' A rows
// (StitchInfo::a_row_cached): with kRowCacheBudget and the reduction scratch, within 48 KiB.
inline constexpr int64_t kARowCacheBudget = 8 * 1024;

}  // namespace stitch::codegen
