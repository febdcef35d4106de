// expand_block_moves: DepthToSpace and SpaceToDepth (PixelShuffle and PixelUnshuffle) become the
// Reshape, Transpose and Reshape they are defined by (ops::block_move), which the stitcher fuses
// with the convolution epilogue work around them. Runs after fold_constants and leaves nodes
// without static shapes alone; the new nodes are named after the op ("S/blocks", "S/move").
#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> expand_block_moves_node(Graph& g, Node& n) {
  Value *x = n.input(0), *y = n.output(0);
  if (!x || !y || !x->has_static_shape()) return false;
  ASSIGN_OR_RETURN(ops::BlockMove m, ops::block_move(n, *x->dims));
  NodeBuilder b{g, n};
  Value* v = b.reshape(x, m.split, "blocks");
  Dims moved;
  for (int64_t p : m.perm) moved.push_back(m.split[static_cast<size_t>(p)]);
  v = b.node("Transpose", "move", {v}, x->dtype, moved, {{"perm", m.perm}});
  v = b.reshape(v, m.out, "pixels");
  b.finish(v, y);
  return true;
}

}  // namespace

StatusOr<bool> expand_block_moves(Graph& g, PassContext&) {
  ASSIGN_OR_RETURN(bool d2s, expand_each(g, "DepthToSpace", expand_block_moves_node));
  ASSIGN_OR_RETURN(bool s2d, expand_each(g, "SpaceToDepth", expand_block_moves_node));
  return d2s || s2d;
}

}  // namespace stitch
