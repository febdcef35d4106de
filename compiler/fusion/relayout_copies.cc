#include "fusion/relayout_copies.h"

#include <fmt/format.h>

#include <functional>
#include <set>
#include <unordered_map>

#include "codegen/lower.h"
#include "fusion/graph_edit.h"

namespace stitch::fusion {

namespace {

constexpr size_t kMaxReaders = 8;  // more would be a broadcast of one layout, not a chain to copy

bool relayout(const Node& n) {
  if (n.inputs.empty() || n.outputs.size() != 1 || !n.domain.empty()) return false;
  const codegen::NodeLowering l = codegen::classify_node(n);
  return l == codegen::NodeLowering::kView ||
         (l == codegen::NodeLowering::kKernel && (n.op_type == "Transpose" || n.op_type == "Slice"));
}

}  // namespace

StatusOr<std::vector<std::string>> copy_shared_relayouts(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  auto users = g.users();
  std::unordered_map<const Value*, bool> memo;
  std::function<bool(const Value*)> feeds_matmul = [&](const Value* v) {
    if (auto it = memo.find(v); it != memo.end()) return it->second;
    memo[v] = false;
    bool r = false;
    if (auto it = users.find(v); it != users.end())
      for (const Node* u : it->second)
        if ((u->op_type == "MatMul" && u->domain.empty()) || (relayout(*u) && feeds_matmul(u->output(0))))
          r = true;
    return memo[v] = r;
  };
  std::set<std::string> taken;
  std::vector<Node*> order;  // taken first: the copies are appended to the graph's nodes
  for (const auto& m : g.nodes()) {
    taken.insert(m->name);
    order.push_back(m.get());
  }
  // Consumers first, so that a producer that is a relayout too sees the readers its copies add.
  bool copied = false;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node& n = **it;
    if (!relayout(n) || keep.count(n.name)) continue;
    Value* v = n.output(0);
    if (v == nullptr || !v->has_static_shape() || g.is_graph_output(v)) continue;
    auto u = users.find(v);
    if (u == users.end() || u->second.size() < 2 || u->second.size() > kMaxReaders) continue;
    bool ok = n.input(0) != nullptr && n.input(0)->has_static_shape();
    for (const Value* in : n.inputs) ok &= in == nullptr || in == n.input(0) || in->is_constant();
    if (!ok || !feeds_matmul(v)) continue;
    const std::vector<Node*> readers = u->second;
    std::string names;
    for (size_t i = 1; i < readers.size(); ++i) {
      std::string name = n.name + "/copy";
      for (int k = 2; taken.count(name); ++k) name = fmt::format("{}/copy{}", n.name, k);
      taken.insert(name);
      Node* c = add_copy_node(g, n, name);
      c->inputs = n.inputs;
      Value* cv = add_typed_value(g, v->name + "/copy", v->dtype, *v->dims);
      c->outputs = {cv};
      cv->producer = c;
      for (Value*& in : readers[i]->inputs)
        if (in == v) in = cv;
      users[cv] = {readers[i]};
      users[n.input(0)].push_back(c);
      names += fmt::format("{}'{}' for {}", names.empty() ? "" : ", ", c->name, readers[i]->describe());
    }
    users[v] = {readers[0]};
    memo.erase(v);  // it now has one reader
    log.push_back(fmt::format("{}: read by {} nodes; copies {}", n.describe(), readers.size(), names));
    copied = true;
  }
  if (copied) RETURN_IF_ERROR(g.topo_sort());
  return log;
}

StatusOr<RewriteResult> copy_shared_relayouts_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                         const std::optional<Cost>& before) {
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return copy_shared_relayouts(c, o.no_fuse); }, "--no-relayout-copies",
      /*strict=*/true, before);
}

}  // namespace stitch::fusion
