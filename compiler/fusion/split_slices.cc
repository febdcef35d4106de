#include "fusion/split_slices.h"

#include <fmt/format.h>

#include "fusion/graph_edit.h"
#include "ops/op_util.h"

namespace stitch::fusion {

StatusOr<std::vector<std::string>> split_to_slices(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  if (g.opset < 10) return log;  // Slice takes its bounds as inputs from opset 10
  const auto users = g.users();
  std::vector<Node*> dead;
  std::vector<Node*> splits;
  for (const auto& np : g.nodes())
    if (np->op_type == "Split" && !keep.count(np->name)) splits.push_back(np.get());
  for (Node* n : splits) {
    Value* x = n->input(0);
    if (x == nullptr || !x->has_static_shape()) continue;
    const int64_t rank = static_cast<int64_t>(x->dims->size());
    auto axis = ops::norm_axis(*n, n->attr_int("axis", 0), rank);
    if (!axis.is_ok()) continue;
    bool ok = true;
    for (const Value* v : n->outputs) ok &= v != nullptr && v->has_static_shape();
    if (!ok) continue;
    Value* axes = add_typed_value(g, n->name + "/axis", DType::kI64, {1});
    axes->constant = Tensor::vector_i64({*axis});
    int64_t start = 0;
    std::string parts;
    for (Value* v : n->outputs) {
      const int64_t len = (*v->dims)[static_cast<size_t>(*axis)];
      const auto it = users.find(v);
      if ((it != users.end() && !it->second.empty()) || g.is_graph_output(v)) {
        Node* slice = add_op_node(g, "Slice", g.unique_name(n->name + "/" + v->name));
        Value* starts = add_typed_value(g, n->name + "/starts", DType::kI64, {1});
        starts->constant = Tensor::vector_i64({start});
        Value* ends = add_typed_value(g, n->name + "/ends", DType::kI64, {1});
        ends->constant = Tensor::vector_i64({start + len});
        slice->inputs = {x, starts, ends, axes};
        slice->outputs = {v};
        v->producer = slice;
        parts += fmt::format("{}'{}' [{}, {})", parts.empty() ? "" : ", ", v->name, start, start + len);
      } else {
        v->producer = nullptr;
      }
      start += len;
    }
    n->outputs.assign(n->outputs.size(), nullptr);
    dead.push_back(n);
    log.push_back(fmt::format("{}: a Slice each along axis {}: {}", n->describe(), *axis, parts));
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

StatusOr<RewriteResult> split_to_slices_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o) {
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return split_to_slices(c, o.no_fuse); }, "--no-split-slices");
}

}  // namespace stitch::fusion
