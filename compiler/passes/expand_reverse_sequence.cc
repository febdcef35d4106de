// expand_reverse_sequence: a ReverseSequence becomes a GatherElements along its time axis, the
// index of output step t of batch entry b being t < len[b] ? len[b] - 1 - t : t (ops/op_params.h),
// made over the time and batch axes alone and Expanded to the input's shape, which the back end
// reads as an index map. Constant lengths give a constant index; lengths known at run time are
// clamped to [0, T] (a kernel cannot report a bad one; the reference backend does), and the index
// is their Less, Sub and Where. Runs after fold_constants and leaves nodes without static shapes
// alone; the new nodes are named after the op's.
#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> expand(Graph& g, Node& n) {
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
    Value* l = b.reshape(lens, len_dims, "lens");
    l = b.node("Max", "lens_low", {b.node("Min", "lens_high", {l, k(steps)}, DType::kI64, len_dims), k(0)},
               DType::kI64, len_dims);
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
  return expand_each(g, "ReverseSequence", expand);
}

}  // namespace stitch
