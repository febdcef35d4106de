// Row kernels: row ops of one pass that run in the pass of an earlier one (StitchInfo::
// shared_pass), for analyze_stitch.
#pragma once

#include <map>
#include <vector>

#include "codegen/stitch.h"

namespace stitch::codegen {

// Whether `n` is a row op of one pass whose result is a value per row: a ReduceSum, ReduceMean,
// ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare or ReduceLogSum, a
// GlobalAveragePool or a GlobalMaxPool (not ReduceLogSumExp: a maximum, then a sum from it).
bool single_pass_reduction(const Node& n);

// Fills info.shared_pass and takes those row ops' passes out of info.passes. `rows` are the
// group's row ops in topological order, `producer` the producers of the group's values. A row op
// of one pass (single_pass_reduction), not an outer reduction, joins the pass of the first such
// op before it that is not itself joined and whose pass comes after every row op its input is
// computed from; the rows are the same (the kernel's), so one loop serves both.
void share_passes(const std::vector<const Node*>& rows, const std::map<const Value*, const Node*>& producer,
                  StitchInfo& info);

}  // namespace stitch::codegen
