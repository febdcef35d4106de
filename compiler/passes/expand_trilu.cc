// expand_trilu: a Trilu of a static shape becomes Where(mask, x, 0), the mask a constant of its last
// two axes (broadcast over the others), which the stitcher fuses with its neighbours; the back end's
// Trilu kernel takes no part in a stitched one. The chunked gated delta rule (Qwen3.5, OLMo hybrid)
// takes the lower triangle of a product and negates it before its triangular solve: the Trilu and
// the Neg were a kernel each.
//
// Element (r, c) of the last two axes is kept where c - r >= k for the upper triangle and c - r <= k
// for the lower (k from input 1, 0 when absent); elsewhere it is 0 of x's type, as the op's zeros
// are. Left as it is: a mask of more than kMaxTriluMask elements (a causal mask over a long sequence
// would be megabytes of weights; its kernel reads nothing else). A k computed at run time is refused
// before this pass.
#include <fmt/format.h>

#include <algorithm>

#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

constexpr int64_t kMaxTriluMask = int64_t{1} << 16;

StatusOr<bool> expand_trilu_node(Graph& g, Node& n) {
  Value *x = n.input(0), *y = n.output(0);
  if (!x || !y || !x->has_static_shape() || !y->has_static_shape() || x->dims->size() < 2) return false;
  int64_t k = 0;
  if (const Value* kv = n.input(1)) {
    if (!kv->constant || kv->constant->size() != 1) return false;
    k = kv->constant->get_i64(0);
  }
  const Dims& d = *x->dims;
  const int64_t rows = d[d.size() - 2], cols = d[d.size() - 1];
  if (rows * cols > kMaxTriluMask || rows * cols == 0) return false;
  const bool upper = n.attr_int("upper", 1) != 0;
  Tensor mask(DType::kBool, {rows, cols});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      // c - r lies within (-rows, cols): a k past that keeps everything or nothing, as in the op
      const bool kept = upper ? c - r >= k : c - r <= k;
      mask.set_i64(r * cols + c, kept ? 1 : 0);
    }
  NodeBuilder b{g, n};
  Value* kept = b.constant("kept", std::move(mask));
  Value* zero = b.constant("zero", Tensor(x->dtype, {}));
  b.finish(b.node("Where", "kept_or_zero", {kept, x, zero}, x->dtype, *y->dims), y);
  return true;
}

}  // namespace

StatusOr<bool> expand_trilu(Graph& g, PassContext&) { return expand_each(g, "Trilu", expand_trilu_node); }

}  // namespace stitch
