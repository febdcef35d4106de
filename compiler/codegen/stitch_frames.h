// Row kernels: the values computed from a row op's result whose rows a Transpose or Reshape moved
// (a head transpose after a norm, a rotary embedding after Q/K norms), for analyze_stitch.
#pragma once

#include <map>
#include <vector>

#include "codegen/stitch.h"

namespace stitch::codegen {

// The stored values of a row kernel (`info.stored`, of `nodes`) computed from a row op's result
// whose axes are not the domain's, each with the place in the domain of each of its axes
// (StitchInfo::permuted). An error when a node reads a row op's result in a way the kernel cannot
// (a row op reducing moved rows, a GEMM of them, a Transpose that splits a row's innermost piece,
// any layout change in a column kernel) or a value holds other than whole rows moved.
StatusOr<std::map<const Value*, std::vector<RowPiece>>> moved_rows(const std::vector<const Node*>& nodes,
                                                                   const StitchInfo& info);

}  // namespace stitch::codegen
