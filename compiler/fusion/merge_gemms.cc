// merge_sibling_gemms (see merge_gemms.h): find the siblings, concatenate their weights (and
// biases) into new constants, and rewire their outputs to the outputs of one Split.
#include "fusion/merge_gemms.h"

#include <fmt/format.h>

#include <cstring>
#include <map>

#include "fusion/graph_edit.h"

namespace stitch::fusion {
namespace {

struct Sibling {
  Node* mm = nullptr;
  Node* bias_add = nullptr;  // Add of a constant bias vector, the product's only reader
  Value* bias = nullptr;
  int64_t n = 0;
};

// Concatenates constant tensors of shape [rows, n_i] (or [n_i] when rows is 0) along the last axis.
Tensor concat_columns(DType t, int64_t rows, const std::vector<Tensor>& parts) {
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.dims().back();
  Tensor out(t, rows ? Dims{rows, total} : Dims{total});
  const int64_t esz = dtype_size(t);
  const int64_t r = rows ? rows : 1;
  int64_t col = 0;
  uint8_t* to = out.data();
  for (const Tensor& p : parts) {
    const int64_t n = p.dims().back();
    const uint8_t* from = p.data();
    for (int64_t i = 0; i < r; ++i)
      std::memcpy(to + (i * total + col) * esz, from + i * n * esz, static_cast<size_t>(n * esz));
    col += n;
  }
  return out;
}

}  // namespace

StatusOr<std::vector<std::string>> merge_sibling_gemms(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  const auto users = g.users();
  auto only_reader = [&](const Value* v) { return sole_reader(g, users, v); };
  // Siblings per (activation, with bias), in graph order.
  std::map<std::pair<const Value*, bool>, std::vector<Sibling>> by_input;
  std::vector<std::pair<const Value*, bool>> order;
  for (const auto& np : g.nodes()) {
    Node& mm = *np;
    if (mm.op_type != "MatMul" || !mm.domain.empty() || mm.inputs.size() != 2 || !mm.input(0) ||
        !mm.input(1) || !mm.output(0) || keep.count(mm.name))
      continue;
    const Value* a = mm.input(0);
    const Value* w = mm.input(1);
    if (!a->has_static_shape() || a->dims->size() < 2 || !is_float(a->dtype) || !w->is_constant() ||
        w->dtype != a->dtype || w->dims->size() != 2 || (*w->dims)[0] != a->dims->back() || a->is_constant())
      continue;
    // A product that is a graph output would be copied out of the merged one: not worth it.
    if (g.is_graph_output(mm.output(0))) continue;
    Sibling s{&mm, nullptr, nullptr, (*w->dims)[1]};
    if (Node* add = only_reader(mm.output(0)); add && add->op_type == "Add" && add->inputs.size() == 2 &&
                                               add->output(0) &&
                                               *add->output(0)->dims == *mm.output(0)->dims) {
      Value* other = add->input(0) == mm.output(0) ? add->input(1) : add->input(0);
      if (keep.count(add->name)) continue;
      if (other && other != mm.output(0) && other->is_constant() && other->dtype == a->dtype &&
          *other->dims == Dims{s.n}) {
        s.bias_add = add;
        s.bias = other;
        if (g.is_graph_output(add->output(0))) continue;
      }
    }
    const auto key = std::make_pair(a, s.bias_add != nullptr);
    if (!by_input.count(key)) order.push_back(key);
    by_input[key].push_back(s);
  }
  std::vector<Node*> dead;
  for (const auto& key : order) {
    const std::vector<Sibling>& sib = by_input.at(key);
    if (sib.size() < 2 || g.opset < 10) continue;  // Slice takes its bounds as inputs from opset 10
    Value* a = sib.front().mm->input(0);
    const DType t = a->dtype;
    const int64_t k = a->dims->back();
    std::vector<Tensor> ws, bs;  // copies that share the weights' bytes
    std::vector<int64_t> ns;
    std::string names, sizes;
    const std::string merged_name = sib.front().mm->name + "/merged";
    int64_t total = 0;
    for (const Sibling& s : sib) {
      ws.push_back(*s.mm->input(1)->constant);
      if (s.bias) bs.push_back(*s.bias->constant);
      ns.push_back(s.n);
      total += s.n;
      names += (names.empty() ? "" : ", ") + s.mm->describe();
      sizes += (sizes.empty() ? "" : "+") + std::to_string(s.n);
    }
    Value* w = add_typed_value(g, merged_name + "/weight", t, {k, total});
    // Concatenated when first read: a judged rewrite after this one (hoist_layer_norms) may fold
    // a scale into the merged weight on a copy of the graph, and its own new weight is computed
    // only if that copy is kept (Tensor::deferred).
    w->constant =
        Tensor::deferred(t, {k, total}, [t, k, ws = std::move(ws)] { return concat_columns(t, k, ws); });
    Dims out_dims = *a->dims;
    out_dims.back() = total;
    Node* mm = add_op_node(g, "MatMul", g.unique_name(merged_name));
    Value* y = add_typed_value(g, merged_name + "/product", t, out_dims);
    mm->inputs = {a, w};
    mm->outputs = {y};
    y->producer = mm;
    if (key.second) {
      Value* b = add_typed_value(g, merged_name + "/bias", t, {total});
      b->constant = concat_columns(t, 0, bs);  // small: a bias row
      Node* add = add_op_node(g, "Add", g.unique_name(merged_name + "/bias_add"));
      Value* yb = add_typed_value(g, merged_name + "/biased", t, out_dims);
      add->inputs = {y, b};
      add->outputs = {yb};
      yb->producer = add;
      y = yb;
    }
    // One Slice per former output (not one Split): each goes its own way, into the operand of a
    // GEMM (an offset) or into the stitched kernel that reads it (an index map).
    Value* axes = add_constant(g, merged_name + "/axes", DType::kI64, {1}, {-1.0});
    int64_t col = 0;
    for (const Sibling& s : sib) {
      Node* last = s.bias_add ? s.bias_add : s.mm;
      Value* out = last->output(0);
      add_slice(g, s.mm->name + "/columns", y, -1, col, col + s.n, out, axes);
      last->outputs[0] = nullptr;
      dead.push_back(s.mm);
      if (s.bias_add) dead.push_back(s.bias_add);
      col += s.n;
    }
    log.push_back(fmt::format("{} -> node '{}' (MatMul, n = {}) and a Slice each", names, mm->name, sizes));
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

}  // namespace stitch::fusion
