// GroupNorm as PyTorch exports it: x [N, C, S...] reshaped into groups [N, G, C/G * S...], an
// InstanceNormalization over each group (scale 1 and bias 0 per group), reshaped back to
// [N, C, S...], then the channel weight and bias and the activation (SiLU in UNets, GELU in
// wav2vec2, a residual and ReLU in ResNets). A row kernel cannot take the Reshape back: it merges
// the group, a kept axis of the rows, with the row's first piece, the group's channels. The weight,
// bias and activation were then a kernel of their own, reading and writing the whole tensor again.
//
// The rewrite reshapes the groups to [N, G, C/G, S...] instead (the same elements per instance, so
// the same statistics), and moves the Reshape back past the element-wise nodes after it: each
// computes in the groups' shape, its constant operands reshaped to match (a channel weight [C, 1, 1]
// becomes [G, C/G, 1, 1]) and any other operand viewed so. The norm, weight, bias and activation
// become one row kernel storing [N, G, C/G, S...], which the Reshape back only views. It moves
// nothing and computes nothing more, so it always applies.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Rewrites every such GroupNorm of `g` (an InstanceNormalization reading a Reshape of x [N, C, S...]
// into [N, G, L] with 1 < G < C, C a multiple of G, L = C/G * S..., its result read only by
// Reshapes). Returns a line per GroupNorm: "node 'in' (InstanceNormalization): groups of [2, 3, 70]
// as [2, 3, 2, 5, 7]; node 'back' (Reshape) after 4 element-wise nodes". Nodes named in `keep`
// (--no-fuse) are left as they are.
StatusOr<std::vector<std::string>> split_group_norms(Graph& g, const std::set<std::string>& keep = {});

}  // namespace stitch::fusion
