// DepthToSpace and SpaceToDepth (opsets 11 and later; PyTorch's PixelShuffle and PixelUnshuffle):
// blocks of channels moved to pixels and back. Each is a Reshape, a Transpose and a Reshape
// (block_move), which the reference evaluates and the front end's expand_block_moves writes out,
// so the stitcher fuses the move with its neighbours.
//   DepthToSpace DCR: [N, C, H, W] -> [N, b, b, C/b^2, H, W] -> perm (0, 3, 4, 1, 5, 2) -> [N, C/b^2, H b, W
//   b] DepthToSpace CRD: [N, C, H, W] -> [N, C/b^2, b, b, H, W] -> perm (0, 1, 4, 2, 5, 3) -> the same
//   SpaceToDepth DCR: [N, C, H, W] -> [N, C, H/b, b, W/b, b] -> perm (0, 3, 5, 1, 2, 4) -> [N, C b^2, H/b,
//   W/b] SpaceToDepth CRD (opset 28): the same with perm (0, 1, 3, 5, 2, 4)
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

StatusOr<BlockMove> block_move(const Node& n, const Dims& x) {
  if (x.size() != 4)
    return node_error(n, fmt::format("expects an input of rank 4 (N, C, H, W), got {}", dims_to_string(x)));
  const int64_t b = n.attr_int("blocksize", 0), N = x[0], C = x[1], H = x[2], W = x[3];
  if (b <= 0) return node_error(n, fmt::format("blocksize is {}; it must be positive", b));
  BlockMove m;
  if (n.op_type == "DepthToSpace") {
    const std::string mode = n.attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD")
      return node_error(n, fmt::format("mode '{}' is neither DCR nor CRD", mode));
    if (b > C || C % b != 0 || (C / b) % b != 0)  // b * b itself may overflow
      return node_error(n,
                        fmt::format("its {} channels are not a multiple of blocksize^2 = {} x {}", C, b, b));
    const int64_t c = C / b / b;
    m.split = mode == "DCR" ? Dims{N, b, b, c, H, W} : Dims{N, c, b, b, H, W};
    m.perm = mode == "DCR" ? std::vector<int64_t>{0, 3, 4, 1, 5, 2} : std::vector<int64_t>{0, 1, 4, 2, 5, 3};
    m.out = {N, c, H * b, W * b};
    return m;
  }
  const std::string mode = n.attr_string("mode", "DCR");  // an attribute from opset 28
  if (mode != "DCR" && mode != "CRD")
    return node_error(n, fmt::format("mode '{}' is neither DCR nor CRD", mode));
  if (H % b != 0 || W % b != 0)
    return node_error(n,
                      fmt::format("its height {} and width {} must be multiples of blocksize {}", H, W, b));
  m.split = {N, C, H / b, b, W / b, b};
  m.perm = mode == "DCR" ? std::vector<int64_t>{0, 3, 5, 1, 2, 4} : std::vector<int64_t>{0, 1, 3, 5, 2, 4};
  m.out = {N, C * b * b, H / b, W / b};
  return m;
}

namespace {

Status infer_block_move(InferContext& ctx) {
  ASSIGN_OR_RETURN(BlockMove m, block_move(ctx.node(), ctx.dims(0)));
  ctx.set_output(0, ctx.dtype(0), m.out);
  return Status::ok();
}

Status eval_block_move(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(BlockMove m, block_move(n, in[0]->dims()));
  // The split input read in the permuted order (both reshapes keep the element order).
  const Dims split_strides = strides_of(m.split);
  Dims moved, strides;
  for (int64_t p : m.perm) {
    moved.push_back(m.split[static_cast<size_t>(p)]);
    strides.push_back(split_strides[static_cast<size_t>(p)]);
  }
  out[0] = copy_strided(*in[0], moved, 0, strides).reshaped(m.out);
  return Status::ok();
}

}  // namespace

void register_blocks(std::vector<OpDef>& t) {
  for (const char* op : {"DepthToSpace", "SpaceToDepth"})
    t.push_back({op, kMinOpset, kMaxOpset, OpCategory::kLayout, infer_block_move, eval_block_move});
}

}  // namespace stitch::ops
