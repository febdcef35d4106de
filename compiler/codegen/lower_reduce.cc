// Segment kernels: reductions and the ops built on them (Softmax, LogSoftmax, layer and
// instance normalization, global pools, ArgMax/ArgMin, TopK, CumSum); windowed pooling is in
// lower_pool.cc.
//
// A segment is the set of input elements that reduce together; segments are numbered o in
// row-major order of the kept axes and their elements r in row-major order of the reduced axes,
// so a segment's input offset is base(o) + red(r). The thread mapping follows the shape:
//   warp per segment   when the innermost axis is reduced and a segment is short (< 1024);
//   block per segment  when the innermost axis is reduced and a segment is long;
//   tiled              when an inner axis is kept (a column reduction) and segments are long
//                      but few: a block of 256 threads takes 32 neighbouring segments (coalesced
//                      rows) and splits each over 8 threads, combined through shared memory;
//   thread per segment otherwise (neighbouring threads take neighbouring segments, so a column
//                      reduction reads coalesced rows).
// Each kernel is a few passes over its segment (max, sum of exponentials, mean, variance...),
// each pass a strided loop plus a warp or block tree, then a write pass.
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "codegen/scalar_ops.h"
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "ops/row_substitution.h"
#include "support/check.h"

namespace stitch::codegen {
namespace {

using ops::strides_of;

enum class Mapping { kWarp, kBlock, kTile, kThread };

struct Segments {
  Dims in;                    // input dims
  std::vector<bool> reduced;  // per input axis
  int64_t count = 1;          // number of segments
  int64_t len = 1;            // elements per segment
};

Segments make_segments(const Dims& in, std::vector<bool> reduced) {
  Segments s{in, std::move(reduced), 1, 1};
  for (size_t d = 0; d < in.size(); ++d) (s.reduced[d] ? s.len : s.count) *= in[d];
  return s;
}

// The same segments over fewer axes: neighbouring axes that are both kept or both reduced are
// one axis in row-major order, so offsets need fewer divisions (o * 16 rather than three terms).
Segments merged(const Segments& s) {
  Segments m{{}, {}, s.count, s.len};
  for (size_t d = 0; d < s.in.size(); ++d) {
    if (s.in[d] == 1) continue;
    if (!m.in.empty() && m.reduced.back() == s.reduced[d]) {
      m.in.back() *= s.in[d];
    } else {
      m.in.push_back(s.in[d]);
      m.reduced.push_back(s.reduced[d]);
    }
  }
  return m;
}

// Offset expression of element `var` of the axes selected by `pick` (row-major over them).
std::string offset_of(const Segments& original, bool pick, const std::string& var, const IndexWidth& ix) {
  const Segments s = merged(original);
  Dims st = strides_of(s.in);
  std::vector<size_t> axes;
  for (size_t d = 0; d < s.in.size(); ++d)
    if (s.reduced[d] == pick && s.in[d] > 1) axes.push_back(d);
  if (axes.empty()) return ix.lit(0);
  std::string expr;
  int64_t inner = 1;
  for (size_t k = axes.size(); k-- > 0;) {
    const size_t d = axes[k];
    std::string c = var;
    if (inner > 1) c = fmt::format("({} / {})", c, ix.lit(inner));
    if (k > 0) c = fmt::format("({} % {})", c, ix.lit(s.in[d]));
    std::string term = st[d] == 1 ? c : fmt::format("{} * {}", c, ix.lit(st[d]));
    expr = expr.empty() ? term : term + " + " + expr;
    inner *= s.in[d];
  }
  return expr;
}

Mapping choose_mapping(const Segments& s) {
  const Segments m = merged(s);
  const bool inner_reduced = !m.in.empty() && m.reduced.back();
  if (!inner_reduced) return column_tiled(s.count, s.len) ? Mapping::kTile : Mapping::kThread;
  if (s.len <= 1) return Mapping::kThread;
  return s.len >= 1024 ? Mapping::kBlock : Mapping::kWarp;
}

// Threads per block of a segment kernel with this mapping.
int64_t block_size(Mapping m, const Segments& s) {
  if (m == Mapping::kBlock) return s.len >= 4096 ? 512 : 256;
  return m == Mapping::kTile ? kTileBlock : kMapBlock;
}

class SegmentKernel {
 public:
  SegmentKernel(const Node& n, int index, Segments seg, Mapping m, const char* kind, IndexWidth ix)
      : n_(n), seg_(std::move(seg)), map_(m), ix_(ix) {
    k_.name = fmt::format("k{:03d}_{}_{}", index, kind, snake(n.op_type));
    k_.nodes = {&n};
    block_ = block_size(m, seg_);
  }

