#include "ir/op_table.h"

#include <algorithm>

#include "ops/op_util.h"

namespace stitch {

std::string_view category_name(OpCategory c) {
  switch (c) {
    case OpCategory::kElementwise: return "elementwise";
    case OpCategory::kBroadcast: return "broadcast";
    case OpCategory::kReduction: return "reduction";
    case OpCategory::kLayout: return "layout";
    case OpCategory::kLibrary: return "library";
    case OpCategory::kShapeOnly: return "shape-only";
    case OpCategory::kOpaque: return "opaque";
  }
  return "?";
}

void InferContext::set_output(size_t i, DType t, Dims d) {
  Value* v = node_.output(i);
  if (!v) return;
  v->dtype = t;
  v->dims = std::move(d);
}

void InferContext::set_output_constant(size_t i, Tensor t) {
  Value* v = node_.output(i);
  if (!v) return;
  v->dtype = t.dtype();
  v->dims = t.dims();
  v->constant = std::move(t);
}

Status InferContext::error(const std::string& msg) const { return ops::node_error(node_, msg); }

namespace {
std::vector<OpDef> build_table() {
  std::vector<OpDef> t;
  ops::register_unary(t);
  ops::register_elementwise(t);
  ops::register_casts(t);
  ops::register_reduce(t);
  ops::register_normalization(t);
  ops::register_layout(t);
  ops::register_gather_scatter(t);
  ops::register_resize(t);
  ops::register_einsum(t);
  ops::register_attention(t);
  ops::register_signal(t);
  ops::register_recurrent(t);
  ops::register_quantize(t);
  ops::register_integer_gemm(t);
  ops::register_grid_sample(t);
  ops::register_loss(t);
  ops::register_blocks(t);
  ops::register_row_substitution(t);
  ops::register_nn(t);
  ops::register_pool(t);
  ops::register_shape(t);
  std::sort(t.begin(), t.end(), [](const OpDef& a, const OpDef& b) { return a.name < b.name; });
  for (size_t i = 1; i < t.size(); ++i)
    STITCH_CHECK(t[i - 1].name != t[i].name || t[i - 1].until < t[i].since,
                 "overlapping op rows for {}", t[i].name);
  for (const auto& d : t) STITCH_CHECK(d.infer && d.eval, "op row {} lacks a rule", d.name);
  return t;
}
const std::vector<OpDef>& table() {
  static const std::vector<OpDef> t = build_table();
  return t;
}
}  // namespace

const OpDef* find_op(std::string_view domain, std::string_view op_type, int opset) {
  if (!domain.empty() && domain != "ai.onnx") return nullptr;
  for (const auto& d : table())
    if (d.name == op_type && opset >= d.since && opset <= d.until) return &d;
  return nullptr;
}

std::span<const OpDef> all_ops() { return table(); }

}  // namespace stitch
