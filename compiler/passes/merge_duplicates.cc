// merge_duplicates: a view (Reshape, Flatten, Squeeze, Unsqueeze) that an earlier one repeats is
// dropped, its readers reading the earlier view.
//
// A view reinterprets its input's elements in order, so two views of one value to one shape are
// the same tensor, whatever op or shape constant wrote them. Optimizers write such copies:
// onnxruntime's MatMulAddFusion (its graph optimizations' level 1) wraps each projection's Gemm in a
// Reshape of the activation, so Q, K and V each reshape it on their own and their GEMMs no longer
// share an operand; merge_gemms makes them one GEMM only once they do (vit at level 1: 17 library
// calls against 13). Only views: a view costs no kernel either way, while a computing node read by
// two kernels may be better recomputed in each (the planner decides that, per group) than stored
// once: merging every duplicate made bert_legacy_ort's two layers share one Cast of their mask and
// cost a kernel. Views that write a graph output stay (their names are the model's).
#include <map>
#include <set>
#include <utility>

#include "passes/pass.h"

namespace stitch {

StatusOr<bool> merge_duplicates(Graph& g, PassContext&) {
  static const std::set<std::string, std::less<>> kViews = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};
  std::map<std::pair<const Value*, Dims>, Value*> first;  // (viewed value, shape) -> its first view
  std::vector<Node*> dead;
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    Value *x = n.input(0), *y = n.output(0);
    if (!n.domain.empty() || !kViews.count(n.op_type) || !x || !y || n.outputs.size() != 1 ||
        !y->has_static_shape() || g.is_graph_output(y))
      continue;
    auto [it, fresh] = first.emplace(std::pair{x, *y->dims}, y);
    if (fresh) continue;
    g.replace_uses(y, it->second);
    dead.push_back(&n);
  }
  g.remove_nodes(dead);
  return !dead.empty();
}

}  // namespace stitch
