#include "fusion/split_slices.h"

#include <fmt/format.h>

#include <optional>

#include "fusion/graph_edit.h"
#include "ops/op_util.h"

namespace stitch::fusion {

namespace {

// A Gather whose indices are a constant run k, k+1, ..., k+n-1 along its axis (a scalar k, or
// such a vector) reads the Slice [k, k+n) of its data: it becomes that Slice, followed by a
// Reshape that drops the axis when the index is a scalar (BLOOM's Q, K and V picked out of one
// [batch, seq, heads, 3, head_dim] view). Returns the line for the log, or nothing when the
// Gather is not such a one (its output value then keeps its producer). Out-of-range indices
// stay a Gather, whose kernel reports them. A GatherND without batch dimensions whose constant
// indices have one coordinate each ([1], a scalar pick, or [n, 1], a run) is the Gather of
// those along axis 0 (Falcon's multi-query K and V picked out of the heads that way).
std::optional<std::string> gather_to_slice(Graph& g, Node& n) {
  Value* x = n.input(0);
  const Value* idx = n.input(1);
  Value* out = n.output(0);
  if (x == nullptr || idx == nullptr || out == nullptr || !idx->is_constant() || !x->has_static_shape() ||
      x->dims->empty() || !out->has_static_shape() || !is_int(idx->constant->dtype()) ||
      num_elements(*out->dims) == 0)
    return std::nullopt;
  const int64_t rank = static_cast<int64_t>(x->dims->size());
  const Dims& idims = idx->constant->dims();
  bool scalar = idx->constant->rank() == 0;
  int64_t axis = 0;
  if (n.op_type == "GatherND") {
    if (n.attr_int("batch_dims", 0) != 0 || idims.empty() || idims.size() > 2 || idims.back() != 1)
      return std::nullopt;
    scalar = idims.size() == 1;
  } else {
    if (idims.size() > 1) return std::nullopt;
    auto a = ops::norm_axis(n, n.attr_int("axis", 0), rank);
    if (!a.is_ok()) return std::nullopt;
    axis = *a;
  }
  const int64_t extent = (*x->dims)[static_cast<size_t>(axis)];
  const std::vector<int64_t> ks = idx->constant->to_i64();
  if (ks.empty()) return std::nullopt;
  const int64_t start = ks.front() < 0 ? ks.front() + extent : ks.front();
  for (size_t i = 0; i < ks.size(); ++i) {
    const int64_t k = ks[i] < 0 ? ks[i] + extent : ks[i];
    if (k != start + static_cast<int64_t>(i) || k < 0 || k >= extent) return std::nullopt;
  }
  const int64_t len = static_cast<int64_t>(ks.size());
  Dims want = *x->dims;  // the Slice's shape, or with the axis dropped, must be the output's
  want[static_cast<size_t>(axis)] = len;
  if (scalar) want.erase(want.begin() + axis);
  if (want != *out->dims) return std::nullopt;
  Value* sliced = out;
  if (scalar) {
    Dims d = *x->dims;
    d[static_cast<size_t>(axis)] = 1;
    sliced = add_typed_value(g, n.name + "/sliced", out->dtype, d);
  }
  add_slice(g, n.name + "/slice", x, axis, start, start + len, sliced);
  if (scalar) {
    Node* reshape = add_op_node(g, "Reshape", g.unique_name(n.name + "/drop_axis"));
    Value* shape =
        add_typed_value(g, n.name + "/shape", DType::kI64, {static_cast<int64_t>(out->dims->size())});
    shape->constant = Tensor::vector_i64(*out->dims);
    reshape->inputs = {sliced, shape};
    reshape->outputs = {out};
    out->producer = reshape;
  }
  n.outputs.assign(n.outputs.size(), nullptr);
  return fmt::format("{}: a Slice along axis {}: [{}, {}){}", n.describe(), axis, start, start + len,
                     scalar ? ", the axis dropped by a Reshape" : "");
}

}  // namespace

StatusOr<std::vector<std::string>> split_to_slices(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  if (g.opset < 10) return log;  // Slice takes its bounds as inputs from opset 10
  const auto users = g.users();
  std::vector<Node*> dead;
  std::vector<Node*> splits;
  for (const auto& np : g.nodes())
    if (np->op_type == "Split" && !keep.count(np->name)) splits.push_back(np.get());
  for (Node* n : splits) {
    Value* x = n->input(0);
    if (x == nullptr || !x->has_static_shape()) continue;
    const int64_t rank = static_cast<int64_t>(x->dims->size());
    auto axis = ops::norm_axis(*n, n->attr_int("axis", 0), rank);
    if (!axis.is_ok()) continue;
    bool ok = true;
    for (const Value* v : n->outputs) ok &= v != nullptr && v->has_static_shape();
    if (!ok) continue;
    Value* axes = add_constant(g, n->name + "/axis", DType::kI64, {1}, {static_cast<double>(*axis)});
    int64_t start = 0;
    std::string parts;
    for (Value* v : n->outputs) {
      const int64_t len = (*v->dims)[static_cast<size_t>(*axis)];
      if (is_read(g, users, v)) {
        add_slice(g, n->name + "/" + v->name, x, *axis, start, start + len, v, axes);
        parts += fmt::format("{}'{}' [{}, {})", parts.empty() ? "" : ", ", v->name, start, start + len);
      } else {
        v->producer = nullptr;
      }
      start += len;
    }
    n->outputs.assign(n->outputs.size(), nullptr);
    dead.push_back(n);
    log.push_back(fmt::format("{}: a Slice each along axis {}: {}", n->describe(), *axis, parts));
  }
  std::vector<Node*> gathers;  // collected first: the rewrite adds nodes
  for (const auto& np : g.nodes())
    if ((np->op_type == "Gather" || np->op_type == "GatherND") && !keep.count(np->name))
      gathers.push_back(np.get());
  for (Node* n : gathers) {
    if (auto line = gather_to_slice(g, *n)) {
      log.push_back(std::move(*line));
      dead.push_back(n);
    }
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

StatusOr<RewriteResult> split_to_slices_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                   const std::optional<Cost>& before) {
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return split_to_slices(c, o.no_fuse); }, "--no-split-slices", /*strict=*/false,
      before);
}

}  // namespace stitch::fusion
