// The stitched-kernel generator (stitch.h), shared by its files: stitch.cc (pulling values,
// element and tiled GEMM kernels, the entry points), stitch_loops.cc (an element's contraction and
// running-scan loops), stitch_rows.cc (row kernels) and stitch_index.cc (flat indices and reshaped
// coordinates). Internal to codegen: include stitch.h for the interface.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "codegen/scalar_ops.h"
#include "codegen/stitch.h"
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "support/check.h"

namespace stitch::codegen::detail {

// The longest contraction a vectorised element kernel unrolls (4 lanes x 64 steps of straight
// code per product; longer ones keep a loop per lane).
inline constexpr int64_t kUnrolledLaneContraction = 64;

using ops::strides_of;

// One term of a coordinate that is a sum of others: `weight` times (base / div) % extent, where
// base (an atomic or parenthesised expression) lies in [0, base_extent). The remainder is left out
// of the text when (base / div) stays below extent anyway (wraps() false).
struct Digit {
  std::string base;
  int level = 0;
  int64_t weight = 1;
  int64_t base_extent = 1;
  int64_t div = 1;
  int64_t extent = 1;  // the digit lies in [0, extent)
  bool wraps() const { return (base_extent + div - 1) / div > extent; }
  // ll: the suffix of the kernel's integer literals ("LL" in 64-bit index arithmetic, "" in 32).
  std::string text(const char* ll) const {
    std::string t = base;
    if (div > 1) t = fmt::format("({} / {}{})", t, div, ll);
    if (wraps()) t = fmt::format("({} % {}{})", t, extent, ll);
    return t;
  }
};

// An expression and the loop level it depends on (0: the row or the whole kernel, 1: the loop).
// A coordinate that a reshape made by merging axes also keeps its terms as digits (s is their
// sum), so that a later reshape which splits it again takes the digits apart instead of dividing
// (reshape_coords).
struct SExpr {
  SExpr() = default;
  SExpr(std::string expr, int lvl, std::vector<Digit> ds = {})
      : s(std::move(expr)), level(lvl), digits(std::move(ds)) {}
  std::string s;
  int level = 0;
  std::vector<Digit> digits;
};
using Coords = std::vector<SExpr>;

// The coordinate (var / inner) % extent of an index `var` in [0, total) (the remainder left out
// where var / inner stays below extent), kept as a digit of var so that reads which join it with
// its neighbouring coordinates again need no arithmetic (reshape_coords, flat_index).
inline SExpr index_piece(const std::string& var, int level, int64_t total, int64_t inner, int64_t extent,
                         const char* ll) {
  Digit x{var, level, 1, total, inner, extent};
  return {x.text(ll), level, {x}};
}

inline std::string fnm(const std::string& ct, const char* name) {
  return ct == "float" ? std::string(name) + "f" : name;
}

// One stitched kernel's generator: values are pulled at coordinates (at, compute) into scopes of
// lines per loop level, memoised by value and coordinates, then an emit_* method writes the kernel
// around them (element, tiled GEMM or row kernel, or a part of a packed one).
class Stitcher {
 public:
  // part_name empty: a whole kernel. Otherwise a part of a packed kernel (lower_packed): a
  // __device__ function of that name taking the block index and block count as bid and nblk.
  // exchange: an element kernel whose domain ends in a tile of 2 to 32 elements (exchange_tile)
  // reads the values it computes at other elements of the thread's tile from the lanes that
  // computed them (warp shuffles) instead of computing them again.
  Stitcher(const std::vector<const Node*>& nodes, const StitchInfo& info, int index, bool cache,
           const std::string& part_name = "", int64_t index32_limit = kIndex32Limit, bool exchange = false)
      : nodes_(computed(nodes, info)), info_(info), cache_allowed_(cache), part_(!part_name.empty()) {
    if (exchange && !info.row && !info.tile) {
      const ExchangeTile t = exchange_tile(info.domain);
      xtile_ = t.elements;
      xaxis_ = t.axis;
    }
    for (const Node* n : nodes_) {
      for (const Value* v : n->outputs)
        if (v) producer_[v] = n;
      rounds_ = rounds_ || n->op_type == "Round";
    }
    width_ = index_width(nodes, index32_limit);
    width_.narrow = width_.narrow && num_elements(info.domain) <= index32_limit &&
                    (!info.tile || info.tile->index_type() == "int");
    k_.nodes = nodes;
    std::string first = snake(nodes.front()->op_type), last = snake(nodes.back()->op_type);
    k_.name =
        fmt::format("k{:03d}_{}_{}", index, info.row ? (info.column ? "cols" : "rows") : "fused", first);
    if (nodes.size() > 2) k_.name += "_to";
    if (nodes.size() > 1) k_.name += "_" + last;
    if (part_) k_.name = part_name;
    k_.scheme = info.row ? "regional" : "local";
  }

