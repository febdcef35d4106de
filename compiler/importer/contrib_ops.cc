#include "importer/contrib_ops.h"

#include <fmt/format.h>

#include <limits>
#include <map>
#include <optional>
#include <set>

#include "ir/op_table.h"
#include "passes/graph_builder.h"

namespace stitch {
namespace {

// Every node written here is of this opset: Attention, RMSNormalization and Split's num_outputs
// exist at it, and Gelu (20) and LayerNormalization (17) are unchanged since.
constexpr int kOpset = 23;

const std::set<std::string, std::less<>>& microsoft_ops() {
  static const std::set<std::string, std::less<>> ops = {
      "Attention", "BiasGelu",  "EmbedLayerNormalization", "FastGelu",
      "Gelu",      "QuickGelu", "SkipLayerNormalization",  "SkipSimplifiedLayerNormalization"};
  return ops;
}

Status refuse(const Node& n, const std::string& why) {
  return Status::user(
      fmt::format("{}: {}; stitch reads this onnxruntime contrib op only in the forms "
                  "onnxruntime's transformer optimizer writes (or export the model "
                  "without those optimizations)",
                  n.describe(), why));
}

// The attributes onnxruntime defines for each op read here, with their kinds (AttrValue's
// alternatives: 0 int, 1 float, 3 ints). Any other, or one of another kind, is refused: read as
// absent, it would change the op's meaning without a word.
Status check_attributes(const Node& c) {
  constexpr size_t kInt = 0, kFloat = 1, kInts = 3;
  static const std::map<std::string, std::map<std::string, size_t>, std::less<>> defined = {
      {"SkipLayerNormalization", {{"epsilon", kFloat}}},
      {"SkipSimplifiedLayerNormalization", {{"epsilon", kFloat}}},
      {"SimplifiedLayerNormalization", {{"axis", kInt}, {"epsilon", kFloat}, {"stash_type", kInt}}},
      {"BiasGelu", {}},
      {"Gelu", {}},
      {"FastGelu", {}},
      {"QuickGelu", {{"alpha", kFloat}}},
      {"EmbedLayerNormalization", {{"epsilon", kFloat}, {"mask_index_type", kInt}}},
      {"Attention",
       {{"num_heads", kInt},
        {"unidirectional", kInt},
        {"qkv_hidden_sizes", kInts},
        {"mask_filter_value", kFloat},
        {"scale", kFloat},
        {"do_rotary", kInt},
        {"rotary_embedding_dim", kInt},
        {"past_present_share_buffer", kInt}}}};
  const auto it = defined.find(c.op_type);
  if (it == defined.end()) return Status::ok();
  for (const auto& [name, value] : c.attrs) {
    const auto a = it->second.find(name);
    if (a == it->second.end())
      return refuse(c, fmt::format("'{}' is not an attribute of onnxruntime's {}", name, c.op_type));
    if (value.index() != a->second)
      return refuse(c, fmt::format("its attribute '{}' is not {}", name,
                                   a->second == kInt     ? "an int"
                                   : a->second == kFloat ? "a float"
                                                         : "a list of ints"));
  }
  return Status::ok();
}

// The rank of `v` where the model says it before shape inference: a graph input's or constant's
// declared shape, through Cast, CastLike and Identity, a ReduceSum (keepdims or not) and a Squeeze
// of constant axes (onnxruntime's mask index, this file's too).
std::optional<size_t> known_rank(const Value* v) {
  if (v->dims) return v->dims->size();
  const Node* p = v->producer;
  if (!p || !p->domain.empty() || !p->input(0)) return std::nullopt;
  const std::string& op = p->op_type;
  if (op == "Cast" || op == "CastLike" || op == "Identity") return known_rank(p->input(0));
  if (op != "ReduceSum" && op != "Squeeze") return std::nullopt;
  const auto r = known_rank(p->input(0));
  if (op == "ReduceSum" && p->attr_int("keepdims", 1) != 0) return r;
  std::optional<size_t> axes;
  if (p->has_attr("axes"))
    axes = p->attr_ints("axes").size();
  else if (p->input(1) && p->input(1)->constant)
    axes = static_cast<size_t>(p->input(1)->constant->size());
  if (r && axes && *axes <= *r) return *r - *axes;
  return std::nullopt;
}

// Adds the nodes one contrib node is written as, named "<node>/<part>"; the one that writes its
// main output keeps the node's own name, so that --explain-fusion and the fusion overrides name it.
class Writer {
 public:
  Writer(Graph& g, const Node& c) : g_(g), c_(c), constants_{g, c} {}

