// expand_one_hot: a OneHot becomes the element-wise comparison it is, which the stitcher fuses
// with its neighbours (the back end had no kernel for it):
//   i = indices as int64 (a Cast of other types truncates, as the op's definition casts),
//   i' = Where(i < 0, i + depth, i)                       (negative indices count from the end),
//   y = Where(Equal(Reshape(i', axis of 1), 0 .. depth - 1 along the axis), on, off).
// Indices outside [-depth, depth) match no position, so their row is `off`, as the op defines.
// Runs after fold_constants; depth is a constant by then (shape inference needs it), and the
// values' [off, on] become scalar constants when they are constant, Gathers otherwise. The new
// nodes are named after the OneHot ("H/match").
#include "ops/op_util.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> expand_one_hot_node(Graph& g, Node& n) {
  Value *idx = n.input(0), *depth = n.input(1), *values = n.input(2), *y = n.output(0);
  if (!idx || !depth || !values || !y || !depth->constant || !idx->has_static_shape() ||
      !y->has_static_shape())
    return false;
  const Dims& yd = *y->dims;
  const int64_t r = static_cast<int64_t>(yd.size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", -1), r));
  const int64_t d = yd[static_cast<size_t>(axis)];
  NodeBuilder b{g, n};
  const Dims& id = *idx->dims;
  Value* i = idx->dtype == DType::kI64 ? idx : b.cast(idx, DType::kI64, "as_int64");
  Value* zero = b.constant("zero", Tensor::scalar_i64(0));
  Value* neg = b.node("Less", "negative", {i, zero}, DType::kBool, id);
  Value* wrapped =
      b.node("Add", "from_end", {i, b.constant("depth", Tensor::scalar_i64(d))}, DType::kI64, id);
  i = b.node("Where", "wrapped", {neg, wrapped, i}, DType::kI64, id);
  Dims with_axis = id;
  with_axis.insert(with_axis.begin() + axis, 1);
  i = b.reshape(i, with_axis, "with_axis");
  Dims along(static_cast<size_t>(r), 1);
  along[static_cast<size_t>(axis)] = d;
  std::vector<int64_t> positions(static_cast<size_t>(d));
  for (int64_t k = 0; k < d; ++k) positions[static_cast<size_t>(k)] = k;
  Value* pos = b.constant("positions", Tensor::from_i64(DType::kI64, along, positions));
  Value* match = b.node("Equal", "match", {i, pos}, DType::kBool, yd);
  Value *off = nullptr, *on = nullptr;
  if (values->constant) {  // each a scalar copy of its element, exact for every type
    off = b.constant("off", ops::copy_strided(*values->constant, {}, 0, {}));
    on = b.constant("on", ops::copy_strided(*values->constant, {}, 1, {}));
  } else {
    off =
        b.node("Gather", "off", {values, b.constant("off_index", Tensor::scalar_i64(0))}, values->dtype, {});
    on = b.node("Gather", "on", {values, b.constant("on_index", Tensor::scalar_i64(1))}, values->dtype, {});
  }
  b.finish(b.node("Where", "values", {match, on, off}, values->dtype, yd), y);
  return true;
}

}  // namespace

StatusOr<bool> expand_one_hot(Graph& g, PassContext&) {
  return expand_each(g, "OneHot", expand_one_hot_node);
}

}  // namespace stitch
