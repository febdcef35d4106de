#include "fusion/expert_gemms.h"

#include <fmt/format.h>

#include "fusion/graph_edit.h"
#include "ops/op_util.h"

namespace stitch::fusion {

namespace {

// The GatherND feeding input `i` of MatMul `n` that the rewrite takes: batch_dims 0, floating-point
// constant weights of rank 3 gathered along axis 0 by indices [S, 1], its output read by `n` alone.
Node* expert_gather(const Graph& g, const std::unordered_map<const Value*, std::vector<Node*>>& users,
                    const Node& n, size_t i, const std::set<std::string>& keep) {
  const Value* v = n.input(i);
  Node* p = v ? v->producer : nullptr;
  if (p == nullptr || p->op_type != "GatherND" || !p->domain.empty() || keep.count(p->name) ||
      p->attr_int("batch_dims", 0) != 0 || sole_reader(g, users, v) != &n)
    return nullptr;
  const Value *w = p->input(0), *idx = p->input(1);
  if (w == nullptr || idx == nullptr || !w->is_constant() || !w->has_static_shape() || w->dims->size() != 3 ||
      !is_float(w->dtype) || !idx->has_static_shape() || idx->dims->size() != 2 || (*idx->dims)[1] != 1 ||
      !is_int(idx->dtype))
    return nullptr;
  return p;
}

// When activation `x` ([S, K, 1] or [S, 1, K]) of MatMul `n` repeats each of T rows of K values
// r > 1 times in a row: an Expand of [T, 1, K] to [T, r, K] read through views that keep the element
// order (transformers' repeat_interleave of each token over its k slots). Returns that Expand's
// input and r, and adds to `dead` the nodes from x back to the Expand that nothing but the next of
// them (and `n`) reads; else {nullptr, 0}.
std::pair<Value*, int64_t> repeated_rows(const Graph& g,
                                         const std::unordered_map<const Value*, std::vector<Node*>>& users,
                                         const Node& n, Value* x, int64_t s, int64_t k,
                                         std::vector<Node*>& dead) {
  std::vector<Node*> chain;  // x's producer first, the Expand last
  Value* v = x;
  while (is_order_view(v->producer)) {
    chain.push_back(v->producer);
    v = v->producer->input(0);
  }
  Node* e = v->producer;
  if (e == nullptr || e->op_type != "Expand" || !e->domain.empty() || !v->has_static_shape())
    return {nullptr, 0};
  chain.push_back(e);
  Value* in = e->input(0);
  if (in == nullptr || !in->has_static_shape() || in->dims->size() != 3) return {nullptr, 0};
  const Dims &id = *in->dims, &od = *v->dims;
  if (od.size() != 3 || id[1] != 1 || id[0] != od[0] || id[2] != k || od[2] != k || od[1] < 2 ||
      od[0] * od[1] != s)
    return {nullptr, 0};
  const Node* reader = &n;
  for (Node* c : chain) {
    if (sole_reader(g, users, c->output(0)) != reader) break;
    dead.push_back(c);
    reader = c;
  }
  return {in, od[1]};
}

}  // namespace

StatusOr<std::vector<std::string>> all_expert_gemms(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  const auto users = g.users();
  std::vector<Node*> matmuls;  // collected first: the rewrite adds nodes
  for (const auto& np : g.nodes())
    if (np->op_type == "MatMul" && np->domain.empty() && !keep.count(np->name)) matmuls.push_back(np.get());
  std::vector<Node*> dead;
  for (Node* n : matmuls) {
    Value *a = n->input(0), *b = n->input(1), *out = n->output(0);
    if (a == nullptr || b == nullptr || out == nullptr || !a->has_static_shape() || !b->has_static_shape() ||
        !out->has_static_shape() || a->dims->size() != 3 || b->dims->size() != 3 || out->dtype != a->dtype ||
        a->dtype != b->dtype)
      continue;
    // left: weights [E, M, K] gathered, times [S, K, 1]; else the activation [S, 1, K] times weights
    // [E, K, N] gathered.
    Node* p = expert_gather(g, users, *n, 0, keep);
    const bool left = p != nullptr;
    if (!left) p = expert_gather(g, users, *n, 1, keep);
    if (p == nullptr) continue;
    Value* w = p->input(0);
    Value* idx = p->input(1);
    Value* x = left ? b : a;
    const Dims &wd = *w->dims, &xd = *x->dims;
    const int64_t s = (*idx->dims)[0], e = wd[0];
    const int64_t k = left ? wd[2] : wd[1], m = left ? wd[1] : wd[2];
    const Dims x_want = left ? Dims{s, k, 1} : Dims{s, 1, k};
    const Dims out_want = left ? Dims{s, m, 1} : Dims{s, 1, m};
    if (xd != x_want || *out->dims != out_want || w->dtype != out->dtype || num_elements(*out->dims) == 0 ||
        k < 1)
      continue;
    const std::string base = n->name + "/all_experts";
    // A token's slots repeat its row: the product once per token, each slot's part picked from its
    // token's ([T, E, M] by indices [T, r, 1]).
    const auto [token_rows, r] = repeated_rows(g, users, *n, x, s, k, dead);
    const int64_t t = r ? s / r : s;
    Value* rows =
        add_op(g, "Reshape", base + "/rows",
               {r ? token_rows : x, add_shape_constant(g, base + "/rows_shape", {t, k})}, x->dtype, {t, k});
    // [E, M, K] -> [K, E, M] (left) or [E, K, N] -> [K, E, N], then [K, E * M].
    Value* wt = add_typed_value(g, w->name + "/by_input", w->dtype, {k, e * m});
    const Dims ws = ops::strides_of(wd);
    // Copied when first read (Tensor::deferred): the rewrite is judged on a copy of the graph.
    const Dims from = left ? Dims{ws[2], ws[0], ws[1]} : Dims{ws[1], ws[0], ws[2]};
    wt->constant = Tensor::deferred(w->dtype, {k, e * m}, [src = *w->constant, k, e, m, from] {
      return ops::copy_strided(src, {k, e, m}, 0, from).reshaped({k, e * m});
    });
    Value* y = add_op(g, "MatMul", base, {rows, wt}, out->dtype, {t, e * m});
    Value* per_expert =
        add_op(g, "Reshape", base + "/per_expert",
               {y, add_shape_constant(g, base + "/per_expert_shape", {t, e, m})}, out->dtype, {t, e, m});
    Value* slot_idx =
        r ? add_op(g, "Reshape", base + "/slot_experts",
                   {idx, add_shape_constant(g, base + "/slots_shape", {t, r, 1})}, idx->dtype, {t, r, 1})
          : idx;
    Value* picked = add_op(g, "GatherND", base + "/picked", {per_expert, slot_idx}, out->dtype,
                           r ? Dims{t, r, m} : Dims{s, m});
    picked->producer->attrs["batch_dims"] = int64_t{1};
    add_op_writing(g, "Reshape", base + "/back",
                   {picked, add_shape_constant(g, base + "/back_shape", out_want)}, out);
    n->outputs.assign(n->outputs.size(), nullptr);
    dead.push_back(n);
    dead.push_back(p);
    log.push_back(
        fmt::format("{}: every expert's weights '{}' [{}] in one GEMM, [{}, {}] by [{}, {}]{}, the slot's "
                    "expert's part of "
                    "the product picked by {} (was {} copying an expert's weights for each of {} slots)",
                    n->describe(), w->name, dims_to_string(wd), t, k, k, e * m,
                    r ? fmt::format(" once per token, its {} slots' rows being its row", r) : "",
                    picked->producer->describe(), p->describe(), s));
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

StatusOr<RewriteResult> all_expert_gemms_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                    const std::optional<Cost>& before) {
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return all_expert_gemms(c, o.no_fuse); }, "--no-all-expert-gemms",
      /*strict=*/false, before);
}

}  // namespace stitch::fusion
