// expand_lrn: an LRN becomes the arithmetic of its definition (ops/normalization.cc), which the
// planner fuses into one element kernel: the squares, Padded with zeros along the channels by the
// window's reach on each side (at most C - 1), summed over the window as Slices of the padded squares, then
// x / (bias + alpha / size * sum)^beta. Runs after fold_constants and leaves nodes without static
// shapes alone; the new nodes are named after the op's.
#include <algorithm>

#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> expand_lrn_node(Graph& g, Node& n) {
  Value *x = n.input(0), *y = n.output(0);
  if (!x || !y || !x->has_static_shape()) return false;
  const Dims& xd = *x->dims;
  ASSIGN_OR_RETURN(ops::LrnSpec s, ops::lrn_spec(n, xd));
  NodeBuilder b{g, n};
  auto k = [&](double v) { return b.constant("c", Tensor::from_f64(x->dtype, {}, {v})); };
  Value* sq = b.node("Mul", "square", {x, x}, x->dtype, xd);
  const auto rank = static_cast<int64_t>(xd.size());
  // A window reaching past every channel reads only zeros there: at most C - 1 on each side.
  const int64_t lower = std::min(s.lower(), xd[1] - 1), upper = std::min(s.upper(), xd[1] - 1);
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  pads[1] = lower;
  pads[static_cast<size_t>(rank + 1)] = upper;
  Dims padded = xd;
  padded[1] += lower + upper;
  Value* p =
      b.node("Pad", "window", {sq, b.constant("window_pads", Tensor::vector_i64(pads))}, x->dtype, padded);
  Value* sum = nullptr;
  for (int64_t i = 0; i < lower + upper + 1; ++i) {
    Value* part = b.slice(p, {i}, {i + xd[1]}, {1}, "shifted");
    sum = sum ? b.node("Add", "window_sum", {sum, part}, x->dtype, xd) : part;
  }
  Value* scaled = b.node("Mul", "scaled", {sum, k(s.alpha / double(s.size))}, x->dtype, xd);
  Value* base = b.node("Add", "biased", {scaled, k(s.bias)}, x->dtype, xd);
  Value* denom = b.node("Pow", "denominator", {base, k(s.beta)}, x->dtype, xd);
  b.finish(b.node("Div", "normalized", {x, denom}, x->dtype, xd), y);
  return true;
}

}  // namespace

StatusOr<bool> expand_lrn(Graph& g, PassContext&) { return expand_each(g, "LRN", expand_lrn_node); }

}  // namespace stitch
