// Stitched kernels (stitch.h): each node's part in a stitched kernel (stitch_role) and what an op
// tells a kernel of itself: a constant Slice's and Pad's parameters, a row op's rows and reduced
// axes, a running scan's axis, a MatMul's contraction. The analysis of a group is
// stitch_analysis.cc.
#include <fmt/format.h>

#include <optional>

#include "codegen/lower.h"
#include "codegen/node_facts.h"
#include "codegen/scalar_ops.h"
#include "codegen/stitch.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

std::optional<std::vector<int64_t>> const_ints(const Value* v) {
  if (v == nullptr || !v->is_constant()) return std::nullopt;
  return v->constant->to_i64();
}

// `info` with its rows and cols counted from its reduced axes.
RowOpInfo with_extents(RowOpInfo info) {
  for (size_t d = 0; d < info.in.size(); ++d) (info.reduced[d] ? info.cols : info.rows) *= info.in[d];
  return info;
}

// Row ops reduce floating point, and integers in these reductions only. A row kernel runs them in
// the integers' compute type (long long, or unsigned long long for uint64) as the own-kernel
// reduction does: sums and products wrap, a mean divides the sum by the count (truncating).
bool stitched_integer_reduction(const std::string& op) {
  return op == "ReduceSum" || op == "ReduceProd" || op == "ReduceMax" || op == "ReduceMin" ||
         op == "ReduceMean" || op == "ReduceSumSquare" || op == "ReduceL1";
}

}  // namespace

StatusOr<ops::SliceSpec> stitch_slice(const Node& n) {
  auto starts = const_ints(n.input(1)), ends = const_ints(n.input(2));
  if (!starts || !ends)
    return Status::user(fmt::format("{}: starts and ends are not constants", n.describe()));
  std::optional<std::vector<int64_t>> axes, steps;
  if (n.input(3)) {
    axes = const_ints(n.input(3));
    if (!axes) return Status::user(fmt::format("{}: axes are not constants", n.describe()));
  }
  if (n.input(4)) {
    steps = const_ints(n.input(4));
    if (!steps) return Status::user(fmt::format("{}: steps are not constants", n.describe()));
  }
  return ops::slice_spec(n, dims(n.input(0)), *starts, *ends, axes, steps);
}

StatusOr<std::vector<int64_t>> stitch_pads(const Node& n) {
  const Value* x = n.input(0);
  if (!x || !x->has_static_shape())
    return Status::user(fmt::format("{}: its input's shape is not static", n.describe()));
  const std::string mode = n.attr_string("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
    return Status::user(fmt::format("{}: mode '{}'", n.describe(), mode));
  auto pads = const_ints(n.input(1));
  if (!pads) return Status::user(fmt::format("{}: pads are not constants", n.describe()));
  if (n.input(2) && !n.input(2)->is_constant())
    return Status::user(fmt::format("{}: its constant value is not a constant", n.describe()));
  std::optional<std::vector<int64_t>> axes;
  if (n.input(3)) {
    axes = const_ints(n.input(3));
    if (!axes) return Status::user(fmt::format("{}: axes are not constants", n.describe()));
  }
  return ops::full_pads(n, static_cast<int64_t>(dims(x).size()), *pads, axes);
}

bool row_op_keeps_shape(const Node& n) {
  const std::string& op = n.op_type;
  return op == "Softmax" || op == "LogSoftmax" || op == "LayerNormalization" || op == "InstanceNormalization";
}

StatusOr<RowOpInfo> row_op_info(const Node& n) {
  const std::string& op = n.op_type;
  const Value* x = n.input(0);
  if (x == nullptr || n.output(0) == nullptr || !x->has_static_shape())
    return Status::user(fmt::format("{} has no static input", n.describe()));
  if (!is_float(x->dtype) && !stitched_integer_reduction(op))
    return Status::user(
        fmt::format("{} reduces integers through a square root, logarithm or exponential (row kernels "
                    "take integer sums, products, means, L1 norms, maxima and minima)",
                    n.describe()));
  const Dims& in = dims(x);
  const int64_t r = static_cast<int64_t>(in.size());
  if (num_elements(in) == 0) return Status::user(fmt::format("{} has an empty input", n.describe()));
  std::vector<bool> red(r, false);
  int passes = 2;
  if (op.rfind("Reduce", 0) == 0 && n.def && n.def->category == OpCategory::kReduction) {
    ASSIGN_OR_RETURN(ops::ReduceAxes ra, ops::constant_reduce_axes(n, r));
    if (ra.identity) return Status::user(fmt::format("{} reduces nothing", n.describe()));
    red = ra.reduced;
    passes = op == "ReduceLogSumExp" ? 2 : 1;
  } else if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "InstanceNormalization") {
    // Over the spatial axes (2 on) of each batch and channel; instance normalization's mean and
    // variance are two passes.
    if (r < 3) return Status::user(fmt::format("{} needs spatial axes", n.describe()));
    for (int64_t d = 2; d < r; ++d) red[d] = true;
    passes = op == "InstanceNormalization" ? 2 : 1;
  } else if (op == "Softmax" || op == "LogSoftmax") {
    ASSIGN_OR_RETURN(ops::ReduceAxes axes, ops::softmax_axes(n, r));
    red = axes.reduced;
  } else if (op == "LayerNormalization") {
    if (n.outputs.size() > 1 && (n.output(1) || (n.outputs.size() > 2 && n.output(2))))
      return Status::user(fmt::format("{} also returns its statistics", n.describe()));
    ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", -1), r));
    for (int64_t d = axis; d < r; ++d) red[d] = true;
  } else {
    return Status::user(fmt::format("{} is not a row op", n.describe()));
  }
  // The reduced axes must be the trailing ones (axes of size 1 count as either)...
  int64_t first = r;
  for (int64_t d = r - 1; d >= 0 && (red[d] || in[d] == 1); --d) first = d;
  bool trailing = true, any = false;
  for (int64_t d = 0; d < r; ++d) {
    trailing &= !(d < first && red[d] && in[d] != 1);
    any |= red[d] && in[d] != 1;
  }
  if (!any) return Status::user(fmt::format("{} reduces only axes of size 1", n.describe()));
  if (!trailing) {
    // ...or leave the innermost axis of more than one element kept: a column reduction.
    int64_t inner = r - 1;
    while (inner >= 0 && in[inner] == 1) --inner;
    if (red[inner] || op == "LayerNormalization")
      return Status::user(fmt::format("{} reduces some inner and some outer axes", n.describe()));
    RowOpInfo info{in, 0, passes, true, {}};
    for (int64_t d = 0; d < r; ++d) info.reduced.push_back(red[d] && in[d] != 1);
    return with_extents(std::move(info));
  }
  // Put size-1 axes just before the reduced block on the kept side.
  while (first < r && !red[first] && in[first] == 1) ++first;
  RowOpInfo info{in, r - first, passes, false, {}};
  for (int64_t d = 0; d < r; ++d) info.reduced.push_back(d >= first);
  return with_extents(std::move(info));
}

