// Reductions over a few elements as element-wise ops. A ReduceSum or ReduceMean over one axis of
// 2 to kMaxShortReduction elements is a row op to the stitcher, and its rows fix the rows of the
// kernel it joins: transformers' MoE exports sum each token's expert outputs over its 2 slots
// ([tokens, slots, hidden] over the slots), a column reduction that neither the slots' element
// kernel nor the next norm's row kernel (rows of hidden) can take, so it is a kernel of its own.
// Written as the sum of one Slice per element of the axis, the reduction is element-wise at its
// output's coordinates: any kernel takes it, each of its elements a few loads and adds. The
// elements are added in the axis's order, from the first (as the reference interpreter does); a
// mean divides that sum by the count. A Softmax over a last axis of 2 to kMaxShortReduction elements
// is likewise a row op whose rows of a few elements no wider kernel takes (an MoE router's softmax
// over its top 2, after a TopK over the experts): written as the largest element by Max, the
// exponentials of the differences, their sum by Adds and the quotients (half types in float32,
// rounded once), it joins the kernel that picks the top 2.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

inline constexpr int64_t kMaxShortReduction = 8;

// Rewrites every ReduceSum (of a float or integer tensor) and ReduceMean (of a float tensor) of
// static shapes with constant axes that reduce one axis of 2 to kMaxShortReduction elements (any
// other axes they name of one element) into Slices and Adds (then a Div by the count for a mean,
// and a Reshape when the axes are not kept); its output keeps its value; and every float Softmax
// of static shape over such a last axis. Returns one line per
// reduction. Those named in `keep` (--no-fuse) stay.
StatusOr<std::vector<std::string>> short_reductions_as_adds(Graph& g, const std::set<std::string>& keep = {});

// short_reductions_as_adds through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten
// graph is estimated no slower.
StatusOr<RewriteResult> short_reductions_as_adds_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                            const std::optional<Cost>& before = std::nullopt);

// Rewrites every ReduceMax and ReduceMin (of a float or integer tensor, static shapes, constant
// axes) that reduces one axis of 2 to kMaxShortReduction elements (any other axes they name of one
// element), of `only_len` elements when that is not 0, into one Slice per element combined by Max
// or Min in the axis's order, then a Reshape to its output's shape; its output keeps its value (Max
// and Min carry a NaN as the reduction does). The rounds of a TopK over a few (topk_rounds.h) are
// such ReduceMaxes of int64 keys: element-wise, a router's top 2 of each group and top 2 of the
// groups join the kernel of its rows over every expert. Returns one line per reduction; those named
// in `keep` stay.
StatusOr<std::vector<std::string>> short_maxima_as_maxes(Graph& g, const std::set<std::string>& keep = {},
                                                         int64_t only_len = 0);

// short_maxima_as_maxes through rewrite_if_cheaper, once per row length present, the shortest
// first, each kept when the plan is estimated no slower and has no more kernels: rows of different
// lengths often belong to different kernels, and element-wise work pays only where it leaves a
// kernel's rows of one length. The verdict names each length ("over 2: ...").
StatusOr<RewriteResult> short_maxima_as_maxes_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                         const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