  std::string param(const Value* v, bool output) {
    for (const KernelParam& p : k_.params)
      if (p.value == v && p.output == output) return p.name;
    std::string name = fmt::format("{}{}", output ? "y" : "x", output ? outs_++ : ins_++);
    k_.params.push_back({name, v, output});
    k_.bytes_moved += num_elements(*v->dims) * dtype_size(v->dtype);
    return name;
  }
  std::string load(const Value* v, const std::string& off, const std::string& ct) {
    const std::string p = param(v, false), st = storage_type(v->dtype);
    if (st == "__half" || st == "__nv_bfloat16") return fmt::format("stitch_dev::cvt<float>({}[{}])", p, off);
    return ct == st ? fmt::format("{}[{}]", p, off) : fmt::format("({}){}[{}]", ct, p, off);
  }
  // A tiled kernel's threads past the last segment compute a copy of it (so that every thread
  // reaches the shared-memory barriers) but store nothing.
  std::string store(const Value* v, const std::string& off, const std::string& val) {
    const std::string p = param(v, true), st = storage_type(v->dtype);
    const char* guard = map_ == Mapping::kTile ? "if (live) " : "";
    if (st == "__half" || st == "__nv_bfloat16")
      return fmt::format("{}{}[{}] = stitch_dev::cvt<{}>({});", guard, p, off, st, val);
    return fmt::format("{}{}[{}] = ({})({});", guard, p, off, st, val);
  }
  CudaWriter& w() { return body_; }
  const IndexWidth& ix() const { return ix_; }
  std::string lit(int64_t v) const { return ix_.lit(v); }
  const Segments& seg() const { return seg_; }
  Mapping mapping() const { return map_; }

  // acc = combine over the segment of elem(off) (the loop body gets `off`, the element's input
  // offset, and `r`, its index in the segment); all threads of the segment get the result.
  void reduce_pass(const std::string& ct, const std::string& acc, const std::string& init,
                   const std::string& op, const std::string& elem) {
    body_.line("{} {} = {};", ct, acc, init);
    begin_loop();
    body_.line("{} = {}({}, {});", acc, op, acc, elem);
    body_.close();
    if (map_ == Mapping::kWarp) body_.line("{0} = stitch_dev::warp_reduce({0}, {1});", acc, op);
    if (map_ == Mapping::kBlock) {
      body_.line("{0} = stitch_dev::block_reduce({0}, {1}, scratch_{2});", acc, op, ct == "double" ? "d" : ct == "float" ? "f" : "i");
      scratch_.insert(ct);
    }
    if (map_ == Mapping::kTile) {
      body_.line("{0} = stitch_dev::tile_column_reduce({0}, {1}, tile_{2});", acc, op,
                 ct == "double"  ? "d"
                 : ct == "float" ? "f"
                                 : "i");
      scratch_.insert(ct);
    }
  }
  // A loop over the segment; the caller writes the body, then calls end_loop().
  void begin_loop() {
    body_.open("for ({0} r = lane; r < {1}; r += step)", ix_.type(), lit(seg_.len));
    body_.line("const {} off = base + {};", ix_.type(), offset_of(seg_, true, "r", ix_));
  }
  void end_loop() { body_.close(); }

