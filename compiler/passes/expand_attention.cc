// The opset-23 transformer ops written as the nodes PyTorch's opset-18 exports spell them with, which
// the back end already plans and fuses (a norm's statistics in a row kernel, the rotary embedding in
// the kernel of the norm or softmax next to it, the score scale folded into a GEMM's alpha, a repeated
// K/V head read in place by the GEMM):
//  - RMSNormalization: Pow 2, ReduceMean over the axes from `axis` (keepdims), Add epsilon, Sqrt,
//    Reciprocal, Mul by the input, then Mul by the scale. A half input is cast to float32 first
//    (stash_type 1) and the normalized value back to its type before the scale, as the op defines.
//  - RotaryEmbedding: the caches gathered by position_ids (when given; ids that may lie outside
//    the caches go through a StitchIndexCheck, ops/index_check.h) and unsqueezed over the
//    heads, the rotated part's halves (or, interleaved, its even and odd elements) as Slices,
//    cos * x1 - sin * x2 and sin * x1 + cos * x2, joined back by a Concat (interleaved: each pair
//    unsqueezed, joined and reshaped), and the part not rotated concatenated after them.
//  - Attention: 3-D Q, K and V reshaped and transposed into heads; past K and V concatenated in
//    front (the present outputs); K and V heads repeated for grouped queries (Unsqueeze, Expand,
//    Reshape); Q and K^T each scaled by sqrt(scale); MatMul; softcap (cap * tanh(s / cap)); the mask
//    (a boolean one as Where(mask, 0, -inf)) and the causal mask (a constant, bottom-right
//    aligned to the past) added; Softmax over the keys, in softmax_precision when given; rows
//    whose every key is masked set to zero (IsNaN, Where); MatMul by V; back to 3-D when Q was.
//    With head sinks (input 7, ops/attention.cc) the softmax is written out: ReduceMax of the
//    scores, Max with the head's sink, Exp of both shifted by it, ReduceSum plus the sink's term,
//    Div (a fully masked row is zero there, without the IsNaN).
//    A mask shorter than the keys (opset 24) is padded with -inf. A sliding window (opset 25)
//    joins the causal bound in that constant. With nonpad_kv_seqlen (opset 24: K and V are a
//    whole cache, each batch's first L keys valid), the bias is computed at run time from L:
//    keys at or past L masked, and the causal and window bounds around position L - Sq + i. An L
//    outside [0, T] goes through a StitchIndexCheck, which refuses it as the op does.
//  - TensorScatter (opset 24) into a cache computed in the graph: each cache position c reads the
//    update at (c - write index) (mod the cache length when circular) where that is inside the
//    update, else keeps the past value: GatherElements of the update and a Where. A write index
//    the TensorScatter refuses (negative; in mode linear, one putting updates past the cache's
//    end) goes through a StitchIndexCheck (ops/index_check.h), which refuses it the same way. A
//    cache that is a graph input read by nothing else stays a TensorScatter (a zero Pad growing
//    it by no rows is gone by then: remove_noops runs before the expansions): the back end writes
//    the update into the input's storage (ops::tensor_scatter_in_place).
//  - SwiGLU (opset 28): Swish of A, times B.
// Each runs after fold_constants and leaves nodes without static shapes alone; the last node writes
// the op's output value, and the new nodes are named after it ("attn/scores").
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "ops/index_check.h"
#include "ops/op_util.h"
#include "ops/value_range.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool static_inputs(const Node& n) {
  for (const Value* v : n.inputs)
    if (v && !v->has_static_shape()) return false;
  return true;
}

Value* ints(NodeBuilder& b, const std::string& hint, const std::vector<int64_t>& v) {
  return b.constant(hint, Tensor::vector_i64(v));
}

Value* transpose(NodeBuilder& b, Value* x, const std::vector<int64_t>& perm, const std::string& name) {
  Dims d;
  for (int64_t p : perm) d.push_back((*x->dims)[p]);
  return b.node("Transpose", name, {x}, x->dtype, d, {{"perm", perm}});
}

Value* unsqueeze(NodeBuilder& b, Value* x, int64_t axis, const std::string& name) {
  Dims d = *x->dims;
  d.insert(d.begin() + axis, 1);
  return b.node("Unsqueeze", name, {x, ints(b, name + "_axes", {axis})}, x->dtype, d);
}

