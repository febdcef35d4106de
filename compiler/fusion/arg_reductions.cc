#include "fusion/arg_reductions.h"

#include <fmt/format.h>

#include <limits>

#include "fusion/graph_edit.h"
#include "fusion/order_keys.h"
#include "fusion/scatter_selects.h"
#include "ops/op_util.h"

namespace stitch::fusion {

StatusOr<std::vector<std::string>> arg_extremes_as_reductions(Graph& g, const std::set<std::string>& keep) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::string> log;
  std::vector<Node*> args;  // collected first: the rewrite adds nodes
  for (const auto& np : g.nodes())
    if ((np->op_type == "ArgMax" || np->op_type == "ArgMin") && np->domain.empty() && !keep.count(np->name))
      args.push_back(np.get());
  std::vector<Node*> dead;
  for (Node* n : args) {
    Value *x = n->input(0), *y = n->output(0);
    if (!x || !y || !x->has_static_shape() || !y->has_static_shape() || x->dims->empty() ||
        num_elements(*x->dims) == 0 || !is_float(x->dtype) || n->attr_int("select_last_index", 0) != 0)
      continue;
    const int64_t rank = static_cast<int64_t>(x->dims->size());
    auto axis = ops::norm_axis(*n, n->attr_int("axis", 0), rank);
    const int64_t len = x->dims->back();
    if (!axis.is_ok() || *axis != rank - 1 || len > kMaxKeyedRow) continue;
    const bool mx = n->op_type == "ArgMax";
    const DType t = x->dtype;
    const Dims& d = *x->dims;
    const std::string h = n->name + "/extreme";
    auto lit = [&](const std::string& name, DType type, double v) {
      return add_constant(g, h + name, type, {}, {v});
    };
    std::vector<double> first(static_cast<size_t>(len), 0.0);
    first[0] = 1.0;
    Value* at_first = add_constant(g, h + "_at_first", DType::kBool, {len}, first);
    Value* nan = add_op(g, "IsNaN", h + "_nan", {x}, DType::kBool, d);
    Value* later_nan =
        add_op(g, "And", h + "_later_nan",
               {nan, add_op(g, "Not", h + "_not_first", {at_first}, DType::kBool, {len})}, DType::kBool, d);
    // A NaN after the first element: beyond no number; a NaN first element: beyond every number.
    Value* z = add_op(g, "Where", h + "_first_nan", {nan, lit("_beyond", t, mx ? kInf : -kInf), x}, t, d);
    z = add_op(g, "Where", h + "_read", {later_nan, lit("_short", t, mx ? -kInf : kInf), z}, t, d);
    const bool keepdims = n->attr_int("keepdims", 1) != 0;
    std::string how;
    if (t != DType::kF64) {
      // One ReduceMax of keys (order_keys.h): the extreme at its first position in one pass. A later
      // NaN, read as the farthest number, never beats the first element, which is no farther.
      const OrderKeys keys =
          add_order_keys(g, h, t == DType::kF32 ? z : add_cast(g, h + "_f32", z, DType::kF32), mx);
      Value* best = add_row_reduce(g, "ReduceMax", h + "_best", keys.keys, keepdims);
      // The position at the node's own shape (its keepdims), into its output: no view between.
      key_position(g, keys, h + "_index", key_low_bits(g, keys, h + "_low_bits", best), y);
      how = fmt::format("one row reduction of keys for the {} at its first position",
                        mx ? "largest" : "smallest");
    } else {  // float64 does not fit a key: the extreme, then the least position holding it
      Value* positions = add_positions(g, h + "_positions", DType::kI64, len);
      Value* extreme = add_row_reduce(g, mx ? "ReduceMax" : "ReduceMin", h + "_value", z);
      Value* holds = add_op(g, "And", h + "_holds",
                            {add_op(g, "Equal", h + "_equal", {z, extreme}, DType::kBool, d),
                             add_op(g, "Not", h + "_number", {later_nan}, DType::kBool, d)},
                            DType::kBool, d);
      // Some position always holds the extreme: z has no NaN, and when only later NaNs held it (an
      // infinity), the first element is that infinity too. So a position no element holds may read
      // as the last, which keeps the answer inside the axis for the bounds a reader's check sees
      // (ops::int_range).
      Value* held =
          add_op(g, "Where", h + "_held",
                 {holds, positions, lit("_none", DType::kI64, static_cast<double>(len - 1))}, DType::kI64, d);
      // The least position, at the node's own shape (its keepdims), into its output: no view between.
      add_row_reduce(g, "ReduceMin", h + "_index", held, keepdims, y);
      how = fmt::format("the {} and its first position", mx ? "largest" : "smallest");
    }
    n->outputs = {nullptr};
    dead.push_back(n);
    log.push_back(fmt::format("{}: over rows of {}, {}", n->describe(), len, how));
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

StatusOr<RewriteResult> arg_extremes_as_reductions_if_cheaper(std::unique_ptr<Graph>& g,
                                                              const FusionOptions& o,
                                                              const std::optional<Cost>& before) {
  return rewrite_if_cheaper(
      g, o,
      [&](Graph& c) -> StatusOr<std::vector<std::string>> {
        ASSIGN_OR_RETURN(std::vector<std::string> lines, arg_extremes_as_reductions(c, o.no_fuse));
        ASSIGN_OR_RETURN(std::vector<std::string> selects, scatter_selects(c, o.no_fuse));
        lines.insert(lines.end(), selects.begin(), selects.end());
        return lines;
      },
      "--no-arg-reductions", /*strict=*/false, before);
}

}  // namespace stitch::fusion
