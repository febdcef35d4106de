#include "fusion/short_reductions.h"

#include <fmt/format.h>

#include "fusion/graph_edit.h"
#include "ops/op_params.h"

namespace stitch::fusion {
namespace {

// The elements of `x` along `axis` (len of them) combined by `op` (Add, Max) in the axis's order:
// one Slice each, shaped as `x` with that axis 1.
Value* combine_slices(Graph& g, Value* x, int64_t axis, int64_t len, const char* op, const std::string& h) {
  Dims part = *x->dims;
  part[static_cast<size_t>(axis)] = 1;
  Value* shared_axes = add_constant(g, h + "_axes", DType::kI64, {1}, {static_cast<double>(axis)});
  Value* acc = nullptr;
  for (int64_t i = 0; i < len; ++i) {
    Value* e = add_typed_value(g, fmt::format("{}{}", h, i), x->dtype, part);
    add_slice(g, fmt::format("{}{}", h, i), x, axis, i, i + 1, e, shared_axes);
    acc = acc ? add_op(g, op, fmt::format("{}s_to_{}", h, i), {acc, e}, x->dtype, part) : e;
  }
  return acc;
}

// The one axis of 2 to kMaxShortReduction elements that reduction `n` (constant axes) reduces over
// input dims `d`, any other axis it names being of one element; none otherwise.
std::optional<int64_t> short_axis(const Node& n, const Dims& d) {
  auto axes = ops::constant_reduce_axes(n, static_cast<int64_t>(d.size()));
  if (!axes.is_ok() || axes->identity) return std::nullopt;
  int64_t axis = -1;
  for (size_t k = 0; k < d.size(); ++k) {
    if (!axes->reduced[k] || d[k] == 1) continue;
    if (axis >= 0) return std::nullopt;
    axis = static_cast<int64_t>(k);
  }
  if (axis < 0) return std::nullopt;
  const int64_t len = d[static_cast<size_t>(axis)];
  if (len < 2 || len > kMaxShortReduction) return std::nullopt;
  return axis;
}

// The ReduceMaxes and ReduceMins (of numbers, static shapes, constant axes) over one short axis,
// in graph order, with that axis and its extent; those named in `keep` left out.
struct ShortExtreme {
  Node* node;
  int64_t axis, len;
};
std::vector<ShortExtreme> short_extremes(const Graph& g, const std::set<std::string>& keep) {
  std::vector<ShortExtreme> found;
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    if ((n.op_type != "ReduceMax" && n.op_type != "ReduceMin") || !n.domain.empty() ||
        n.outputs.size() != 1 || keep.count(n.name))
      continue;
    const Value* x = n.input(0);
    const Value* y = n.output(0);
    if (x == nullptr || y == nullptr || !x->has_static_shape() || !y->has_static_shape() ||
        num_elements(*x->dims) == 0 || !(is_float(x->dtype) || is_int(x->dtype)))
      continue;
    if (const std::optional<int64_t> axis = short_axis(n, *x->dims))
      found.push_back({np.get(), *axis, (*x->dims)[static_cast<size_t>(*axis)]});
  }
  return found;
}

// A Softmax over a last axis of 2 to kMaxShortReduction elements: the largest by Max, the exponentials
// of the differences, their sum by Adds, and the quotients, each element-wise. Returns its line, or
// empty when the node is not such a Softmax.
std::string short_softmax(Graph& g, Node& n, std::vector<Node*>& dead) {
  Value* x = n.input(0);
  Value* y = n.output(0);
  if (x == nullptr || y == nullptr || !x->has_static_shape() || !is_float(x->dtype) || x->dims->empty() ||
      num_elements(*x->dims) == 0 || n.outputs.size() != 1)
    return "";
  const int64_t rank = static_cast<int64_t>(x->dims->size());
  int64_t axis = n.attr_int("axis", n.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  // The last axis only: before opset 13 another axis splits the input into 2-D rows, and from 13
  // a softmax over another axis (an image's classes over its channels) is a column reduction its
  // kernel tiles, where the element-wise form would compute the producers again for every element
  // of the axis at every output (seg_small's bicubic upsample: nvcc ran for minutes on that kernel).
  if (axis != rank - 1) return "";
  const int64_t len = (*x->dims)[static_cast<size_t>(axis)];
  if (len < 2 || len > kMaxShortReduction) return "";
  const std::string h = n.name + "/short";
  // Half types compute in float32 and round once, as the Softmax's own kernels do.
  const bool half = x->dtype == DType::kF16 || x->dtype == DType::kBF16;
  const DType t = half ? DType::kF32 : x->dtype;
  Value* xc = half ? add_cast(g, h + "_f32", x, t) : x;
  Value* top = combine_slices(g, xc, axis, len, "Max", h + "_element");
  Value* e =
      add_op(g, "Exp", h + "_exp", {add_op(g, "Sub", h + "_shifted", {xc, top}, t, *x->dims)}, t, *x->dims);
  Value* sum = combine_slices(g, e, axis, len, "Add", h + "_exp_element");
  if (half) {
    Value* q = add_op(g, "Div", h + "_quotient", {e, sum}, t, *x->dims);
    add_op_writing(g, "Cast", h + "_back", {q}, y)->attrs["to"] =
        static_cast<int64_t>(dtype_to_onnx(y->dtype));
  } else {
    add_op_writing(g, "Div", h + "_quotient", {e, sum}, y);
  }
  n.outputs = {nullptr};
  dead.push_back(&n);
  return fmt::format(
      "{}: {} elements along axis {} as element-wise ops (the largest by {} Max, the sum of the "
      "exponentials by {} Add{}){}",
      n.describe(), len, axis, len - 1, len - 1, len > 2 ? "s" : "", half ? ", in float32" : "");
}

}  // namespace

StatusOr<std::vector<std::string>> short_reductions_as_adds(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  std::vector<Node*> sums;  // collected first: the rewrite adds nodes
  for (const auto& np : g.nodes())
    if ((np->op_type == "ReduceSum" || np->op_type == "ReduceMean" || np->op_type == "Softmax") &&
        np->domain.empty() && !keep.count(np->name))
      sums.push_back(np.get());
  std::vector<Node*> dead;
  for (Node* n : sums) {
    if (n->op_type == "Softmax") {
      if (std::string line = short_softmax(g, *n, dead); !line.empty()) log.push_back(std::move(line));
      continue;
    }
    Value* x = n->input(0);
    Value* y = n->output(0);
    if (x == nullptr || y == nullptr || !x->has_static_shape() || !y->has_static_shape() ||
        num_elements(*x->dims) == 0)
      continue;
    const DType t = x->dtype;
    if (!(is_float(t) || (is_int(t) && n->op_type == "ReduceSum"))) continue;
    const Dims& d = *x->dims;
    const std::optional<int64_t> short_ax = short_axis(*n, d);
    if (!short_ax) continue;
    const int64_t axis = *short_ax;
    const int64_t len = d[static_cast<size_t>(axis)];
    Dims part = d;
    part[static_cast<size_t>(axis)] = 1;
    Value* sum = combine_slices(g, x, axis, len, "Add", n->name + "/element");
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

StatusOr<std::vector<std::string>> short_maxima_as_maxes(Graph& g, const std::set<std::string>& keep,
                                                         int64_t only_len) {
  std::vector<std::string> log;
  std::vector<Node*> dead;
  for (const auto& [n, axis, len] : short_extremes(g, keep)) {  // collected first: the rewrite adds nodes
    if (only_len != 0 && len != only_len) continue;
    Value* x = n->input(0);
    Value* y = n->output(0);
    const bool max = n->op_type == "ReduceMax";
    Value* best = combine_slices(g, x, axis, len, max ? "Max" : "Min", n->name + "/element");
    // The reduction's output, kept or not, is the extremes' elements in their order: a view of them.
    add_op_writing(g, "Reshape", n->name + "/shape",
                   {best, add_shape_constant(g, n->name + "/dims", *y->dims)}, y);
    n->outputs = {nullptr};
    dead.push_back(n);
    log.push_back(fmt::format("{}: {} elements along axis {} as {} Slices and {} {}", n->describe(), len,
                              axis, len, len - 1, max ? "Max" : "Min"));
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

StatusOr<RewriteResult> short_maxima_as_maxes_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                         const std::optional<Cost>& before) {
  std::set<int64_t> lens;
  for (const ShortExtreme& e : short_extremes(*g, o.no_fuse)) lens.insert(e.len);
  // Judged a row length at a time, the shortest first: element-wise, the maxima over rows of 2 and 4
  // of a group-limited router join the kernel of its rows of 8, which stay a row op. Kept only with
  // no more kernels: the rewrite is for joining kernels, and a plan it splits into more (gpt-oss's
  // genai router, its rows of 4 experts beside two norms' outer reductions, as a row kernel and an
  // element one) is cheaper only by an estimate of the split no GPU has checked.
  RewriteResult all;
  std::optional<Cost> known = before;
  for (int64_t len : lens) {
    ASSIGN_OR_RETURN(
        RewriteResult r,
        rewrite_if_cheaper(
            g, o, [&](Graph& c) { return short_maxima_as_maxes(c, o.no_fuse, len); }, "--no-short-reductions",
            /*strict=*/false, known, /*no_more_kernels=*/true));
    if (r.verdict.empty()) continue;
    if (r.kept) known = all.kept = r.kept;
    if (r.kept_plan) all.kept_plan = r.kept_plan;
    all.add_step(fmt::format("over {}", len), r);
  }
  return all;
}

}  // namespace stitch::fusion
