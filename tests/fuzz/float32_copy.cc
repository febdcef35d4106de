#include "float32_copy.h"

#include <fmt/format.h>

#include "importer/tensor_proto.h"

namespace stitch::fuzz {
namespace {

bool is_half(int64_t t) { return t == onnx::TensorProto::FLOAT16 || t == onnx::TensorProto::BFLOAT16; }

// Whether attribute `a` of `n` names an element type the op makes (Cast's "to", EyeLike's and the
// random ops' "dtype").
bool names_type(const onnx::NodeProto& n, const onnx::AttributeProto& a) {
  if (a.type() != onnx::AttributeProto::INT) return false;
  if (a.name() == "to") return n.op_type() == "Cast";
  return a.name() == "dtype" && (n.op_type() == "EyeLike" || n.op_type().rfind("Random", 0) == 0);
}

// Widens tensor `t` in place when it is half; counts it in `changed`.
Status widen(onnx::TensorProto& t, int& changed) {
  if (!is_half(t.data_type())) return Status::ok();
  ASSIGN_OR_RETURN(Tensor v, tensor_from_proto(t, "", fmt::format("tensor '{}'", t.name())));
  t = tensor_to_proto(widened(v), t.name());
  ++changed;
  return Status::ok();
}

// Makes every half tensor, type and type-naming attribute of `g` and its subgraphs float32,
// counting them in `changed`.
Status widen(onnx::GraphProto& g, int& changed) {
  auto types = [&](auto* values) {
    for (auto& v : *values)
      if (v.type().has_tensor_type() && is_half(v.type().tensor_type().elem_type())) {
        v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
        ++changed;
      }
  };
  types(g.mutable_input());
  types(g.mutable_output());
  types(g.mutable_value_info());
  for (auto& t : *g.mutable_initializer()) RETURN_IF_ERROR(widen(t, changed));
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t()) RETURN_IF_ERROR(widen(*a.mutable_t(), changed));
      for (auto& t : *a.mutable_tensors()) RETURN_IF_ERROR(widen(t, changed));
      if (a.has_g()) RETURN_IF_ERROR(widen(*a.mutable_g(), changed));
      for (auto& s : *a.mutable_graphs()) RETURN_IF_ERROR(widen(s, changed));
      if (names_type(n, a) && is_half(a.i())) {
        a.set_i(onnx::TensorProto::FLOAT);
        ++changed;
      }
    }
  return Status::ok();
}

}  // namespace

StatusOr<std::optional<onnx::ModelProto>> float32_copy(const onnx::ModelProto& m) {
  onnx::ModelProto copy = m;
  int changed = 0;
  RETURN_IF_ERROR(widen(*copy.mutable_graph(), changed));
  if (changed == 0) return std::optional<onnx::ModelProto>{};
  return std::optional<onnx::ModelProto>{std::move(copy)};
}

Tensor widened(const Tensor& t) {
  if (t.dtype() != DType::kF16 && t.dtype() != DType::kBF16) return t;
  return Tensor::from_f64(DType::kF32, t.dims(), t.to_f64());
}

}  // namespace stitch::fuzz