std::optional<ScanInfo> scan_info(const Node& n) {
  if ((n.op_type != "CumSum" && n.op_type != "CumProd") || !n.domain.empty()) return std::nullopt;
  const Value *x = n.input(0), *a = n.input(1), *y = n.output(0);
  if (!x || !a || !y || !x->has_static_shape() || !is_float(x->dtype) || y->dtype != x->dtype ||
      !a->is_constant() || a->constant->size() != 1)
    return std::nullopt;
  const Dims& d = dims(x);
  auto axis = ops::norm_axis(n, a->constant->get_i64(0), static_cast<int64_t>(d.size()));
  if (!axis.is_ok() || num_elements(d) == 0 || d[*axis] > kMaxScan) return std::nullopt;
  ScanInfo s;
  s.axis = *axis;
  s.len = d[*axis];
  s.exclusive = n.attr_int("exclusive", 0) != 0;
  s.reverse = n.attr_int("reverse", 0) != 0;
  s.product = n.op_type == "CumProd";
  return s;
}

bool generatable_matmul(const Node& n) {
  if (n.op_type != "MatMul" || n.inputs.size() != 2 || n.output(0) == nullptr) return false;
  const Value *a = n.input(0), *b = n.input(1), *y = n.output(0);
  if (a == nullptr || b == nullptr || (a->is_constant() && b->is_constant())) return false;
  if (!a->has_static_shape() || !b->has_static_shape() || !y->has_static_shape()) return false;
  if (!is_float(a->dtype) || a->dtype != b->dtype || y->dtype != a->dtype) return false;
  const Dims &ad = dims(a), &bd = dims(b);
  return ad.size() >= 2 && bd.size() >= 2 && ad.back() == bd[bd.size() - 2] && num_elements(dims(y)) > 0;
}

std::optional<int64_t> contraction_length(const Node& n) {
  if (!generatable_matmul(n)) return std::nullopt;
  const int64_t k = dims(n.input(0)).back();
  if (k < 1 || k > kMaxContraction) return std::nullopt;
  return k;
}

namespace {

StitchRole compute_role(const Node& n) {
  if (contraction_length(n)) return StitchRole::kContraction;
  if (gemm_tile(n)) return StitchRole::kTiledGemm;
  const NodeLowering l = classify_node(n);
  if (l == NodeLowering::kView) return n.input(0) && n.output(0) ? StitchRole::kView : StitchRole::kNone;
  if (l == NodeLowering::kKernel && n.op_type == "Split") {  // each output a slice along the axis
    for (const Value* v : n.outputs)
      if (v == nullptr || num_elements(dims(v)) == 0) return StitchRole::kNone;
    return n.input(0) && n.input(0)->has_static_shape() ? StitchRole::kLayout : StitchRole::kNone;
  }
  if (l != NodeLowering::kKernel || n.outputs.size() != 1 || n.output(0) == nullptr) return StitchRole::kNone;
  if (num_elements(dims(n.output(0))) == 0) return StitchRole::kNone;
  if (has_scalar_expr(n)) return StitchRole::kPointwise;
  const std::string& op = n.op_type;
  if (op == "Transpose" || op == "Expand") return StitchRole::kLayout;
  if (op == "Pad") return stitch_pads(n).is_ok() ? StitchRole::kLayout : StitchRole::kNone;
  if (op == "Tile")
    return n.input(0) && n.input(0)->has_static_shape() ? StitchRole::kLayout : StitchRole::kNone;
  if (op == "Slice") return stitch_slice(n).is_ok() ? StitchRole::kLayout : StitchRole::kNone;
  if (op == "Concat") return StitchRole::kLayout;
  if (op == "Gather" || op == "GatherElements" || op == "GatherND") return StitchRole::kLayout;
  if (scan_info(n)) return StitchRole::kScan;
  if (row_op_info(n).is_ok()) return StitchRole::kRow;
  return StitchRole::kNone;
}

}  // namespace

StitchRole stitch_role(const Node& n) { return remembered_role(n, compute_role); }

}  // namespace stitch::codegen
