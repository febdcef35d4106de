// relabel_transposes: a Transpose that moves only size-1 axes becomes a Reshape.
//
// When the axes of size other than 1 keep their order, a Transpose writes every element where it
// was: [b, 1, h, d] -> [b, h, 1, d] (a decoding step's heads put first, one token) or
// [b, s, 1, d] -> [b, 1, s, d] (one key/value head) only relabels the axes. As a Reshape to its
// output shape it is a view: no kernel, and the GEMM folds and index maps of the later stages see
// through it. Assumes static shapes (run after infer_shapes; nodes with a dynamic or empty
// output are left alone). The node keeps its name and output value, so --no-fuse and the plan
// still name it.
#include "ir/op_table.h"
#include "ops/op_params.h"
#include "passes/pass.h"

namespace stitch {

namespace {

// Whether `n` is a Transpose whose axes of size other than 1 keep their relative order.
bool moves_only_unit_axes(const Node& n) {
  if (n.op_type != "Transpose" || !n.domain.empty() || n.inputs.size() != 1 || !n.input(0) || !n.output(0))
    return false;
  const Value* x = n.input(0);
  const Value* y = n.output(0);
  if (!x->has_static_shape() || !y->has_static_shape() || num_elements(*y->dims) == 0) return false;
  const Dims& d = *x->dims;
  auto perm = ops::transpose_perm(n, static_cast<int64_t>(d.size()));
  if (!perm.is_ok() || perm->size() != d.size()) return false;
  int64_t last = -1;
  for (int64_t p : *perm) {
    if (d[static_cast<size_t>(p)] == 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

}  // namespace

StatusOr<bool> relabel_transposes(Graph& g, PassContext&) {
  bool changed = false;
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    if (!moves_only_unit_axes(n)) continue;
    const OpDef* reshape = find_op("", "Reshape", n.opset);
    if (reshape == nullptr) continue;
    const Dims& out = *n.output(0)->dims;
    Value* shape = g.add_value(g.unique_name(n.name + "/shape"));
    shape->dtype = DType::kI64;
    shape->dims = Dims{static_cast<int64_t>(out.size())};
    shape->constant = Tensor::vector_i64(std::vector<int64_t>(out.begin(), out.end()));
    n.op_type = "Reshape";
    n.def = reshape;
    n.attrs.clear();
    n.inputs.push_back(shape);
    changed = true;
  }
  return changed;
}

}  // namespace stitch