  // A constant named "<node>/<hint>", as the front-end passes name theirs.
  Value* constant(const std::string& hint, Tensor t) { return constants_.constant(hint, std::move(t)); }
  Value* ints(const std::string& hint, const std::vector<int64_t>& v) {
    return constant(hint, Tensor::vector_i64(v));
  }
  Value* i64(const std::string& hint, int64_t v) { return constant(hint, Tensor::scalar_i64(v)); }
  Value* f32(const std::string& hint, double v) {
    return constant(hint, Tensor::from_f64(DType::kF32, {}, {v}));
  }

  // A node writing `outs` (null: omitted); `name` empty gives it the contrib node's name.
  void node(const std::string& op, const std::string& name, std::vector<Value*> in, std::vector<Value*> outs,
            std::map<std::string, AttrValue> attrs = {}) {
    auto n = std::make_unique<Node>();
    n->name = name.empty() ? c_.name : c_.name + "/" + name;
    n->op_type = op;
    n->opset = kOpset;
    n->def = find_op("", op, kOpset);
    n->inputs = std::move(in);
    while (!n->inputs.empty() && !n->inputs.back()) n->inputs.pop_back();
    n->outputs = std::move(outs);  // trailing omitted ones dropped: a one-output norm is a row op
    while (n->outputs.size() > 1 && !n->outputs.back()) n->outputs.pop_back();
    n->attrs = std::move(attrs);
    g_.add_node(std::move(n));
  }
  Value* fresh(const std::string& name) {
    return g_.add_value(g_.unique_name(c_.name + "/" + name + "_output"));
  }
  // A one-output node; its output is `out` when given, else a new value.
  Value* op(const std::string& op, const std::string& name, std::vector<Value*> in,
            std::map<std::string, AttrValue> attrs = {}, Value* out = nullptr) {
    Value* y = out ? out : fresh(name);
    node(op, name, std::move(in), {y}, std::move(attrs));
    return y;
  }
  // Element `i` of x's shape, a scalar.
  Value* dim(Value* x, int64_t i, const std::string& name) {
    Value* shape = op("Shape", name + "_shape", {x});
    return op("Gather", name, {shape, i64(name + "_index", i)}, {{"axis", int64_t{0}}});
  }

