// expand_bool_reductions: a ReduceMax or ReduceMin of bool (any and all; ONNX allows bool from
// opset 20) becomes the same reduction of the values cast to uint8, cast back to bool. The
// kernels reduce integers; bool values are 0 and 1 in either type, so the result is the same.
// The new nodes are named after the op's.
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> expand_bool_reduction_node(Graph& g, Node& n) {
  Value *x = n.input(0), *y = n.output(0);
  if (!x || !y || x->dtype != DType::kBool || !x->dims || !y->dims) return false;
  NodeBuilder b{g, n};
  std::vector<Value*> in = n.inputs;
  in[0] = b.cast(x, DType::kU8, "as_uint8");
  Value* reduced = b.node(n.op_type, "of_uint8", in, DType::kU8, *y->dims, n.attrs);
  b.finish(b.cast(reduced, DType::kBool, "as_bool"), y);
  return true;
}

}  // namespace

StatusOr<bool> expand_bool_reductions(Graph& g, PassContext&) {
  bool changed = false;
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    ASSIGN_OR_RETURN(const bool c, expand_each(g, op, expand_bool_reduction_node));
    changed |= c;
  }
  return changed;
}

}  // namespace stitch