  StatusOr<Kernel> run();
  // Elements each thread computes (4 in a vectorised element kernel).
  int lanes() const { return vec_ ? 4 : 1; }

 private:
  struct Scope {
    std::vector<std::string> lines;
    std::map<std::string, SExpr> memo;
  };

  // ---- entry ----
  void open_entry(CudaWriter& w, const std::string& scheme, int64_t block);
  // A packed part's bid and nblk are long long parameters.
  std::string block_index() const { return by_block("bid", "blockIdx.x"); }
  std::string block_count() const { return by_block("nblk", "gridDim.x"); }
  std::string by_block(const char* part, const char* whole) const {
    if (part_) return width_.narrow ? fmt::format("(int){}", part) : part;
    return fmt::format("({}){}", ix(), whole);
  }
  // The type of the kernel's index arithmetic, its literals' suffix, and such a literal.
  const char* ix() const { return width_.type(); }
  const char* ll() const { return width_.suffix(); }
  std::string lit(int64_t v) const { return width_.lit(v); }

  // ---- parameters, loads, stores ----
  std::string param(const Value* v, bool output) {
    for (const KernelParam& p : k_.params)
      if (p.value == v && p.output == output) return p.name;
    std::string name = fmt::format("{}{}", output ? "y" : "x", output ? outs_++ : ins_++);
    k_.params.push_back({name, v, output});
    k_.bytes_moved += num_elements(dims(v)) * dtype_size(v->dtype);
    return name;
  }
  void line(int level, const std::string& s) { scopes_[level].lines.push_back(s); }
  std::string fresh(const char* prefix) { return fmt::format("{}{}", prefix, counter_++); }
  // A run-time check of `n` (kernel.h's fault_call).
  std::string fault(const Node& n, const std::string& message, const std::string& value) {
    return fault_call(k_, n, message, value);
  }
  // Gather `n`'s index value `idx` as a coordinate along axis `data_axis` of its data: read in 64
  // bits (an int64 tensor's value may be anything), a negative one counted from the end, one still
  // out of range taken as 0 (the read stays inside the data) and reported as a fault of `n`
  // (kernel.h's index_check; `component` as there), then narrowed to the kernel's index width.
  // Bound at idx's loop level.
  SExpr data_index(const SExpr& idx, const Node& n, int64_t data_axis, int64_t component = -1);

