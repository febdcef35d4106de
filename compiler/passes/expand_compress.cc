// expand_compress: a Compress of a constant condition (its output's shape needs one) is a Gather of
// the positions the condition keeps, along its axis or of x flattened; split_slices makes a
// contiguous run of them a Slice, and the stitcher reads either as an index map. Runs after
// fold_constants (a Compress of a constant x is a constant by then); the new nodes are named after
// the Compress ("C/kept").
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> expand_compress_node(Graph& g, Node& n) {
  Value *x = n.input(0), *condition = n.input(1), *y = n.output(0);
  if (!x || !condition || !y || !condition->constant || !x->has_static_shape() || !y->has_static_shape())
    return false;
  const Dims& xd = *x->dims;
  const bool along_axis = n.has_attr("axis");
  int64_t axis = 0;
  if (along_axis) {
    ASSIGN_OR_RETURN(axis, ops::norm_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(xd.size())));
  }
  const int64_t length = along_axis ? xd[static_cast<size_t>(axis)] : num_elements(xd);
  ASSIGN_OR_RETURN(std::vector<int64_t> kept, ops::compress_positions(n, *condition->constant, length));
  NodeBuilder b{g, n};
  Value* from = along_axis ? x : b.reshape(x, {num_elements(xd)}, "flat");
  Value* at = b.constant("kept", Tensor::vector_i64(kept));
  b.finish(b.node("Gather", "gather", {from, at}, x->dtype, *y->dims, {{"axis", axis}}), y);
  return true;
}

}  // namespace

StatusOr<bool> expand_compress(Graph& g, PassContext&) {
  return expand_each(g, "Compress", expand_compress_node);
}

}  // namespace stitch
