// unflatten_gemms (see unflatten_gemms.h): a MatMul reading a flattening view reads the view's
// input; the element-wise chain after it follows at the unflattened shape, and a Reshape of the
// chain's old value stands in for it.
#include "fusion/unflatten_gemms.h"

#include <fmt/format.h>

#include <unordered_set>

#include "codegen/lower.h"
#include "codegen/stitch.h"
#include "fusion/graph_edit.h"

namespace stitch::fusion {
namespace {

// A constant that broadcasts against [m, n] along rows only: a scalar, [n] or [1], [1, n] or [1, 1].
bool column_constant(const Value* c, int64_t n) {
  if (!c || !c->is_constant() || !c->has_static_shape()) return false;
  const Dims& d = *c->dims;
  if (d.size() > 2 || (d.size() == 2 && d[0] != 1)) return false;
  return d.empty() || d.back() == n || d.back() == 1;
}

// The next node of y's chain (`cur` is the chain's value so far, [m, n]): read only by it, an
// element-wise node of one output of cur's shape and type whose other inputs are column constants.
Node* next_in_chain(const Graph& g, const std::unordered_map<const Value*, std::vector<Node*>>& users,
                    const Value* cur, const std::set<std::string>& keep) {
  Node* r = sole_reader(g, users, cur);
  if (!r || keep.count(r->name) || !r->domain.empty() ||
      codegen::stitch_role(*r) != codegen::StitchRole::kPointwise)
    return nullptr;
  const Value* out = r->output(0);
  if (r->outputs.size() != 1 || !out || !out->has_static_shape() || *out->dims != *cur->dims ||
      out->dtype != cur->dtype)
    return nullptr;
  int reads = 0;
  for (const Value* in : r->inputs) {
    if (in == cur) {
      ++reads;
    } else if (!column_constant(in, cur->dims->back())) {
      return nullptr;
    }
  }
  return reads == 1 ? r : nullptr;
}

}  // namespace

StatusOr<std::vector<std::string>> unflatten_gemms(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  std::vector<Node*> matmuls;
  for (const auto& np : g.nodes())
    if (np->op_type == "MatMul" && np->domain.empty() && !keep.count(np->name)) matmuls.push_back(np.get());
  std::unordered_set<const Node*> views;  // the Reshapes written here: removed when nothing reads them
  for (Node* mm : matmuls) {
    Value *a = mm->input(0), *b = mm->input(1), *y = mm->output(0);
    if (!a || !b || !y || !a->has_static_shape() || !b->has_static_shape() || !y->has_static_shape() ||
        a->dims->size() != 2 || b->dims->size() != 2 || y->dims->size() != 2)
      continue;
    const Node* view = a->producer;
    if (!view || !view->domain.empty() || keep.count(view->name) ||
        codegen::classify_node(*view) != codegen::NodeLowering::kView)
      continue;
    Value* x = view->input(0);
    if (!x || x->is_constant() || !x->has_static_shape() || x->dims->size() < 3 || x->dtype != a->dtype)
      continue;
    const int64_t m = (*a->dims)[0], k = (*a->dims)[1], n = (*y->dims)[1];
    Dims lead(x->dims->begin(), x->dims->end() - 1);
    if (x->dims->back() != k || num_elements(lead) != m) continue;
    views.insert(view);
    Dims wide = lead;
    wide.push_back(n);
    const auto users = g.users();
    std::vector<Node*> chain;
    for (Node* r = next_in_chain(g, users, y, keep); r; r = next_in_chain(g, users, r->output(0), keep))
      chain.push_back(r);
    // The MatMul and each chain node write a new value of the unflattened shape; the chain's last
    // old value is a Reshape of the last new one.
    mm->inputs[0] = x;
    Value* cur = add_typed_value(g, y->name + "/unflattened", y->dtype, wide);
    mm->outputs[0] = cur;
    cur->producer = mm;
    Value* old = y;
    std::vector<std::string> names;
    for (Node* r : chain) {
      for (Value*& in : r->inputs)
        if (in == old) in = cur;
      old->producer = nullptr;  // read by nothing now: removed below
      old = r->output(0);
      Value* w = add_typed_value(g, old->name + "/unflattened", old->dtype, wide);
      r->outputs[0] = w;
      w->producer = r;
      cur = w;
      names.push_back(fmt::format("'{}'", r->name));
    }
    Node* back = add_op_node(g, "Reshape", g.unique_name(old->name + "/flattened"));
    back->inputs = {cur, add_shape_constant(g, old->name + "/flattened_shape", *old->dims)};
    back->outputs = {old};
    old->producer = back;
    views.insert(back);
    // Readers that view the old value back at the unflattened shape read the new value.
    std::vector<std::string> gone;
    auto it = users.find(old);
    if (it != users.end())
      for (Node* u : it->second) {
        Value* uo = u->output(0);
        if (!u->domain.empty() || keep.count(u->name) ||
            codegen::classify_node(*u) != codegen::NodeLowering::kView || u->input(0) != old || !uo ||
            g.is_graph_output(uo) || !uo->has_static_shape() || *uo->dims != wide)
          continue;
        g.replace_uses(uo, cur);
        gone.push_back(fmt::format("'{}'", u->name));
        views.insert(u);
      }
    log.push_back(fmt::format(
        "{} reads '{}' [{}] in place of its view '{}' [{}]{}{}", mm->describe(), x->name,
        dims_to_string(*x->dims), a->name, dims_to_string(*a->dims),
        names.empty()
            ? ""
            : fmt::format("; {} after it at [{}] too", fmt::join(names, ", "), dims_to_string(wide)),
        gone.empty() ? "" : fmt::format("; the view back {} goes", fmt::join(gone, ", "))));
  }
  if (log.empty()) return log;
  // The views nothing reads any more: Reshapes written here whose old values had no other
  // readers, the views back, and the flattening views that only the MatMuls read.
  g.remove_dead_nodes(&views);
  RETURN_IF_ERROR(remove_and_sort(g, {}));
  return log;
}

}  // namespace stitch::fusion
