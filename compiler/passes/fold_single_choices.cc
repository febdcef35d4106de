// fold_single_choices: choices among one element, and selections by a condition of one value.
//
// A TopK along an axis of one element (k is then 1) returns its input, and index 0 everywhere; an
// ArgMax or ArgMin along one, index 0 everywhere. Readers of the values read the input; the
// indices become a constant of zeros. Group-limited MoE routing with one group (DeepSeek-V3's
// form with n_group = 1, transformers' default for GLM-4-MoE) picks its one group so; the mask it
// builds from that pick becomes a constant once shapes are inferred again and constants folded
// (both run here when a choice was folded). Then a Where whose condition is a constant of one
// value (all true or all false) is the input it selects, when that input has the Where's type and
// shape: the masked scores are the scores. Nodes with a graph output are left as they are.
//
// A ReduceMax or ReduceMin whose reduced axes hold one element between them is that element, a
// Reshape; a ReduceSum or ReduceMean is 0 plus it (an Add of 0: so a -0 sums to +0, as a sum that
// starts from 0 does, and as numpy and PyTorch give), then the Reshape. Top-1 mixtures of experts
// sum their one slot so; the stitcher takes no reduction of axes of size 1, so each was a kernel
// of its own between kernels that could have been one. A Softmax or LogSoftmax over one element
// (the attention of a first decoding step, over its one key) is x - x, plus 1 for the softmax: 1
// and 0 where x is finite, NaN where it is not, as the op's exp(x - max) / sum gives. Their outputs
// keep their values, graph outputs included.
#include <algorithm>
#include <set>
#include <string>

#include "ops/op_params.h"
#include "ops/op_util.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

bool writes_graph_output(const Graph& g, const Node& n) {
  return std::any_of(n.outputs.begin(), n.outputs.end(),
                     [&](const Value* o) { return o && g.is_graph_output(o); });
}

// The extent of the axis a TopK, ArgMax or ArgMin chooses along, or -1 when not known.
int64_t choice_extent(const Node& n) {
  const Value* x = n.input(0);
  if (!x || !x->has_static_shape()) return -1;
  const int64_t rank = static_cast<int64_t>(x->dims->size());
  auto axis = ops::norm_axis(n, n.attr_int("axis", n.op_type == "TopK" ? -1 : 0), rank);
  if (!axis.is_ok()) return -1;
  return (*x->dims)[static_cast<size_t>(*axis)];
}

// `v` as a constant of zeros (int64, its shape), detached from its producer.
void make_zeros(Value* v) {
  v->constant = Tensor(DType::kI64, *v->dims);
  v->producer = nullptr;
}

// Whether constant `c` holds one value in every element (and has at least one): that value.
std::optional<bool> uniform(const Tensor& c) {
  if (c.size() == 0) return std::nullopt;
  const bool first = c.get_i64(0) != 0;
  for (int64_t i = 1; i < c.size(); ++i)
    if ((c.get_i64(i) != 0) != first) return std::nullopt;
  return first;
}

// Whether `n` is a ReduceSum, ReduceMean, ReduceMax or ReduceMin (constant axes), a Softmax or a
// LogSoftmax, of static shapes, whose reduced axes hold one element between them.
bool over_one_element(const Node& n) {
  static const std::set<std::string> kOps = {"ReduceSum", "ReduceMean", "ReduceMax",
                                             "ReduceMin", "Softmax",    "LogSoftmax"};
  if (!n.domain.empty() || !kOps.count(n.op_type) || n.outputs.size() != 1) return false;
  const Value *x = n.input(0), *y = n.output(0);
  if (!x || !y || !x->has_static_shape() || !y->has_static_shape() || y->dtype != x->dtype) return false;
  const int64_t rank = static_cast<int64_t>(x->dims->size());
  const bool softmax = n.op_type == "Softmax" || n.op_type == "LogSoftmax";
  auto axes = softmax ? ops::softmax_axes(n, rank) : ops::constant_reduce_axes(n, rank);
  if (!axes.is_ok() || axes->identity) return false;
  int64_t count = 1;
  for (size_t d = 0; d < axes->reduced.size(); ++d)
    if (axes->reduced[d]) count *= (*x->dims)[d];
  return count == 1;
}

