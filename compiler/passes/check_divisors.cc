// check_divisors: an integer Div or Mod whose divisor may hold 0 reads it through the compiler's
// StitchIndexCheck with `nonzero` (ops/index_check.h), named after the Div or Mod. ONNX leaves integer
// division by zero undefined (PyTorch refuses it); the kernels and the reference would give 0. Now
// the reference refuses it naming the node, and a kernel reports it after the run (exit 2) and goes
// on dividing by 1. A divisor whose bounds exclude 0 (ops::int_range: a constant, a Clip to at
// least 1, ...) takes no check, and a constant one holding 0 is refused now. Runs after
// fold_constants, so that folded divisors are constants.
#include <fmt/format.h>

#include <limits>

#include "ops/index_check.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> check(Graph& g, Node& n) {
  Value* divisor = n.input(1);
  if (!divisor || !n.input(0) || !is_int(n.input(0)->dtype) || divisor->dtype == DType::kBool ||
      !divisor->has_static_shape())
    return false;
  const ops::IndexBounds nonzero{
      std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
      fmt::format("an element of its divisor '{}' is 0 (integer division by zero)", divisor->name), true};
  ASSIGN_OR_RETURN(Value * checked, ops::checked_index(g, n, divisor, nonzero, "divisor_checked"));
  n.inputs[1] = checked;
  return checked != divisor;
}

}  // namespace

StatusOr<bool> check_divisors(Graph& g, PassContext&) {
  bool changed = false;
  for (const char* op : {"Div", "Mod"}) {
    std::vector<Node*> found;
    for (const auto& np : g.nodes())
      if (np->op_type == op && np->domain.empty()) found.push_back(np.get());
    for (Node* n : found) {
      ASSIGN_OR_RETURN(bool done, check(g, *n));
      changed = changed || done;
    }
  }
  if (changed) RETURN_IF_ERROR(g.topo_sort());
  return changed;
}

}  // namespace stitch
