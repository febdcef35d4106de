// expand_resize: a Resize becomes Gathers of constant indices weighted by constant taps.
//
// Resampling is separable (ops/op_params.h, ResizeSpec): each resized axis reads, per output
// position, a few input positions with fixed weights. Once shapes are static those are
// constants, so axis by axis the pass writes
//   Gather(x, index_t, axis) * weight_t, summed over the taps t
// (one Gather alone for nearest), with index_t an int64 vector of the output length and weight_t
// shaped [out, 1, ...] to broadcast over the axes after it; an Add of the extrapolation value
// where tf_crop_and_resize samples outside the input. Half inputs are interpolated in f32 and cast
// back once at the end. These are ops the back end already generates and fuses (a bilinear
// upsample becomes one kernel with the op before or after it), so Resize needs no kernel of its
// own. Runs after fold_constants (a constant Resize is folded by the reference implementation
// instead) and leaves nodes without static shapes alone. The last node writes the Resize's
// output value, so graph outputs and readers keep their names; the new nodes are named after
// the Resize ("R/axis2_tap0"), and --no-fuse takes those names.
#include <fmt/format.h>

#include "ir/op_table.h"
#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

// The Resize's roi, scales and sizes as constants (null when omitted; roi also when it is not
// constant, which only tf_crop_and_resize reads and shape inference then rejected).
const Tensor* constant_input(const Node& n, size_t i) {
  const Value* v = n.input(i);
  return v && v->constant ? &*v->constant : nullptr;
}

// Writes the chain for `n`; returns false (and leaves the graph alone) when it does not apply.
StatusOr<bool> expand_resize_node(Graph& g, Node& n) {
  Value* x = n.input(0);
  Value* y = n.output(0);
  if (!x || !y || !x->has_static_shape() || !y->has_static_shape()) return false;
  for (size_t i = 2; i <= 3; ++i)
    if (n.input(i) && !n.input(i)->constant) return false;
  ASSIGN_OR_RETURN(ops::ResizeSpec spec, ops::resize_spec(n, *x->dims, constant_input(n, 1),
                                                          constant_input(n, 2), constant_input(n, 3)));
  const DType t = x->dtype;
  const bool interpolates = std::any_of(spec.axes.begin(), spec.axes.end(), [](const ops::ResizeAxis& a) {
    return a.taps > 1 || a.any_outside();
  });
  if (interpolates && !is_float(t))
    return Status::user(
        fmt::format("{}: interpolating or extrapolating a {} tensor is not supported; Cast it "
                    "to float first",
                    n.describe(), dtype_name(t)));
  // f32 and f64 interpolate in their own type, f16 and bf16 in f32.
  const DType ct = t == DType::kF64 ? DType::kF64 : DType::kF32;
  NodeBuilder b{g, n};
  Value* cur = x;
  Dims d = *x->dims;
  for (const ops::ResizeAxis& a : spec.axes) {
    const size_t ax = static_cast<size_t>(a.axis);
    Dims od = d;
    od[ax] = a.out;
    // The taps some position weights, and whether one tap of weight 1 is all there is.
    std::vector<int64_t> used;
    for (int64_t tp = 0; tp < a.taps; ++tp)
      for (int64_t o = 0; o < a.out; ++o)
        if (a.weight[static_cast<size_t>(o * a.taps + tp)] != 0) {
          used.push_back(tp);
          break;
        }
    bool plain = used.size() == 1 && !a.any_outside();
    for (int64_t o = 0; plain && o < a.out; ++o)
      plain = a.weight[static_cast<size_t>(o * a.taps + used[0])] == 1;
    Dims wd(d.size() - ax, 1);
    wd[0] = a.out;
    Value* acc = nullptr;
    for (int64_t tp : used) {
      std::vector<int64_t> idx(static_cast<size_t>(a.out));
      std::vector<double> w(static_cast<size_t>(a.out));
      for (int64_t o = 0; o < a.out; ++o) {
        idx[static_cast<size_t>(o)] = a.index[static_cast<size_t>(o * a.taps + tp)];
        w[static_cast<size_t>(o)] = a.weight[static_cast<size_t>(o * a.taps + tp)];
      }
      const std::string tap = plain ? fmt::format("axis{}", ax) : fmt::format("axis{}_tap{}", ax, tp);
      Value* gi = b.constant(tap + "_index", Tensor::vector_i64(idx));
      Value* gathered =
          b.node("Gather", tap, {cur, gi}, cur->dtype, od, {{"axis", static_cast<int64_t>(ax)}});
      if (plain) {
        acc = gathered;
        break;
      }
      if (gathered->dtype != ct) gathered = b.cast(gathered, ct, tap + "_cast");
      Value* wv = b.constant(tap + "_weight", Tensor::from_f64(ct, wd, w));
      Value* m = b.node("Mul", tap + "_weighted", {gathered, wv}, ct, od);
      acc = acc ? b.node("Add", tap + "_sum", {acc, m}, ct, od) : m;
    }
    if (!acc) {  // every position outside the input: zeros of the axis's new length to add to
      Value* z = b.constant(fmt::format("axis{}_zero", ax), Tensor(ct, od));
      acc = b.node("Identity", fmt::format("axis{}_outside", ax), {z}, ct, od);
    }
    if (a.any_outside() && spec.extrapolation != 0) {
      std::vector<double> e(static_cast<size_t>(a.out));
      for (int64_t o = 0; o < a.out; ++o)
        e[static_cast<size_t>(o)] = a.outside[static_cast<size_t>(o)] ? spec.extrapolation : 0;
      Value* ev = b.constant(fmt::format("axis{}_extrapolation", ax), Tensor::from_f64(acc->dtype, wd, e));
      acc = b.node("Add", fmt::format("axis{}_extrapolated", ax), {acc, ev}, acc->dtype, od);
    }
    cur = acc;
    d = od;
  }
  if (cur == x) {  // no axis changes: the Resize copies its input
    cur = b.node("Identity", "copy", {x}, t, d);
  } else if (cur->dtype != t) {
    cur = b.cast(cur, t, "cast_back");
  }
  b.finish(cur, y);  // the last node writes the Resize's own output value
  return true;
}

}  // namespace

StatusOr<bool> expand_resize(Graph& g, PassContext&) { return expand_each(g, "Resize", expand_resize_node); }

}  // namespace stitch