  Kernel finish(const std::string& what) {
    const std::string mapping = map_ == Mapping::kWarp    ? "warp per segment"
                                : map_ == Mapping::kBlock ? "block per segment"
                                : map_ == Mapping::kTile
                                    ? fmt::format("tiled: {} segments x {} threads each per block",
                                                  kTileSegments, kTileBlock / kTileSegments)
                                    : "thread per segment";
    k_.mapping = fmt::format("{}: {} segments of {} elements over axes {} of {}; {}", mapping, seg_.count, seg_.len,
                             reduced_axes_text(), dims_to_string(seg_.in), what);
    const int64_t per_block = map_ == Mapping::kWarp    ? block_ / 32
                              : map_ == Mapping::kBlock ? 1
                              : map_ == Mapping::kTile  ? kTileSegments
                                                        : block_;
    k_.block = {block_, 1, 1};
    k_.grid = {std::max<int64_t>(1, (seg_.count + per_block - 1) / per_block), 1, 1};
    CudaWriter w;
    w.raw_line(kernel_header(k_));
    open_kernel(w, k_, block_);
    for (const std::string& ct : scratch_) {
      const char* tag = ct == "double" ? "d" : ct == "float" ? "f" : "i";
      if (map_ == Mapping::kTile)
        w.line("__shared__ {} tile_{}[{}];", ct, tag, kTileBlock);
      else
        w.line("__shared__ {} scratch_{}[32];", ct, tag);
    }
    const std::string body = body_.text();
    const bool loops = body.find("lane") != std::string::npos;
    const char* t = ix_.type();
    if (map_ == Mapping::kWarp) {
      w.line("const {0} o = ({0})blockIdx.x * {1} + (threadIdx.x >> 5);", t, block_ / 32);
      w.line("const int lane = threadIdx.x & 31;");
      w.line("const int step = 32;");
    } else if (map_ == Mapping::kBlock) {
      w.line("const {} o = blockIdx.x;", t);
      w.line("const int lane = threadIdx.x;");
      w.line("const int step = {};", block_);
    } else if (map_ == Mapping::kTile) {
      open_tile(w, fmt::format("({})blockIdx.x", t), "o", seg_.count, t);
    } else {
      w.line("const {0} o = ({0})blockIdx.x * {1} + threadIdx.x;", t, block_);
      if (loops) {
        w.line("const int lane = 0;");
        w.line("const int step = 1;");
      }
    }
    if (map_ != Mapping::kTile)
      w.line("if (o >= {}) return;  // uniform per {}", lit(seg_.count),
             map_ == Mapping::kWarp    ? "warp"
             : map_ == Mapping::kBlock ? "block"
                                       : "thread");
    w.line("const {} base = {};", t, offset_of(seg_, false, "o", ix_));
    const std::string& text = body;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      w.raw_line(text.substr(start, end - start));
      start = end + 1;
    }
    w.close();
    k_.source = w.text();
    return std::move(k_);
  }

