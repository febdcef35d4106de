// onnxruntime's MoE (com.microsoft), a mixture of experts as onnxruntime-genai's model builder
// writes gpt-oss's (and Mixtral's, Phi-3.5-MoE's) feed-forward layers, written as ONNX ops over
// every expert at once. Read as onnxruntime's CPU kernel computes it (1.32, measured):
//  - Routing: softmax of router_probs [T, E] (logits, one row per token of the input [T, H] or
//    [B, S, H]) over the experts, in float32; the k largest (TopK) with their experts; divided by
//    their sum with normalize_routing_weights=1. A token's weight for expert e is its top-k value
//    where e is among its k, else 0: a [T, E] matrix.
//  - Each expert: fc1 (weights [E, F1, H], bias [E, F1]), the activation, fc2 (weights [E, H, F],
//    bias [E, H]); the token's output sums each chosen expert's (with its bias) times its weight.
//  - Activations: relu, gelu (the tanh approximation, as that kernel computes it), silu,
//    identity, and swiglu: g and l from fc1's row, interleaved [g0, l0, g1, l1, ..]
//    (swiglu_fusion=1), concatenated [g | l] (2), or g from fc1 and l from fc3 (weights [E, F, H],
//    bias [E, F]; 0); G = min(g, limit), L = clamp(l, -limit, limit) when swiglu_limit is given;
//    G * sigmoid(alpha G) * (L + beta), alpha and beta activation_alpha and activation_beta.
// Written for the planner: no TopK (a kernel of its own) and two plain GEMMs over all E experts.
//  - The k experts are picked in k rounds of row reductions over the token's probabilities (the
//    largest left, the lowest index holding it, as TopK breaks ties), which join the softmax's row
//    kernel. An expert's weight is its probability where picked, else 0.
//  - fc1 of all experts is one MatMul, x [.., H] by the weights as [H, E * F1], plus the biases as
//    [E * F1]; the activation runs on it viewed [.., E, F1] and is multiplied by the token's weight
//    for the expert, [.., E, 1], in the routing's kernel (the activations an axis of their own beside
//    the routing's rows of E: RowPiece::kOwn); fc2 of all experts, weighted and
//    summed, is then one MatMul of that [.., E * F] by fc2's weights as [E * F, H]; with fc2's biases
//    each expert's part carries its weight as one more column and the weights its bias as one more
//    row, so the same GEMM adds them. x keeps its shape ([T, H] or [B, S, H]) throughout.
// That computes E / k times the products of the chosen experts' alone, but reads each expert's
// weights once, however many tokens chose it; a step that chooses few experts (decoding) reads the
// weights of those it did not choose too. A token whose unchosen expert gives inf or NaN gets NaN
// here (times 0), where onnxruntime skips that expert.
//
// Refused, naming the node: use_sparse_mixer=1 (Phi-3.5-MoE's routing), geglu and relu2 and
// swiglu_limit_after_activation=1 (CUDA-only in onnxruntime: no reference to check them against),
// fc3 other than swiglu_fusion=0's l, swiglu_fusion=0 without fc3.
#include <fmt/format.h>

#include <limits>

#include "importer/contrib_writer.h"

namespace stitch::contrib {
namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// x[..., start::step] along the last axis.
Value* every(Writer& w, Value* x, int64_t start, int64_t step, const std::string& name) {
  return w.op("Slice", name,
              {x, w.ints(name + "_start", {start}), w.ints(name + "_end", {kEnd}),
               w.ints(name + "_axis", {-1}), w.ints(name + "_step", {step})});
}

// fc weights [E, N, H] as [H, E * N] (every expert's columns side by side) and its bias [E, N] as
// [E * N]; x [.., H] times them: [.., E * N].
Value* all_experts(Writer& w, Value* x, Value* weights, Value* bias, const std::string& name) {
  Value* columns = w.op(
      "Flatten", name + "_weights",
      {w.op("Transpose", name + "_weights_by_input", {weights}, {{"perm", std::vector<int64_t>{2, 0, 1}}})},
      {{"axis", int64_t{1}}});
  Value* y = w.op("MatMul", name, {x, columns});
  if (!bias) return y;
  return w.op("Add", name + "_bias_add",
              {y, w.op("Reshape", name + "_bias", {bias, w.ints(name + "_flat", {-1})})});
}

}  // namespace

