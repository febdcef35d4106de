// Segment kernels, shared by lower_reduce.cc (the ops that combine a segment through a warp,
// block or tile tree: ReduceX, global pools, Softmax, LogSoftmax, layer and instance
// normalization) and lower_segment_threads.cc (the ops that take one thread per segment:
// ArgMax/ArgMin, TopK, Hardmax, CumSum and the row-by-row triangular solve).
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
#pragma once

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "ops/op_util.h"

namespace stitch::codegen::segments {

enum class Mapping { kWarp, kBlock, kTile, kThread };

struct Segments {
  Dims in;                    // input dims
  std::vector<bool> reduced;  // per input axis
  int64_t count = 1;          // number of segments
  int64_t len = 1;            // elements per segment
};

Segments make_segments(const Dims& in, std::vector<bool> reduced);
// The same segments over fewer axes: neighbouring axes that are both kept or both reduced are
// one axis in row-major order, so offsets need fewer divisions (o * 16 rather than three terms).
Segments merged(const Segments& s);
// Offset expression of element `var` of the axes selected by `pick` (row-major over them).
std::string offset_of(const Segments& original, bool pick, const std::string& var, const IndexWidth& ix);
Mapping choose_mapping(const Segments& s);
// Threads per block of a segment kernel with this mapping.
int64_t block_size(Mapping m, const Segments& s);
// The softmax family's rows: one axis (default -1) from opset 13, before that everything from
// `axis` (default 1) on, the input flattened to 2-D.
StatusOr<Segments> softmax_segments(const Node& n);

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
      body_.line("{0} = stitch_dev::block_reduce({0}, {1}, scratch_{2});", acc, op, scratch_tag(ct));
      scratch_.insert(ct);
    }
    if (map_ == Mapping::kTile) {
      body_.line("{0} = stitch_dev::tile_column_reduce({0}, {1}, tile_{2});", acc, op, scratch_tag(ct));
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
    k_.mapping = fmt::format("{}: {} segments of {} elements over axes {} of {}; {}", mapping, seg_.count,
                             seg_.len, reduced_axes_text(), dims_to_string(seg_.in), what);
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
      const char* tag = scratch_tag(ct);
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
  // The suffix of the shared scratch array of a compute type: scratch_d, scratch_f, scratch_i.
  static const char* scratch_tag(const std::string& ct) {
    return ct == "double" ? "d" : ct == "float" ? "f" : "i";
  }
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

// One thread per segment (lower_segment_threads.cc).
StatusOr<Kernel> lower_arg(const Node& n, int index, IndexWidth ix);
StatusOr<Kernel> lower_topk(const Node& n, int index, IndexWidth ix);
StatusOr<Kernel> lower_hardmax(const Node& n, int index, IndexWidth ix);
StatusOr<Kernel> lower_cumsum(const Node& n, int index, IndexWidth ix);
StatusOr<Kernel> lower_row_substitution(const Node& n, int index, IndexWidth ix);

}  // namespace stitch::codegen::segments