// Elements [start, end) of the last axis with `step`.
Value* slice_last(NodeBuilder& b, Value* x, int64_t start, int64_t end, int64_t step,
                  const std::string& name) {
  Dims d = *x->dims;
  d.back() = (end - start + step - 1) / step;
  const int64_t last = static_cast<int64_t>(d.size()) - 1;
  return b.node("Slice", name,
                {x, ints(b, name + "_starts", {start}), ints(b, name + "_ends", {end}),
                 ints(b, name + "_axes", {last}), ints(b, name + "_steps", {step})},
                x->dtype, d);
}

// x op y, broadcast (the shapes were checked by the op's shape rule).
Value* binary(NodeBuilder& b, const char* op, Value* x, Value* y, const std::string& name) {
  return b.node(op, name, {x, y}, x->dtype, *ops::broadcast_dims(*x->dims, *y->dims));
}

// A comparison or logical op of x and y, broadcast: a bool result.
Value* test(NodeBuilder& b, const char* op, Value* x, Value* y, const std::string& name) {
  return b.node(op, name, {x, y}, DType::kBool, *ops::broadcast_dims(*x->dims, *y->dims));
}

// The int64 constant 0, 1, ..., n - 1 along `axis` of a rank-`rank` shape of ones elsewhere.
Value* positions(NodeBuilder& b, int64_t rank, int64_t axis, int64_t n, const std::string& hint) {
  Dims d(static_cast<size_t>(rank), 1);
  d[axis] = n;
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return b.constant(hint, Tensor::from_i64(DType::kI64, d, v));
}

Value* scalar(NodeBuilder& b, DType t, double v, const std::string& hint) {
  return b.constant(hint, Tensor::from_f64(t, {}, {v}));
}

Value* concat_last(NodeBuilder& b, std::vector<Value*> xs, const std::string& name) {
  Dims d = *xs.front()->dims;
  const DType t = xs.front()->dtype;
  d.back() = 0;
  for (const Value* x : xs) d.back() += x->dims->back();
  return b.node("Concat", name, std::move(xs), t, d, {{"axis", int64_t{-1}}});
}

// Makes `out` (an output of the replaced node) an Identity of `v`, which other new nodes may read.
void take_output(NodeBuilder& b, Value* v, Value* out, const std::string& name) {
  Node* p = b.node("Identity", name, {v}, v->dtype, *v->dims)->producer;
  p->outputs[0] = out;
  out->producer = p;
}

// ---- RMSNormalization ----

StatusOr<bool> expand_rms(Graph& g, Node& n) {
  Value *x = n.input(0), *scale = n.input(1), *y = n.output(0);
  if (!x || !scale || !y || !static_inputs(n)) return false;
  const Dims& xd = *x->dims;
  const int64_t r = static_cast<int64_t>(xd.size());
  int64_t axis = n.attr_int("axis", -1);
  if (axis < 0) axis += r;
  NodeBuilder b{g, n};
  const bool widen = x->dtype == DType::kF16 || x->dtype == DType::kBF16;
  Value* xs = widen ? b.cast(x, DType::kF32, "to_float") : x;
  const DType ct = xs->dtype;
  std::vector<int64_t> axes;
  Dims rd = xd;
  for (int64_t k = axis; k < r; ++k) {
    axes.push_back(k);
    rd[k] = 1;
  }
  Value* sq = b.node("Pow", "square", {xs, scalar(b, ct, 2.0, "two")}, ct, xd);
  Value* mean = b.node("ReduceMean", "mean", {sq, ints(b, "axes", axes)}, ct, rd, {{"keepdims", int64_t{1}}});
  Value* var =
      b.node("Add", "add_epsilon", {mean, scalar(b, ct, n.attr_float("epsilon", 1e-5f), "epsilon")}, ct, rd);
  Value* rms = b.node("Sqrt", "rms", {var}, ct, rd);
  Value* inv = b.node("Reciprocal", "inv_rms", {rms}, ct, rd);
  Value* norm = b.node("Mul", "normalized", {xs, inv}, ct, xd);
  if (widen) norm = b.cast(norm, x->dtype, "to_input_type");
  if (norm->dtype != scale->dtype) norm = b.cast(norm, scale->dtype, "to_scale_type");
  b.finish(binary(b, "Mul", norm, scale, "scale"), y);
  return true;
}

// ---- RotaryEmbedding ----

