// Constant scales after a GEMM, folded into its weights: y = (x W + b) * c, with W, b and c
// constants and c one value per column (a [n] vector, or a scalar), is x (W diag(c)) + b * c.
// DINOv2's and ConvNeXt's layer scale and CaiT's are such a Mul after a projection, and it stood
// between the GEMM and the residual Add the call could otherwise take as its C, and so between the
// call and a LayerNorm that could move past the next GEMM. Folded, the product is one call with
// its bias (and residual); the Mul and the traffic of its pass are gone. The rewrite is exact up
// to one rounding of each new weight, done once at compile time.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Also folds a BatchNormalization in inference mode of such a product seen as [rows, n] (through
// views keeping the last axis: LeViT's Linear then BatchNorm1d over the flattened tokens), a
// scale and a shift per column: the scale into the weight, the shift into the bias (an Add made
// after the MatMul when it has none, which its call then takes as its bias epilogue).
// Folds every Mul of a constant c whose other operand is the product of a MatMul (A computed,
// B a constant [k, n] matrix), or that product plus a constant [n] bias, read by nothing else and
// not a graph output; c has one value per column (dims [n], [1, ..., 1, n] of no higher rank than
// the product, or one value). The weight and bias become new constants (the old ones may be
// shared, e.g. tied weights) and the Mul's output is the GEMM's (or the bias Add's). In float16 a
// fold is skipped when a column of scaled weights would be subnormal throughout (a freshly
// initialised layer scale is 1e-5) or a value would overflow, and said so. Nodes named in
// `keep` (--no-fuse) are left alone. Returns one line per fold (or skip).
StatusOr<std::vector<std::string>> fold_column_scales(Graph& g, const std::set<std::string>& keep = {});

}  // namespace stitch::fusion
