// eliminate_dead_code: drops nodes whose outputs nothing reads and that are
// not graph outputs, then values (constants included) nothing refers to.
// Graph inputs stay: they are the model's interface even when unused.
#include <unordered_set>

#include "passes/pass.h"

namespace stitch {

StatusOr<bool> eliminate_dead_code(Graph& g, PassContext&) {
  std::unordered_set<const Value*> live(g.outputs.begin(), g.outputs.end());
  std::vector<Node*> dead;
  const auto& nodes = g.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = it->get();
    bool needed = std::any_of(n->outputs.begin(), n->outputs.end(), [&](const Value* v) { return v && live.count(v); });
    if (!needed) {
      dead.push_back(n);
      continue;
    }
    for (const Value* in : n->inputs) live.insert(in);
  }
  size_t values_before = g.values().size();
  g.remove_nodes(dead);
  g.remove_unused_values();
  return !dead.empty() || g.values().size() != values_before;
}

}  // namespace stitch
