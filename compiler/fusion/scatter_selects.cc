#include "fusion/scatter_selects.h"

#include <fmt/format.h>

#include "fusion/graph_edit.h"
#include "ops/op_util.h"

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
    bool one_per_row = true;
    for (int64_t k = 0; k < rank; ++k) one_per_row &= (*ind->dims)[k] == (k == *axis ? 1 : d[k]);
    if (!one_per_row) continue;
    const int64_t len = d[*axis];
    const DType it = ind->dtype;
    const std::string h = n->name + "/select";
    // The positions along the axis, shaped to broadcast there: [len, 1, ..., 1].
    Value* positions = add_positions(g, h + "_positions", it, len, rank - 1 - *axis);
    auto lit = [&](const std::string& name, double v) { return add_constant(g, h + name, it, {}, {v}); };
    Value* negative = add_op(g, "Less", h + "_negative", {ind, lit("_zero", 0)}, DType::kBool, *ind->dims);
    Value* wrapped = add_op(
        g, "Where", h + "_index",
        {negative,
         add_op(g, "Add", h + "_from_end", {ind, lit("_len", static_cast<double>(len))}, it, *ind->dims),
         ind},
        it, *ind->dims);
    Value* at = add_op(g, "Equal", h + "_at", {positions, wrapped}, DType::kBool, d);
    Value* value = upd;
    if (red != "none")
      value = add_op(g, red == "add" ? "Add" : "Mul", h + "_combined", {data, upd}, data->dtype, d);
    add_op_writing(g, "Where", h, {at, value, data}, y);
    n->outputs = {nullptr};
    dead.push_back(n);
    log.push_back(fmt::format(
        "{}: one index per row along axis {} of {}, as a Where{}", n->describe(), *axis, len,
        red == "none" ? "" : fmt::format(" of the data {} the update", red == "add" ? "plus" : "times")));
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

}  // namespace stitch::fusion
