// A LayerNormalization op written out as the nodes its definition spells, so that a rewrite (the
// hoisting of norms past GEMMs, hoist_scales) can take its mean and standard deviation apart.
#pragma once

#include "ir/graph.h"

namespace stitch::fusion {

// A LayerNormalization over the last axis as the nodes its definition spells: the mean (a
// ReduceMean, axes an attribute before opset 18 and an input from it), the centered rows,
// 1 / sqrt(mean of their squares + epsilon) as a Div by the Sqrt, the weight and the bias. The
// last node writes the op's output; the op is left without it, for the caller to remove.
void decompose_layer_norm(Graph& g, Node& ln);

}  // namespace stitch::fusion
