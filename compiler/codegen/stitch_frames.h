// Row kernels: the values computed from a row op's result whose rows a Transpose or Reshape moved
// (a head transpose after a norm, a rotary embedding after Q/K norms) or that are broadcast over
// axes of their own (an MoE's routing weights over the experts' activations), for analyze_stitch.
#pragma once

#include <cstdint>
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

// Row kernels: for each value of `nodes` the kernel pulls, which of the domain's axes each of its
// axes may be read at coordinates of (a bit per domain axis), from where the kernel reads: row ops'
// inputs and stored values at the domain's coordinates (moved values along their pieces), then back
// through each node (element-wise ops and layout changes axis by axis, Reshapes by runs of equal
// products, a fine-grained GEMM's operands at its batch axes and M or N with their contraction axis
// along the row, anything else every axis). An axis read along a reduced axis changes along the
// row. Outer reductions (StitchInfo::outer) run their own loop: nothing is carried back through
// them.
std::map<const Value*, std::vector<uint64_t>> domain_axes(const std::vector<const Node*>& nodes,
                                                          const StitchInfo& info);

// Whether row op `n` (info `ri`), over rows other than the kernel's (`info`), may be an outer
// reduction of it (StitchInfo::outer): a reduction keeping its axes, in a kernel over whole rows (not
// columns), whose input is computed from outside values (`producer`: the group's values) without
// another row op or a fine-grained GEMM. Where its result is read is checked by outer_reductions.
bool outer_candidate(const Node& n, const RowOpInfo& ri, const StitchInfo& info,
                     const std::map<const Value*, const Node*>& producer);

// Once `info` is complete (its stored and moved values known): an error, `why[i]` (the reason the
// i-th outer reduction is over other rows) and what makes it impossible, unless every outer
// reduction's result is read at coordinates of the row alone (domain_axes) and the rows are not
// split over blocks; then each one's group (StitchInfo::Outer::group).
Status outer_reductions(const std::vector<const Node*>& nodes, const std::vector<std::string>& why,
                        StitchInfo& info);

}  // namespace stitch::codegen
