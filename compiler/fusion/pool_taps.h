// Pools over small windows as element-wise taps. A MaxPool or AveragePool is an op the stitcher
// does not take: a kernel of its own between its producer and its reader, even when both are
// memory-intensive (CoAtNet's pre-norm BatchNorm before the 2 x 2 average pool that downsamples,
// ResNeSt's split-attention sum before its 3 x 3 average pool, DPN's MaxPool before a BatchNorm).
// Written as one strided Slice per window position (of a Pad when the windows reach past the
// input), combined by Add or Max in the window's row-major order, the pool is element-wise at its
// output's coordinates: the kernel of its producer or of its reader computes it, each output a few
// loads. An average divides the sum by the count the pool divides by (count_include_pad or not,
// with ceil_mode's overhang never counted): one number when every window counts the same, else a
// constant per output position. The padding is 0 for an average and the type's lowest value for a
// maximum, so padded positions never win; half types average in float32 and round once, as the
// pool's own kernel does.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// The most window positions a pool may have to be written as taps (a 3 x 3 window): each output
// element reads that many input elements, and the kernel that takes the pool computes its producer
// at each of them.
inline constexpr int64_t kMaxPoolTaps = 9;

// Rewrites every MaxPool (float or integer, its Indices output not read) and AveragePool (float)
// of the default domain with static shapes whose window has at most `max_taps` positions into
// Slices (of a Pad where needed) combined by Max or Add, an average then divided by its count, the
// last node writing the pool's output. Returns one line per pool; those named in `keep` (--no-fuse)
// stay.
StatusOr<std::vector<std::string>> pools_as_taps(Graph& g, const std::set<std::string>& keep = {},
                                                 int64_t max_taps = kMaxPoolTaps);

// pools_as_taps through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten graph is
// estimated faster (a tie keeps the pools' own kernels).
StatusOr<RewriteResult> pools_as_taps_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                 const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
