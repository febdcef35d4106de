// GEMMs wrapped in flattening views: onnxruntime's level-1 optimizations (MatMulAddFusion) and
// Keras-style exports write a dense layer over [batch, seq, k] as a Reshape to [batch*seq, k], a
// 2-D Gemm or MatMul and a Reshape back. The views cost nothing, but they stand between the GEMM
// and what the rewrites look for: a LayerNorm reaching its GEMM through a view is not moved past
// it (hoist_scales.h), so it keeps a kernel of its own; a bias added at [batch*seq, n] is not the
// product's bias at [batch, seq, n]. Here the MatMul reads the view's input itself (a MatMul
// broadcasts over leading axes, so the product is the same numbers in the same order), and the
// element-wise nodes after it that read only it and constants of one value per column (C's bias
// Add, an activation) compute at the unflattened shape too. The chain's old value is a Reshape of
// the new one for its readers, and a reader that reshapes it back to the unflattened shape reads
// the new value instead: the two views go.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// For every MatMul of a rank-2 A [m, k] and rank-2 B whose A is a view (Reshape, Flatten,
// Squeeze, Unsqueeze) of a value x of rank 3 or more, [d0, ..., k] with d0 * ... = m, of A's
// type: the MatMul reads x. MatMuls, views and chain nodes named in `keep` (--no-fuse) stay as
// they are. Returns one line per MatMul.
StatusOr<std::vector<std::string>> unflatten_gemms(Graph& g, const std::set<std::string>& keep = {});

}  // namespace stitch::fusion