 private:
  std::string reduced_axes_text() const {
    std::string s;
    for (size_t d = 0; d < seg_.reduced.size(); ++d)
      if (seg_.reduced[d]) s += (s.empty() ? "" : ",") + std::to_string(d);
    return "[" + s + "]";
  }
  const Node& n_;
  Segments seg_;
  Mapping map_;
  IndexWidth ix_;
  Kernel k_;
  int64_t block_;
  int ins_ = 0, outs_ = 0;
  CudaWriter body_;
  std::set<std::string> scratch_;
};

std::string fnm(const std::string& ct, const char* name) { return ct == "float" ? std::string(name) + "f" : name; }

// ---- ReduceX and global pools ----------------------------------------------------------------

// ReduceX and global pools: the reduced axes.
StatusOr<Segments> reduction_segments(const Node& n) {
  const Value* x = n.input(0);
  std::vector<bool> red;
  if (n.op_type == "GlobalAveragePool" || n.op_type == "GlobalMaxPool") {
    red.assign(dims(x).size(), true);
    red[0] = red[1] = false;
  } else {
    ASSIGN_OR_RETURN(ops::ReduceAxes ra, ops::constant_reduce_axes(n, static_cast<int64_t>(dims(x).size())));
    red = ra.identity ? std::vector<bool>(dims(x).size(), false) : ra.reduced;
  }
  return make_segments(dims(x), red);
}

StatusOr<Kernel> lower_reduction(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const Value* y = n.output(0);
  const std::string& op = n.op_type;
  ASSIGN_OR_RETURN(Segments seg, reduction_segments(n));
  SegmentKernel k(n, index, seg, choose_mapping(seg), "red", ix);
  // Integers reduce in their own type, as the reference does, except through exp: a LogSumExp in
  // double. A LogSum's log and an L2's square root are taken of the integer sum in double. Either
  // result is stored as a float is (stitch_dev::float_to_int).
  const bool via_double = is_int(x->dtype) && op == "ReduceLogSumExp";
  const bool int_root = is_int(x->dtype) && (op == "ReduceLogSum" || op == "ReduceL2");
  const std::string ct = via_double ? "double" : compute_type(x->dtype);
  const std::string v = k.load(x, "off", ct);
  const bool is_max = op == "ReduceMax" || op == "GlobalMaxPool", is_min = op == "ReduceMin";
  std::string result;
  if (is_max || is_min) {
    k.reduce_pass(ct, "acc", extreme_literal(is_max, ct), is_max ? "stitch_dev::Max()" : "stitch_dev::Min()",
                  v);
    result = "acc";
  } else if (op == "ReduceProd") {
    k.reduce_pass(ct, "acc", literal(1, ct), "stitch_dev::Prod()", v);
    result = "acc";
  } else if (op == "ReduceLogSumExp") {
    k.reduce_pass(ct, "mx", literal(-INFINITY, ct), "stitch_dev::Max()", v);
    k.w().line("const {} shift = isinf(mx) ? ({})0 : mx;", ct, ct);
    k.reduce_pass(ct, "acc", literal(0, ct), "stitch_dev::Sum()", fmt::format("{}({} - shift)", fnm(ct, "exp"), v));
    result = fmt::format("{}(acc) + shift", fnm(ct, "log"));
  } else {
    std::string elem = v;
    if (op == "ReduceL1") elem = magnitude(v, ct);
    if (op == "ReduceL2" || op == "ReduceSumSquare") elem = fmt::format("({0}) * ({0})", v);
    k.reduce_pass(ct, "acc", literal(0, ct), "stitch_dev::Sum()", elem);
    result = "acc";
    if (op == "ReduceMean" || op == "GlobalAveragePool") result = fmt::format("acc / ({}){}", ct, seg.len);
    const std::string sum = int_root ? "(double)acc" : "acc";
    const std::string fn_t = int_root ? "double" : ct;
    if (op == "ReduceL2") result = fmt::format("{}({})", fnm(fn_t, "sqrt"), sum);
    if (op == "ReduceLogSum") result = fmt::format("{}({})", fnm(fn_t, "log"), sum);
  }
  if (via_double || int_root) result = float_to_int(result, y->dtype);
  k.w().line("if (lane == 0) {}", k.store(y, "o", result));
  return k.finish(op);
}

// ArgMax / ArgMin: one thread per segment, first (or last) extreme index.
StatusOr<Kernel> lower_arg(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const int64_t r = static_cast<int64_t>(dims(x).size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), r));
  std::vector<bool> red(r, false);
  red[axis] = true;
  Segments seg = make_segments(dims(x), red);
  SegmentKernel k(n, index, seg, Mapping::kThread, "red", ix);
  const std::string ct = compute_type(x->dtype);
  const bool last = n.attr_int("select_last_index", 0) != 0, is_max = n.op_type == "ArgMax";
  k.w().line("long long best = 0;");
  k.w().line("{} bv = {};", ct, k.load(x, "base", ct));
  k.begin_loop();
  k.w().line("const {} c = {};", ct, k.load(x, "off", ct));
  k.w().line("if (c {} bv{}) {{ best = r; bv = c; }}", is_max ? ">" : "<", last ? " || c == bv" : "");
  k.end_loop();
  k.w().line("{}", k.store(n.output(0), "o", "best"));
  return k.finish(n.op_type);
}

