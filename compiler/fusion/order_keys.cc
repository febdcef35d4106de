#include "fusion/order_keys.h"

#include "fusion/graph_edit.h"

namespace stitch::fusion {

namespace {

Value* int_scalar(Graph& g, const std::string& hint, DType t, int64_t v) {
  Value* c = add_typed_value(g, hint, t, {});
  c->constant = Tensor::from_i64(t, {}, {v});
  return c;
}

// int32 bits to their order and back (its own inverse): the magnitude bits flipped when negative.
Value* ordered(Graph& g, const OrderKeys& k, const std::string& hint, Value* bits) {
  const Dims& d = *bits->dims;
  Value* negative = add_op(g, "Less", hint + "_negative", {bits, k.zero32}, DType::kBool, d);
  Value* flipped = add_op_since(g, "BitwiseXor", 18, hint + "_flipped", {bits, k.magnitude}, DType::kI32, d);
  return add_op(g, "Where", hint, {negative, flipped, bits}, DType::kI32, d);
}

Value* bit_cast(Graph& g, const std::string& hint, Value* x, DType to) {
  Value* v = add_op_since(g, "BitCast", 26, hint, {x}, to, *x->dims);
  v->producer->attrs["to"] = static_cast<int64_t>(dtype_to_onnx(to));
  return v;
}

}  // namespace

Value* add_op_since(Graph& g, const char* op, int since, const std::string& hint, std::vector<Value*> inputs,
                    DType t, const Dims& d) {
  Value* v = add_op(g, op, hint, std::move(inputs), t, d);
  v->producer->opset = std::max(g.opset, since);
  v->producer->def = find_op("", op, v->producer->opset);
  return v;
}

OrderKeys add_order_keys(Graph& g, const std::string& hint, Value* y, bool largest) {
  const Dims& d = *y->dims;
  const int64_t len = d.back();
  OrderKeys k;
  k.largest = largest;
  k.mask = int_scalar(g, hint + "_mask", DType::kI64, kMaxKeyedRow - 1);
  k.unit = int_scalar(g, hint + "_unit", DType::kI64, kMaxKeyedRow);
  k.minus_one = int_scalar(g, hint + "_minus_one", DType::kI64, -1);
  k.zero32 = int_scalar(g, hint + "_i0", DType::kI32, 0);
  k.magnitude = int_scalar(g, hint + "_magnitude", DType::kI32, 0x7fffffff);
  Value* zero = add_constant(g, hint + "_f0", DType::kF32, {}, {0.0});
  Value* is_zero = add_op(g, "Equal", hint + "_is_zero", {y, zero}, DType::kBool, d);
  Value* plus_zero = add_op(g, "Where", hint + "_plus_zero", {is_zero, zero, y}, DType::kF32, d);
  Value* order = add_cast(g, hint + "_order64",
                          ordered(g, k, hint + "_order", bit_cast(g, hint + "_bits", plus_zero, DType::kI32)),
                          DType::kI64);
  if (!largest) order = add_op(g, "Sub", hint + "_reversed", {k.minus_one, order}, DType::kI64, d);
  std::vector<double> low(static_cast<size_t>(len));
  for (int64_t j = 0; j < len; ++j) low[static_cast<size_t>(j)] = static_cast<double>(kMaxKeyedRow - 1 - j);
  k.keys = add_op(g, "Add", hint + "_keys",
                  {add_op(g, "Mul", hint + "_high", {order, k.unit}, DType::kI64, d),
                   add_constant(g, hint + "_low", DType::kI64, {len}, low)},
                  DType::kI64, d);
  return k;
}

Value* key_low_bits(Graph& g, const OrderKeys& k, const std::string& hint, Value* best) {
  return add_op_since(g, "BitwiseAnd", 18, hint, {best, k.mask}, DType::kI64, *best->dims);
}

Value* key_position(Graph& g, const OrderKeys& k, const std::string& hint, Value* low, Value* out) {
  if (out) return add_op_writing(g, "Sub", hint, {k.mask, low}, out)->output(0);
  return add_op(g, "Sub", hint, {k.mask, low}, DType::kI64, *low->dims);
}

Value* key_value(Graph& g, const OrderKeys& k, const std::string& hint, Value* best, Value* low) {
  const Dims& d = *best->dims;
  Value* high =
      add_op(g, "Div", hint + "_high",
             {add_op(g, "Sub", hint + "_high_bits", {best, low}, DType::kI64, d), k.unit}, DType::kI64, d);
  if (!k.largest) high = add_op(g, "Sub", hint + "_unreversed", {k.minus_one, high}, DType::kI64, d);
  return bit_cast(g, hint + "_f32",
                  ordered(g, k, hint + "_bits", add_cast(g, hint + "_order32", high, DType::kI32)),
                  DType::kF32);
}

}  // namespace stitch::fusion