// A softmax over one element is 1, a log-softmax 0, where the element is finite; NaN where it is
// infinite or NaN, as exp(x - max) / sum gives: x - x, plus 1 for the softmax.
void softmax_as_element(Graph& g, Node& n) {
  NodeBuilder b{g, n};
  Value *x = n.input(0), *y = n.output(0);
  Value* v = b.node("Sub", "self_difference", {x, x}, x->dtype, *x->dims);
  if (n.op_type == "Softmax")
    v = b.node("Add", "plus_one", {v, b.constant("one", Tensor::from_f64(x->dtype, {}, {1.0}))}, x->dtype,
               *x->dims);
  b.finish(v, y);
}

void reduction_as_element(Graph& g, Node& n) {
  NodeBuilder b{g, n};
  Value *x = n.input(0), *y = n.output(0);
  Value* v = x;
  if (n.op_type == "ReduceSum" || n.op_type == "ReduceMean")
    v = b.node("Add", "plus_zero", {x, b.constant("zero", Tensor(x->dtype, Dims{}))}, x->dtype, *x->dims);
  if (v == x || *v->dims != *y->dims) v = b.reshape(v, *y->dims, "one_element");
  b.finish(v, y);
}

}  // namespace

StatusOr<bool> fold_single_choices(Graph& g, PassContext& ctx) {
  std::vector<Node*> one_element;
  for (const auto& np : g.nodes())
    if (over_one_element(*np)) one_element.push_back(np.get());
  for (Node* n : one_element) {
    if (n->op_type == "Softmax" || n->op_type == "LogSoftmax")
      softmax_as_element(g, *n);
    else
      reduction_as_element(g, *n);
  }
  if (!one_element.empty()) RETURN_IF_ERROR(g.topo_sort());
  std::vector<Node*> dead;
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    if (!n.domain.empty() || writes_graph_output(g, n)) continue;
    if (n.op_type == "TopK" && n.outputs.size() == 2 && n.output(0) && n.output(1) && choice_extent(n) == 1 &&
        n.output(1)->dtype == DType::kI64 && n.output(0)->has_static_shape() &&
        *n.output(0)->dims == *n.input(0)->dims && n.output(0)->dtype == n.input(0)->dtype) {
      g.replace_uses(n.output(0), n.input(0));
      make_zeros(n.output(1));
      dead.push_back(&n);
    } else if ((n.op_type == "ArgMax" || n.op_type == "ArgMin") && n.output(0) && choice_extent(n) == 1 &&
               n.output(0)->dtype == DType::kI64 && n.output(0)->has_static_shape()) {
      make_zeros(n.output(0));
      dead.push_back(&n);
    }
  }
  bool changed = !dead.empty();
  if (changed) {
    g.remove_nodes(dead);
    RETURN_IF_ERROR(infer_shapes(g, ctx).status());
    RETURN_IF_ERROR(fold_constants(g, ctx).status());
  }
  dead.clear();
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    if (!n.domain.empty() || n.op_type != "Where" || n.inputs.size() != 3 || writes_graph_output(g, n))
      continue;
    const Value *cond = n.input(0), *y = n.output(0);
    if (!cond || !cond->constant || !y || !y->has_static_shape()) continue;
    const std::optional<bool> which = uniform(*cond->constant);
    if (!which) continue;
    Value* chosen = n.input(*which ? 1 : 2);
    if (!chosen || !chosen->has_static_shape() || *chosen->dims != *y->dims || chosen->dtype != y->dtype)
      continue;
    g.replace_uses(n.output(0), chosen);
    dead.push_back(&n);
  }
  if (!dead.empty()) {
    g.remove_nodes(dead);
    changed = true;
  }
  return changed || !one_element.empty();
}

}  // namespace stitch
