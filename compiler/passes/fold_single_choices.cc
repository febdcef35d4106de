// fold_single_choices: choices among one element, and selections by a condition of one value.
//
// A TopK along an axis of one element (k is then 1) returns its input, and index 0 everywhere; an
// ArgMax or ArgMin along one, index 0 everywhere. Readers of the values read the input; the
// indices become a constant of zeros. Group-limited MoE routing with one group (DeepSeek-V3's
// form with n_group = 1, transformers' default for GLM-4-MoE) picks its one group so; the mask it
// builds from that pick becomes a constant once shapes are inferred again and constants folded
// (both run here when a choice was folded). Then a Where whose condition is a constant of one
// value (all true or all false) is the input it selects, when that input has the Where's type and
// shape: the masked scores are the scores. Nodes with a graph output are left as they are.
#include <algorithm>

#include "ops/op_util.h"
#include "passes/pass.h"

namespace stitch {

namespace {

bool writes_graph_output(const Graph& g, const Node& n) {
  return std::any_of(n.outputs.begin(), n.outputs.end(),
                     [&](const Value* o) { return o && g.is_graph_output(o); });
}

// The extent of the axis a TopK, ArgMax or ArgMin chooses along, or -1 when not known.
int64_t choice_extent(const Node& n) {
  const Value* x = n.input(0);
  if (!x || !x->has_static_shape()) return -1;
  const int64_t rank = static_cast<int64_t>(x->dims->size());
  auto axis = ops::norm_axis(n, n.attr_int("axis", n.op_type == "TopK" ? -1 : 0), rank);
  if (!axis.is_ok()) return -1;
  return (*x->dims)[static_cast<size_t>(*axis)];
}

// `v` as a constant of zeros (int64, its shape), detached from its producer.
void make_zeros(Value* v) {
  v->constant = Tensor(DType::kI64, *v->dims);
  v->producer = nullptr;
}

// Whether constant `c` holds one value in every element (and has at least one): that value.
std::optional<bool> uniform(const Tensor& c) {
  if (c.size() == 0) return std::nullopt;
  const bool first = c.get_i64(0) != 0;
  for (int64_t i = 1; i < c.size(); ++i)
    if ((c.get_i64(i) != 0) != first) return std::nullopt;
  return first;
}

}  // namespace

StatusOr<bool> fold_single_choices(Graph& g, PassContext& ctx) {
  std::vector<Node*> dead;
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    if (!n.domain.empty() || writes_graph_output(g, n)) continue;
    if (n.op_type == "TopK" && n.outputs.size() == 2 && n.output(0) && n.output(1) && choice_extent(n) == 1 &&
        n.output(1)->dtype == DType::kI64 && n.output(0)->has_static_shape() &&
        *n.output(0)->dims == *n.input(0)->dims && n.output(0)->dtype == n.input(0)->dtype) {
      g.replace_uses(n.output(0), n.input(0));
      make_zeros(n.output(1));
      dead.push_back(&n);
    } else if ((n.op_type == "ArgMax" || n.op_type == "ArgMin") && n.output(0) && choice_extent(n) == 1 &&
               n.output(0)->dtype == DType::kI64 && n.output(0)->has_static_shape()) {
      make_zeros(n.output(0));
      dead.push_back(&n);
    }
  }
  bool changed = !dead.empty();
  if (changed) {
    g.remove_nodes(dead);
    RETURN_IF_ERROR(infer_shapes(g, ctx).status());
    RETURN_IF_ERROR(fold_constants(g, ctx).status());
  }
  dead.clear();
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    if (!n.domain.empty() || n.op_type != "Where" || n.inputs.size() != 3 || writes_graph_output(g, n))
      continue;
    const Value *cond = n.input(0), *y = n.output(0);
    if (!cond || !cond->constant || !y || !y->has_static_shape()) continue;
    const std::optional<bool> which = uniform(*cond->constant);
    if (!which) continue;
    Value* chosen = n.input(*which ? 1 : 2);
    if (!chosen || !chosen->has_static_shape() || *chosen->dims != *y->dims || chosen->dtype != y->dtype)
      continue;
    g.replace_uses(n.output(0), chosen);
    dead.push_back(&n);
  }
  if (!dead.empty()) {
    g.remove_nodes(dead);
    changed = true;
  }
  return changed;
}

}  // namespace stitch
