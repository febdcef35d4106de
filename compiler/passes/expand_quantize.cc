// expand_quantize: each DequantizeLinear, QuantizeLinear and DynamicQuantizeLinear becomes the
// element-wise arithmetic it is defined by, which the planner fuses with the work around it (a QDQ
// model's quantize-dequantize pairs into the kernels before and after each GEMM):
//   DequantizeLinear   Cast x to float32, Sub the zero point, Mul by the scale, Cast to the output type
//   QuantizeLinear     Div by the scale in the op's precision, Round (half to even), Add the zero
//                      point, Clip to the quantized type's range, Cast to it
//   DynamicQuantizeLinear  ReduceMin and ReduceMax of x (keeping its rank), widened to hold 0, give
//                      the scale and the zero point, then the QuantizeLinear arithmetic
// A scale or zero point per axis becomes [D, 1, ...] to broadcast; a blocked one is repeated along
// its axis (a Gather of constant indices, or computed here when it is a constant). Runs after
// fold_constants (a DequantizeLinear of constant weights is a float constant by then) and leaves
// nodes without static shapes alone; the new nodes are named after the op's.
// First, a QuantizeLinear of a DequantizeLinear's value with the same scale, zero point and type,
// with only ops that move values between them (skip_requantize), reads the integers themselves.
#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <optional>
#include <set>
#include <unordered_set>

#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

Value* f32_scalar(NodeBuilder& b, const std::string& hint, double v) {
  return b.constant(hint, Tensor::from_f64(DType::kF32, {}, {v}));
}

// Scale or zero point `p` (spec `q`) as a value of type `t` that broadcasts to x's shape `x`.
Value* broadcastable(NodeBuilder& b, Value* p, const ops::QuantSpec& q, const Dims& x, DType t,
                     const std::string& hint) {
  const Dims& pd = *p->dims;
  Dims d = pd;
  if (q.grain == ops::QuantSpec::Grain::kTensor) {
    d = {};
  } else if (q.grain == ops::QuantSpec::Grain::kAxis) {
    d.assign(x.size() - static_cast<size_t>(q.axis), 1);
    d[0] = pd[0];
  } else {
    d[static_cast<size_t>(q.axis)] = x[static_cast<size_t>(q.axis)];
  }
  if (p->constant) {
    Tensor v = *p->constant;
    if (q.grain == ops::QuantSpec::Grain::kBlocked) {
      ops::QuantSpec full = q;
      full.bind(d);
      const std::vector<double> src = v.to_f64();
      std::vector<double> rep(static_cast<size_t>(num_elements(d)));
      for (size_t i = 0; i < rep.size(); ++i) rep[i] = src[static_cast<size_t>(full.param_index(int64_t(i)))];
      return b.constant(hint, Tensor::from_f64(t, d, rep));
    }
    return b.constant(hint, Tensor::from_f64(t, d, v.to_f64()));
  }
  Value* v = p;
  if (q.grain == ops::QuantSpec::Grain::kBlocked) {
    std::vector<int64_t> idx(static_cast<size_t>(d[static_cast<size_t>(q.axis)]));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i) / q.block;
    v = b.node("Gather", hint + "_blocks", {v, b.constant(hint + "_block_of", Tensor::vector_i64(idx))},
               v->dtype, d, {{"axis", q.axis}});
  } else if (d != pd) {
    v = b.reshape(v, d, hint + "_broadcast");
  }
  return v->dtype == t ? v : b.cast(v, t, hint + "_cast");
}

// The spec of QuantizeLinear or DequantizeLinear `n`, or nullopt when a shape is not known.
StatusOr<std::optional<ops::QuantSpec>> spec_of(const Node& n, bool quantize) {
  const Value *x = n.input(0), *scale = n.input(1), *zp = n.input(2);
  if (!x || !scale || !n.output(0) || !x->has_static_shape() || !scale->has_static_shape() ||
      (zp && !zp->has_static_shape()))
    return std::optional<ops::QuantSpec>{};
  std::vector<ops::QuantOperand> in{{x->dtype, &*x->dims}, {scale->dtype, &*scale->dims}};
  if (zp) in.push_back({zp->dtype, &*zp->dims});
  ASSIGN_OR_RETURN(ops::QuantSpec q, ops::quant_spec(n, in, quantize));
  return std::optional<ops::QuantSpec>{q};
}

StatusOr<bool> expand_dequantize(Graph& g, Node& n) {
  ASSIGN_OR_RETURN(std::optional<ops::QuantSpec> spec, spec_of(n, false));
  if (!spec) return false;
  const ops::QuantSpec& q = *spec;
  Value *x = n.input(0), *scale = n.input(1), *zp = n.input(2), *y = n.output(0);
  const Dims& xd = *x->dims;
  NodeBuilder b{g, n};
  Value* last = b.cast(x, DType::kF32, "real");
  if (zp)
    last = b.node("Sub", "centred", {last, broadcastable(b, zp, q, xd, DType::kF32, "zero_point")},
                  DType::kF32, xd);
  last =
      b.node("Mul", "scaled", {last, broadcastable(b, scale, q, xd, DType::kF32, "scale")}, DType::kF32, xd);
  if (q.real != DType::kF32) last = b.cast(last, q.real, "rounded");
  b.finish(last, y);
  return true;
}

