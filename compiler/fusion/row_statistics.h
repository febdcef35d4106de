// Row statistics computed again for each per-head norm that reads them (Qwen3's Q/K norms after
// its input RMSNorm's scale moved past the Q/K/V projection, fusion/hoist_scales.h): the scaled Q
// product and the scaled K product each go through a per-head RMSNorm, whose kernel's rows are
// the token's heads. With the token's statistics (Pow, ReduceMean, Add, Sqrt, Reciprocal over the
// token's hidden vector) a node of their own, both kernels would read them from a kernel run
// before; with a copy each, each kernel computes its token's statistics itself (an outer reduction,
// codegen/stitch.h), and the Q and K kernels need nothing from each other: one launch for both.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// For each value r read by several nodes, computed by a chain of at most kMaxStatisticNodes nodes
// back to one that is not element-wise: element-wise nodes of one computed input each and exactly
// one reduction keeping its axes (r one value per row of that input), every value of the chain but
// r read inside it only, and the chain's input written by a GEMM call (with its residual) or a graph
// input, so that no generated kernel computes it (one that did could compute r for every reader).
// Each reader of r that scales a GEMM's product (or a part of it) and from which a row op (a
// reduction, a norm) is reached through element-wise nodes and data movement gets a copy of the
// chain, but the first such reader when r has no other. Nodes named in `keep` (--no-fuse) are left
// as they are. Returns one line per copy.
inline constexpr int kMaxStatisticNodes = 8;
StatusOr<std::vector<std::string>> copy_row_statistics(Graph& g, const std::set<std::string>& keep = {});

}  // namespace stitch::fusion