// TopK: one thread per segment picks the k elements in order, each the best of those that come
// after the previous pick (by value, then by index, the lower first): k passes over the segment,
// for the few experts of a mixture-of-experts router (4 to 256 per token, k of 1 to 8).
StatusOr<Kernel> lower_topk(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const int64_t r = static_cast<int64_t>(dims(x).size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", -1), r));
  if (!n.input(1) || !n.input(1)->is_constant())
    return Status::user(fmt::format("{}: K must be a constant for the back end", n.describe()));
  const int64_t kk = n.input(1)->constant->get_i64(0);
  std::vector<bool> red(r, false);
  red[axis] = true;
  Segments seg = make_segments(dims(x), red);
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < r; ++d) inner *= dims(x)[d];
  SegmentKernel k(n, index, seg, Mapping::kThread, "topk", ix);
  const std::string ct = compute_type(x->dtype), it = ix.type();
  const bool largest = n.attr_int("largest", 1) != 0;
  // NaN orders above every number (as ONNX's reference implementation and PyTorch put it): first
  // when the largest are taken, last when the smallest are.
  auto gt = [](const char* a, const char* b) {
    return fmt::format("(({0} != {0} && {1} == {1}) || {0} > {1})", a, b);
  };
  auto eq = [](const char* a, const char* b) {
    return fmt::format("({0} == {1} || ({0} != {0} && {1} != {1}))", a, b);
  };
  const std::string better = largest ? gt("c", "bv") : gt("bv", "c");
  const std::string after = largest ? gt("pv", "c") : gt("c", "pv");
  k.w().line("{} pi = -1;", it);
  k.w().line("{} pv = 0;", ct);
  k.w().open("for ({0} j = 0; j < {1}; ++j)", it, k.lit(kk));
  k.w().line("{} bi = -1;", it);
  k.w().line("{} bv = 0;", ct);
  k.begin_loop();
  k.w().line("const {} c = {};", ct, k.load(x, "off", ct));
  k.w().line("const bool after = pi < 0 || {} || ({} && r > pi);", after, eq("c", "pv"));
  k.w().line("if (after && (bi < 0 || {})) {{ bi = r; bv = c; }}", better);
  k.end_loop();
  const std::string at =
      inner == 1 ? fmt::format("o * {} + j", k.lit(kk))
                 : fmt::format("(o / {0}) * {1} + j * {0} + o % {0}", k.lit(inner), k.lit(kk * inner));
  k.w().line("{}", k.store(n.output(0), at, "bv"));
  if (n.outputs.size() > 1 && n.output(1)) k.w().line("{}", k.store(n.output(1), at, "(long long)bi"));
  k.w().line("pi = bi;");
  k.w().line("pv = bv;");
  k.w().close();
  return k.finish(
      fmt::format("TopK: {} passes, each the next {} element", kk, largest ? "largest" : "smallest"));
}

// The softmax family's rows: one axis (default -1) from opset 13, before that everything from
// `axis` (default 1) on, the input flattened to 2-D.
StatusOr<Segments> softmax_segments(const Node& n) {
  const Dims& d = dims(n.input(0));
  const int64_t r = static_cast<int64_t>(d.size());
  ASSIGN_OR_RETURN(ops::ReduceAxes axes, ops::softmax_axes(n, r));
  return make_segments(d, axes.reduced);
}

// Hardmax: 1 at the first maximum of each segment, 0 elsewhere; one thread per segment.
StatusOr<Kernel> lower_hardmax(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  ASSIGN_OR_RETURN(Segments seg, softmax_segments(n));
  SegmentKernel k(n, index, seg, Mapping::kThread, "row", ix);
  const std::string ct = compute_type(x->dtype);
  k.w().line("long long best = 0;");
  k.w().line("{} bv = {};", ct, k.load(x, "base", ct));
  k.begin_loop();
  k.w().line("const {} c = {};", ct, k.load(x, "off", ct));
  k.w().line("if (c > bv) {{ best = r; bv = c; }}");
  k.end_loop();
  k.begin_loop();
  k.w().line("{}", k.store(n.output(0), "off", "r == best ? 1 : 0"));
  k.end_loop();
  return k.finish("Hardmax: first maximum, then write");
}