StatusOr<bool> expand_rotary(Graph& g, Node& n) {
  Value *x = n.input(0), *cos = n.input(1), *sin = n.input(2), *pos = n.input(3), *y = n.output(0);
  if (!x || !cos || !sin || !y || !static_inputs(n)) return false;
  NodeBuilder b{g, n};
  const Dims xd = *x->dims;
  const bool four = xd.size() == 4;
  const int64_t heads = four ? xd[1] : n.attr_int("num_heads", 1);
  const int64_t head = four ? xd[3] : xd[2] / heads;
  int64_t rot = n.attr_int("rotary_embedding_dim", 0);
  if (rot == 0) rot = head;
  const int64_t half = rot / 2;
  const bool interleaved = n.attr_int("interleaved", 0) != 0;
  // x as [B, H, S, D] (4-D) or [B, S, H, D]; the caches [B or 1, S, half] then broadcast over H.
  Value* xh = four ? x : b.reshape(x, {xd[0], xd[1], heads, head}, "heads");
  if (pos) {
    // A position id outside the caches is refused, as the op refuses it, negative ones included
    // (the Gather alone would count those from the end): the reference stops, and a kernel reports
    // it after the run naming the RotaryEmbedding (StitchIndexCheck). None where the ids' bounds
    // show it cannot happen, one for all the layers that read the same ids into caches of as many
    // positions; a constant one outside is refused now.
    ASSIGN_OR_RETURN(pos, ops::checked_index(g, n, pos, ops::position_ids_bounds((*cos->dims)[0]),
                                             "position_ids_checked"));
  }
  auto cache = [&](Value* c, const std::string& hint) {
    if (pos) {
      Dims d = *pos->dims;
      d.push_back(half);
      c = b.node("Gather", hint + "_at_positions", {c, pos}, c->dtype, d, {{"axis", int64_t{0}}});
    }
    return unsqueeze(b, c, four ? 1 : 2, hint + "_over_heads");
  };
  Value *c = cache(cos, "cos"), *s = cache(sin, "sin");
  Value* part = rot == head ? xh : slice_last(b, xh, 0, rot, 1, "rotated_part");
  Value *x1 = nullptr, *x2 = nullptr;
  if (interleaved) {
    x1 = slice_last(b, part, 0, rot, 2, "even");
    x2 = slice_last(b, part, 1, rot, 2, "odd");
  } else {
    x1 = slice_last(b, part, 0, half, 1, "first_half");
    x2 = slice_last(b, part, half, rot, 1, "second_half");
  }
  Value* real =
      binary(b, "Sub", binary(b, "Mul", x1, c, "x1_cos"), binary(b, "Mul", x2, s, "x2_sin"), "real");
  Value* imag =
      binary(b, "Add", binary(b, "Mul", x1, s, "x1_sin"), binary(b, "Mul", x2, c, "x2_cos"), "imag");
  Value* rotated = nullptr;
  if (interleaved) {
    const int64_t last = static_cast<int64_t>(real->dims->size());
    Value* pairs = concat_last(
        b, {unsqueeze(b, real, last, "real_pairs"), unsqueeze(b, imag, last, "imag_pairs")}, "pairs");
    Dims d = *part->dims;
    rotated = b.reshape(pairs, d, "interleave");
  } else {
    rotated = concat_last(b, {real, imag}, "rotated");
  }
  Value* out = rot == head
                   ? rotated
                   : concat_last(b, {rotated, slice_last(b, xh, rot, head, 1, "kept_part")}, "joined");
  if (!four) out = b.reshape(out, xd, "hidden");
  b.finish(out, y);
  return true;
}

// ---- Attention ----