  // The offset of `v` at `c`: the flat index when c are the domain's own coordinates.
  SExpr offset(const Value* v, const Coords& c) {
    const Dims& d = dims(v);
    if (d == info_.domain && same(c, dom_)) return flat_;
    SExpr e = flat_index(c, d);
    if (e.s.empty()) e.s = "0";
    return e;
  }
  // sum of c[k] * stride[k] over the contiguous layout of `d` ("" when every term is zero), and
  // the loop level it depends on; neighbouring pieces of one coordinate (digits) joined again.
  SExpr flat_index(const Coords& c, const Dims& d) const;
  static bool same(const Coords& a, const Coords& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (a[k].s != b[k].s) return false;
    return true;
  }
  static int level_of(const Coords& c) {
    int l = 0;
    for (const SExpr& e : c) l = std::max(l, e.level);
    return l;
  }
  // Coordinates `c` of a value broadcast (numpy style) into it, read in `in`'s own dims: its axes
  // align with c's trailing ones, and an axis of 1 is read at 0.
  static Coords broadcast_coords(const Coords& c, const Dims& in) {
    const size_t off = c.size() - in.size();
    Coords ci;
    for (size_t d = 0; d < in.size(); ++d) ci.push_back(in[d] == 1 ? SExpr{"0", 0} : c[d + off]);
    return ci;
  }
  std::string key(const Value* v, const Coords& c) {
    std::string k = fmt::format("{}@", static_cast<const void*>(v));
    for (const SExpr& e : c) k += e.s + ",";
    return k;
  }
  const SExpr* find(const std::string& k) {
    for (const Scope& s : scopes_)
      if (auto it = s.memo.find(k); it != s.memo.end()) return &it->second;
    return nullptr;
  }
  SExpr bind(const std::string& k, const std::string& type, const std::string& expr, int level,
             const std::string& note = "") {
    const std::string name = fresh("v");
    line(level, fmt::format("const {} {} = {};{}", type, name, expr, note.empty() ? "" : "  // " + note));
    SExpr r{name, level};
    scopes_[level].memo[k] = r;
    return r;
  }
  // The members the kernel computes: an in-place TensorScatter's update is stored into its cache
  // (StitchInfo::scattered), the op itself computes nothing.
  static std::vector<const Node*> computed(const std::vector<const Node*>& nodes, const StitchInfo& info) {
    std::vector<const Node*> out;
    for (const Node* n : nodes)
      if (info.scattered.empty() || n->op_type != "TensorScatter") out.push_back(n);
    return out;
  }
  // Stored value `v` at coordinates `c` (`off` in its own layout) = `val`; an in-place TensorScatter's
  // update goes into its cache instead.
  Status store_at(const Value* v, const Coords& c, const std::string& off, const std::string& val, int level);
  void store(const Value* v, const std::string& off, const std::string& val, int level) {
    const std::string p = param(v, true), ct = compute_type(v->dtype), st = storage_type(v->dtype);
    if (ct == st)
      line(level, fmt::format("{}[{}] = {};", p, off, val));
    else
      line(level, fmt::format("{}[{}] = stitch_dev::cvt<{}>({});", p, off, st, val));
  }

  // The 4 lanes' values of `v` at `off` (a multiple of 4, an expression safe before ">>") as one
  // 128-bit store.
  void store4(const Value* v, const std::string& off, const std::vector<std::string>& x, int level) {
    const std::string st = storage_type(v->dtype), vt = vec4_type(v->dtype);
    line(level,
         fmt::format(
             "reinterpret_cast<{0}*>({1})[{2} >> 2] = make_{0}(({3}){4}, ({3}){5}, ({3}){6}, ({3}){7});", vt,
             param(v, true), off, st, x[0], x[1], x[2], x[3]));
  }

  // ---- pulling values ----
  StatusOr<SExpr> at(const Value* v, const Coords& c);
  // Exchange: `v` (computed by `n`, of the domain's shape) at `c`, another element of this
  // thread's tile, as the value the lane holding that element computed; nullopt where the
  // exchange does not apply (c leaves the tile, or depends on a loop inside the element's).
  StatusOr<std::optional<SExpr>> from_lane(const Node& n, const Value* v, const Coords& c,
                                           const std::string& k);
  void maybe_cache(const Value* v, const Coords& c, const SExpr& r) {
    if (!cache_.count(v) || !same(c, dom_) || cached_ready_.count(v) || r.level != 1) return;
    line(1, fmt::format("{}[cache_row + j] = {};", cache_.at(v), r.s));
    cached_ready_.insert(v);
  }

  StatusOr<SExpr> compute(const Node& n, const Value* v, const Coords& c, const std::string& k);
  // Round `n` of a float32 Div by a value fixed outside the loop (QuantizeLinear's x / scale) at
  // `c`: stitch_dev::round_quotient, a product with the divisor's reciprocal, and the division only
  // where the product cannot decide the integer. nullopt where the pattern does not apply.
  StatusOr<std::optional<SExpr>> round_quotient(const Node& n, const Coords& c, const std::string& k);
  StatusOr<SExpr> concat(const Node& n, const Coords& c, const std::string& k);
  // The load of `v` at `c` as an expression, unbound, when v is read from outside the group
  // (directly or through views of such a value) and not from a row cache; nullopt otherwise.
  std::optional<SExpr> outside_load(const Value* v, Coords c);