// ---- Softmax, LogSoftmax ------------------------------------------------------------------------

StatusOr<Kernel> lower_softmax(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  ASSIGN_OR_RETURN(Segments seg, softmax_segments(n));
  SegmentKernel k(n, index, seg, choose_mapping(seg), "row", ix);
  const std::string ct = compute_type(x->dtype);
  const std::string v = k.load(x, "off", ct);
  k.reduce_pass(ct, "mx", literal(-INFINITY, ct), "stitch_dev::Max()", v);
  k.reduce_pass(ct, "sum", literal(0, ct), "stitch_dev::Sum()", fmt::format("{}({} - mx)", fnm(ct, "exp"), v));
  if (n.op_type == "LogSoftmax") {
    k.w().line("const {} lse = mx + {}(sum);", ct, fnm(ct, "log"));
    k.begin_loop();
    k.w().line("{}", k.store(n.output(0), "off", fmt::format("{} - lse", v)));
  } else {
    k.w().line("const {0} inv = ({0})1 / sum;", ct);
    k.begin_loop();
    k.w().line("{}", k.store(n.output(0), "off", fmt::format("{}({} - mx) * inv", fnm(ct, "exp"), v)));
  }
  k.end_loop();
  return k.finish(fmt::format("{}: max, sum of exponentials, write", n.op_type));
}

// ---- LayerNormalization, InstanceNormalization ----------------------------------------------

// Layer normalization: from `axis` on; instance normalization: the spatial axes.
StatusOr<int64_t> norm_axis(const Node& n) {
  if (n.op_type != "LayerNormalization") return int64_t{2};
  return ops::norm_axis(n, n.attr_int("axis", -1), static_cast<int64_t>(dims(n.input(0)).size()));
}
StatusOr<Segments> norm_segments(const Node& n) {
  const int64_t r = static_cast<int64_t>(dims(n.input(0)).size());
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(n));
  std::vector<bool> red(r, false);
  for (int64_t d = axis; d < r; ++d) red[d] = true;
  return make_segments(dims(n.input(0)), red);
}

StatusOr<Kernel> lower_norm(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const bool layer = n.op_type == "LayerNormalization";
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(n));
  ASSIGN_OR_RETURN(Segments seg, norm_segments(n));
  SegmentKernel k(n, index, seg, choose_mapping(seg), "row", ix);
  const std::string ct = compute_type(x->dtype);
  const std::string v = k.load(x, "off", ct);
  k.reduce_pass(ct, "sum", literal(0, ct), "stitch_dev::Sum()", v);
  k.w().line("const {} mean = sum / ({}){};", ct, ct, seg.len);
  k.reduce_pass(ct, "sq", literal(0, ct), "stitch_dev::Sum()", fmt::format("({0} - mean) * ({0} - mean)", v));
  const std::string eps = literal(n.attr_float("epsilon", 1e-5f), ct);
  k.w().line("const {} rstd = {}(({})1 / (sq / ({}){} + {}));", ct, fnm(ct, "sqrt"), ct, ct, seg.len, eps);
  // Scale and bias: broadcast over the normalized axes (layer) or per channel (instance).
  auto param = [&](size_t i, const char* dflt) -> std::string {
    const Value* p = n.input(i);
    if (p == nullptr) return dflt;
    std::string off;
    if (layer) {
      Dims norm(dims(x).begin() + axis, dims(x).end());
      Dims s = ops::broadcast_strides(dims(p), norm);
      // Offset of element r of the normalized block inside the parameter.
      Dims ns = strides_of(norm);
      bool same = s == ns;
      off = same ? "r" : k.lit(0);
      if (!same) {
        off.clear();
        for (size_t d = 0; d < norm.size(); ++d) {
          if (s[d] == 0 || norm[d] == 1) continue;
          std::string c = fmt::format("((r / {}) % {})", k.lit(ns[d]), k.lit(norm[d]));
          if (!off.empty()) off += " + ";
          off += fmt::format("{} * {}", c, k.lit(s[d]));
        }
        if (off.empty()) off = k.lit(0);
      }
    } else {
      off = fmt::format("(o % {})", k.lit(dims(x)[1]));
    }
    return k.load(p, off, ct);
  };
  const std::string scale = param(1, "1"), bias = param(2, "0");
  k.begin_loop();
  k.w().line("{}", k.store(n.output(0), "off", fmt::format("({} - mean) * rstd * {} + {}", v, scale, bias)));
  k.end_loop();
  if (layer) {
    if (n.output(1)) k.w().line("if (lane == 0) {}", k.store(n.output(1), "o", "mean"));
    if (n.output(2)) k.w().line("if (lane == 0) {}", k.store(n.output(2), "o", "rstd"));
  }
  return k.finish(fmt::format("{}: mean, variance, normalize", n.op_type));
}