Status moe(Writer& w, const Node& c) {
  Value *x = c.input(0), *router = c.input(1), *fc1 = c.input(2), *fc1_bias = c.input(3), *fc2 = c.input(4),
        *fc2_bias = c.input(5), *fc3 = c.input(6), *fc3_bias = c.input(7);
  if (!x || !router || !fc1 || !fc2)
    return refuse(
        c, "needs input, router_probs, fc1_experts_weights and fc2_experts_weights (inputs 0, 1, 2, 4)");
  if (c.attr_int("use_sparse_mixer", 0) != 0)
    return refuse(c, "use_sparse_mixer=1 (Phi-3.5-MoE's routing) is not read");
  const std::string act = c.attr_string("activation_type", "relu");
  if (act != "relu" && act != "gelu" && act != "silu" && act != "identity" && act != "swiglu")
    return refuse(c,
                  fmt::format("activation_type '{}' is not read; stitch reads relu, gelu, silu, identity and "
                              "swiglu (onnxruntime's CPU kernel's)",
                              act));
  if (c.attr_int("swiglu_limit_after_activation", 0) != 0)
    return refuse(c, "swiglu_limit_after_activation=1 (onnxruntime's CUDA kernels only) is not read");
  const int64_t k = c.attr_int("k", 1), fusion = c.attr_int("swiglu_fusion", 0);
  if (k < 1) return refuse(c, fmt::format("k={} is not a positive count of experts", k));
  const bool swiglu = act == "swiglu";
  if (swiglu && (fusion < 0 || fusion > 2))
    return refuse(c, fmt::format("swiglu_fusion={} is not 0, 1 or 2", fusion));
  if (swiglu && fusion == 0 && !fc3)
    return refuse(c, "swiglu_fusion=0 takes l from fc3, and fc3_experts_weights (input 6) is not given");
  if ((fc3 || fc3_bias) && !(swiglu && fusion == 0))
    return refuse(c, "fc3 (inputs 6 and 7) is read only as swiglu's l with swiglu_fusion=0");
  ASSIGN_OR_RETURN(const size_t rank_x, rank_or_refuse(c, x, "input"));
  if (rank_x != 2 && rank_x != 3)
    return refuse(
        c, fmt::format("its input '{}' is {}-D; it is [tokens, hidden] or [batch, sequence, hidden]", x->name,
                       rank_x));

  // The tokens' leading axes (x's but the last): the router's logits [.., E] (one row per token, as
  // the input's rows: the routing's row kernel then gives each token's weights where the activation
  // reads them) and each expert's part [.., E, N] of an fc's output [.., E * N]. x is not flattened:
  // the norm before it, its scale moved past the GEMM, stays a row scale over the same tokens.
  Value* lead =
      w.op("Slice", "token_axes",
           {w.op("Shape", "input_shape", {x}), w.ints("lead_start", {0}), w.ints("lead_end", {-1})});
  auto shaped = [&](Value* v, std::vector<Value*> tail, const std::string& name) {
    tail.insert(tail.begin(), lead);
    return w.op("Reshape", name, {v, w.op("Concat", name + "_shape", tail, {{"axis", int64_t{0}}})});
  };

  // Routing, in float32: each token's weight for each expert, [.., E] (0 for those not chosen).
  const std::map<std::string, AttrValue> to_f32 = {{"to", int64_t{1}}};
  Value* logits = shaped(router, {w.ints("router_rest", {-1})}, "router_per_token");
  Value* probs = w.op("Softmax", "routing_softmax", {w.op("Cast", "routing_logits", {logits}, to_f32)},
                      {{"axis", int64_t{-1}}});
  // The top k as TopK picks them (the largest first, a lower index first among equals), one a round:
  // the largest probability left, the lowest expert holding it, then that expert set below all
  // (-1). Every round is a reduction over the token's row, as the softmax is.
  const std::map<std::string, AttrValue> keep = {{"keepdims", int64_t{1}}};
  Value* ids = w.op("Cast", "expert_ids",
                    {w.op("Range", "expert_range",
                          {w.i64("expert0", 0), w.dim(router, 1, "experts"), w.i64("expert1", 1)})},
                    to_f32);
  Value *left = probs, *chosen = nullptr;
  for (int64_t r = 0; r < k; ++r) {
    const std::string n = fmt::format("routing_round{}", r);
    Value* top = w.op("ReduceMax", n + "_max", {left, w.ints(n + "_axis", {-1})}, keep);
    Value* holders = w.op("Where", n + "_holders",
                          {w.op("Equal", n + "_is_max", {left, top}), ids,
                           w.f32(n + "_none", std::numeric_limits<double>::infinity())});
    Value* first = w.op("ReduceMin", n + "_first", {holders, w.ints(n + "_first_axis", {-1})}, keep);
    Value* pick = w.op("Equal", n + "_pick", {ids, first});
    chosen = chosen ? w.op("Or", n + "_chosen", {chosen, pick}) : pick;
    if (r + 1 < k) left = w.op("Where", n + "_left", {pick, w.f32(n + "_below", -1), left});
  }
  // Each expert's weight as a column [.., E, 1]: the activation's multiplier, which the routing's
  // kernel computes again beside each activation it stores.
  auto column = [&](Value* v, const std::string& name) {
    return w.op("Unsqueeze", name, {v, w.ints(name + "_axis", {-1})});
  };
  Value* weights = nullptr;
  if (c.attr_int("normalize_routing_weights", 0) != 0) {  // the sum over the token's row, as the rounds
    Value* row = w.op("Where", "routing_chosen", {chosen, probs, w.f32("routing_zero", 0)});
    Value* sum = w.op("ReduceSum", "routing_chosen_sum", {row, w.ints("routing_sum_axis", {-1})},
                      {{"keepdims", int64_t{1}}});
    weights = w.op("Div", "routing_normalized",
                   {column(row, "routing_chosen_column"), column(sum, "routing_sum_column")});
  } else {
    weights = w.op("Where", "routing_chosen",
                   {column(chosen, "routing_chosen_column"), column(probs, "routing_probs_column"),
                    w.f32("routing_zero", 0)});
  }
  weights = w.op("CastLike", "routing_weights", {weights, x});
  Value* expert_count =
      w.op("Slice", "expert_count",
           {w.op("Shape", "router_shape", {router}), w.ints("count_start", {1}), w.ints("count_end", {2})});
  auto per_expert = [&](Value* v, const std::string& name) {
    return shaped(v, {expert_count, w.ints(name + "_rest", {-1})}, name);
  };
  Value* h = per_expert(all_experts(w, x, fc1, fc1_bias, "fc1"), "fc1_per_expert");
  auto constant = [&](const std::string& name, double v) {
    return w.op("CastLike", name, {w.f32(name + "_f32", v), x});
  };
  Value* a = nullptr;
  if (act == "relu") {
    a = w.op("Relu", "activation", {h});
  } else if (act == "gelu") {
    a = w.op("Gelu", "activation", {h}, {{"approximate", std::string("tanh")}});
  } else if (act == "silu") {
    a = w.op("Mul", "activation", {h, w.op("Sigmoid", "activation_sigmoid", {h})});
  } else if (act == "identity") {
    a = h;
  } else {
    Value *g = nullptr, *l = nullptr;
    if (fusion == 1) {
      g = every(w, h, 0, 2, "swiglu_gate");
      l = every(w, h, 1, 2, "swiglu_linear");
    } else if (fusion == 2) {
      g = w.fresh("swiglu_gate"), l = w.fresh("swiglu_linear");
      w.node("Split", "swiglu_split", {h}, {g, l}, {{"axis", int64_t{-1}}, {"num_outputs", int64_t{2}}});
    } else {
      g = h;
      l = per_expert(all_experts(w, x, fc3, fc3_bias, "fc3"), "fc3_per_expert");
    }
    if (c.has_attr("swiglu_limit")) {
      const double limit = c.attr_float("swiglu_limit", 0.0f);
      g = w.op("Min", "swiglu_gate_clamped", {g, constant("swiglu_limit", limit)});
      l = w.op("Clip", "swiglu_linear_clamped",
               {l, constant("swiglu_low", -limit), constant("swiglu_high", limit)});
    }
    Value* gate =
        w.op("Mul", "swiglu_swish",
             {g, w.op("Sigmoid", "swiglu_sigmoid",
                      {w.op("Mul", "swiglu_alpha_gate",
                            {g, constant("swiglu_alpha", c.attr_float("activation_alpha", 1.0f))})})});
    a = w.op("Mul", "activation",
             {gate, w.op("Add", "swiglu_beta_linear",
                         {l, constant("swiglu_beta", c.attr_float("activation_beta", 0.0f))})});
  }
  // Weighted by the routing, times fc2's weights [E, H, F] as [E * F, H]: the weighted sum over the
  // experts. With biases, each expert's part gets one more column, its weight, and fc2's weights one
  // more row, its bias: [.., E, F + 1] by [E * (F + 1), H] adds the weighted sum of the biases in the
  // same GEMM.
  Value* weighted = w.op("Mul", "weighted_activation", {a, weights});
  Value* fc2_by_input =
      w.op("Transpose", "fc2_weights_by_input", {fc2}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  if (fc2_bias) {
    weighted = w.op("Concat", "weighted_with_bias_weight", {weighted, weights}, {{"axis", int64_t{-1}}});
    fc2_by_input =
        w.op("Concat", "fc2_weights_with_bias",
             {fc2_by_input, w.op("Unsqueeze", "fc2_bias_row", {fc2_bias, w.ints("bias_row_axis", {1})})},
             {{"axis", int64_t{1}}});
  }
  Value* fc2_rows = w.op("Flatten", "fc2_weights", {fc2_by_input}, {{"axis", int64_t{2}}});
  Value* y =
      w.op("MatMul", "fc2", {shaped(weighted, {w.ints("rows_rest", {-1})}, "weighted_rows"), fc2_rows});
  // x's shape again (a Reshape that changes nothing, gone before planning): the output's rank is then
  // known to the contrib ops after it, as a Shape's length.
  w.op("Reshape", "", {y, w.op("Shape", "output_shape", {x})}, {}, c.output(0));
  return Status::ok();
}

}  // namespace stitch::contrib
