// ArgMax and ArgMin as two row reductions. An ArgMax or ArgMin is a kernel of its own to the
// stitcher. PhiMoE's router picks each token's expert with one, masks that expert's logit (a
// ScatterElements, scatter_selects.h) and picks the second with another, around its softmaxes' row
// kernel. Along a float tensor's last axis it is written as the extreme (a ReduceMax or ReduceMin)
// and then the least position holding it (a ReduceMin of the positions), which join the kernel of
// the rows they read. It keeps the reference interpreter's answer exactly: a scan that takes a later
// element only when it is strictly beyond the best so far, so a NaN is never taken after the first
// element, and a NaN first element is the answer. Here a NaN after the first element reads as
// beyond no number (-inf for ArgMax, +inf for ArgMin) and is never a holder, and a NaN first
// element as beyond every number, so that position 0 holds the extreme.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Rewrites every ArgMax and ArgMin of static shapes along its input's last axis, of a float tensor
// whose last axis holds at most 2^24 elements (a key's low bits, order_keys.h), with
// select_last_index 0, into those reductions; its output keeps its value, and its bounds
// (ops::int_range) are the axis. Returns one line per node. Those named in `keep` (--no-fuse) stay.
StatusOr<std::vector<std::string>> arg_extremes_as_reductions(Graph& g,
                                                              const std::set<std::string>& keep = {});

// arg_extremes_as_reductions and scatter_selects (scatter_selects.h) through rewrite_if_cheaper
// (plan.h), judged together: kept when the plan of the rewritten graph is estimated no slower.
// PhiMoE's second pick reads the first through a scatter, and the picks alone are estimated no
// faster there (the scatter, a kernel of its own, stays between them).
StatusOr<RewriteResult> arg_extremes_as_reductions_if_cheaper(
    std::unique_ptr<Graph>& g, const FusionOptions& o, const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
