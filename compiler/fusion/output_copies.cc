// copy_output_cones (see output_copies.h): collect a graph output's cheap producer cone, clone it
// in graph order, and point the output's readers at the clone.
#include "fusion/output_copies.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>

#include "codegen/lower.h"
#include "codegen/stitch.h"
#include "fusion/graph_edit.h"

namespace stitch::fusion {
namespace {

// Data movement or element-wise work a reader may do again: no reduction, no contraction, no
// library call (their results are read stored, as the cone's sources).
bool cheap(const Node& n) {
  if (!n.domain.empty() || n.outputs.empty()) return false;
  for (const Value* o : n.outputs)
    if (o == nullptr || !o->has_static_shape()) return false;
  const codegen::NodeLowering l = codegen::classify_node(n);
  if (l == codegen::NodeLowering::kView) return true;
  if (l != codegen::NodeLowering::kKernel) return false;
  const codegen::StitchRole r = codegen::stitch_role(n);
  return r == codegen::StitchRole::kPointwise || r == codegen::StitchRole::kLayout ||
         r == codegen::StitchRole::kView;
}

}  // namespace

StatusOr<std::vector<std::string>> copy_output_cones(Graph& g, const std::set<std::string>& keep,
                                                     const std::set<std::string>* only,
                                                     std::map<std::string, std::string>* copies,
                                                     std::map<std::string, std::string>* kinds) {
  std::vector<std::string> log;
  const auto users = g.users();
  std::map<const Node*, size_t> position;
  for (const auto& n : g.nodes()) position.emplace(n.get(), position.size());
  const std::vector<Value*> outputs = g.outputs;
  bool copied = false;
  for (Value* v : outputs) {
    Node* p = v->producer;
    auto u = users.find(v);
    if (p == nullptr || u == users.end() || u->second.empty() || !v->has_static_shape() ||
        (only && !only->count(v->name)))
      continue;
    // The cone, collected from v's producer back to stored values.
    std::set<Node*> cone;
    std::vector<Node*> stack{p};
    bool ok = true;
    while (ok && !stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (!cone.insert(n).second) continue;
      ok = cheap(*n) && !keep.count(n->name) && cone.size() <= kMaxOutputCone;
      for (Value* in : n->inputs)
        if (in && !in->is_constant() && in->producer && cheap(*in->producer)) stack.push_back(in->producer);
    }
    if (!ok) continue;
    std::vector<Node*> ordered(cone.begin(), cone.end());
    // A copy made for an earlier output takes its original's place (its inputs come before it as
    // the original's do); the names order the two.
    std::sort(ordered.begin(), ordered.end(), [&](const Node* a, const Node* b) {
      const size_t pa = position.at(a), pb = position.at(b);
      return pa != pb ? pa < pb : a->name < b->name;
    });
    std::map<const Value*, Value*> copy_of;
    for (Node* n : ordered) {
      Node* c = add_copy_node(g, *n, g.unique_name(n->name + "/for_readers"));
      position.emplace(c, position.at(n));
      for (Value* in : n->inputs) {
        auto it = copy_of.find(in);
        c->inputs.push_back(it == copy_of.end() ? in : it->second);
      }
      for (Value* o : n->outputs) {
        Value* co = add_typed_value(g, o->name + "/for_readers", o->dtype, *o->dims);
        co->producer = c;
        c->outputs.push_back(co);
        copy_of[o] = co;
      }
    }
    Value* cv = copy_of.at(v);
    if (copies) (*copies)[v->name] = cv->name;
    std::string readers, kind;
    for (const Node* n : ordered) kind += n->op_type + " ";
    kind += "->";
    std::set<Node*> done;
    for (Node* r : u->second) {
      if (!done.insert(r).second) continue;
      for (Value*& in : r->inputs)
        if (in == v) in = cv;
      readers += fmt::format("{}{}", readers.empty() ? "" : ", ", r->describe());
      kind += " " + r->op_type;
    }
    if (kinds) (*kinds)[v->name] = kind;
    log.push_back(fmt::format("output '{}' ({} node(s) from {}): its readers {} read a copy", v->name,
                              cone.size(), p->describe(), readers));
    copied = true;
  }
  if (copied) RETURN_IF_ERROR(g.topo_sort());
  return log;
}

StatusOr<RewriteResult> copy_output_cones_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                     const std::optional<Cost>& before) {
  std::unique_ptr<Graph> trial = clone_graph(*g);
  std::map<std::string, std::string> copies, kinds;
  ASSIGN_OR_RETURN(std::vector<std::string> lines,
                   copy_output_cones(*trial, o.no_fuse, nullptr, &copies, &kinds));
  if (lines.empty()) return RewriteResult{};
  ASSIGN_OR_RETURN(FusionPlan plan, make_plan(*trial, o));
  std::map<const Node*, size_t> group_of;
  for (size_t i = 0; i < plan.groups.size(); ++i)
    for (const Node* n : plan.groups[i].nodes) group_of[n] = i;
  const auto users = trial->users();
  std::set<std::string> useful;
  for (const auto& [out, copy] : copies) {
    const Value* cv = trial->find_value(copy);
    if (cv == nullptr || cv->producer == nullptr) continue;
    const size_t home = group_of.at(cv->producer);
    bool stored = plan.groups[home].scheme == "library" || plan.groups[home].scheme == "view";
    if (auto it = users.find(cv); it != users.end())
      for (const Node* r : it->second) stored |= group_of.at(r) != home;
    if (!stored) useful.insert(out);
  }
  if (useful.empty()) {
    RewriteResult none;
    none.verdict =
        fmt::format("not applied: every copy of the {} candidate(s) would be stored", lines.size());
    return none;
  }
  // Each kind of useful cone left out in turn; the set estimated fastest goes on.
  std::map<std::string, std::set<std::string>> by_kind;
  for (const std::string& out : useful) by_kind[kinds.at(out)].insert(out);
  std::string left_out;
  if (by_kind.size() > 1) {
    auto time_of = [&](const std::set<std::string>& set) -> StatusOr<double> {
      std::unique_ptr<Graph> c = clone_graph(*g);
      RETURN_IF_ERROR(copy_output_cones(*c, o.no_fuse, &set).status());
      ASSIGN_OR_RETURN(FusionPlan p, make_plan(*c, o));
      return p.cost.time;
    };
    ASSIGN_OR_RETURN(double best, time_of(useful));
    const double all = best;
    std::set<std::string> chosen = useful;
    for (const auto& [kind, outs] : by_kind) {
      std::set<std::string> rest;
      std::set_difference(useful.begin(), useful.end(), outs.begin(), outs.end(),
                          std::inserter(rest, rest.end()));
      ASSIGN_OR_RETURN(double t, time_of(rest));
      if (t < best) {
        best = t;
        chosen = std::move(rest);
        left_out = fmt::format("; the {} like output '{}' left out (estimated {:.1f} us with them)",
                               outs.size() == 1 ? "copy" : fmt::format("{} copies", outs.size()),
                               *outs.begin(), all * 1e6);
      }
    }
    useful = std::move(chosen);
  }
  ASSIGN_OR_RETURN(
      RewriteResult r,
      rewrite_if_cheaper(
          g, o, [&](Graph& c) { return copy_output_cones(c, o.no_fuse, &useful); }, "--no-output-copies",
          /*strict=*/true, before));
  if (!r.lines.empty()) r.verdict += left_out;
  return r;
}

}  // namespace stitch::fusion
