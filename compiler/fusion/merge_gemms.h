// Sibling GEMMs: MatMuls that read the same activation with constant weights (attention's Q, K
// and V projections, LLaMA's gate and up projections) become one MatMul over the weights
// concatenated along n, and a Slice of its columns hands each former output on. One launch
// instead of two or three, with a wider n that fills the GPU better; a Slice costs nothing where it
// feeds a GEMM operand (read in place, find_gemm_folds) or a stitched kernel (an index map).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Merges, for every value, its MatMul readers whose B is a constant [k, n_i] matrix of the
// value's dtype and whose (biased) product is not a graph output (at least two; those whose product is read
// only by an Add of a constant [n_i] bias vector merge among themselves, biases concatenated too, the others
// among themselves). Returns one line per merge: "node 'q' (MatMul), ... -> node 'q/merged' (MatMul, n =
// 64+64+64) and a Slice each".
// MatMuls (and bias Adds) named in `keep` (--no-fuse) stay apart.
StatusOr<std::vector<std::string>> merge_sibling_gemms(Graph& g, const std::set<std::string>& keep = {});

}  // namespace stitch::fusion