StatusOr<bool> expand_attention(Graph& g, Node& n) {
  Value *q = n.input(0), *k = n.input(1), *v = n.input(2), *mask = n.input(3), *past_k = n.input(4),
        *past_v = n.input(5), *nonpad = n.input(6), *sink = n.input(7), *y = n.output(0);
  if (!q || !k || !v || !y || !static_inputs(n)) return false;
  NodeBuilder b{g, n};
  const bool three = q->dims->size() == 3;
  const DType t = q->dtype;
  auto heads = [&](Value* x, int64_t h, const std::string& name) {
    if (!three) return x;
    const Dims& d = *x->dims;
    return transpose(b, b.reshape(x, {d[0], d[1], h, d[2] / h}, name + "_heads"), {0, 2, 1, 3},
                     name + "_transposed");
  };
  const int64_t hq = three ? n.attr_int("q_num_heads", 1) : (*q->dims)[1];
  const int64_t hk = three ? n.attr_int("kv_num_heads", 1) : (*k->dims)[1];
  Value *qh = heads(q, hq, "q"), *kh = heads(k, hk, "k"), *vh = heads(v, hk, "v");
  auto join = [&](Value* past, Value* now, const std::string& name) {
    if (!past) return now;
    Dims d = *now->dims;
    d[2] += (*past->dims)[2];
    return b.node("Concat", name, {past, now}, now->dtype, d, {{"axis", int64_t{2}}});
  };
  kh = join(past_k, kh, "present_key");
  vh = join(past_v, vh, "present_value");
  Value *present_k = kh, *present_v = vh;
  const int64_t batch = (*qh->dims)[0], sq = (*qh->dims)[2], head = (*qh->dims)[3], total = (*kh->dims)[2];
  const int64_t past = past_k ? (*past_k->dims)[2] : 0;
  if (hq != hk) {  // each K/V head read by hq / hk query heads in a row (h uses head h / group)
    auto repeat = [&](Value* x, const std::string& name) {
      Dims d = *x->dims;
      Value* u = unsqueeze(b, x, 2, name + "_unsqueezed");
      Dims e{d[0], hk, hq / hk, d[2], d[3]};
      Value* ex =
          b.node("Expand", name + "_repeated",
                 {u, ints(b, name + "_repeats", std::vector<int64_t>(e.begin(), e.end()))}, x->dtype, e);
      return b.reshape(ex, {d[0], hq, d[2], d[3]}, name + "_per_query_head");
    };
    kh = repeat(kh, "k");
    vh = repeat(vh, "v");
  }
  const double scale = n.has_attr("scale") ? n.attr_float("scale", 1.0f) : 1.0 / std::sqrt(double(head));
  Value* root = scalar(b, t, std::sqrt(scale), "sqrt_scale");
  Value* qs = binary(b, "Mul", qh, root, "q_scaled");
  Value* kt = transpose(b, kh, {0, 1, 3, 2}, "k_transposed");
  Value* ks = binary(b, "Mul", kt, root, "k_scaled");
  const Dims sd{batch, hq, sq, total};
  Value* scores = b.node("MatMul", "scores", {qs, ks}, t, sd);
  const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
  Value* qk_out = scores;
  const double cap = n.attr_float("softcap", 0.0f);
  if (cap > 0) {
    Value* capped = b.node("Tanh", "softcap_tanh",
                           {binary(b, "Div", scores, scalar(b, t, cap, "cap"), "softcap_in")}, t, sd);
    scores = binary(b, "Mul", capped, scalar(b, t, cap, "cap_out"), "softcapped");
    if (mode >= 1) qk_out = scores;
  }
  const ops::AttentionWindow window = ops::AttentionWindow::of(n);
  if (mask) {
    Value* bias = mask;
    if (mask->dtype == DType::kBool)
      bias = b.node("Where", "mask_bias", {mask, scalar(b, t, 0.0, "zero"), scalar(b, t, -kInf, "minus_inf")},
                    t, *mask->dims);
    const Dims& md = *bias->dims;
    if (!md.empty() && md.back() != 1 && md.back() < total) {  // the missing keys masked
      std::vector<int64_t> pads(2 * md.size(), 0);
      pads.back() = total - md.back();
      Dims pd = md;
      pd.back() = total;
      bias = b.node("Pad", "mask_padded",
                    {bias, ints(b, "mask_pads", pads), scalar(b, t, -kInf, "pad_minus_inf")}, t, pd,
                    {{"mode", std::string("constant")}});
    }
    scores = binary(b, "Add", scores, bias, "masked");
  }
  if (nonpad) {  // the keys each batch sees, from its valid length L at run time
    // A length outside [0, T] is refused, as the op refuses it: the reference stops, and a kernel
    // reports it after the run and goes on with the nearest bound (StitchIndexCheck).
    ASSIGN_OR_RETURN(Value * checked, ops::checked_index(g, n, nonpad, ops::valid_keys_bounds(n, total),
                                                         "valid_keys_checked"));
    Value* len = b.reshape(checked, {batch, 1, 1, 1}, "valid_keys");
    Value* key = positions(b, 4, 3, total, "key_positions");
    Value* seen = test(b, "Less", key, len, "not_padding");
    if (window.bounded()) {  // around the query's position L - Sq + i
      Value* at = binary(b, "Add", positions(b, 4, 2, sq, "query_index"),
                         binary(b, "Sub", len, b.constant("queries", Tensor::scalar_i64(sq)), "offset"),
                         "query_positions");
      if (window.causal) seen = test(b, "And", seen, test(b, "LessOrEqual", key, at, "not_after"), "causal");
      // One side of the window: keys at or after at - left, at or before at + right.
      auto side = [&](const char* cmp, const char* shift, int64_t size, const std::string& name) {
        Value* edge =
            binary(b, shift, at, b.constant(name + "_size", Tensor::scalar_i64(size)), name + "_edge");
        seen = test(b, "And", seen, test(b, cmp, key, edge, "in_" + name), name);
      };
      if (window.left >= 0) side("GreaterOrEqual", "Sub", window.left, "left_window");
      if (window.right >= 0) side("LessOrEqual", "Add", window.right, "right_window");
    }
    Value* bias =
        b.node("Where", "keys_bias", {seen, scalar(b, t, 0.0, "keys_zero"), scalar(b, t, -kInf, "keys_inf")},
               t, *seen->dims);
    scores = binary(b, "Add", scores, bias, "keys_masked");
  } else if (window.bounded()) {
    std::vector<double> c(static_cast<size_t>(sq * total));
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < total; ++j) c[i * total + j] = window.visible(past, i, j) ? 0.0 : -kInf;
    scores =
        binary(b, "Add", scores, b.constant("causal_bias", Tensor::from_f64(t, {sq, total}, c)), "causal");
  }
  if (mode >= 2) qk_out = scores;
  DType st = t;
  if (n.has_attr("softmax_precision"))
    st = dtype_from_onnx(static_cast<int>(n.attr_int("softmax_precision", 1))).value_or(t);
  if (st != t) scores = b.cast(scores, st, "to_softmax_type");
  Value* p = nullptr;
  if (sink) {  // one more score per row, with no value: exp(s - m) / (sum exp(x - m) + exp(sink - m))
    Value* hs = b.reshape(sink, {1, hq, 1, 1}, "sinks");
    if (st != t) hs = b.cast(hs, st, "sinks_to_softmax_type");
    const Dims rd{batch, hq, sq, 1};
    // Axes as an input: the nodes are of the Attention's opset (23 or later).
    Value* last = ints(b, "keys_axis", {-1});
    const std::map<std::string, AttrValue> keep = {{"keepdims", int64_t{1}}};
    Value* m = binary(b, "Max", b.node("ReduceMax", "scores_max", {scores, last}, st, rd, keep), hs,
                      "with_sink_max");
    Value* e = b.node("Exp", "scores_exp", {binary(b, "Sub", scores, m, "scores_shifted")}, st, sd);
    Value* rest = b.node("Exp", "sink_exp", {binary(b, "Sub", hs, m, "sink_shifted")}, st, rd);
    Value* sum =
        binary(b, "Add", b.node("ReduceSum", "scores_sum", {e, last}, st, rd, keep), rest, "with_sink_sum");
    p = binary(b, "Div", e, sum, "softmax");
  } else {
    p = b.node("Softmax", "softmax", {scores}, st, sd, {{"axis", int64_t{-1}}});
  }
  if (!sink && (mask || nonpad ||
                window.bounded())) {  // a row with every key masked: NaN from the softmax, zero by definition
    Value* nan = b.node("IsNaN", "fully_masked", {p}, DType::kBool, sd);
    p = b.node("Where", "masked_rows_zero", {nan, scalar(b, st, 0.0, "zero_p"), p}, st, sd);
  }
  if (st != t) p = b.cast(p, t, "to_input_type");
  if (mode == 3) qk_out = p;
  const Dims od{batch, hq, sq, (*vh->dims)[3]};
  // V may be of another float type than Q (T2; present_value keeps it); Y is Q's type, and so is the
  // product (ONNX's own function body multiplies the two types, which MatMul does not allow).
  if (vh->dtype != t) vh = b.cast(vh, t, "v_to_query_type");
  Value* out = b.node("MatMul", "output", {p, vh}, t, od);
  if (three) out = b.reshape(transpose(b, out, {0, 2, 1, 3}, "output_transposed"), *y->dims, "output_hidden");
  Value* extra[3] = {n.outputs.size() > 1 ? n.output(1) : nullptr,
                     n.outputs.size() > 2 ? n.output(2) : nullptr,
                     n.outputs.size() > 3 ? n.output(3) : nullptr};
  if (extra[0]) take_output(b, present_k, extra[0], "present_key_out");
  if (extra[1]) take_output(b, present_v, extra[1], "present_value_out");
  if (extra[2]) take_output(b, qk_out, extra[2], "qk_matmul_out");
  b.finish(out, y);
  return true;
}