// ---- CumSum -------------------------------------------------------------------------------------

StatusOr<Kernel> lower_cumsum(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const int64_t r = static_cast<int64_t>(dims(x).size());
  if (!n.input(1) || !n.input(1)->is_constant())
    return Status::user(fmt::format("{}: axis must be a compile-time constant", n.describe()));
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.input(1)->constant->get_i64(0), r));
  std::vector<bool> red(r, false);
  red[axis] = true;
  Segments seg = make_segments(dims(x), red);
  SegmentKernel k(n, index, seg, Mapping::kThread, "scan", ix);
  const std::string ct = compute_type(x->dtype);
  const bool exclusive = n.attr_int("exclusive", 0) != 0, reverse = n.attr_int("reverse", 0) != 0;
  const bool prod = n.op_type == "CumProd";
  const int64_t stride = strides_of(dims(x))[axis];
  k.w().line("{} acc = {};", ct, prod ? 1 : 0);
  const char* t = k.ix().type();
  k.w().open("for ({} j = 0; j < {}; ++j)", t, k.lit(seg.len));
  k.w().line("const {} off = base + ({}) * {};", t, reverse ? fmt::format("{} - 1 - j", k.lit(seg.len)) : "j",
             k.lit(stride));
  k.w().line("const {} v = {};", ct, k.load(x, "off", ct));
  const char* step = prod ? "acc *= v;" : "acc += v;";
  if (exclusive) {
    k.w().line("{}", k.store(n.output(0), "off", "acc"));
    k.w().line("{}", step);
  } else {
    k.w().line("{}", step);
    k.w().line("{}", k.store(n.output(0), "off", "acc"));
  }
  k.w().close();
  return k.finish(prod ? "running product" : "running sum");
}

// ---- StitchRowSubstitution (ops/row_substitution.h) ------------------------------------------

