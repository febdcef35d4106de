// Bounds of an integer tensor's elements known at compile time, from the nodes that compute it:
// what lets a kernel skip the run-time check of an index that cannot leave its axis (codegen's
// known_in_range), such as the clamped cache positions passes/expand_attention.cc writes for a
// TensorScatter.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/graph.h"

namespace stitch::ops {

struct IntRange {
  int64_t min = 0, max = 0;  // every element lies in [min, max]
};

// The bounds of integer value `v`, or nothing when they are not known. Follows constants, the
// compiler's StitchIndexCheck, Clip, Min and Max, Where (either branch), Add and Sub, Mod by a
// positive constant, BitwiseAnd with a non-negative operand or a low-bits mask (the position an
// order key holds, fusion/order_keys.h), ReduceMax and ReduceMin, the positions ArgMax, ArgMin and
// TopK pick (inside their axis), and the ops that only move or copy elements (Reshape, Expand,
// Transpose, Slice, Gather's data, integer Casts that keep every value). Never a range that a value
// computed at run time could leave; nothing where a bound would overflow.
std::optional<IntRange> int_range(const Value* v);

}  // namespace stitch::ops
