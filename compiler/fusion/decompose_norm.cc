// decompose_layer_norm (see decompose_norm.h): a LayerNormalization as the nodes its definition
// spells.
#include "fusion/decompose_norm.h"

#include "fusion/graph_edit.h"

namespace stitch::fusion {
void decompose_layer_norm(Graph& g, Node& ln) {
  Value* x = ln.input(0);
  Value* out = ln.output(0);
  const DType t = x->dtype;
  const Dims& d = *x->dims;
  const std::string h = ln.name + "/decomposed";
  Value* mean = add_row_reduce(g, "ReduceMean", h + "_mean", x);
  Value* dev = add_op(g, "Sub", h + "_centered", {x, mean}, t, d);
  Value* var =
      add_row_reduce(g, "ReduceMean", h + "_variance", add_op(g, "Mul", h + "_squared", {dev, dev}, t, d));
  Value* eps = add_constant(g, h + "_epsilon", t, {}, {ln.attr_float("epsilon", 1e-5f)});
  Value* sd = add_op(g, "Sqrt", h + "_std",
                     {add_op(g, "Add", h + "_variance_eps", {var, eps}, t, *var->dims)}, t, *var->dims);
  Value* norm = add_op(g, "Div", h + "_normalized", {dev, sd}, t, d);
  ln.outputs[0] = nullptr;
  Node* last = nullptr;
  if (ln.input(2)) {
    Value* scaled = add_op(g, "Mul", h + "_scaled", {norm, ln.input(1)}, t, d);
    last = add_op_node(g, "Add", g.unique_name(h + "_biased"));
    last->inputs = {scaled, ln.input(2)};
  } else {
    last = add_op_node(g, "Mul", g.unique_name(h + "_scaled"));
    last->inputs = {norm, ln.input(1)};
  }
  last->outputs = {out};
  out->producer = last;
}

}  // namespace stitch::fusion
