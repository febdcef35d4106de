// ScatterElements of a few indices per row as selects. A ScatterElements whose indices (and
// updates) hold k elements along its axis and the data's extent along every other axis writes k
// updates into each row along that axis: with one, the output at position j of a row is the row's
// update where j is the row's index (a negative one counted from the end), the data elsewhere.
// Written as Where(j == index, update, data) (the update combined with the data for reduction add
// or mul), it is element-wise, so any kernel takes it; as a scatter it is a kernel of its own, one
// block copying the data and then writing the updates. PhiMoE's router masks each token's first
// pick that way (the logit at its argmax set to -inf) before picking the second; DeepSeek-V3's
// routing limited to groups marks each token's best groups with k of them (ones at the groups'
// indices). With k > 1 each slot is one such Where over the previous one's result, in the
// scatter's order, so that a later slot at a position already written overrides it (none) or
// combines with it (add, mul), as the reference interpreter's scatter does. An index out of range
// matches no position, and its update is dropped, as the scatter kernel drops it; indices not
// known to lie inside the axis (ops/value_range.h: a TopK's or an ArgMax's are) go through a
// StitchIndexCheck (ops/index_check.h) first, so that such an index is still refused by the reference
// and reported after the run by the kernel that computes the Wheres, naming the scatter.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

inline constexpr int64_t kMaxScatterSelects = 8;  // k: more would be a Where chain longer than a scatter

// Rewrites every such ScatterElements of static shapes, 1 to kMaxScatterSelects indices a row,
// with reduction none, add or mul (max and min are left: their NaN rules differ from Max and
// Min's) into, per slot, an Equal of constant positions along the axis with the wrapped index and
// a Where (a Slice of the slot's indices and updates when k > 1). Returns one line per scatter.
// Those named in `keep` (--no-fuse) stay.
StatusOr<std::vector<std::string>> scatter_selects(Graph& g, const std::set<std::string>& keep = {});

}  // namespace stitch::fusion