 private:
  Graph& g_;
  const Node& c_;
  NodeBuilder constants_;
};

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

// The additive mask of onnxruntime's Attention from mask_index (1-D: each batch's end position;
// 2-D [batch, total] and 3-D [batch, sequence, total]: 0 masks a key), as [batch, 1, 1 or
// sequence, total] float32: 0 where a key is seen, mask_filter_value where not.
StatusOr<Value*> key_mask(Writer& w, const Node& c, Value* total) {
  Value* mask = c.input(3);
  const double filter = c.attr_float("mask_filter_value", -10000.0f);
  const auto rank = known_rank(mask);
  if (!rank)
    return refuse(c, fmt::format("the rank of its mask_index '{}' is not known before shape inference (a "
                                 "graph input with a declared shape, or a Cast or ReduceSum of one, is)",
                                 mask->name));
  Value* keep = nullptr;
  if (*rank == 1) {
    Value* keys = w.op("Range", "key_positions", {w.i64("key_start", 0), total, w.i64("key_step", 1)});
    Value* end = w.op("Cast", "mask_end", {mask}, {{"to", int64_t{7}}});  // int64
    keep =
        w.op("Less", "key_seen", {keys, w.op("Unsqueeze", "mask_column", {end, w.ints("column_axis", {1})})});
  } else if (*rank == 2 || *rank == 3) {
    Value* m = w.op("Cast", "mask_float", {mask}, {{"to", int64_t{1}}});  // float
    keep = w.op("Greater", "key_seen", {m, w.f32("mask_zero", 0)});
  } else {
    return refuse(c, fmt::format("its mask_index '{}' is {}-D; stitch reads the 1-D (end positions), 2-D and "
                                 "3-D forms",
                                 mask->name, *rank));
  }
  Value* add = w.op("Where", "key_mask", {keep, w.f32("seen", 0), w.f32("filter", filter)});
  return w.op("Unsqueeze", "key_mask_heads",
              {add, w.ints("head_axes", *rank == 3 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2})});
}

Status attention(Writer& w, const Node& c) {
  Value *x = c.input(0), *weights = c.input(1), *past = c.input(4), *bias_scores = c.input(5);
  if (!x || !weights) return refuse(c, "needs input and weights (inputs 0 and 1)");
  const int64_t heads = c.attr_int("num_heads", 0);
  if (heads < 1) return refuse(c, "needs num_heads, a positive count");
  if (c.attr_int("do_rotary", 0) != 0)
    return refuse(c, "do_rotary=1 (a rotary embedding inside) is not read");
  if (c.attr_int("past_present_share_buffer", 0) != 0)
    return refuse(c, "past_present_share_buffer=1 (a preallocated cache) is not read");
  if (c.input(6)) return refuse(c, "past_sequence_length (input 6, with a shared buffer) is not read");
  Value* qkv = w.op("MatMul", "qkv_matmul", {x, weights});
  if (c.input(2)) qkv = w.op("Add", "qkv_bias", {qkv, c.input(2)});
  const std::vector<int64_t> sizes = c.attr_ints("qkv_hidden_sizes");
  if (!sizes.empty() && sizes.size() != 3)
    return refuse(c, fmt::format("qkv_hidden_sizes has {} values, not 3", sizes.size()));
  Value *q = w.fresh("q"), *k = w.fresh("k"), *v = w.fresh("v");
  if (sizes.empty())
    w.node("Split", "qkv_split", {qkv}, {q, k, v}, {{"axis", int64_t{-1}}, {"num_outputs", int64_t{3}}});
  else
    w.node("Split", "qkv_split", {qkv, w.ints("qkv_sizes", sizes)}, {q, k, v}, {{"axis", int64_t{-1}}});
  Value *past_k = nullptr, *past_v = nullptr;
  if (past) {  // [2, batch, heads, past, head size]: K's and V's caches stacked
    Value *pk = w.fresh("past_k"), *pv = w.fresh("past_v");
    w.node("Split", "past_split", {past}, {pk, pv}, {{"axis", int64_t{0}}, {"num_outputs", int64_t{2}}});
    past_k = w.op("Squeeze", "past_key", {pk, w.ints("past_key_axis", {0})});
    past_v = w.op("Squeeze", "past_value", {pv, w.ints("past_value_axis", {0})});
  }
  Value* seq = w.dim(x, 1, "sequence");
  Value* past_len = past ? w.dim(past, 3, "past_length") : w.i64("no_past", 0);
  Value* total = w.op("Add", "total_length", {seq, past_len});
  Value* mask = nullptr;
  if (c.input(3)) {
    ASSIGN_OR_RETURN(mask, key_mask(w, c, total));
  }
  if (c.attr_int("unidirectional", 0) != 0) {
    // Query i sees keys up to past + i; onnxruntime leaves the later ones out of the softmax.
    Value* rows = w.op("Range", "query_positions", {past_len, total, w.i64("query_step", 1)});
    Value* cols =
        w.op("Range", "causal_key_positions", {w.i64("causal_start", 0), total, w.i64("causal_step", 1)});
    Value* future = w.op("Greater", "future",
                         {cols, w.op("Unsqueeze", "query_column", {rows, w.ints("query_axis", {1})})});
    Value* causal =
        w.op("Where", "causal_mask",
             {future, w.f32("unseen", std::numeric_limits<float>::lowest()), w.f32("causal_seen", 0)});
    mask = mask ? w.op("Add", "masks", {mask, causal}) : causal;
  }
  if (mask) mask = w.op("CastLike", "mask_cast", {mask, x});
  if (bias_scores) mask = mask ? w.op("Add", "attention_bias_add", {mask, bias_scores}) : bias_scores;
  std::map<std::string, AttrValue> attrs = {{"q_num_heads", heads}, {"kv_num_heads", heads}};
  if (c.attr_float("scale", 0.0f) != 0.0f) attrs["scale"] = c.attr_float("scale", 0.0f);
  Value* present_k = c.output(1) ? w.fresh("present_key") : nullptr;
  Value* present_v = c.output(1) ? w.fresh("present_value") : nullptr;
  w.node("Attention", "", {q, k, v, mask, past_k, past_v}, {c.output(0), present_k, present_v},
         std::move(attrs));
  if (c.output(1)) {
    const std::map<std::string, AttrValue> axis0 = {{"axis", int64_t{0}}};
    Value* sk = w.op("Unsqueeze", "present_key_stack", {present_k, w.ints("present_key_axis", {0})});
    Value* sv = w.op("Unsqueeze", "present_value_stack", {present_v, w.ints("present_value_axis", {0})});
    w.op("Concat", "present", {sk, sv}, axis0, c.output(1));
  }
  return Status::ok();
}

}  // namespace

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
      st = attention(w, c);
    RETURN_IF_ERROR(st);
  }
  return Status::ok();
}

}  // namespace stitch
