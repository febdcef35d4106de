#include "importer/contrib_ops.h"

#include <fmt/format.h>

#include <limits>
#include <map>
#include <set>

#include "importer/contrib_writer.h"
#include "ir/op_table.h"

namespace stitch {
namespace {

using contrib::kOpset;
using contrib::refuse;
using contrib::Writer;

const std::set<std::string, std::less<>>& microsoft_ops() {
  static const std::set<std::string, std::less<>> ops = {"Attention",
                                                         "BiasGelu",
                                                         "CausalConvWithState",
                                                         "EmbedLayerNormalization",
                                                         "FastGelu",
                                                         "Gelu",
                                                         "GroupQueryAttention",
                                                         "MatMulNBits",
                                                         "MoE",
                                                         "MultiHeadAttention",
                                                         "QuickGelu",
                                                         "RotaryEmbedding",
                                                         "SkipLayerNormalization",
                                                         "SkipSimplifiedLayerNormalization"};
  return ops;
}

// The attributes onnxruntime defines for each op read here, with their kinds (AttrValue's
// alternatives: 0 int, 1 float, 3 ints). Any other, or one of another kind, is refused: read as
// absent, it would change the op's meaning without a word.
Status check_attributes(const Node& c) {
  constexpr size_t kInt = 0, kFloat = 1, kString = 2, kInts = 3;
  static const std::map<std::string, std::map<std::string, size_t>, std::less<>> defined = {
      {"SkipLayerNormalization", {{"epsilon", kFloat}}},
      {"SkipSimplifiedLayerNormalization", {{"epsilon", kFloat}}},
      {"SimplifiedLayerNormalization", {{"axis", kInt}, {"epsilon", kFloat}, {"stash_type", kInt}}},
      {"BiasGelu", {}},
      {"Gelu", {}},
      {"FastGelu", {}},
      {"QuickGelu", {{"alpha", kFloat}}},
      {"MatMulNBits",
       {{"K", kInt},
        {"N", kInt},
        {"bits", kInt},
        {"block_size", kInt},
        {"accuracy_level", kInt},
        {"weight_prepacked", kInt}}},
      {"RotaryEmbedding",
       {{"num_heads", kInt},
        {"rotary_embedding_dim", kInt},
        {"interleaved", kInt},
        {"is_packed_batching", kInt},
        {"scale", kFloat}}},
      {"EmbedLayerNormalization", {{"epsilon", kFloat}, {"mask_index_type", kInt}}},
      {"Attention",
       {{"num_heads", kInt},
        {"unidirectional", kInt},
        {"qkv_hidden_sizes", kInts},
        {"mask_filter_value", kFloat},
        {"scale", kFloat},
        {"do_rotary", kInt},
        {"rotary_embedding_dim", kInt},
        {"past_present_share_buffer", kInt}}},
      {"MultiHeadAttention",
       {{"num_heads", kInt}, {"unidirectional", kInt}, {"mask_filter_value", kFloat}, {"scale", kFloat}}},
      {"CausalConvWithState",
       {{"ndim", kInt},
        {"activation", kString},
        {"dilation", kInt},
        {"channels_last", kInt},
        {"state_window", kInt},
        {"state_update_capacity", kInt},
        {"state_channels_last", kInt},
        {"state_length", kInt},
        {"input_channel_offset", kInt},
        {"input_channels", kInt}}},
      {"MoE",
       {{"activation_type", kString},
        {"k", kInt},
        {"normalize_routing_weights", kInt},
        {"use_sparse_mixer", kInt},
        {"swiglu_fusion", kInt},
        {"swiglu_limit", kFloat},
        {"swiglu_limit_after_activation", kInt},
        {"activation_alpha", kFloat},
        {"activation_beta", kFloat}}},
      {"GroupQueryAttention",
       {{"num_heads", kInt},
        {"kv_num_heads", kInt},
        {"scale", kFloat},
        {"softcap", kFloat},
        {"local_window_size", kInt},
        {"do_rotary", kInt},
        {"rotary_interleaved", kInt},
        {"smooth_softmax", kInt},
        {"causal", kInt},
        {"qk_output", kInt},
        {"sliding_window_cache", kInt},
        {"kv_cache_bit_width", kInt},
        {"k_quant_type", kString},
        {"v_quant_type", kString},
        {"qk_norm_epsilon", kFloat},
        {"q_norm_epsilon", kFloat},
        {"k_norm_epsilon", kFloat}}}};
  const auto it = defined.find(c.op_type);
  if (it == defined.end()) return Status::ok();
  for (const auto& [name, value] : c.attrs) {
    const auto a = it->second.find(name);
    if (a == it->second.end())
      return refuse(c, fmt::format("'{}' is not an attribute of onnxruntime's {}", name, c.op_type));
    if (value.index() != a->second)
      return refuse(c, fmt::format("its attribute '{}' is not {}", name,
                                   a->second == kInt      ? "an int"
                                   : a->second == kFloat  ? "a float"
                                   : a->second == kString ? "a string"
                                                          : "a list of ints"));
  }
  return Status::ok();
}

float epsilon(const Node& c) { return c.attr_float("epsilon", 1e-12f); }  // onnxruntime's default

// input (+ bias) + skip, written to output 3 when the model reads it. onnxruntime adds the bias
// last; added first (a rounding apart) it is the form an export has, the GEMM's bias (input is the
// GEMM's output) and then the residual, which the planner folds into the GEMM's epilogue and C.
Value* skip_sum(Writer& w, const Node& c, Value* bias) {
  Value* x = bias ? w.op("Add", "bias_add", {c.input(0), bias}) : c.input(0);
  return w.op("Add", "skip_add", {x, c.input(1)}, {}, c.output(3));
}

Status skip_layer_norm(Writer& w, const Node& c) {
  if (!c.input(2)) return refuse(c, "needs gamma (input 2)");
  Value* s = skip_sum(w, c, c.input(4));
  w.node("LayerNormalization", "", {s, c.input(2), c.input(3)}, {c.output(0), c.output(1), c.output(2)},
         {{"axis", int64_t{-1}}, {"epsilon", epsilon(c)}});
  return Status::ok();
}

Status skip_simplified_layer_norm(Writer& w, const Node& c) {
  if (!c.input(2)) return refuse(c, "needs gamma (input 2)");
  if (c.output(1) || c.output(2))
    return refuse(c,
                  "its mean and inv_std_var outputs (1 and 2) are read; onnxruntime leaves the mean "
                  "undefined and stitch writes only the normalized values and the sum");
  Value* s = skip_sum(w, c, c.input(3));
  w.node("RMSNormalization", "", {s, c.input(2)}, {c.output(0)},
         {{"axis", int64_t{-1}}, {"epsilon", epsilon(c)}});
  return Status::ok();
}

Status gelu(Writer& w, const Node& c, bool with_bias, const char* approximate) {
  Value* x = c.input(0);
  if (with_bias && c.input(1))
    x = w.op("Add", "bias_add", {x, c.input(1)});
  else if (c.op_type == "BiasGelu")
    return refuse(c, "needs its bias (input 1)");
  w.op("Gelu", "", {x}, {{"approximate", std::string(approximate)}}, c.output(0));
  return Status::ok();
}

// RotaryEmbedding (input, position_ids, cos_cache, sin_cache) as ONNX's of opset 23 (input,
// cos_cache, sin_cache, position_ids): the same rotation of the same layouts (3-D [B, S, N * H],
// 4-D [B, N, S, H]). position_ids [B, S], or one offset [1] for positions offset .. offset + S - 1
// in every batch. Without num_heads a 3-D input's head is twice the caches' width (onnxruntime's
// reading): it goes heads first through a Reshape and a Transpose, the 4-D form, and back.
Status rotary_embedding(Writer& w, const Node& c) {
  Value *x = c.input(0), *pos = c.input(1), *cos = c.input(2), *sin = c.input(3);
  if (!x || !pos || !cos || !sin)
    return refuse(c, "needs input, position_ids, cos_cache and sin_cache (inputs 0 to 3)");
  if (c.attr_int("is_packed_batching", 0) != 0)
    return refuse(c, "is_packed_batching=1 (ragged batches) is not read");
  if (c.attr_float("scale", 1.0f) != 1.0f)
    return refuse(c, "a scale other than 1 is not read (onnxruntime's CPU kernel leaves it unused)");
  const int64_t heads = c.attr_int("num_heads", 0), rot = c.attr_int("rotary_embedding_dim", 0);
  if (rot != 0 && heads == 0) return refuse(c, "rotary_embedding_dim is given without num_heads");
  ASSIGN_OR_RETURN(const size_t xr, contrib::rank_or_refuse(c, x, "input"));
  ASSIGN_OR_RETURN(const size_t pr, contrib::rank_or_refuse(c, pos, "position_ids"));
  if ((xr != 3 && xr != 4) || (pr != 1 && pr != 2))
    return refuse(c,
                  fmt::format("its input '{}' is {}-D and its position_ids '{}' {}-D; stitch reads a 3-D or "
                              "4-D input and 1-D or 2-D position ids",
                              x->name, xr, pos->name, pr));
  const bool four = xr == 4;
  if (pr == 1) {  // an offset: positions offset + 0 .. S - 1, the same in every batch
    Value* len = w.dim(x, four ? 2 : 1, "sequence");
    Value* steps = w.op("Range", "positions", {w.i64("first", 0), len, w.i64("step", 1)});
    Value* at = w.op("Add", "offset_positions", {steps, w.op("Cast", "offset", {pos}, {{"to", int64_t{7}}})});
    Value* batch = w.op("Unsqueeze", "batch", {w.dim(x, 0, "batch_size"), w.ints("batch_axis", {0})});
    Value* shape =
        w.op("Concat", "position_shape",
             {batch, w.op("Unsqueeze", "length", {len, w.ints("length_axis", {0})})}, {{"axis", int64_t{0}}});
    Value* row = w.op("Unsqueeze", "position_row", {at, w.ints("row_axis", {0})});
    pos = w.op("Expand", "batch_positions", {row, shape});
  }
  std::map<std::string, AttrValue> attrs = {{"interleaved", c.attr_int("interleaved", 0)}};
  if (rot != 0) attrs["rotary_embedding_dim"] = rot;
  if (four || heads != 0) {
    if (!four) attrs["num_heads"] = heads;
    w.op("RotaryEmbedding", "", {x, cos, sin, pos}, std::move(attrs), c.output(0));
    return Status::ok();
  }
  // [B, S, N * H] as [B, N, S, H], H twice the caches' width, and back.
  Value* width = w.op("Slice", "cache_width",
                      {w.op("Shape", "cache_shape", {cos}), w.ints("w0", {1}), w.ints("w1", {2})});
  Value* head = w.op("Mul", "head_size", {width, w.ints("two", {2})});
  Value* split = w.op("Concat", "heads_shape", {w.ints("lead", {0, 0, -1}), head}, {{"axis", int64_t{0}}});
  Value* xh = w.op("Transpose", "heads_first", {w.op("Reshape", "heads", {x, split})},
                   {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  Value* y = w.op("RotaryEmbedding", "", {xh, cos, sin, pos}, std::move(attrs), w.fresh("heads_first"));
  Value* back = w.op("Transpose", "heads_back", {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  w.op("Reshape", "hidden", {back, w.ints("hidden_shape", {0, 0, -1})}, {}, c.output(0));
  return Status::ok();
}

Status quick_gelu(Writer& w, const Node& c) {
  Value* x = c.input(0);
  Value* alpha = w.op("CastLike", "alpha_cast", {w.f32("alpha", c.attr_float("alpha", 1.702f)), x});
  Value* s = w.op("Sigmoid", "sigmoid", {w.op("Mul", "scale", {x, alpha})});
  w.op("Mul", "", {x, s}, {}, c.output(0));
  return Status::ok();
}

Status embed_layer_norm(Writer& w, const Node& c) {
  Value *ids = c.input(0), *seg = c.input(1), *words = c.input(2), *positions = c.input(3),
        *segments = c.input(4);
  if (!ids || !words || !positions || !c.input(5) || !c.input(6))
    return refuse(
        c, "needs input_ids, word_embedding, position_embedding, gamma and beta (inputs 0, 2, 3, 5, 6)");
  if ((seg == nullptr) != (segments == nullptr))
    return refuse(c, "segment_ids and segment_embedding (inputs 1 and 4) must be given together");
  const std::map<std::string, AttrValue> axis0 = {{"axis", int64_t{0}}};
  Value* sum = w.op("Gather", "word_gather", {words, ids}, axis0);
  Value* pos = nullptr;
  if (Value* pid = c.input(8)) {
    pos = w.op("Gather", "position_gather", {positions, pid}, axis0);
  } else {  // positions 0 .. S-1: the first S rows
    Value* len =
        w.op("Slice", "length", {w.op("Shape", "ids_shape", {ids}), w.ints("one", {1}), w.ints("two", {2})});
    pos = w.op("Slice", "position_rows", {positions, w.ints("zero", {0}), len, w.ints("rows_axis", {0})});
  }
  sum = w.op("Add", "position_add", {sum, pos}, {}, seg ? nullptr : c.output(2));
  if (seg)
    sum = w.op("Add", "segment_add", {sum, w.op("Gather", "segment_gather", {segments, seg}, axis0)}, {},
               c.output(2));
  w.node("LayerNormalization", "", {sum, c.input(5), c.input(6)}, {c.output(0)},
         {{"axis", int64_t{-1}}, {"epsilon", epsilon(c)}});
  if (!c.output(1)) return Status::ok();
  if (Value* mask = c.input(7)) {
    // The sum of each row (its count of ones), as onnxruntime's kernel writes it; summed in float,
    // exactly while a row sums to less than 2^24, and kept as [batch, 1] until a Squeeze, so that
    // the stitcher takes the reduction (it reduces floating-point values, and reads a reduction
    // back in its own kernel only at the rank it had) into a kernel with the work around it.
    Value* m = w.op("Cast", "mask_float", {mask}, {{"to", int64_t{1}}});
    Value* ones = w.op("ReduceSum", "mask_sum", {m, w.ints("mask_axes", {1})});
    Value* count = w.op("CastLike", "mask_count", {ones, mask});
    w.op("Squeeze", "mask_index", {count, w.ints("count_axis", {1})}, {}, c.output(1));
  } else {
    Value* batch =
        w.op("Slice", "batch", {w.op("Shape", "batch_shape", {ids}), w.ints("b0", {0}), w.ints("b1", {1})});
    w.op("ConstantOfShape", "mask_index", {batch}, {{"value", Tensor::from_i64(DType::kI32, {1}, {0})}},
         c.output(1));
  }
  return Status::ok();
}

// CausalConvWithState (LFM2's convolution layers; Mamba's and Gated DeltaNet's preprocessing): a
// depthwise convolution of each channel along the sequence, causal, its carry state the last
// P = (k - 1) * dilation positions. Written out as element-wise work the planner fuses with its
// neighbours (not a grouped convolution call): the past state (zeros without one) and the input
// joined along the sequence, then k taps, each a Slice of that at its offset j * dilation times the
// channel's weight, summed, plus the bias, SiLU when asked; the present state is the joined
// sequence's last P positions (joined again, so that no kernel stores the whole of it). ndim 1, channels
// first [B, C, S] (state [B, C, P]) or channels last [B, S, C] (state [B, P, C]). Refused: more spatial dims,
// a window of states, onnxruntime's CUDA-only state layouts and channel slices, a weight whose kernel size is
// not known.
Status causal_conv_with_state(Writer& w, const Node& c) {
  Value *x = c.input(0), *weight = c.input(1), *bias = c.input(2), *past = c.input(3);
  if (!x || !weight) return refuse(c, "needs input and weight (inputs 0 and 1)");
  if (c.attr_int("ndim", 1) != 1)
    return refuse(c, "ndim other than 1 (a 2-D or 3-D convolution) is not read");
  if (c.attr_int("state_window", 0) != 0)
    return refuse(c, "state_window (a window of carry states) is not read");
  if (c.attr_int("state_update_capacity", 0) != 0 || c.attr_int("state_channels_last", -1) != -1 ||
      c.attr_int("state_length", 0) != 0 || c.attr_int("input_channel_offset", 0) != 0 ||
      c.attr_int("input_channels", 0) != 0 || c.output(2))
    return refuse(c,
                  "state_update_capacity, state_channels_last, state_length, input_channel_offset and "
                  "input_channels (onnxruntime's CUDA-only forms) are not read");
  const std::string act = c.attr_string("activation", "none");
  if (act != "none" && act != "silu" && act != "swish")
    return refuse(c, fmt::format("activation '{}' is not none, silu or swish", act));
  const int64_t dilation = c.attr_int("dilation", 1);
  if (dilation < 1) return refuse(c, fmt::format("dilation={} is below 1", dilation));
  if (!weight->constant || weight->constant->dims().size() != 3)
    return refuse(c, fmt::format("its weight '{}' must be an initializer [channels, 1, k]", weight->name));
  const int64_t k = weight->constant->dims()[2], held = (k - 1) * dilation;
  const bool last = c.attr_int("channels_last", 0) != 0;
  if (last) {
    ASSIGN_OR_RETURN(const size_t rank, contrib::rank_or_refuse(c, x, "input"));
    if (rank != 3) return refuse(c, "channels_last=1 is read for a 3-D input [batch, sequence, channels]");
  }
  const int64_t axis = last ? 1 : -1;
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  // The past (or P zeros: a Pad of x's 3 axes) and x along the sequence. The present state joins
  // them again: then no kernel stores the joined sequence, and the taps' kernel reads x and the past.
  auto join = [&](const std::string& name) {
    if (past) return w.op("Concat", name, {past, x}, {{"axis", axis}});
    std::vector<int64_t> pads(6, 0);
    pads[last ? 1 : 2] = held;
    return w.op("Pad", name, {x, w.ints(name + "_zeros_before", pads)});
  };
  Value* joined = join("with_past");
  // The channel's weight for tap j, broadcast along the sequence: [C, 1] first, [C] last.
  auto tap = [&](int64_t j) {
    const std::string n = fmt::format("tap{}", j);
    Value* wj = w.op("Slice", n + "_weight",
                     {weight, w.ints(n + "_w0", {j}), w.ints(n + "_w1", {j + 1}), w.ints(n + "_waxis", {2})});
    return w.op("Reshape", n + "_channel",
                {wj, w.ints(n + "_shape", last ? std::vector<int64_t>{-1} : std::vector<int64_t>{-1, 1})});
  };
  Value* y = nullptr;
  for (int64_t j = 0; j < k; ++j) {
    const std::string n = fmt::format("tap{}", j);
    const int64_t from = j * dilation, to = held - from;  // positions [from, length - to)
    Value* part = w.op("Slice", n,
                       {joined, w.ints(n + "_start", {from}), w.ints(n + "_end", {to > 0 ? -to : kEnd}),
                        w.ints(n + "_axis", {axis})});
    Value* term = w.op("Mul", n + "_weighted", {part, tap(j)});
    y = y ? w.op("Add", n + "_sum", {y, term}) : term;
  }
  const bool silu = act != "none";
  if (bias)
    y = w.op("Add", silu ? "bias_add" : "",
             {y, w.op("Reshape", "bias_channel",
                      {bias,
                       w.ints("bias_shape", last ? std::vector<int64_t>{-1} : std::vector<int64_t>{-1, 1})})},
             {}, silu ? nullptr : c.output(0));
  if (silu) {
    w.op("Mul", "", {y, w.op("Sigmoid", "silu_sigmoid", {y})}, {}, c.output(0));
  } else if (!bias) {
    w.op("Identity", "", {y}, {}, c.output(0));
  }
  if (c.output(1))  // the last P positions
    w.op("Slice", "present_state",
         {join("present_joined"), w.ints("state_start", {held > 0 ? -held : kEnd}),
          w.ints("state_end", {kEnd}), w.ints("state_axis", {axis})},
         {}, c.output(1));
  return Status::ok();
}

}  // namespace

std::string contrib_op_list() {
  std::string list;
  size_t i = 0;
  for (const std::string& op : microsoft_ops())
    list += (i++ == 0 ? "" : i == microsoft_ops().size() ? " and " : ", ") + op;
  return list;
}

bool is_contrib_op(const Node& n) {
  if (n.domain == "com.microsoft") return microsoft_ops().count(n.op_type) != 0;
  if (!n.domain.empty()) return false;
  return n.op_type == "SimplifiedLayerNormalization" || (n.op_type == "LayerNormalization" && n.opset < 17);
}

Status expand_contrib_ops(Graph& g) {
  std::vector<Node*> todo;
  for (const auto& n : g.nodes())
    if (!n->def && is_contrib_op(*n)) todo.push_back(n.get());
  for (Node* raw : todo) {
    RETURN_IF_ERROR(check_attributes(*raw));
    if (raw->domain.empty()) {  // onnxruntime's default-domain normalizations: the ONNX ops, renamed
      if (raw->op_type == "SimplifiedLayerNormalization") {
        if (raw->output(1))
          return refuse(*raw, "its inv_std_var output (1) is read; stitch writes only the normalized values");
        raw->op_type = "RMSNormalization";
      }
      raw->opset = kOpset;
      raw->def = find_op("", raw->op_type, kOpset);
      continue;
    }
    const Node c = *raw;
    g.remove_nodes({raw});
    Writer w(g, c);
    const std::string& op = c.op_type;
    Status st = Status::ok();
    if (op == "SkipLayerNormalization")
      st = skip_layer_norm(w, c);
    else if (op == "SkipSimplifiedLayerNormalization")
      st = skip_simplified_layer_norm(w, c);
    else if (op == "BiasGelu")
      st = gelu(w, c, true, "none");
    else if (op == "Gelu")
      st = gelu(w, c, false, "none");
    else if (op == "FastGelu")
      st = gelu(w, c, true, "tanh");
    else if (op == "QuickGelu")
      st = quick_gelu(w, c);
    else if (op == "EmbedLayerNormalization")
      st = embed_layer_norm(w, c);
    else if (op == "Attention")
      st = contrib::attention(w, c);
    else if (op == "MatMulNBits")
      st = contrib::matmul_nbits(w, c);
    else if (op == "MoE")
      st = contrib::moe(w, c);
    else if (op == "CausalConvWithState")
      st = causal_conv_with_state(w, c);
    else if (op == "RotaryEmbedding")
      st = rotary_embedding(w, c);
    else if (op == "MultiHeadAttention")
      st = contrib::multi_head_attention(w, c);
    else if (op == "GroupQueryAttention")
      st = contrib::group_query_attention(w, c);
    RETURN_IF_ERROR(st);
  }
  return Status::ok();
}

}  // namespace stitch
