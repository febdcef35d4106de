// Shared relayouts copied per reader: a Transpose, Slice or view (Reshape and the like) whose
// result several nodes read is one node for the planner, and one stored tensor whenever any of
// its readers needs it stored. A GEMM reads such a chain in place (its operand's offset and
// strides, codegen/gemm_folds.h) only when every value along the chain has that one reader, and
// a stitched kernel that takes the chain as an index map stores its result when another group
// reads it. Falcon's exporter makes the fused Q/K/V product one [batch, seq, heads, head_dim]
// view, transposes it once and picks Q's heads, the one K head and the one V head out of that:
// K's pick goes into the softmax kernel, V's into P.V, so the Transpose (and the columns Slice of
// the merged GEMM before it) was a kernel of its own. With one copy of the chain per reader,
// P.V reads V in place and the softmax kernel computes Q and K through index maps.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Copies every Transpose, Slice and view node with static shapes whose output is read by 2 to 8
// nodes, is not a graph output, and reaches a MatMul operand through relayouts alone (the case a
// copy can save a stored tensor for): each reader after the first gets a copy of its own, and a
// producer that is itself such a relayout is copied in turn (consumers first, so a chain is
// copied whole). Returns one line per node copied. Nodes named in `keep` (--no-fuse) stay.
StatusOr<std::vector<std::string>> copy_shared_relayouts(Graph& g, const std::set<std::string>& keep = {});

// copy_shared_relayouts through rewrite_if_cheaper (plan.h): kept only when the plan of the
// rewritten graph is estimated faster (a copy whose readers all store it anyway only adds a
// kernel, and one that changes nothing only adds nodes to read in the plan).
StatusOr<RewriteResult> copy_shared_relayouts_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                         const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