  // A fine-grained GEMM's value at c: a loop over the contraction axis, pulling A at (batch, row,
  // step) and B at (batch, step, column) with numpy broadcasting of the batch axes. Values that
  // depend on the step are computed in a scope of their own one level deeper (the loop body);
  // those that do not are hoisted to the level where they belong, before the loop.
  StatusOr<SExpr> contraction(const Node& n, const Coords& c, const std::string& k);
  // A running sum or product's value at c (scan_info): a loop over the elements of its axis up to
  // c's (from the end when reversed; c's own left out when exclusive), in the order the op's own
  // kernel adds them, pulling the input at each; as contraction(), values that depend on the step
  // are computed in the loop's body, the others hoisted before it.
  StatusOr<SExpr> scan(const Node& n, const Coords& c, const std::string& k);
  // In a vectorised element kernel, a product read by the 4 lanes at 4 neighbouring columns
  // (its inner coordinate the domain's, maybe shifted by a multiple of 4, as vector_component
  // requires) with B an f32 operand of the kernel whose columns are the product's: lane 0 runs one
  // loop for the 4, each step loading A's element once and B's 4 columns as one float4, and the
  // other lanes take their sums. `lane_key` is the product's key at lane 0's coordinates, from
  // any lane's, when c has that form. Nothing (the loop per lane) otherwise.
  std::optional<std::string> lane_key(const Node& n, const Coords& c) const;
  StatusOr<std::optional<SExpr>> lanes_contraction(const Node& n, const Coords& c, const std::string& k);
  // Row kernels: for a product whose A row is cached (StitchInfo::a_row_cached) and pulled at
  // the row's own coordinates `aco` (the step last), a loop before the passes that computes A's
  // `len` values of this row into shared memory, once per kernel and row; returns the start of
  // the read ("arow0[(threadIdx.x >> 5) * 16 + ", the step and "]" to follow). None otherwise.
  StatusOr<std::optional<std::string>> a_row(const Node& n, const Coords& aco, int64_t len);

  // Coordinates of a view's input from its output's: the same non-1 dims in order need no
  // arithmetic. Otherwise the flat index over the output is a sum of digits (each output
  // coordinate times its stride, or the digits a merged coordinate kept), and each input
  // coordinate, (flat / stride) % extent, is taken apart digit by digit (split_digits): axes
  // merged become a multiply-add, an axis split one division and one remainder of that axis
  // alone, and a merge split back the coordinates it merged. Only digits that carry into each
  // other go through a division of their sum.
  Coords reshape_coords(const Coords& c, const Dims& od, const Dims& id);
  // Coordinates of a Tile's input (dims `id`) from its output's (`od`): each modulo the input's
  // extent along a repeated axis.
  Coords tile_coords(const Coords& c, const Dims& od, const Dims& id) const;
  // Coordinates of a Pad's input from its output's: each padded axis's moved by its begin pad,
  // then clamped into the input (constant and edge modes, so every load stays in bounds),
  // wrapped, or reflected without repeating the edge. Constant mode also gives the condition that
  // every padded coordinate is inside the input (empty in other modes) and its level.
  struct PadCoords {
    Coords coords;
    std::string inside;
    int level = 0;
  };
  StatusOr<PadCoords> pad_coords(const Node& n, const Coords& c) const;
  // A Pad's fill value in compute type `ct` (0 without a constant value).
  static std::string pad_fill(const Node& n, const std::string& ct);
  // (sum of ds / s) % e, ds each in [0, extent): digits whose weight is a multiple of s * e
  // drop out; when the rest below s cannot carry into s (or is one digit of a weight dividing s,
  // which is divided itself, over digits that cannot carry into it), the quotient is the digits
  // of weights that are multiples of s, divided by s, and the remainder is taken digit by digit
  // where a weight divides e, and of the sum only when it can still reach e; otherwise the sum is
  // bound to a temporary (one per distinct sum, in `flats`) and divided. Neighbouring pieces of
  // one coordinate are joined again (x / 16 * 16 + x % 16 is x).
  SExpr split_digits(const std::vector<Digit>& ds, int64_t s, int64_t e,
                     std::map<std::string, std::string>& flats);

  // ---- element kernels ----
  // Vectorized element kernels: the component of a 128-bit load that holds `v` at `c` for this
  // lane, when the 4 lanes read 4 consecutive elements of `v` starting at a multiple of 4: v's
  // innermost axis of more than one element is read at the domain's inner coordinate, maybe
  // shifted by a constant multiple of 4 (a Slice), its extent is a multiple of 4, and no other
  // axis depends on the inner coordinate. (The domain's inner coordinate is a multiple of 4 at
  // lane 0 and every outer stride of v a multiple of its inner extent, so the start is aligned.)
  // Lanes 1-3 map their coordinates back to lane 0's to find the same load.
  std::optional<std::string> vector_component(const Value* v, const Coords& c, const std::string& p);
  // Lane 0's coordinates from this lane's `c`, when axis `kv` (extent a multiple of 4) is read at
  // the domain's inner coordinate shifted by a constant multiple of 4 and no other axis depends
  // on it (vector_component's condition). Nothing otherwise.
  std::optional<Coords> lane0_coords(const Coords& c, int kv, int64_t extent) const;

