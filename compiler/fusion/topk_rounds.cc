#include "fusion/topk_rounds.h"

#include <fmt/format.h>

#include <limits>

#include "fusion/graph_edit.h"
#include "ops/op_util.h"

namespace stitch::fusion {

namespace {
// The low bits of a key: the position's. Rows up to 2^24 long (what TopK's rounds take).
constexpr int64_t kPositionBits = 24;
constexpr int64_t kPositionMask = (int64_t{1} << kPositionBits) - 1;
// A key taken: below every key (those are at least -2^31 * 2^24).
constexpr int64_t kTaken = -(int64_t{1} << 62);
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
        !x->has_static_shape() || x->dims->empty() || num_elements(*x->dims) == 0 || !is_float(x->dtype) ||
        x->dtype == DType::kF64)  // (keys hold a float32's order)
      continue;
    const int64_t rank = static_cast<int64_t>(x->dims->size());
    auto axis = ops::norm_axis(*n, n->attr_int("axis", -1), rank);
    if (!axis.is_ok() || *axis != rank - 1) continue;
    const int64_t k = kv->constant->get_i64(0), len = x->dims->back();
    if (k < 1 || k > kMaxTopKRounds || k > len || len > kPositionMask + 1) continue;
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
    const DType i64 = DType::kI64;
    auto lit = [&](const std::string& name, DType type, double v) {
      return add_constant(g, name, type, {}, {v});
    };
    auto ilit = [&](const std::string& name, int64_t v) {
      Value* c = add_typed_value(g, name, i64, {});
      c->constant = Tensor::scalar_i64(v);
      return c;
    };
    // A node of an opset past the graph's (BitCast is opset 26's, the bitwise ops 18's).
    auto op_at = [&](const char* op, int since, const std::string& name, std::vector<Value*> in, DType type,
                     const Dims& dims) {
      Value* v = add_op(g, op, name, std::move(in), type, dims);
      v->producer->opset = std::max(g.opset, since);
      v->producer->def = find_op("", op, v->producer->opset);
      return v;
    };
    auto bools = [&](const char* op, const std::string& name, std::vector<Value*> in, const Dims& dims) {
      return add_op(g, op, name, std::move(in), DType::kBool, dims);
    };
    // Each element's key: its value's order in the high bits, the position's (reversed: the lower
    // position the larger key) in the low kPositionBits, so that one ReduceMax over the keys gives
    // a round's pick, value and index together. The value's order is the float32's bits read as an
    // int32, its magnitude bits flipped when negative (then the int32s order as the floats do), NaN
    // made one quiet NaN above +inf and -0 made +0 (TopK ties them). For the smallest the order is
    // reversed, which puts NaN last.
    Value* xf = t == DType::kF32 ? x : add_cast(g, h + "_f32", x, DType::kF32);
    Value* y = add_op(g, "Where", h + "_zero",
                      {bools("Equal", h + "_is_zero", {xf, lit(h + "_f0", DType::kF32, 0.0)}, d),
                       lit(h + "_plus_zero", DType::kF32, 0.0), xf},
                      DType::kF32, d);
    y = add_op(g, "Where", h + "_nan",
               {bools("IsNaN", h + "_is_nan", {xf}, d),
                lit(h + "_quiet_nan", DType::kF32, std::numeric_limits<double>::quiet_NaN()), y},
               DType::kF32, d);
    Value* bits = op_at("BitCast", 26, h + "_bits", {y}, DType::kI32, d);
    bits->producer->attrs["to"] = static_cast<int64_t>(dtype_to_onnx(DType::kI32));
    Value* zero32 = add_constant(g, h + "_i0", DType::kI32, {}, {0.0});
    Value* mag32 = add_constant(g, h + "_magnitude", DType::kI32, {}, {static_cast<double>(0x7fffffff)});
    auto ordered = [&](const std::string& name, Value* b, const Dims& dims) {  // its own inverse
      return add_op(g, "Where", name,
                    {bools("Less", name + "_negative", {b, zero32}, dims),
                     op_at("BitwiseXor", 18, name + "_flipped", {b, mag32}, DType::kI32, dims), b},
                    DType::kI32, dims);
    };
    Value* order = add_cast(g, h + "_order64", ordered(h + "_order", bits, d), i64);
    Value* minus_one = ilit(h + "_minus_one", -1);
    if (!largest) order = add_op(g, "Sub", h + "_reversed", {minus_one, order}, i64, d);
    std::vector<double> low(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) low[static_cast<size_t>(j)] = static_cast<double>(kPositionMask - j);
    Value* unit = ilit(h + "_unit", kPositionMask + 1);
    Value* keys = add_op(
        g, "Add", h + "_keys",
        {add_op(g, "Mul", h + "_high", {order, unit}, i64, d), add_constant(g, h + "_low", i64, {len}, low)},
        i64, d);
    Value* mask = ilit(h + "_mask", kPositionMask);
    Value* positions = k > 1 ? add_positions(g, h + "_positions", i64, len) : nullptr;
    Value* taken = nullptr;
    std::vector<Value*> values, indices;
    for (int64_t r = 0; r < k; ++r) {
      const std::string hr = fmt::format("{}{}", h, r);
      Value* left =
          taken ? add_op(g, "Where", hr + "_left", {taken, ilit(hr + "_none", kTaken), keys}, i64, d) : keys;
      Value* best = add_row_reduce(g, "ReduceMax", hr + "_best", left);
      Value* low_bits = op_at("BitwiseAnd", 18, hr + "_low_bits", {best, mask}, i64, row);
      Value* index = add_op(g, "Sub", hr + "_index", {mask, low_bits}, i64, row);
      if (want_indices) indices.push_back(index);
      if (want_values) {
        Value* high =
            add_op(g, "Div", hr + "_high",
                   {add_op(g, "Sub", hr + "_high_bits", {best, low_bits}, i64, row), unit}, i64, row);
        if (!largest) high = add_op(g, "Sub", hr + "_unreversed", {minus_one, high}, i64, row);
        Value* b = ordered(hr + "_value_bits", add_cast(g, hr + "_order32", high, DType::kI32), row);
        Value* v = op_at("BitCast", 26, hr + "_value_f32", {b}, DType::kF32, row);
        v->producer->attrs["to"] = static_cast<int64_t>(dtype_to_onnx(DType::kF32));
        values.push_back(t == DType::kF32 ? v : add_cast(g, hr + "_value", v, t));
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
