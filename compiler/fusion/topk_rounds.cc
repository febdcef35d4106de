#include "fusion/topk_rounds.h"

#include <fmt/format.h>

#include <limits>

#include "fusion/graph_edit.h"
#include "ops/op_util.h"

namespace stitch::fusion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

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
        !x->has_static_shape() || x->dims->empty() || num_elements(*x->dims) == 0 || !is_float(x->dtype))
      continue;
    const int64_t rank = static_cast<int64_t>(x->dims->size());
    auto axis = ops::norm_axis(*n, n->attr_int("axis", -1), rank);
    if (!axis.is_ok() || *axis != rank - 1) continue;
    const int64_t k = kv->constant->get_i64(0), len = x->dims->back();
    if (k < 1 || k > kMaxTopKRounds || k > len) continue;
    Value* values_out = n->output(0);
    Value* indices_out = n->outputs.size() > 1 ? n->output(1) : nullptr;
    const bool want_values = is_read(g, users, values_out), want_indices = is_read(g, users, indices_out);
    if (!want_values && !want_indices) continue;
    const bool largest = n->attr_int("largest", 1) != 0;
    const DType t = x->dtype;
    const Dims& d = *x->dims;
    Dims row = d;
    row.back() = 1;
    const std::string h = n->name + "/round";
    auto lit = [&](const std::string& name, DType type, double v) {
      return add_constant(g, name, type, {}, {v});
    };
    auto bools = [&](const char* op, const std::string& name, std::vector<Value*> in, const Dims& dims) {
      return add_op(g, op, name, std::move(in), DType::kBool, dims);
    };
    // NaN reads as +inf in the extremes; the keys then tell it from +inf. A holder's key is its
    // index, plus len for a number when the largest are taken (a NaN among the holders comes first)
    // or for a NaN when the smallest are (it comes after the numbers): unique, so the least key
    // held is the round's pick, and whether it is past len says a NaN was picked.
    const double inf = largest ? -kInf : kInf;  // what a value taken becomes: past every value left
    Value* nan = bools("IsNaN", h + "_nan", {x}, d);
    Value* y = add_op(g, "Where", h + "_nan_as_inf", {nan, lit(h + "_inf", t, kInf), x}, t, d);
    Value* ids = add_positions(g, h + "_ids", DType::kF32, len);
    Value* shift = add_op(g, "Where", h + "_key_shift",
                          {nan, lit(h + "_nan_shift", DType::kF32, largest ? 0.0 : static_cast<double>(len)),
                           lit(h + "_number_shift", DType::kF32, largest ? static_cast<double>(len) : 0.0)},
                          DType::kF32, d);
    Value* keys = add_op(g, "Add", h + "_keys", {ids, shift}, DType::kF32, d);
    Value* lenv = lit(h + "_len", DType::kF32, static_cast<double>(len));
    Value* taken = nullptr;
    std::vector<Value*> values, indices;
    for (int64_t r = 0; r < k; ++r) {
      const std::string hr = fmt::format("{}{}", h, r);
      Value* masked =
          taken ? add_op(g, "Where", hr + "_left", {taken, lit(hr + "_past", t, inf), y}, t, d) : y;
      Value* extreme = add_row_reduce(g, largest ? "ReduceMax" : "ReduceMin", hr + "_extreme", masked);
      Value* holders = bools("Equal", hr + "_holds", {y, extreme}, d);
      if (taken)
        holders = bools("And", hr + "_holders", {holders, bools("Not", hr + "_free", {taken}, d)}, d);
      Value* first =
          add_row_reduce(g, "ReduceMin", hr + "_first",
                         add_op(g, "Where", hr + "_held_keys",
                                {holders, keys, lit(hr + "_none", DType::kF32, kInf)}, DType::kF32, d));
      Value* past = bools("GreaterOrEqual", hr + "_past_len", {first, lenv}, row);
      Value* nan_picked = !want_values ? nullptr
                          : largest    ? bools("Not", hr + "_nan_picked", {past}, row)
                                       : past;
      if (want_values)  // (nodes only for the outputs read: an unread one would be computed for nothing)
        values.push_back(
            add_op(g, "Where", hr + "_value",
                   {nan_picked, lit(hr + "_nan_value", t, std::numeric_limits<double>::quiet_NaN()), extreme},
                   t, row));
      if (want_indices) {
        indices.push_back(add_cast(
            g, hr + "_index",
            add_op(g, "Where", hr + "_position",
                   {past, add_op(g, "Sub", hr + "_less_len", {first, lenv}, DType::kF32, row), first},
                   DType::kF32, row),
            DType::kI64));
      }
      if (r + 1 < k) {
        Value* pick = bools("Equal", hr + "_pick", {keys, first}, d);
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
    log.push_back(fmt::format("{}: {} rounds over rows of {} ({} first), 2 row reductions each",
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
