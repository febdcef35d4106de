// expand_integer_matmuls: a MatMul or Gemm of integers (ONNX allows int32, int64, uint32 and
// uint64; an Einsum of any integer type becomes a MatMul in expand_einsum) becomes the products
// and the sum it is defined by, since no GEMM of the back end takes integers (cuBLAS's integer
// GEMM is int8's only, and the generated loops and tiles accumulate in a float type):
//   A [..., M, K] -> Reshape -> [..., M, K, 1]
//   B [..., K, N] -> Reshape -> [..., 1, K, N]
//   Mul -> [..., M, K, N], ReduceSum over K -> [..., M, N]
// The planner stitches the Mul into the column reduction's kernel, so the products are not
// stored. A 1-D operand gets the axis MatMul gives it, and loses it after the sum; a Gemm's
// operands are transposed first where it says, and C added after. The products and the sum wrap
// in the output's type as numpy's integer matmul does: a Mul of the type wraps, and the integer
// ReduceSum sums in 64 bits and keeps the low bits, which is the same modulo 2^bits. Unfused (the
// reference interpreter, `--fusion none`) the products are one tensor of M K N elements per
// batch, so more than ops::kMaxIntegerProducts (op_params.h) of them are refused. Runs after every
// pass that writes MatMuls (expand_einsum, expand_attention...); nodes without static shapes are
// left alone.
#include <fmt/format.h>

#include "ops/op_params.h"
#include "ops/op_util.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

// Refuses products past ops::kMaxIntegerProducts: `outputs` outputs of `k` products each.
Status check_products(const Node& n, int64_t outputs, int64_t k) {
  const int64_t products = outputs * k;
  if (products <= ops::kMaxIntegerProducts) return Status::ok();
  return Status::user(fmt::format(
      "{}: an integer {} runs as the products of its operands and their sum over K, and here those are "
      "{} products ({} outputs x K = {}), more than the {} stitch computes for one node; split it into "
      "smaller ones, or Cast its operands to double where every sum stays below 2^53 in magnitude "
      "(exact there, and a GEMM of the library)",
      n.describe(), n.op_type, products, outputs, k, ops::kMaxIntegerProducts));
}

// The sum over K of a [..., M, K] times b [..., K, N] (each of rank 2 or more) in type `t`: [..., M, N].
Value* products_sum(NodeBuilder& bld, Value* a, Value* b, DType t) {
  auto unsqueeze = [&](Value* x, int64_t axis, const std::string& name) {
    Dims d = *x->dims;
    d.insert(d.end() + axis + 1, 1);
    return bld.reshape(x, d, name);
  };
  Value* a3 = unsqueeze(a, -1, "a_by_k");  // [..., M, K, 1]
  Value* b3 = unsqueeze(b, -3, "b_by_k");  // [..., 1, K, N]
  // The products' shape: the batch axes broadcast (MatMul's shape inference has checked them), then
  // M, K, N.
  const Dims pd = *ops::broadcast_dims(*a3->dims, *b3->dims);
  Value* p = bld.node("Mul", "products", {a3, b3}, t, pd);
  Dims sd = pd;
  sd.erase(sd.end() - 2);  // [..., M, N]
  // ReduceSum takes its axes as an input from opset 13, as an attribute before.
  std::map<std::string, AttrValue> attrs{{"keepdims", int64_t{0}}};
  std::vector<Value*> in{p};
  if (std::max(bld.g.opset, bld.replaced.opset) >= 13)
    in.push_back(bld.constant("sum_axes", Tensor::vector_i64({-2})));
  else
    attrs["axes"] = std::vector<int64_t>{-2};
  return bld.node("ReduceSum", "sum", in, t, sd, std::move(attrs));
}

bool integer_node(const Node& n) {
  const Value *a = n.input(0), *b = n.input(1), *y = n.output(0);
  return a && b && y && is_int(y->dtype) && a->has_static_shape() && b->has_static_shape() &&
         y->has_static_shape() && (n.inputs.size() < 3 || !n.input(2) || n.input(2)->has_static_shape());
}

StatusOr<bool> expand_integer_matmul(Graph& g, Node& n) {
  if (!integer_node(n)) return false;
  Value *a = n.input(0), *b = n.input(1), *y = n.output(0);
  const Dims &ad = *a->dims, &bd = *b->dims;
  if (ad.empty() || bd.empty())
    return Status::user(fmt::format("{}: a MatMul operand must have at least one axis", n.describe()));
  RETURN_IF_ERROR(check_products(n, num_elements(*y->dims), ad.back()));
  NodeBuilder bld{g, n};
  // A 1-D A is a row [1, K], a 1-D B a column [K, 1] (MatMul's rule; the axis goes again below).
  Value* a2 = ad.size() == 1 ? bld.reshape(a, {1, ad[0]}, "a_row") : a;
  Value* b2 = bd.size() == 1 ? bld.reshape(b, {bd[0], 1}, "b_column") : b;
  Value* s = products_sum(bld, a2, b2, y->dtype);
  if (*s->dims != *y->dims) s = bld.reshape(s, *y->dims, "result");  // the 1-D operands' axes dropped
  bld.finish(s, y);
  return true;
}

// Gemm of integers (alpha and beta 1, ops/nn.cc): A and B transposed as it says, the products'
// sum, plus C.
StatusOr<bool> expand_integer_gemm_op(Graph& g, Node& n) {
  if (!integer_node(n)) return false;
  Value *a = n.input(0), *b = n.input(1), *y = n.output(0);
  const bool ta = n.attr_int("transA", 0), tb = n.attr_int("transB", 0);
  RETURN_IF_ERROR(check_products(n, num_elements(*y->dims), (*a->dims)[ta ? 0 : 1]));
  NodeBuilder bld{g, n};
  auto transposed = [&](Value* x, const std::string& name) {
    const Dims& d = *x->dims;
    return bld.node("Transpose", name, {x}, x->dtype, {d[1], d[0]}, {{"perm", std::vector<int64_t>{1, 0}}});
  };
  Value* s = products_sum(bld, ta ? transposed(a, "a_t") : a, tb ? transposed(b, "b_t") : b, y->dtype);
  if (n.inputs.size() > 2 && n.input(2)) s = bld.node("Add", "plus_c", {s, n.input(2)}, y->dtype, *y->dims);
  bld.finish(s, y);
  return true;
}

}  // namespace

StatusOr<bool> expand_integer_matmuls(Graph& g, PassContext&) {
  ASSIGN_OR_RETURN(bool matmuls, expand_each(g, "MatMul", expand_integer_matmul));
  ASSIGN_OR_RETURN(bool gemms, expand_each(g, "Gemm", expand_integer_gemm_op));
  return matmuls || gemms;
}

}  // namespace stitch
