// The op table: every supported ONNX op as one row of data.
//
// A row gives the ONNX name, the opset range it is supported for, its fusion
// category, its shape/dtype rule and its reference implementation. Nothing
// else in the compiler spells out op names to decide legality or cost: the
// planner reads the category, the passes read the rules.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace stitch {

// Opsets of the default domain the importer accepts.
inline constexpr int kMinOpset = 11;
inline constexpr int kMaxOpset = 28;

enum class OpCategory {
  kElementwise,  // one output element from the same-index input elements
  kBroadcast,    // elementwise with numpy broadcasting between inputs
  kReduction,    // reduces one or more axes (row or column)
  kLayout,       // moves data: reshape, transpose, slice, concat, gather...
  kLibrary,      // best served by a library call: MatMul, Gemm, Conv, pooling
  kShapeOnly,    // computes shapes or constants; folded away after binding
  kOpaque,       // anything else; never fused
};
std::string_view category_name(OpCategory c);

// What a shape rule sees: the node, its inputs' types and constant values.
class InferContext {
 public:
  explicit InferContext(Node& node) : node_(node) {}
  Node& node() { return node_; }
  const Node& node() const { return node_; }
  size_t num_inputs() const { return node_.inputs.size(); }
  bool has_input(size_t i) const { return node_.input(i) != nullptr; }
  DType dtype(size_t i) const { return node_.inputs[i]->dtype; }
  const Dims& dims(size_t i) const { return *node_.inputs[i]->dims; }
  int64_t rank(size_t i) const { return static_cast<int64_t>(dims(i).size()); }
  // The input's compile-time value, or null when it is only known at run time.
  const Tensor* constant(size_t i) const {
    Value* v = node_.input(i);
    return v && v->constant ? &*v->constant : nullptr;
  }
  // Sets output i (ignored when the output is omitted).
  void set_output(size_t i, DType t, Dims d);
  // Also records output i's value when the rule can compute it from shapes
  // alone (Shape, Size): data propagation, so shape chains fold.
  void set_output_constant(size_t i, Tensor t);
  // A user error about this node: "node 'n' (Op): msg".
  Status error(const std::string& msg) const;

 private:
  Node& node_;
};

using ShapeFn = Status (*)(InferContext& ctx);
// Computes all outputs from all inputs (null for omitted optional inputs).
// Outputs arrive empty, one per node output (omitted ones may be left empty).
using EvalFn = Status (*)(const Node& node, std::span<const Tensor* const> inputs,
                          std::vector<Tensor>& outputs);
// True when the node (with inferred types) copies input 0 to output 0 unchanged.
using NoopFn = bool (*)(const Node& node);

struct OpDef {
  std::string name;
  int since = kMinOpset;  // first opset whose semantics the row implements
  int until = kMaxOpset;  // last opset supported
  OpCategory category = OpCategory::kOpaque;
  ShapeFn infer = nullptr;
  EvalFn eval = nullptr;
  NoopFn is_noop = nullptr;  // null: never a no-op
  // An op of the compiler's own that rewrites insert (ops/index_check.h's kIndexCheck); no model may
  // hold one: the importer does not know it (find_model_op), and `stitchc ops` does not list it.
  bool internal = false;
};

// Finds the row for an op of the default domain; null if unsupported at that
// opset or at all.
const OpDef* find_op(std::string_view domain, std::string_view op_type, int opset);
// Every row, sorted by name.
std::span<const OpDef> all_ops();

}  // namespace stitch