// A thread per column of each matrix (the segments along the row axis): it copies its column,
// then runs the steps in order, each the sum of row i's products with the column's rows above it
// (its own earlier results, or the input's rows before `first`) added to row i's own element. Row i
// is read from the input: no step before step i writes it. The products are rounded before they
// are summed (__fmul_rn), as the written-out steps' Mul rounds them.
StatusOr<Kernel> lower_row_substitution(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const Dims& d = dims(x);
  const int64_t r = static_cast<int64_t>(d.size()), size = d.back();
  const int64_t first = n.attr_int("first", 0), last = n.attr_int("last", 0);
  std::vector<bool> red(static_cast<size_t>(r), false);
  red[static_cast<size_t>(r - 2)] = true;
  SegmentKernel k(n, index, make_segments(d, red), Mapping::kThread, "steps", ix);
  const char* t = k.ix().type();
  const std::string y = k.param(n.output(0), true);
  k.w().line("const {} col = o % {};", t, k.lit(size));
  k.w().line("const {} mat = base - col;", t);
  k.w().open("for ({} i = 0; i < {}; ++i)", t, k.lit(size));
  k.w().line("{}", k.store(n.output(0), fmt::format("base + i * {}", k.lit(size)),
                           k.load(x, fmt::format("base + i * {}", k.lit(size)), "float")));
  k.w().close();
  k.w().open("for ({0} i = col + 1 > {1} ? col + 1 : {1}; i <= {2}; ++i)", t, k.lit(first), k.lit(last));
  k.w().line("const {} row = mat + i * {};", t, k.lit(size));
  k.w().line("float sum = 0.0f;");
  k.w().open("for ({} j = 0; j < i; ++j)", t);
  k.w().line("sum += __fmul_rn({}, {}[mat + j * {} + col]);", k.load(x, "row + j", "float"), y, k.lit(size));
  k.w().close();
  k.w().line("{}", k.store(n.output(0), fmt::format("base + i * {}", k.lit(size)),
                           fmt::format("{} + sum", k.load(x, "row + col", "float"))));
  k.w().close();
  const Value* addend = n.input(1);
  if (addend) {  // the constant added to the result (the solve's identity), once every step is done
    k.w().open("for ({} i = 0; i < {}; ++i)", t, k.lit(size));
    k.w().line("const {} at = base + i * {};", t, k.lit(size));
    k.w().line("{}", k.store(n.output(0), "at",
                             fmt::format("{}[at] + {}", y,
                                         k.load(addend, fmt::format("i * {} + col", k.lit(size)), "float"))));
    k.w().close();
  }
  return k.finish(fmt::format("steps {} to {} of a row-by-row triangular solve, in order{}", first, last,
                              addend ? ", then a constant added" : ""));
}

}  // namespace

StatusOr<SegmentShape> segment_shape(const Node& n) {
  const std::string& op = n.op_type;
  const Value* x = n.input(0);
  if (x == nullptr || !x->has_static_shape())
    return Status::user(fmt::format("{} has no static input", n.describe()));
  Segments seg;
  SegmentShape s;
  if (op == "Softmax" || op == "LogSoftmax") {
    ASSIGN_OR_RETURN(seg, softmax_segments(n));
    s.loops = 3, s.reductions = 2;
  } else if (op == "LayerNormalization" || op == "InstanceNormalization") {
    ASSIGN_OR_RETURN(seg, norm_segments(n));
    s.loops = 3, s.reductions = 2;
  } else if ((op.rfind("Reduce", 0) == 0 && n.def && n.def->category == OpCategory::kReduction) ||
             op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    ASSIGN_OR_RETURN(seg, reduction_segments(n));
    s.loops = s.reductions = op == "ReduceLogSumExp" ? 2 : 1;
  } else {
    return Status::user(fmt::format("{} is not lowered as a segment kernel with trees", n.describe()));
  }
  s.count = seg.count;
  s.length = seg.len;
  const Mapping m = choose_mapping(seg);
  s.tiled = m == Mapping::kTile;
  s.lanes = m == Mapping::kWarp    ? 32
            : m == Mapping::kBlock ? block_size(m, seg)
            : m == Mapping::kTile  ? kTileBlock / kTileSegments
                                   : 1;
  s.threads = m == Mapping::kTile ? (seg.count + kTileSegments - 1) / kTileSegments * kTileBlock
                                  : seg.count * s.lanes;
  return s;
}

StatusOr<Kernel> lower_reduce(const Node& n, int index, IndexWidth ix) {
  const std::string& op = n.op_type;
  if (op == "Softmax" || op == "LogSoftmax") return lower_softmax(n, index, ix);
  if (op == "LayerNormalization" || op == "InstanceNormalization") return lower_norm(n, index, ix);
  if (op == "ArgMax" || op == "ArgMin") return lower_arg(n, index, ix);
  if (op == "TopK") return lower_topk(n, index, ix);
  if (op == "Hardmax") return lower_hardmax(n, index, ix);
  if (op == "CumSum" || op == "CumProd") return lower_cumsum(n, index, ix);
  if (op == ops::kRowSubstitution) return lower_row_substitution(n, index, ix);
  return lower_reduction(n, index, ix);
}

}  // namespace stitch::codegen
