// Splits as Slices: a Split of constant sizes becomes one Slice per output it hands on, so each
// output goes its own way, as the Slices of merged GEMMs do (merge_gemms.h): into a GEMM
// operand (read in place, find_gemm_folds), into the stitched kernel that reads it (an index
// map), or a kernel of its own. A Split is one unit otherwise: a GEMM call takes one over only
// when it takes every output, and a kernel that stitches one output stores the others. GPT-2's
// exporter splits Q, K and V with one Split: as Slices, Q.K^T can be stitched into the softmax
// kernel while V is still read in place by P.V.
//
// A Gather whose indices are a constant run (a scalar k, or k, k+1, ..., k+n-1) is a Slice of
// its data, with a Reshape that drops the axis for a scalar. BLOOM's exporter picks Q, K and V
// out of one [batch, seq, heads, 3, head_dim] view with three such Gathers, which one element
// kernel stored; as Slices they go the way of GPT-2's. BERT's pooler reads the first token with
// one, which its dense GEMM then reads in place. A GatherND without batch dimensions whose
// constant indices have one coordinate each is such a Gather along axis 0: Falcon's exporter
// picks its one K head and one V head out of the heads that way.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Rewrites every Split whose input and outputs have static shapes (the sizes are its outputs'
// extents along the axis) into Slices of the input, one per output that is read or is a graph
// output; the output values keep their names. Likewise every Gather with static shapes whose
// indices are a constant run in range: a Slice, and a Reshape for a scalar index, that write
// its output value; and every such GatherND (batch_dims 0, indices [1] or [n, 1]) along axis 0.
// Returns one line per Split and per Gather. Those named in `keep`
// (--no-fuse) stay.
StatusOr<std::vector<std::string>> split_to_slices(Graph& g, const std::set<std::string>& keep = {});

// split_to_slices through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten graph
// is estimated no slower (a Split whose outputs all need kernels of their own is one launch;
// its Slices would be several).
StatusOr<RewriteResult> split_to_slices_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                   const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