// The type a quantization rounds, adds its zero point and clamps in after a division in `division`:
// float32, or float64 after a float64 division (its quotient rounded to float32 first could land on
// a half and round the other way).
DType rounding_type(DType division) { return division == DType::kF64 ? DType::kF64 : DType::kF32; }

// round(x / scale) + zero point, clamped to [lo, hi] and cast to `to`; `scale` and `zp` (or null)
// broadcast to x, `scale` of the division's type, `zp` of rounding_type(the division's).
Value* quantize(NodeBuilder& b, Value* x, Value* scale, Value* zp, DType to, double lo, double hi) {
  const Dims& xd = *x->dims;
  const DType work = rounding_type(scale->dtype);
  if (x->dtype != scale->dtype) x = b.cast(x, scale->dtype, "precise");
  Value* last = b.node("Div", "ratio", {x, scale}, scale->dtype, xd);
  if (last->dtype != work) last = b.cast(last, work, "ratio_f32");
  last = b.node("Round", "round", {last}, work, xd);
  if (zp) last = b.node("Add", "shifted", {last, zp}, work, xd);
  auto bound = [&](const char* name, double v) { return b.constant(name, Tensor::from_f64(work, {}, {v})); };
  last = b.node("Clip", "saturate", {last, bound("min", lo), bound("max", hi)}, work, xd);
  return b.cast(last, to, "quantized");
}

StatusOr<bool> expand_quantize_linear(Graph& g, Node& n) {
  ASSIGN_OR_RETURN(std::optional<ops::QuantSpec> spec, spec_of(n, true));
  if (!spec) return false;
  const ops::QuantSpec& q = *spec;
  Value *x = n.input(0), *scale = n.input(1), *zp = n.input(2), *y = n.output(0);
  const Dims& xd = *x->dims;
  NodeBuilder b{g, n};
  Value* s = broadcastable(b, scale, q, xd, q.real, "scale");
  Value* z = zp ? broadcastable(b, zp, q, xd, rounding_type(q.real), "zero_point") : nullptr;
  b.finish(quantize(b, x, s, z, q.q, q.lo, q.hi), y);
  return true;
}

StatusOr<bool> expand_dynamic_quantize(Graph& g, Node& n) {
  Value* x = n.input(0);
  if (!x || !x->has_static_shape() || x->dtype != DType::kF32) return false;
  NodeBuilder b{g, n};
  // The statistics keep x's rank (all ones), so the planner may compute the scale and zero point
  // in the kernel of the reductions; the op's scalar outputs are Reshapes of them.
  const Dims one(x->dims->size(), 1);
  const std::map<std::string, AttrValue> all{{"keepdims", int64_t{1}}};
  Value* zero = f32_scalar(b, "zero", 0.0);
  Value* hi = b.node("Max", "max_or_zero", {b.node("ReduceMax", "max", {x}, DType::kF32, one, all), zero},
                     DType::kF32, one);
  Value* lo = b.node("Min", "min_or_zero", {b.node("ReduceMin", "min", {x}, DType::kF32, one, all), zero},
                     DType::kF32, one);
  Value* range = b.node("Sub", "range", {hi, lo}, DType::kF32, one);
  Value* empty = b.node("Equal", "empty_range", {range, zero}, DType::kBool, one);
  range = b.node("Where", "range_or_one", {empty, f32_scalar(b, "one", 1.0), range}, DType::kF32, one);
  Value* scale = b.node("Div", "scale", {range, f32_scalar(b, "levels", 255.0)}, DType::kF32, one);
  Value* zp = b.node("Neg", "zero_point_real", {b.node("Div", "min_steps", {lo, scale}, DType::kF32, one)},
                     DType::kF32, one);
  zp = b.node("Clip", "zero_point_clip", {zp, zero, f32_scalar(b, "top", 255.0)}, DType::kF32, one);
  zp = b.node("Round", "zero_point", {zp}, DType::kF32, one);
  Value* y = quantize(b, x, scale, zp, DType::kU8, 0, 255);
  Value* scale_out = b.reshape(scale, {}, "scale_scalar");
  Value* zp_u8 = b.reshape(b.cast(zp, DType::kU8, "zero_point_u8"), {}, "zero_point_scalar");
  std::vector<std::pair<Value*, Value*>> outs{
      {y, n.output(0)}, {scale_out, n.output(1)}, {zp_u8, n.output(2)}};
  b.finish_all(outs);
  return true;
}

