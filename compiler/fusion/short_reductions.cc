#include "fusion/short_reductions.h"

#include <fmt/format.h>

#include "fusion/graph_edit.h"
#include "ops/op_params.h"

namespace stitch::fusion {

StatusOr<std::vector<std::string>> short_reductions_as_adds(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  std::vector<Node*> sums;  // collected first: the rewrite adds nodes
  for (const auto& np : g.nodes())
    if ((np->op_type == "ReduceSum" || np->op_type == "ReduceMean") && np->domain.empty() &&
        !keep.count(np->name))
      sums.push_back(np.get());
  std::vector<Node*> dead;
  for (Node* n : sums) {
    Value* x = n->input(0);
    Value* y = n->output(0);
    if (x == nullptr || y == nullptr || !x->has_static_shape() || !y->has_static_shape() ||
        num_elements(*x->dims) == 0)
      continue;
    const DType t = x->dtype;
    if (!(is_float(t) || (is_int(t) && n->op_type == "ReduceSum"))) continue;
    const Dims& d = *x->dims;
    auto axes = ops::constant_reduce_axes(*n, static_cast<int64_t>(d.size()));
    if (!axes.is_ok() || axes->identity) continue;
    int64_t axis = -1;
    bool one = true;
    for (size_t k = 0; k < d.size(); ++k) {
      if (!axes->reduced[k] || d[k] == 1) continue;
      one &= axis < 0;
      axis = static_cast<int64_t>(k);
    }
    if (!one || axis < 0) continue;
    const int64_t len = d[static_cast<size_t>(axis)];
    if (len < 2 || len > kMaxShortReduction) continue;
    Dims part = d;
    part[static_cast<size_t>(axis)] = 1;
    const std::string h = n->name + "/element";
    Value* shared_axes = add_constant(g, h + "_axes", DType::kI64, {1}, {static_cast<double>(axis)});
    Value* sum = nullptr;
    for (int64_t i = 0; i < len; ++i) {
      Value* e = add_typed_value(g, fmt::format("{}{}", h, i), t, part);
      add_slice(g, fmt::format("{}{}", h, i), x, axis, i, i + 1, e, shared_axes);
      sum = sum ? add_op(g, "Add", fmt::format("{}s_to_{}", h, i), {sum, e}, t, part) : e;
    }
    if (n->op_type == "ReduceMean")
      sum = add_op(g, "Div", n->name + "/mean",
                   {sum, add_constant(g, n->name + "/count", t, {}, {static_cast<double>(len)})}, t, part);
    // The reduction's output, kept or not, is the sum's elements in their order: a view of it.
    add_op_writing(g, "Reshape", n->name + "/shape",
                   {sum, add_shape_constant(g, n->name + "/dims", *y->dims)}, y);
    n->outputs = {nullptr};
    dead.push_back(n);
    log.push_back(fmt::format("{}: {} elements along axis {} as {} Slices and {} Add{}{}", n->describe(), len,
                              axis, len, len - 1, len > 2 ? "s" : "",
                              n->op_type == "ReduceMean" ? ", then a Div by the count" : ""));
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

StatusOr<RewriteResult> short_reductions_as_adds_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                            const std::optional<Cost>& before) {
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return short_reductions_as_adds(c, o.no_fuse); }, "--no-short-reductions",
      /*strict=*/false, before);
}

}  // namespace stitch::fusion
