// infer_shapes: gives every value an element type and a static shape.
//
// Walks nodes in topological order and applies each op's shape rule. A node of an opset-6..10
// model is first rewritten into its opset-11 form (ir/legacy_forms.h), now that its inputs are typed. It also
// propagates constants: a node whose inputs are all constants is evaluated
// with the reference interpreter (when its outputs are not huge), and rules
// that can compute values from shapes alone (Shape, Size) record them. That
// is what lets PyTorch's Shape -> Gather -> Unsqueeze -> Concat -> Reshape
// chains resolve once the input shapes are bound; fold_constants then removes
// those nodes. An output with no elements is a constant too (an empty tensor has no values to
// compute). An output whose type the model declares (a graph output, value_info) must have that
// type. Assumes bound input shapes; guarantees static types everywhere.
#include <fmt/format.h>

#include "ir/legacy_forms.h"
#include "ir/op_table.h"
#include "passes/pass.h"
#include "reference/interpreter.h"
#include "support/check.h"

namespace stitch {

// Outputs larger than this are left for run time rather than stored as constants.
inline constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

namespace {
// Rejects shapes whose element count overflows or exceeds 2^40 (4 TiB of bytes).
bool fits_in_memory(const Dims& d) {
  constexpr int64_t kMax = int64_t{1} << 40;
  int64_t n = 1;
  for (int64_t x : d) {
    if (x > 0 && n > kMax / x) return false;
    n *= x;
  }
  return true;
}
}  // namespace

StatusOr<bool> infer_shapes(Graph& g, PassContext&) {
  for (const Value* in : g.inputs)
    STITCH_CHECK(in->has_static_shape(), "input '{}' is unbound; bind_shapes runs first", in->name);
  bool changed = false;
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    STITCH_CHECK(n.def, "{} has no op row", n.describe());
    for (const Value* in : n.inputs)
      STITCH_CHECK(!in || (in->dtype != DType::kUndefined && in->has_static_shape()),
                   "{} reads '{}' before its type is known", n.describe(), in->name);
    std::vector<std::pair<DType, std::optional<Dims>>> before;
    for (const Value* o : n.outputs) before.emplace_back(o ? o->dtype : DType::kUndefined, o ? o->dims : std::nullopt);
    RETURN_IF_ERROR(upgrade_legacy_node(g, n));  // a node of an opset-6..10 model, once its inputs are typed
    InferContext ctx(n);
    RETURN_IF_ERROR(n.def->infer(ctx));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value* o = n.outputs[i];
      if (!o) continue;
      if (o->dims && std::any_of(o->dims->begin(), o->dims->end(), [](int64_t d) { return d < 0; }))
        return Status::user(
            fmt::format("{}: output '{}' would have shape {}, with a negative axis; check the "
                        "model's shape constants and the --shape bindings",
                        n.describe(), o->name, dims_to_string(*o->dims)));
      if (o->dtype == DType::kUndefined || !o->has_static_shape())
        return Status::internal(fmt::format("{}: the shape rule left output {} untyped", n.describe(), i));
      if (o->declared != DType::kUndefined && o->declared != o->dtype)
        return Status::user(fmt::format(
            "{}: output '{}' is {} by the op's type rule, but the model declares it {}; correct the model's "
            "declaration, or Cast the op's inputs or output to the types the model means",
            n.describe(), o->name, dtype_name(o->dtype), dtype_name(o->declared)));
      if (!fits_in_memory(*o->dims))
        return Status::user(fmt::format("{}: output '{}' would have shape {}, too large to exist; check the "
                                        "--shape bindings and the model's shape constants",
                                        n.describe(), o->name, dims_to_string(*o->dims)));
      changed |= before[i].first != o->dtype || before[i].second != o->dims;
    }
    for (Value* o : n.outputs)
      if (o) o->declared = DType::kUndefined;  // checked once: later passes may retype a value
    // Outputs with no elements are known without computing them: constants, so that no kernel or
    // library call is planned over an empty tensor.
    if (std::all_of(n.outputs.begin(), n.outputs.end(),
                    [](const Value* o) { return !o || num_elements(*o->dims) == 0; })) {
      for (Value* o : n.outputs)
        if (o && !o->constant) {
          o->constant = Tensor(o->dtype, *o->dims);
          changed = true;
        }
      continue;
    }
    bool all_const = std::all_of(n.inputs.begin(), n.inputs.end(), [](const Value* v) { return !v || v->constant; });
    bool outputs_known = std::all_of(n.outputs.begin(), n.outputs.end(), [](const Value* v) { return !v || v->constant; });
    if (!all_const || outputs_known) continue;
    int64_t out_elems = 0;
    for (const Value* o : n.outputs)
      if (o) out_elems += num_elements(*o->dims);
    if (out_elems > kMaxFoldElements) continue;
    std::vector<const Tensor*> ins;
    for (const Value* v : n.inputs) ins.push_back(v ? &*v->constant : nullptr);
    auto outs = eval_node(n, ins);
    if (!outs.is_ok()) return outs.status();
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i]) n.outputs[i]->constant = std::move((*outs)[i]);
    changed = true;
  }
  return changed;
}

}  // namespace stitch