// ---- a dequantized value quantized again the same way ------------------------------------------
// onnxruntime's quantizer puts a DequantizeLinear -> QuantizeLinear pair of one scale around each op
// that only moves values (Reshape, Transpose, ...): QuantizeLinear(DequantizeLinear(k)) is k there.
// Exact for a per-tensor float32 scale s that is a normal number with 2^16 s finite, and an 8- or
// 16-bit integer type: d = k - zero point is an integer with |d| < 2^16, RN(RN(d s) / s) is within
// |d| 2^-23 < 0.5 of d, so Round gives d back and the Clip keeps k. The QuantizeLinear then reads
// k through copies of the ops between, on k's type: no division, rounding or conversion runs.

bool moves_values(const Node& n) {
  static const std::set<std::string> ops{"Reshape",   "Transpose", "Squeeze",
                                         "Unsqueeze", "Flatten",   "Identity"};
  return n.domain.empty() && ops.count(n.op_type) && n.outputs.size() == 1 && n.output(0) && n.input(0) &&
         n.output(0)->has_static_shape();
}

// The integer type, scale and zero point of a per-tensor QuantizeLinear or DequantizeLinear with
// a float32 scale and constant parameters for which the pair is exact (above); nullopt otherwise.
struct TensorQuant {
  DType q;
  float scale;
  double zero_point;
};
std::optional<TensorQuant> tensor_quant(const Node& n, bool quantize) {
  auto spec = spec_of(n, quantize);
  if (!spec.is_ok() || !*spec) return std::nullopt;  // an error is the expansion's to report
  const ops::QuantSpec& q = **spec;
  const Value *scale = n.input(1), *zp = n.input(2);
  const bool small = q.q == DType::kI8 || q.q == DType::kU8 || q.q == DType::kI16 || q.q == DType::kU16;
  if (q.grain != ops::QuantSpec::Grain::kTensor || q.real != DType::kF32 || !small || !scale->constant ||
      scale->dtype != DType::kF32 || scale->constant->size() != 1 ||
      (zp && (!zp->constant || zp->constant->size() != 1)))
    return std::nullopt;
  const float s = static_cast<float>(scale->constant->to_f64()[0]);
  if (!std::isnormal(s) || std::fabs(s) > FLT_MAX / 65536.0f) return std::nullopt;
  return TensorQuant{q.q, s, zp ? zp->constant->to_f64()[0] : 0.0};
}

StatusOr<bool> skip_requantize(Graph& g) {
  std::vector<Node*> quantizes;
  for (const auto& np : g.nodes())
    if (np->op_type == "QuantizeLinear" && np->domain.empty()) quantizes.push_back(np.get());
  std::unordered_set<const Node*> passed;  // the ops between and the DequantizeLinears, dead now if unread
  for (Node* q : quantizes) {
    std::vector<const Node*> between;  // from the QuantizeLinear back
    Node* p = q->input(0) ? q->input(0)->producer : nullptr;
    for (; p && moves_values(*p); p = p->input(0)->producer) between.push_back(p);
    if (!p || p->op_type != "DequantizeLinear" || !p->domain.empty() || !q->output(0)) continue;
    const std::optional<TensorQuant> dq = tensor_quant(*p, false), requant = tensor_quant(*q, true);
    Value* k = p->input(0);
    if (!dq || !requant || dq->q != requant->q || dq->scale != requant->scale ||
        dq->zero_point != requant->zero_point || k->dtype != dq->q || q->output(0)->dtype != dq->q)
      continue;
    // The ops between, again, on k: each a copy with k's type, named after the one it copies.
    Value* last = k;
    for (auto it = between.rbegin(); it != between.rend(); ++it) {
      auto copy = std::make_unique<Node>(**it);
      copy->name = g.unique_name((*it)->name + "_quantized");
      copy->inputs[0] = last;
      Value* y = g.add_value(g.unique_name(copy->name + "_output"));
      y->dtype = k->dtype;
      y->dims = (*it)->output(0)->dims;
      copy->outputs = {y};
      last = g.add_node(std::move(copy))->output(0);
    }
    NodeBuilder b{g, *q};
    if (last == k) last = b.node("Identity", "requantized", {k}, k->dtype, *k->dims);
    b.finish(last, q->output(0));
    passed.insert(between.begin(), between.end());
    passed.insert(p);
  }
  if (passed.empty()) return false;
  g.remove_dead_nodes(&passed);
  g.remove_unused_values();
  RETURN_IF_ERROR(g.topo_sort());
  return true;
}

}  // namespace

StatusOr<bool> expand_quantize(Graph& g, PassContext&) {
  ASSIGN_OR_RETURN(bool skipped, skip_requantize(g));
  ASSIGN_OR_RETURN(bool dq, expand_each(g, "DequantizeLinear", expand_dequantize));
  ASSIGN_OR_RETURN(bool q, expand_each(g, "QuantizeLinear", expand_quantize_linear));
  ASSIGN_OR_RETURN(bool dyn, expand_each(g, "DynamicQuantizeLinear", expand_dynamic_quantize));
  return skipped || dq || q || dyn;
}

}  // namespace stitch
