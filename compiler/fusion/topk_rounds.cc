#include "fusion/topk_rounds.h"

#include <fmt/format.h>

#include <limits>

#include "fusion/graph_edit.h"
#include "fusion/order_keys.h"
#include "ops/op_util.h"

namespace stitch::fusion {

StatusOr<std::vector<std::string>> topk_as_rounds(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  if (g.opset < 11) return log;  // TopK's K an input, Where and IsNaN defined
  const auto users = g.users();
  std::vector<Node*> topks;  // collected first: the rewrite adds nodes
  for (const auto& np : g.nodes())
    if (np->op_type == "TopK" && np->domain.empty() && !keep.count(np->name)) topks.push_back(np.get());
  std::vector<Node*> dead;
  for (Node* n : topks) {
    Value *x = n->input(0), *kv = n->input(1);
    if (x == nullptr || kv == nullptr || !kv->is_constant() || kv->constant->size() != 1 ||
        !x->has_static_shape() || x->dims->empty() || num_elements(*x->dims) == 0 || !is_float(x->dtype) ||
        x->dtype == DType::kF64)  // (keys hold a float32's order)
      continue;
    const int64_t rank = static_cast<int64_t>(x->dims->size());
    auto axis = ops::norm_axis(*n, n->attr_int("axis", -1), rank);
    if (!axis.is_ok() || *axis != rank - 1) continue;
    const int64_t k = kv->constant->get_i64(0), len = x->dims->back();
    if (k < 1 || k > kMaxTopKRounds || k > len || len > kMaxKeyedRow) continue;
    Value* values_out = n->output(0);
    Value* indices_out = n->outputs.size() > 1 ? n->output(1) : nullptr;
    const bool want_values = is_read(g, users, values_out), want_indices = is_read(g, users, indices_out);
    if (!want_values && !want_indices) continue;
    const bool largest = n->attr_int("largest", 1) != 0;
    const DType t = x->dtype;
    const Dims& d = *x->dims;
    const std::string h = n->name + "/round";
    auto bools = [&](const char* op, const std::string& name, std::vector<Value*> in, const Dims& dims) {
      return add_op(g, op, name, std::move(in), DType::kBool, dims);
    };
    // One key an element (order_keys.h), NaN first made one quiet NaN: above +inf for the largest,
    // as the reference interpreter and PyTorch order it, and last for the smallest.
    Value* xf = t == DType::kF32 ? x : add_cast(g, h + "_f32", x, DType::kF32);
    Value* y = add_op(
        g, "Where", h + "_nan",
        {bools("IsNaN", h + "_is_nan", {xf}, d),
         add_constant(g, h + "_quiet_nan", DType::kF32, {}, {std::numeric_limits<double>::quiet_NaN()}), xf},
        DType::kF32, d);
    const OrderKeys keys = add_order_keys(g, h, y, largest);
    // Past the first round: each position's index, and the key a pick is masked to. Its low bits
    // are the last position's, so that every key's position lies in the row and the indices'
    // bounds (ops::int_range) are the axis: a reader's index check has nothing to check.
    Value* positions = k > 1 ? add_positions(g, h + "_positions", DType::kI64, len) : nullptr;
    Value* none = nullptr;
    if (k > 1) {  // exact: past 2^53 a double would round the low bits away
      none = add_typed_value(g, h + "_none", DType::kI64, {});
      none->constant = Tensor::from_i64(DType::kI64, {}, {kKeyBelowAll + (kMaxKeyedRow - len)});
    }
    Value* taken = nullptr;
    std::vector<Value*> values, indices;
    for (int64_t r = 0; r < k; ++r) {
      const std::string hr = fmt::format("{}{}", h, r);
      Value* left =
          taken ? add_op(g, "Where", hr + "_left", {taken, none, keys.keys}, DType::kI64, d) : keys.keys;
      Value* best = add_row_reduce(g, "ReduceMax", hr + "_best", left);
      Value* low = key_low_bits(g, keys, hr + "_low_bits", best);
      Value* index = key_position(g, keys, hr + "_index", low);
      if (want_indices) indices.push_back(index);
      if (want_values) {
        Value* v = key_value(g, keys, hr + "_value", best, low);
        values.push_back(t == DType::kF32 ? v : add_cast(g, hr + "_value_cast", v, t));
      }
      if (r + 1 < k) {
        Value* pick = bools("Equal", hr + "_pick", {positions, index}, d);
        taken = taken ? bools("Or", hr + "_taken", {taken, pick}, d) : pick;
      }
    }
    auto join = [&](const std::vector<Value*>& parts, Value* out, const char* what) {
      add_op_writing(g, "Concat", n->name + what, parts, out)->attrs["axis"] = int64_t{-1};
    };
    if (want_values) join(values, values_out, "/values");
    if (want_indices) join(indices, indices_out, "/indices");
    for (Value* v : n->outputs)
      if (v && v->producer == n) v->producer = nullptr;
    n->outputs.assign(n->outputs.size(), nullptr);
    dead.push_back(n);
    log.push_back(fmt::format("{}: {} rounds over rows of {} ({} first), one row reduction of keys each",
                              n->describe(), k, len, largest ? "the largest" : "the smallest"));
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

StatusOr<RewriteResult> topk_as_rounds_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                  const std::optional<Cost>& before) {
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return topk_as_rounds(c, o.no_fuse); }, "--no-topk-rounds", /*strict=*/false,
      before);
}

}  // namespace stitch::fusion
