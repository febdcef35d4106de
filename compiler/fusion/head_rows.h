// Per-head norms over merged rows. onnxruntime-genai's builder writes Qwen3's (and LFM2's, OLMo 2's
// per-head) Q and K norms as x [B, S, H*D] reshaped to [B, S*H, D], an RMSNorm over the last axis,
// and a Reshape back to [B, S, H*D]. The merged axis S*H holds a token's heads and the tokens, so
// a row kernel over those rows cannot tell a token's heads apart: it cannot compute the token's own
// statistics (the input norm's, moved past the QKV GEMM) as an outer reduction of its heads, and the
// Reshape back, which merges a kept axis with the row, cannot be in the kernel either.
//
// The rewrite computes the same rows as [B, S, H, D] instead: the Reshape's target is x's leading
// axes and the heads, and every node after it up to the Reshapes that read the result (element-wise
// nodes and reductions over the last axis alone, whose other operands vary along the last axis at
// most) takes that shape; a Reshape of such a Reshape reads the rows directly. Each row is the same
// D elements, so every value is the same; nothing moves and nothing is computed more, so it always
// applies.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Rewrites every Reshape of x [..., W] into [M..., D] (D > 1, W a multiple of D, the leading axes M
// merging runs of x's leading axes and W / D) whose result reaches, through element-wise nodes and
// row ops over the last axis alone (at least one), only Reshapes and no graph output. Returns a line
// per Reshape: "node 'r' (Reshape): rows 2x128x32 as 2x32x4x32, 7 node(s) after it; node 'back'
// (Reshape) read(s) them". Nodes named in `keep` (--no-fuse) are left as they are, with their region.
StatusOr<std::vector<std::string>> split_head_rows(Graph& g, const std::set<std::string>& keep = {});

}  // namespace stitch::fusion
