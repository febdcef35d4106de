// ScatterElements of one index per row as a select. A ScatterElements whose indices (and updates)
// hold one element along its axis and the data's extent along every other axis writes at most one
// update into each row along that axis: the output at position j of a row is the row's update where
// j is the row's index (a negative one counted from the end), the data elsewhere. Written as
// Where(j == index, update, data) (the update combined with the data for reduction add or mul), it
// is element-wise, so any kernel takes it; as a scatter it is a kernel of its own, one block copying
// the data and then writing the updates. PhiMoE's router masks each token's first pick that way
// (the logit at its argmax set to -inf) before picking the second. An index out of range matches no
// position, so its update is dropped, as the scatter kernel drops it (ONNX leaves it undefined; the
// reference interpreter reports it).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Rewrites every such ScatterElements of static shapes with reduction none, add or mul (max and
// min are left: their NaN rules differ from Max and Min's) into an Equal of constant positions
// along the axis with the wrapped index, and a Where. Returns one line per scatter. Those named in
// `keep` (--no-fuse) stay.
StatusOr<std::vector<std::string>> scatter_selects(Graph& g, const std::set<std::string>& keep = {});

}  // namespace stitch::fusion
