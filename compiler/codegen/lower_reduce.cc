// Segment kernels that combine each segment through a warp, block or tile tree: ReduceX, global
// pools, Softmax, LogSoftmax, layer and instance normalization; the ones with one thread per
// segment (ArgMax/ArgMin, TopK, Hardmax, CumSum) are in lower_segment_threads.cc, the segments,
// their thread mappings and the kernel writer in segment_kernel.h, and windowed pooling in
// lower_pool.cc.
#include <fmt/format.h>

#include <cmath>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "codegen/scalar_ops.h"
#include "codegen/segment_kernel.h"
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "ops/row_substitution.h"
#include "support/check.h"

namespace stitch::codegen::segments {
namespace {

using ops::strides_of;

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

}  // namespace
}  // namespace stitch::codegen::segments

namespace stitch::codegen {

StatusOr<SegmentShape> segment_shape(const Node& n) {
  const std::string& op = n.op_type;
  const Value* x = n.input(0);
  if (x == nullptr || !x->has_static_shape())
    return Status::user(fmt::format("{} has no static input", n.describe()));
  segments::Segments seg;
  SegmentShape s;
  if (op == "Softmax" || op == "LogSoftmax") {
    ASSIGN_OR_RETURN(seg, segments::softmax_segments(n));
    s.loops = 3, s.reductions = 2;
  } else if (op == "LayerNormalization" || op == "InstanceNormalization") {
    ASSIGN_OR_RETURN(seg, segments::norm_segments(n));
    s.loops = 3, s.reductions = 2;
  } else if ((op.rfind("Reduce", 0) == 0 && n.def && n.def->category == OpCategory::kReduction) ||
             op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    ASSIGN_OR_RETURN(seg, segments::reduction_segments(n));
    s.loops = s.reductions = op == "ReduceLogSumExp" ? 2 : 1;
  } else {
    return Status::user(fmt::format("{} is not lowered as a segment kernel with trees", n.describe()));
  }
  s.count = seg.count;
  s.length = seg.len;
  const segments::Mapping m = segments::choose_mapping(seg);
  s.tiled = m == segments::Mapping::kTile;
  s.lanes = m == segments::Mapping::kWarp    ? 32
            : m == segments::Mapping::kBlock ? segments::block_size(m, seg)
            : m == segments::Mapping::kTile  ? kTileBlock / kTileSegments
                                             : 1;
  s.threads = m == segments::Mapping::kTile ? (seg.count + kTileSegments - 1) / kTileSegments * kTileBlock
                                            : seg.count * s.lanes;
  return s;
}

StatusOr<Kernel> lower_reduce(const Node& n, int index, IndexWidth ix) {
  const std::string& op = n.op_type;
  if (op == "Softmax" || op == "LogSoftmax") return segments::lower_softmax(n, index, ix);
  if (op == "LayerNormalization" || op == "InstanceNormalization") return segments::lower_norm(n, index, ix);
  if (op == "ArgMax" || op == "ArgMin") return segments::lower_arg(n, index, ix);
  if (op == "TopK") return segments::lower_topk(n, index, ix);
  if (op == "Hardmax") return segments::lower_hardmax(n, index, ix);
  if (op == "CumSum" || op == "CumProd") return segments::lower_cumsum(n, index, ix);
  if (op == ops::kRowSubstitution) return segments::lower_row_substitution(n, index, ix);
  return segments::lower_reduction(n, index, ix);
}

}  // namespace stitch::codegen
