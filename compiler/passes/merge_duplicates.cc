// merge_duplicates: a view (Reshape, Flatten, Squeeze, Unsqueeze) that an earlier one repeats is
// dropped, its readers reading the earlier view.
//
// Two views of one value to one shape are the same tensor. Optimizers write such copies:
// onnxruntime's MatMulAddFusion (its graph optimizations' level 1) wraps each projection's Gemm in a
// Reshape of the activation, so Q, K and V each reshape it on their own and their GEMMs no longer
// share an operand; merge_gemms makes them one GEMM only once they do (vit at level 1: 17 library
// calls against 13). Only views: a view costs no kernel either way, while a computing node read by
// two kernels may be better recomputed in each (the planner decides that, per group) than stored
// once: merging every duplicate made bert_legacy_ort's two layers share one Cast of their mask and
// cost a kernel. Views that write a graph output stay (their names are the model's).
#include <fmt/format.h>

#include <set>
#include <unordered_map>

#include "passes/pass.h"

namespace stitch {
namespace {

// Constants compared by contents up to this size, by identity beyond (weights are not copied).
constexpr int64_t kCompareBytes = 4096;

std::string tensor_key(const Tensor& t) {
  std::string k = fmt::format("{}[{}]", dtype_name(t.dtype()), fmt::join(t.dims(), ","));
  k.append(reinterpret_cast<const char*>(t.data()), static_cast<size_t>(t.byte_size()));
  return k;
}

std::string attr_key(const AttrValue& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>)
          return fmt::format("i{}", v);
        else if constexpr (std::is_same_v<T, float>)
          return fmt::format("f{}", v);
        else if constexpr (std::is_same_v<T, std::string>)
          return fmt::format("s{}:{}", v.size(), v);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return fmt::format("I{}", fmt::join(v, ","));
        else if constexpr (std::is_same_v<T, std::vector<float>>)
          return fmt::format("F{}", fmt::join(v, ","));
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string k = "S";
          for (const auto& s : v) k += fmt::format("{}:{}", s.size(), s);
          return k;
        } else {
          return "T" + tensor_key(v);
        }
      },
      a);
}

// What the view is: its op, attributes and inputs; empty for a node that is not a view or stays.
std::string node_key(const Graph& g, const Node& n) {
  static const std::set<std::string, std::less<>> kViews = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};
  if (!n.domain.empty() || !kViews.count(n.op_type) || n.outputs.empty()) return {};
  for (const Value* o : n.outputs)
    if (o && g.is_graph_output(o)) return {};
  std::string k = fmt::format("{}::{}@{}(", n.domain, n.op_type, n.opset);
  for (const Value* v : n.inputs) {
    if (!v)
      k += "_";
    else if (v->constant && !v->producer && v->constant->byte_size() <= kCompareBytes)
      k += "c" + std::to_string(v->constant->byte_size()) + ":" + tensor_key(*v->constant);
    else
      k += fmt::format("v{}", static_cast<const void*>(v));
    k += ",";
  }
  k += "){";
  for (const auto& [name, a] : n.attrs) k += name + "=" + attr_key(a) + ";";
  return k + "}";
}

}  // namespace

StatusOr<bool> merge_duplicates(Graph& g, PassContext&) {
  std::unordered_map<std::string, Node*> first;
  std::vector<Node*> dead;
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    const std::string key = node_key(g, n);
    if (key.empty()) continue;
    auto [it, fresh] = first.emplace(key, &n);
    if (fresh) continue;
    const Node& kept = *it->second;
    bool same_outputs = kept.outputs.size() == n.outputs.size();
    for (size_t i = 0; same_outputs && i < n.outputs.size(); ++i)
      same_outputs = !n.outputs[i] || kept.outputs[i];
    if (!same_outputs) continue;
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i]) g.replace_uses(n.outputs[i], kept.outputs[i]);
    dead.push_back(&n);
  }
  g.remove_nodes(dead);
  return !dead.empty();
}

}  // namespace stitch