// ---- TensorScatter ----

StatusOr<bool> expand_tensor_scatter(Graph& g, Node& n) {
  Value *past = n.input(0), *update = n.input(1), *start = n.input(2), *y = n.output(0);
  if (!past || !update || !y || !static_inputs(n)) return false;
  if (ops::tensor_scatter_in_place(g, n)) return false;  // the back end writes the update in place
  NodeBuilder b{g, n};
  const Dims pd = *past->dims;
  const int64_t r = static_cast<int64_t>(pd.size());
  int64_t axis = n.attr_int("axis", -2);
  if (axis < 0) axis += r;
  const int64_t len = pd[axis], s = (*update->dims)[axis];
  // The update's position that cache position c receives, per batch.
  Value* from = positions(b, r, axis, len, "cache_positions");
  if (start) {
    // A write index the TensorScatter refuses is still refused: the reference stops, a kernel
    // reports it after the run (StitchIndexCheck), one check for the key and value caches that take
    // the same indices. A constant one was checked at shape inference.
    ASSIGN_OR_RETURN(
        start, ops::checked_index(g, n, start, ops::tensor_scatter_bounds(n, len, s), "write_index_checked"));
    Dims sd(static_cast<size_t>(r), 1);
    sd[0] = pd[0];
    from = binary(b, "Sub", from, b.reshape(start, sd, "write_start"), "update_positions");
  }
  if (n.attr_string("mode", "linear") == "circular")
    from = binary(b, "Mod", from, b.constant("cache_length", Tensor::scalar_i64(len)), "wrapped");
  Value* zero = b.constant("zero", Tensor::scalar_i64(0));
  Value* written = test(
      b, "And", test(b, "GreaterOrEqual", from, zero, "from_start"),
      test(b, "Less", from, b.constant("update_length", Tensor::scalar_i64(s)), "before_end"), "written");
  // Clamped into the update, so that the GatherElements needs no run-time check (ops/value_range.h);
  // the Where below keeps the past value wherever the clamp changed the position.
  Value* index =
      b.node("Clip", "update_index", {from, zero, b.constant("last_update", Tensor::scalar_i64(s - 1))},
             DType::kI64, *from->dims);
  index =
      b.node("Expand", "update_index_full",
             {index, ints(b, "cache_shape", std::vector<int64_t>(pd.begin(), pd.end()))}, DType::kI64, pd);
  Value* moved = b.node("GatherElements", "updates", {update, index}, update->dtype, pd, {{"axis", axis}});
  b.finish(b.node("Where", "present", {written, moved, past}, past->dtype, pd), y);
  return true;
}

