#include "fusion/kernel_duplicates.h"

#include <fmt/format.h>

#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "codegen/stitch.h"

namespace stitch::fusion {
namespace {

// Attributes equal value for value; a tensor attribute never compares equal (no such node is
// taken for a duplicate).
bool same_attrs(const Node& a, const Node& b) {
  if (a.attrs.size() != b.attrs.size()) return false;
  for (const auto& [k, va] : a.attrs) {
    auto it = b.attrs.find(k);
    if (it == b.attrs.end() || va.index() != it->second.index()) return false;
    const bool eq = std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, Tensor>)
            return false;
          else
            return x == std::get<T>(it->second);
        },
        va);
    if (!eq) return false;
  }
  return true;
}

// A node whose output is a function of its inputs computed in a generated kernel: element-wise or
// a row op, one output, the default domain.
bool computes(const Node& n) {
  if (!n.domain.empty() || n.outputs.size() != 1 || n.output(0) == nullptr) return false;
  const codegen::StitchRole r = codegen::stitch_role(n);
  return r == codegen::StitchRole::kPointwise || r == codegen::StitchRole::kRow;
}

// The groups of `plan` (of `planned`) as groups of g's nodes, node for node by position: empty
// when g is not `planned` node for node (another count, or a name that differs), or when the plan
// holds a node `planned` does not.
std::unordered_map<const Node*, size_t> groups_by_position(const FusionPlan& plan, const Graph& planned,
                                                           const Graph& g) {
  std::unordered_map<const Node*, size_t> out;
  if (planned.nodes().size() != g.nodes().size()) return out;
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (planned.nodes()[i]->name != g.nodes()[i]->name) return out;
    position[planned.nodes()[i].get()] = i;
  }
  for (size_t i = 0; i < plan.groups.size(); ++i)
    for (const Node* n : plan.groups[i].nodes) {
      auto it = position.find(n);
      if (it == position.end()) return {};
      out[g.nodes()[it->second].get()] = i;
    }
  return out;
}

}  // namespace

StatusOr<std::vector<std::string>> share_kernel_duplicates(Graph& g, const FusionOptions& o,
                                                           const FusionPlan* plan_of, const Graph* planned) {
  std::vector<std::string> lines;
  // Each value's representative: the output of the first node that computes it (by structure).
  std::unordered_map<const Value*, Value*> first_of;
  auto rep = [&](Value* v) {
    auto it = v ? first_of.find(v) : first_of.end();
    return it == first_of.end() ? v : it->second;
  };
  std::map<std::pair<std::string, std::vector<const Value*>>, std::vector<Node*>> seen;
  std::vector<Node*> duplicates;  // in graph order, each repeating a node before it
  for (const auto& np : g.nodes()) {
    Node* n = np.get();
    if (!computes(*n) || o.no_fuse.count(n->name)) continue;
    std::vector<const Value*> ins;
    for (Value* in : n->inputs) ins.push_back(rep(in));
    std::vector<Node*>& same = seen[{n->op_type, ins}];
    Node* original = nullptr;
    for (Node* m : same)
      if (m->opset == n->opset && same_attrs(*m, *n) && m->output(0)->dtype == n->output(0)->dtype &&
          m->output(0)->dims == n->output(0)->dims) {
        original = m;
        break;
      }
    if (original == nullptr) {
      same.push_back(n);
      continue;
    }
    first_of[n->output(0)] = rep(original->output(0));
    duplicates.push_back(n);
  }
  if (duplicates.empty()) return lines;
  // Every group: one that is no generated kernel (a call, a view, a node alone) holds one node, so
  // no reader shares it with the original.
  std::unordered_map<const Node*, size_t> group_of;
  if (plan_of && planned) group_of = groups_by_position(*plan_of, *planned, g);
  if (group_of.empty()) {
    ASSIGN_OR_RETURN(FusionPlan plan, make_plan(g, o));
    for (size_t i = 0; i < plan.groups.size(); ++i)
      for (const Node* n : plan.groups[i].nodes) group_of[n] = i;
  }
  auto users = g.users();
  for (Node* dup : duplicates) {
    Value* from = dup->output(0);
    Value* to = first_of.at(from);
    auto gd = group_of.find(to->producer);
    if (gd == group_of.end() || g.is_graph_output(from)) continue;
    std::vector<std::string> readers;
    for (Node* u : users[from]) {
      auto gu = group_of.find(u);
      if (gu == group_of.end() || gu->second != gd->second || o.no_fuse.count(u->name)) continue;
      for (Value*& in : u->inputs)
        if (in == from) in = to;
      readers.push_back(u->describe());
    }
    if (readers.empty()) continue;
    lines.push_back(fmt::format("{} repeats {}: {} read{} '{}' in that kernel", dup->describe(),
                                to->producer->describe(), fmt::join(readers, ", "),
                                readers.size() == 1 ? "s" : "", to->name));
  }
  if (lines.empty()) return lines;
  // Every node of a copied chain repeats a node of the original chain: the chain goes whole.
  const std::unordered_set<const Node*> repeats(duplicates.begin(), duplicates.end());
  g.remove_dead_nodes(&repeats);
  g.remove_unused_values();
  // Rewired readers read a value computed in their own kernel from the same inputs: no cycle can
  // come of it, and the order stays valid as long as the original comes first, which it does
  // (the first of equal nodes in graph order). topo_sort checks.
  RETURN_IF_ERROR(g.topo_sort());
  return lines;
}

StatusOr<RewriteResult> share_kernel_duplicates_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                           const std::optional<Cost>& before,
                                                           std::shared_ptr<const FusionPlan> g_plan) {
  const Graph* planned = g.get();  // the rewrite's copy is a clone of it
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return share_kernel_duplicates(c, o, g_plan.get(), planned); },
      "--no-shared-duplicates", /*strict=*/false, before);
}

}  // namespace stitch::fusion
