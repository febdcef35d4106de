// expand_reverse_sequence: a ReverseSequence becomes a GatherElements along its time axis, the
// index of output step t of batch entry b being t < len[b] ? len[b] - 1 - t : t (ops/op_params.h),
// made over the time and batch axes alone and Expanded to the input's shape, which the back end
// reads as an index map. Constant lengths give a constant index (the shape rule refuses one
// outside [0, T]); lengths known at run time go through a StitchIndexCheck (ops/index_check.h), which
// refuses one outside [0, T] naming the ReverseSequence, and the index is their Less, Sub and
// Where, inside the time axis by their bounds (ops/value_range.h), so the GatherElements takes no
// run-time check. Runs after fold_constants and leaves nodes without static shapes alone; the new
// nodes are named after the op's.
#include <fmt/format.h>

#include "ops/index_check.h"
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> expand_reverse_sequence_node(Graph& g, Node& n) {
  Value *x = n.input(0), *lens = n.input(1), *y = n.output(0);
  if (!x || !lens || !y || !x->has_static_shape() || !lens->has_static_shape()) return false;
  const Dims& xd = *x->dims;
  ASSIGN_OR_RETURN(ops::ReverseSequenceSpec s, ops::reverse_sequence_spec(n, xd, *lens->dims));
  const auto ta = static_cast<size_t>(s.time_axis), ba = static_cast<size_t>(s.batch_axis);
  const int64_t steps = xd[ta], batch = xd[ba];
  NodeBuilder b{g, n};
  // The index over [T, B, 1...] or [B, T, 1...].
  Dims small(xd.size(), 1);
  small[ta] = steps;
  small[ba] = batch;
  Value* idx = nullptr;
  if (lens->constant) {
    const std::vector<int64_t> len = lens->constant->to_i64();
    std::vector<int64_t> v(static_cast<size_t>(steps * batch));
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t e = 0; e < batch; ++e)
        v[static_cast<size_t>(ta == 0 ? t * batch + e : e * steps + t)] =
            ops::reversed_step(t, len[static_cast<size_t>(e)]);
    idx = b.constant("index", Tensor::from_i64(DType::kI64, small, v));
  } else {
    Dims step_dims(xd.size(), 1), len_dims(xd.size(), 1);
    step_dims[ta] = steps;
    len_dims[ba] = batch;
    std::vector<int64_t> t(static_cast<size_t>(steps));
    for (int64_t i = 0; i < steps; ++i) t[static_cast<size_t>(i)] = i;
    Value* at = b.constant("steps", Tensor::from_i64(DType::kI64, step_dims, t));
    auto k = [&](int64_t v) { return b.constant("c", Tensor::scalar_i64(v)); };
    // A length outside [0, T] is refused, as the op refuses it: the reference stops, and a kernel
    // reports it after the run and goes on with the nearest bound (StitchIndexCheck).
    ASSIGN_OR_RETURN(Value * l,
                     ops::checked_index(g, n, lens, ops::sequence_lens_bounds(steps), "lens_checked"));
    l = b.reshape(l, len_dims, "lens");
    Value* rev = b.node("Sub", "reversed", {b.node("Sub", "last", {l, k(1)}, DType::kI64, len_dims), at},
                        DType::kI64, small);
    Value* inside = b.node("Less", "inside", {at, l}, DType::kBool, small);
    idx = b.node("Where", "index", {inside, rev, at}, DType::kI64, small);
  }
  Value* shape = b.constant("shape", Tensor::vector_i64(std::vector<int64_t>(xd.begin(), xd.end())));
  Value* full = b.node("Expand", "index_full", {idx, shape}, DType::kI64, xd);
  b.finish(b.node("GatherElements", "reversed_steps", {x, full}, x->dtype, xd, {{"axis", s.time_axis}}), y);
  return true;
}

}  // namespace

StatusOr<bool> expand_reverse_sequence(Graph& g, PassContext&) {
  return expand_each(g, "ReverseSequence", expand_reverse_sequence_node);
}

}  // namespace stitch
