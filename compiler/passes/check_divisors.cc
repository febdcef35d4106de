// check_divisors: an integer Div or Mod whose divisor may hold 0 reads it through the compiler's
// StitchIndexCheck with `nonzero` (ops/op_util.h), named after the Div or Mod. ONNX leaves integer
// division by zero undefined (PyTorch refuses it); the kernels and the reference would give 0. Now
// the reference refuses it naming the node, and a kernel reports it after the run (exit 2) and goes
// on dividing by 1. A divisor whose bounds exclude 0 (ops::int_range: a constant, a Clip to at
// least 1, ...) takes no check. Runs after fold_constants, so that folded divisors are constants.
#include <fmt/format.h>

#include <limits>

#include "ops/op_util.h"
#include "ops/value_range.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

// Whether `v` may hold 0, by the bounds known at compile time.
bool may_be_zero(const Value* v) {
  const auto r = ops::int_range(v);
  return !r || (r->min <= 0 && r->max >= 0);
}

StatusOr<bool> check(Graph& g, Node& n) {
  Value* divisor = n.input(1);
  if (!divisor || !n.input(0) || !is_int(n.input(0)->dtype) || divisor->dtype == DType::kBool ||
      !divisor->has_static_shape() || !may_be_zero(divisor))
    return false;
  NodeBuilder b{g, n};
  const std::string message =
      fmt::format("an element of its divisor '{}' is 0 (integer division by zero)", divisor->name);
  auto attrs = ops::index_check_attrs(n, std::numeric_limits<int64_t>::min(),
                                      std::numeric_limits<int64_t>::max(), message);
  attrs["nonzero"] = int64_t{1};
  n.inputs[1] = b.node(ops::kIndexCheck, "divisor_checked", {divisor}, divisor->dtype, *divisor->dims, attrs);
  return true;
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
