// TopK as rounds of row reductions. A TopK of a few (k <= kMaxTopKRounds) along the last axis of a
// floating-point tensor is a kernel of its own to the stitcher. The routers of transformers' MoE
// exports pick each token's top 2 experts that way, right after their softmax's row kernel. Written
// as k rounds over the row, each a few reductions, the TopK joins the kernel of the rows it reads
// (importer/contrib_moe.cc picks onnxruntime's MoE's top k the same way). Round r takes the largest
// value not yet taken and the lowest index holding it, as TopK orders them (ties to the lower
// index; NaN above every number, as the reference interpreter and PyTorch put it): a NaN left in
// the row is taken first (its value NaN), else the largest number (ReduceMax with the taken ones
// and the NaNs set to -inf) at its first index (ReduceMin of the indices holding it); the smallest
// (largest = 0) mirror that, NaN last. The values and indices of the rounds are concatenated into
// TopK's outputs ([.., k]: a value of k per row, stored by the row kernel's wide loop).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

inline constexpr int64_t kMaxTopKRounds = 8;

// Rewrites every TopK of static shapes along its input's last axis, of a float tensor, with a
// constant K from 1 to kMaxTopKRounds (and at most the axis's extent), into those rounds; its
// outputs keep their values. Returns one line per TopK. Those named in `keep` (--no-fuse) stay.
StatusOr<std::vector<std::string>> topk_as_rounds(Graph& g, const std::set<std::string>& keep = {});

// topk_as_rounds through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten graph is
// estimated no slower (k rounds over a long row, a vocabulary's, cost more than one TopK kernel).
StatusOr<RewriteResult> topk_as_rounds_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                  const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
