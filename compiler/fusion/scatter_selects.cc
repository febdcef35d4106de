#include "fusion/scatter_selects.h"

#include <fmt/format.h>

#include "fusion/graph_edit.h"
#include "ops/index_check.h"
#include "ops/op_util.h"
#include "ops/value_range.h"

namespace stitch::fusion {

StatusOr<std::vector<std::string>> scatter_selects(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  std::vector<Node*> scatters;  // collected first: the rewrite adds nodes
  for (const auto& np : g.nodes())
    if (np->op_type == "ScatterElements" && np->domain.empty() && !keep.count(np->name))
      scatters.push_back(np.get());
  std::vector<Node*> dead;
  for (Node* n : scatters) {
    Value *data = n->input(0), *ind = n->input(1), *upd = n->input(2), *y = n->output(0);
    if (!data || !ind || !upd || !y || !data->has_static_shape() || !ind->has_static_shape() ||
        !upd->has_static_shape() || num_elements(*data->dims) == 0 || num_elements(*ind->dims) == 0)
      continue;
    const std::string red = n->attr_string("reduction", "none");
    if (red != "none" && red != "add" && red != "mul") continue;
    if (red != "none" && (upd->dtype == DType::kBool || data->dtype == DType::kBool)) continue;
    const Dims& d = *data->dims;
    const int64_t rank = static_cast<int64_t>(d.size());
    auto axis = ops::norm_axis(*n, n->attr_int("axis", 0), rank);
    if (!axis.is_ok() || *ind->dims != *upd->dims || static_cast<int64_t>(ind->dims->size()) != rank)
      continue;
    // k indices in each row along the axis, every other axis whole.
    const int64_t k = (*ind->dims)[*axis];
    bool rows = k >= 1 && k <= kMaxScatterSelects;
    for (int64_t r = 0; r < rank; ++r) rows &= r == *axis || (*ind->dims)[r] == d[r];
    if (!rows) continue;
    const int64_t len = d[*axis];
    const DType it = ind->dtype;
    const std::string h = n->name + "/select";
    // An index outside the axis is still refused (StitchIndexCheck), unless its bounds show none is
    // (a constant, a TopK's indices: ops/value_range.h). A constant one outside keeps the scatter,
    // whose kernel refuses it at run time as it does without fusion.
    const ops::IndexBounds inside{
        -len, len - 1,
        fmt::format("index {{value}} of '{}', along axis {} of '{}', is outside [-{}, {})", ind->name, *axis,
                    data->name, len, len)};
    if (ind->is_constant() && inside.first_refused(ind->constant->to_i64())) continue;
    ASSIGN_OR_RETURN(ind, ops::checked_index(g, *n, ind, inside, "select_index_checked"));
    // The positions along the axis, shaped to broadcast there: [len, 1, ..., 1].
    Value* positions = add_positions(g, h + "_positions", it, len, rank - 1 - *axis);
    Dims slot_dims = *ind->dims;
    slot_dims[static_cast<size_t>(*axis)] = 1;
    // One Where a slot, in the scatter's order: a later slot at the same position overrides an
    // earlier one (reduction none) or combines with what it left (add, mul).
    Value* written = data;
    for (int64_t j = 0; j < k; ++j) {
      const std::string hj = k == 1 ? h : fmt::format("{}_slot{}", h, j);
      Value *index = ind, *update = upd;
      if (k > 1) {
        index = add_typed_value(g, hj + "_index_in", it, slot_dims);
        add_slice(g, hj + "_index_in", ind, *axis, j, j + 1, index);
        update = add_typed_value(g, hj + "_update", upd->dtype, slot_dims);
        add_slice(g, hj + "_update", upd, *axis, j, j + 1, update);
      }
      auto lit = [&](const std::string& name, double v) { return add_constant(g, hj + name, it, {}, {v}); };
      Value* negative =
          add_op(g, "Less", hj + "_negative", {index, lit("_zero", 0)}, DType::kBool, slot_dims);
      Value* wrapped = add_op(
          g, "Where", hj + "_index",
          {negative,
           add_op(g, "Add", hj + "_from_end", {index, lit("_len", static_cast<double>(len))}, it, slot_dims),
           index},
          it, slot_dims);
      Value* at = add_op(g, "Equal", hj + "_at", {positions, wrapped}, DType::kBool, d);
      Value* value = update;
      if (red != "none")
        value = add_op(g, red == "add" ? "Add" : "Mul", hj + "_combined", {written, update}, data->dtype, d);
      if (j + 1 < k)
        written = add_op(g, "Where", hj, {at, value, written}, data->dtype, d);
      else
        add_op_writing(g, "Where", h, {at, value, written}, y);
    }
    n->outputs = {nullptr};
    dead.push_back(n);
    log.push_back(fmt::format(
        "{}: {} per row along axis {} of {}, as {}{}", n->describe(),
        k == 1 ? "one index" : fmt::format("{} indices", k), *axis, len,
        k == 1 ? "a Where" : fmt::format("{} Wheres", k),
        red == "none" ? "" : fmt::format(" of the data {} the update", red == "add" ? "plus" : "times")));
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

}  // namespace stitch::fusion
