// eliminate_dead_code: drops nodes whose outputs nothing reads and that are
// not graph outputs, then values (constants included) nothing refers to.
// Graph inputs stay: they are the model's interface even when unused.
#include "passes/pass.h"

namespace stitch {

StatusOr<bool> eliminate_dead_code(Graph& g, PassContext&) {
  const size_t values_before = g.values().size();
  const size_t removed = g.remove_dead_nodes();
  g.remove_unused_values();
  return removed != 0 || g.values().size() != values_before;
}

}  // namespace stitch
