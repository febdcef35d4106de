// split_group_norms (see group_norms.h): a GroupNorm's groups with their channels as an axis of
// their own, and the Reshape back to channels moved past the element-wise nodes after the norm.
#include "fusion/group_norms.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <optional>
#include <unordered_set>

#include "codegen/stitch.h"
#include "fusion/graph_edit.h"

namespace stitch::fusion {
namespace {

const Dims& dims_of(const Value* v) { return *v->dims; }

// Axes of a Reshape's input (`in`) and output (`out`) whose extents multiply to the same number,
// in order: every axis of both sides is in one run.
struct Run {
  std::vector<size_t> in, out;
};

std::optional<std::vector<Run>> runs_of(const Dims& a, const Dims& b) {
  std::vector<Run> runs;
  size_t i = 0, o = 0;
  while (i < a.size() || o < b.size()) {
    Run r;
    int64_t pa = 1, pb = 1;
    if (i < a.size()) pa = a[r.in.emplace_back(i++)];
    if (o < b.size()) pb = b[r.out.emplace_back(o++)];
    while (pa != pb) {
      if (pa < pb && i < a.size()) {
        pa *= a[r.in.emplace_back(i++)];
      } else if (pb < pa && o < b.size()) {
        pb *= b[r.out.emplace_back(o++)];
      } else {
        return std::nullopt;
      }
    }
    runs.push_back(std::move(r));
  }
  return runs;
}

// The dims that an operand of dims `od`, broadcast against `b`, takes against `a` (the two sides of
// a Reshape, `runs` theirs) so that every element meets the same operand element: within each run
// it must have all of the run's extents or none.
std::optional<Dims> operand_dims(const Dims& od, const Dims& a, const Dims& b, const std::vector<Run>& runs) {
  if (od.size() > b.size()) return std::nullopt;
  Dims full(b.size() - od.size(), 1);
  full.insert(full.end(), od.begin(), od.end());
  Dims out(a.size(), 1);
  for (const Run& r : runs) {
    bool ones = true, whole = true;
    for (size_t k : r.out) {
      ones &= full[k] == 1;
      whole &= full[k] == b[k];
    }
    if (!ones && !whole) return std::nullopt;
    if (!ones)
      for (size_t j : r.in) out[j] = a[j];
  }
  return out;
}

// When `in` is a GroupNorm's InstanceNormalization (group_norms.h), the dims its input takes with
// the group's channels as an axis: [N, G, C/G, S...].
std::optional<Dims> grouped_dims(const Graph& g,
                                 const std::unordered_map<const Value*, std::vector<Node*>>& users,
                                 const Node& in) {
  if (in.op_type != "InstanceNormalization" || !in.domain.empty() || in.outputs.size() != 1)
    return std::nullopt;
  const Value *gv = in.input(0), *y = in.output(0);
  const Node* r = gv ? gv->producer : nullptr;
  if (r == nullptr || r->op_type != "Reshape" || !r->domain.empty() || y == nullptr || g.is_graph_output(y))
    return std::nullopt;
  const Value* x = r->input(0);
  if (x == nullptr || !x->has_static_shape() || !gv->has_static_shape() || !y->has_static_shape())
    return std::nullopt;
  const Dims &xd = dims_of(x), &gd = dims_of(gv);
  if (gd.size() != 3 || xd.size() < 3 || xd[0] != gd[0] || num_elements(xd) <= 0) return std::nullopt;
  const int64_t c = xd[1], groups = gd[1];
  if (groups <= 1 || groups >= c || c % groups != 0 ||
      gd[2] != c / groups * num_elements(Dims(xd.begin() + 2, xd.end())))
    return std::nullopt;
  auto it = users.find(y);
  if (it == users.end()) return std::nullopt;
  for (const Node* u : it->second)
    if (u->op_type != "Reshape" || !u->domain.empty() || u->input(0) != y || !u->output(0) ||
        !u->output(0)->has_static_shape())
      return std::nullopt;
  Dims out{xd[0], groups, c / groups};
  out.insert(out.end(), xd.begin() + 2, xd.end());
  return out;
}

// Moves Reshape `back` (from the groups' shape a to b) past the element-wise nodes after it whose
// every operand is computed from its result or broadcasts against a run by run. Returns the number
// of nodes moved and of other operands viewed in a's shape.
std::pair<int, int> move_back(Graph& g, Node& back, const std::set<std::string>& keep) {
  Value* b_val = back.output(0);
  const Dims a = dims_of(back.input(0)), b = dims_of(b_val);
  const auto runs = runs_of(a, b);
  if (!runs) return {0, 0};
  std::map<Value*, Value*> moved{{b_val, back.input(0)}};  // a value of b's shape -> the same in a's
  std::vector<Node*> order;
  for (const auto& n : g.nodes()) order.push_back(n.get());
  int nodes = 0, views = 0;
  for (Node* e : order) {
    if (keep.count(e->name) || e->outputs.size() != 1 || e->output(0) == nullptr ||
        !e->output(0)->has_static_shape() || dims_of(e->output(0)) != b ||
        codegen::stitch_role(*e) != codegen::StitchRole::kPointwise)
      continue;
    if (std::none_of(e->inputs.begin(), e->inputs.end(), [&](Value* v) { return v && moved.count(v); }))
      continue;
    std::vector<Value*> ins;
    bool ok = true;
    for (Value* v : e->inputs) {
      if (v == nullptr || moved.count(v)) {
        ins.push_back(v ? moved.at(v) : nullptr);
        continue;
      }
      std::optional<Dims> od;
      if (v->has_static_shape()) od = operand_dims(dims_of(v), a, b, *runs);
      if (!od) {
        ok = false;
        break;
      }
      if (num_elements(dims_of(v)) == 1) {
        ins.push_back(v);  // a scalar broadcasts against either shape
      } else if (v->is_constant()) {
        Value* c = add_typed_value(g, v->name + "/grouped", v->dtype, *od);
        c->constant = v->constant->reshaped(*od);
        ins.push_back(c);
      } else {
        ins.push_back(add_op(g, "Reshape", v->name + "/grouped",
                             {v, add_shape_constant(g, v->name + "/grouped_shape", *od)}, v->dtype, *od));
        ++views;
      }
    }
    if (!ok) continue;
    Value* out = e->output(0);
    Value* out_a = add_typed_value(g, out->name + "/grouped", out->dtype, a);
    e->inputs = std::move(ins);
    e->outputs[0] = out_a;
    out_a->producer = e;
    out->producer = nullptr;
    moved[out] = out_a;
    ++nodes;
  }
  // The values still read in b's shape (by nodes not moved, or as graph outputs) are views again.
  const auto users = g.users();
  for (const auto& [bv, av] : moved) {
    if (bv == b_val || (!users.count(bv) && !g.is_graph_output(bv))) continue;
    Node* r = add_op_node(g, "Reshape", g.unique_name(bv->name + "/channels"));
    r->inputs = {av, add_shape_constant(g, bv->name + "/channels_shape", b)};
    r->outputs = {bv};
    bv->producer = r;
  }
  return {nodes, views};
}

}  // namespace

StatusOr<std::vector<std::string>> split_group_norms(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> lines;
  std::vector<Node*> norms;
  for (const auto& n : g.nodes())
    if (n->op_type == "InstanceNormalization") norms.push_back(n.get());
  std::unordered_set<const Node*> maybe_dead;
  for (Node* in : norms) {
    const auto users = g.users();
    const std::optional<Dims> gd = grouped_dims(g, users, *in);
    if (!gd || keep.count(in->name)) continue;
    Value* y = in->output(0);
    std::vector<Node*> backs = users.at(y);
    if (std::any_of(backs.begin(), backs.end(), [&](const Node* r) { return keep.count(r->name) != 0; }))
      continue;
    Node* groups = in->input(0)->producer;
    const std::string from = dims_to_string(dims_of(in->input(0)));
    in->inputs[0] = add_op(g, "Reshape", in->input(0)->name + "/channels_apart",
                           {groups->input(0), add_shape_constant(g, in->name + "/groups_shape", *gd)},
                           in->input(0)->dtype, *gd);
    y->dims = *gd;
    maybe_dead.insert(groups);
    std::vector<std::string> moves;
    for (Node* back : backs) {
      back->inputs.resize(2);
      back->inputs[1] = add_shape_constant(g, back->name + "/shape", dims_of(back->output(0)));
      const auto [nodes, views] = move_back(g, *back, keep);
      maybe_dead.insert(back);
      moves.push_back(
          fmt::format("{} after {} element-wise node(s){}", back->describe(), nodes,
                      views ? fmt::format(" ({} other operand(s) viewed in the groups' shape)", views) : ""));
    }
    lines.push_back(fmt::format("{}: groups {} as {}; {}", in->describe(), from, dims_to_string(*gd),
                                fmt::join(moves, "; ")));
  }
  if (lines.empty()) return lines;
  // A value viewed in the groups' shape by one GroupNorm's move and computed in it by a later one's
  // is a Reshape of a Reshape back to where it was: its readers read the value itself.
  for (const auto& n : g.nodes()) {
    Node* r = n.get();
    const Value* v = r->op_type == "Reshape" && r->input(0) ? r->input(0) : nullptr;
    const Node* r0 = v ? v->producer : nullptr;
    if (r0 == nullptr || r0->op_type != "Reshape" || !r0->input(0) || !r0->input(0)->has_static_shape() ||
        !r->output(0) || g.is_graph_output(r->output(0)) || *r0->input(0)->dims != *r->output(0)->dims)
      continue;
    g.replace_uses(r->output(0), r0->input(0));
    maybe_dead.insert(r);
    maybe_dead.insert(r0);
  }
  g.remove_dead_nodes(&maybe_dead);
  g.remove_unused_values();
  RETURN_IF_ERROR(g.topo_sort());
  return lines;
}

}  // namespace stitch::fusion