  // Whether the element kernel moves 4 elements per thread with 128-bit accesses: a whole kernel
  // (not a packed part) with a vector axis (vector_axis: its innermost extent a multiple of 4, so
  // the 4 elements share every outer coordinate and stay inside one 16-byte-aligned vector of each
  // operand of the domain's shape; buffers start 256-byte aligned).
  bool vectorizable() const;

  // dom_: the coordinates of flat index `flat` in `d` (a size-1 axis at 0). Returns the innermost
  // axis of more than one element (d.size() when there is none).
  size_t domain_coords(const Dims& d, const std::string& flat = "i");

  Status emit_elements();

  // ---- tiled GEMMs ----
  // A block per output tile (gemm_tile.h); then, for each of the thread's accumulators inside the
  // product, the group's values at that element with the product bound to the accumulator.
  Status emit_tiled();

  // ---- row kernels ----
  // The strided loop over this thread's elements of the row (of its block's segment when split).
  // `cols` (an outer reduction's row, never split) for a row of another length.
  std::string row_loop(int64_t cols = -1) const {
    if (map_.split() && cols < 0)
      return fmt::format("for ({} j = jbeg + lane; j < jend; j += step) {{", ix());
    return fmt::format("for ({} j = lane; j < {}; j += step) {{", ix(), lit(cols < 0 ? info_.cols : cols));
  }
  // A replica's share of a row `width` long (RowMapping::replicas): the loop over this thread's
  // elements of it. In 32 bits where the row allows: with a 64-bit counter and bound, ptxas
  // spilled a register around the division's slow path in LLaMA's gate kernel.
  // With `per` 4 (a vectorised wide loop), each thread takes 4 neighbouring elements a step.
  std::string share_loop(int64_t width, int per = 1) const {
    const std::string lane = per == 1 ? "lane" : fmt::format("{} * lane", per);
    const std::string step = per == 1 ? "step" : fmt::format("{} * step", per);
    if (map_.replicas == 1)
      return fmt::format("for ({} j = {}; j < {}; j += {}) {{", ix(), lane, lit(width), step);
    const int64_t chunk = wide_chunk(map_, width);
    if (chunk * map_.replicas < INT32_MAX)
      return fmt::format("for (int j = rep * {0} + {2}; j < (rep + 1) * {0} && j < {1}; j += {3}) {{", chunk,
                         width, lane, step);
    return fmt::format(
        "for (long long j = rep * {0}LL + {2}; j < (rep + 1) * {0}LL && j < {1}LL; j += {3}) {{", chunk,
        width, lane, step);
  }
  // Whether a wide pass over `vs` (one width) moves 4 neighbouring elements per thread as 128-bit
  // accesses: 4-byte values of one shape whose last axis is reduced and a multiple of 4 long, each
  // replica's share a multiple of 4, and no contraction in the group (the lanes of an element
  // kernel share their loops in ways a row kernel's do not).
  bool wide_vectorizable(const std::vector<const Value*>& vs, int64_t width) const;
  // The index of this block's rows; with replicas, also `rep`, which of them this block is
  // (replicas of the same rows are neighbours, so the row they all read is in L2 at once).
  std::string row_block(CudaWriter& w) const {
    if (map_.replicas == 1) return block_index();
    w.line("const int rep = (int)({} % {});", block_index(), lit(map_.replicas));
    return fmt::format("({} / {})", block_index(), lit(map_.replicas));
  }
  // Pass over the row: acc = op(acc, elem(j)) then a warp or block tree; over `cols` elements
  // (an outer reduction's row) when given.
  StatusOr<std::string> pass(const std::string& ct, const std::string& init, const std::string& op,
                             const std::function<StatusOr<std::string>()>& elem, int64_t cols = -1);
  // One reduction of a pass: its accumulator's type and first value, the functor combining two,
  // and the element it takes at the loop's coordinate.
  struct Reduction {
    std::string ct, init, op;
    std::function<StatusOr<std::string>()> elem;
  };
  // A pass of several reductions over the kernel's rows (StitchInfo::shared_pass), or of one over
  // `cols` elements: one loop taking every reduction's element (what their inputs share computed
  // once), a tree each, and in a row split over blocks one grid barrier for all. The accumulators.
  StatusOr<std::vector<std::string>> shared_pass(const std::vector<Reduction>& rs, int64_t cols = -1);
  // A reduction of one pass (single_pass_reduction) over its input read at `xc` (a row of `cols`):
  // its Reduction, and its result from the accumulator (a mean's division, a norm's square root).
  struct OnePass {
    Reduction r;
    std::function<std::string(const std::string&)> result;
  };
  StatusOr<OnePass> one_pass(const Node& n, const Coords& xc, int64_t cols);
  // Declares row op n's result, a value per row, as `result`; its name.
  std::string reduce_result(const Node& n, const std::string& result);