// ---- SwiGLU ----

StatusOr<bool> expand_swiglu(Graph& g, Node& n) {
  Value *a = n.input(0), *v = n.input(1), *y = n.output(0);
  if (!a || !v || !y || !static_inputs(n)) return false;
  NodeBuilder b{g, n};
  Value* gate = b.node("Swish", "gate", {a}, a->dtype, *a->dims, {{"alpha", n.attr_float("alpha", 1.0f)}});
  b.finish(binary(b, "Mul", gate, v, "gated"), y);
  return true;
}

}  // namespace

StatusOr<bool> expand_tensor_scatter(Graph& g, PassContext&) {
  return expand_each(g, "TensorScatter", expand_tensor_scatter);
}
StatusOr<bool> expand_swiglu(Graph& g, PassContext&) { return expand_each(g, "SwiGLU", expand_swiglu); }
StatusOr<bool> expand_rms_norm(Graph& g, PassContext&) {
  return expand_each(g, "RMSNormalization", expand_rms);
}
StatusOr<bool> expand_rotary_embedding(Graph& g, PassContext&) {
  return expand_each(g, "RotaryEmbedding", expand_rotary);
}
StatusOr<bool> expand_attention(Graph& g, PassContext&) {
  return expand_each(g, "Attention", expand_attention);
}

}  // namespace stitch
