#include "fusion/row_statistics.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "codegen/gemm_folds.h"
#include "codegen/stitch.h"
#include "fusion/graph_edit.h"

namespace stitch::fusion {
namespace {

using codegen::StitchRole;

// The chain computing `r` (its nodes, producers first), or empty when it is not a row statistic's:
// from r back to the reduction, element-wise nodes of one computed input whose values only the next
// reads; before the reduction, such nodes as long as there are (the square of an RMSNorm's input).
std::vector<Node*> statistic_chain(const Graph& g,
                                   const std::unordered_map<const Value*, std::vector<Node*>>& users,
                                   Value* r, const std::set<std::string>& keep) {
  std::vector<Node*> chain;
  bool reduced = false;
  for (Value* v = r; v && v->producer && static_cast<int>(chain.size()) < kMaxStatisticNodes;) {
    Node* n = v->producer;
    const bool sole = v == r || (!g.is_graph_output(v) && sole_reader(g, users, v) != nullptr);
    const StitchRole role = codegen::stitch_role(*n);
    const bool reduction = role == StitchRole::kRow && !codegen::row_op_keeps_shape(*n) && !reduced;
    Value* computed = nullptr;
    bool one = n->outputs.size() == 1 && !keep.count(n->name);
    for (Value* in : n->inputs) {
      if (!in || in->is_constant()) continue;
      one = one && (!computed || computed == in);
      computed = in;
    }
    const bool fits = sole && one && (role == StitchRole::kPointwise || reduction) &&
                      (!reduction || n->output(0)->dims->size() == n->input(0)->dims->size());
    if (!fits) {
      if (!reduced) return {};  // between the reduction and r, every node belongs to the chain
      break;
    }
    reduced = reduced || reduction;
    chain.push_back(n);
    v = computed;
  }
  if (!reduced) return {};
  std::reverse(chain.begin(), chain.end());
  return chain;
}

// Whether a row op is reached from `v` through element-wise nodes and data movement.
bool reaches_row_op(const std::unordered_map<const Value*, std::vector<Node*>>& users, const Value* v) {
  std::vector<const Value*> stack{v};
  std::set<const Value*> seen;
  while (!stack.empty()) {
    const Value* u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second || seen.size() > 64) continue;
    auto it = users.find(u);
    if (it == users.end()) continue;
    for (const Node* n : it->second) {
      const StitchRole role = codegen::stitch_role(*n);
      if (role == StitchRole::kRow) return true;
      if (role != StitchRole::kPointwise && role != StitchRole::kView && role != StitchRole::kLayout)
        continue;
      for (const Value* o : n->outputs)
        if (o) stack.push_back(o);
    }
  }
  return false;
}

// A reader scaling a GEMM's product (or a Slice of it: a part of merged Q/K/V) by the statistic.
bool scales_a_product(const Node& u, const Value* r) {
  if ((u.op_type != "Mul" && u.op_type != "Div") || u.inputs.size() != 2) return false;
  const Value* other = u.input(0) == r ? u.input(1) : u.input(0);
  const Node* p = other ? other->producer : nullptr;
  if (p && p->op_type == "Slice") p = p->input(0) ? p->input(0)->producer : nullptr;
  return p && (p->op_type == "MatMul" || p->op_type == "Gemm");
}

}  // namespace

StatusOr<std::vector<std::string>> copy_row_statistics(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> lines;
  const auto users = g.users();
  // Values no generated kernel computes: a GEMM call writes them (with its residual), or they are
  // graph inputs. Statistics of other values are computed, and stored for every reader, by the
  // kernel that computes their input.
  const codegen::GemmFolds folds = codegen::find_gemm_folds(g, {}, codegen::FoldOptions(true));
  auto written_by_a_call = [&](const Value* x) {
    const Node* p = x ? x->producer : nullptr;
    return p == nullptr || p->op_type == "MatMul" || p->op_type == "Gemm" || folds.folded.count(p) > 0;
  };
  std::vector<Value*> candidates;
  for (const auto& n : g.nodes())
    for (Value* v : n->outputs)
      if (v && users.count(v) && users.at(v).size() > 1 && v->dims) candidates.push_back(v);
  for (Value* r : candidates) {
    const std::vector<Node*> chain = statistic_chain(g, users, r, keep);
    if (chain.empty() || !written_by_a_call(chain.front()->input(0))) continue;
    std::vector<Node*> norm_readers;
    for (Node* u : users.at(r))
      if (!keep.count(u->name) && u->output(0) && scales_a_product(*u, r) &&
          reaches_row_op(users, u->output(0)))
        norm_readers.push_back(u);
    const size_t others = users.at(r).size() - norm_readers.size();
    if (norm_readers.empty() || (others == 0 && norm_readers.size() < 2)) continue;

    if (others == 0) norm_readers.erase(norm_readers.begin());  // the first keeps the chain
    for (Node* u : norm_readers) {
      std::map<const Value*, Value*> copy;  // chain value -> its copy for u
      for (Node* n : chain) {
        Node* c = add_copy_node(g, *n, g.unique_name(n->name + "/for_" + u->name));
        for (Value* in : n->inputs) {
          auto it = in ? copy.find(in) : copy.end();
          c->inputs.push_back(it == copy.end() ? in : it->second);
        }
        const Value* o = n->output(0);
        Value* co = add_typed_value(g, o->name + "/for_" + u->name, o->dtype, *o->dims);
        co->producer = c;
        c->outputs = {co};
        copy[o] = co;
      }
      for (Value*& in : u->inputs)
        if (in == r) in = copy.at(r);
      lines.push_back(
          fmt::format("'{}' ({} nodes from {}) computed again for {}, whose result a row op reduces", r->name,
                      chain.size(), chain.front()->describe(), u->describe()));
    }
  }
  if (!lines.empty()) RETURN_IF_ERROR(g.topo_sort());
  return lines;
}

}  // namespace stitch::fusion