  // A row op's statistics (below) from its passes over its input read at `xc` (the domain's
  // coordinates, or an outer reduction's over its own row of `cols`).
  struct Stats;
  StatusOr<Stats> row_stats(const Node& n, const Coords& xc, int64_t cols);
  Status emit_row_op(const Node& n);
  // An outer reduction's result (StitchInfo::outer) at its output's coordinates `c`, which depend on
  // the row only: its passes over its own row, emitted where it is first read, kept for the row.
  StatusOr<SExpr> outer_value(const Node& n, const Coords& c, const std::string& k);

  // A row op's output at c (the current row; D coordinates for Softmax and LayerNormalization).
  StatusOr<SExpr> row_value(const Node& n, const Coords& c, const std::string& k);

  Status emit_rows();

  // A row op's statistics: max and 1/sum (softmax), max and lse (log-softmax), mean and rstd
  // (norm), the result (reduce).
  struct Stats {
    std::string a, b;
  };

  const std::vector<const Node*> nodes_;
  const StitchInfo& info_;
  bool cache_allowed_;
  bool part_;
  // Exchange: elements per tile (0: off) and the tile's first axis of the domain (the shuffles
  // emitted are k_.lane_exchanges).
  int64_t xtile_ = 0;
  size_t xaxis_ = 0;
  // The kernel's index arithmetic: 32-bit when every tensor it touches has at most kIndex32Limit
  // elements (and a tiled GEMM's offsets are int too).
  IndexWidth width_;
  std::map<const Value*, const Node*> producer_;
  // The kernel rounds to integers (a quantization): its divisions stay exact, since a quotient an
  // ulp away can cross a rounding boundary and move a quantized value a whole step.
  bool rounds_ = false;
  Kernel k_;
  int ins_ = 0, outs_ = 0, counter_ = 0, passes_ = 0;
  std::vector<Scope> scopes_;
  Coords dom_;
  SExpr flat_;
  RowMapping map_;
  std::map<const Node*, Stats> stats_;
  std::set<std::string> scratch_;
  bool vec_ = false;       // element kernel (or a row kernel's wide pass) moving 4 elements per thread
  bool wide_vec_ = false;  // a row kernel with a vectorised wide pass
  int lane_ = 0;          // which of the 4 the pull is computing
  std::string vec_base_;  // the domain's inner coordinate at lane 0
  Coords vec_dom0_;       // the domain's coordinates at lane 0
  std::map<std::string, std::string> vec_loads_;  // "param@offset at lane 0" -> its float4/int4
  // Products whose 4 lanes share one loop (lanes_contraction): lane 0's key -> the lanes' sums.
  std::map<std::string, std::array<std::string, 4>> lane_dots_;
  // An outer reduction's passes being emitted by a group of this many warps (StitchInfo::Outer::
  // group); its partials go through __shared__ outer_f (outer_d), one per warp of the block.
  int64_t outer_group_ = 1;
  std::set<std::string> outer_scratch_;
  std::string ws_type_ = "float";                 // element type of a split kernel's partials
  int64_t split_passes_ = 0;  // a split kernel's reductions so far: a slot of partials per row each
  std::map<const Value*, std::string> cache_;
  std::map<std::string, std::string> a_rows_;  // A rows in shared memory by value and row (a_row)
  std::set<const Value*> cached_ready_;
  std::vector<std::string> cache_decl_;
};

}  // namespace stitch::codegen::detail
