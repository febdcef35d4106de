// fold_constants: removes every node whose outputs are all known constants.
//
// infer_shapes has already evaluated constant subgraphs and recorded their
// results on the output values; this pass detaches those values from their
// producers (they become constants like initializers) and drops the nodes.
// Graph outputs that are constant stay graph outputs.
#include "passes/pass.h"

namespace stitch {

StatusOr<bool> fold_constants(Graph& g, PassContext&) {
  std::vector<Node*> dead;
  for (const auto& n : g.nodes()) {
    bool any = false, all = true;
    for (const Value* o : n->outputs) {
      if (!o) continue;
      any = true;
      all = all && o->constant.has_value();
    }
    if (any && all) dead.push_back(n.get());
  }
  g.remove_nodes(dead);
  return !dead.empty();
}

}  // namespace stitch
