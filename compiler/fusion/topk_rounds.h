// TopK as rounds of row reductions. A TopK of a few (k <= kMaxTopKRounds) along the last axis of a
// floating-point tensor is a kernel of its own to the stitcher. The routers of transformers' MoE
// exports pick each token's top 2 experts that way, right after their softmax's row kernel. Written
// as k rounds over the row, each one ReduceMax, the TopK joins the kernel of the rows it reads
// (importer/contrib_moe.cc picks onnxruntime's MoE's top k the same way).
//
// Each element gets an int64 key: its value's order in the high bits, its position's (reversed) in
// the low 24, so that the largest key left is the round's pick: the largest value, at its lowest
// position (TopK's ties). The value's order is its float32 bits (BitCast) read as an int32 with the
// magnitude bits flipped when negative; NaN is first made one quiet NaN (above +inf, as the
// reference interpreter and PyTorch put it) and -0 made +0 (TopK ties them, so a -0 is reported as
// +0). For the smallest (largest = 0) the order is reversed, NaN last. A round's value and index
// come back out of its key; the picks are masked below every key for the next round. The values
// and indices of the rounds are concatenated into TopK's outputs ([.., k]: a value of k per row,
// stored by the row kernel's wide loop). float64 inputs stay TopKs (a key holds a float32's order).
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

// Rewrites every TopK of static shapes along its input's last axis (at most 2^24 long), of a
// float32, float16 or bfloat16 tensor, with a constant K from 1 to kMaxTopKRounds (and at most the
// axis's extent), into those rounds; its outputs keep their values (a -0 value reads +0). Returns
// one line per TopK. Those named in `keep` (--no-fuse) stay.
StatusOr<std::vector<std::string>> topk_as_rounds(Graph& g, const std::set<std::string>& keep = {});

// topk_as_rounds through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten graph is
// estimated no slower (k rounds over a long row, a vocabulary's, cost more than one TopK kernel).
StatusOr<RewriteResult> topk_as_rounds_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                  const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
