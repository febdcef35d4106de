// onnxruntime's attention ops (contrib_ops.h): Attention (packed QKV weights) and
// MultiHeadAttention (projected Q, K and V), each written as ONNX's Attention of opset 23 over an
// additive mask built as onnxruntime builds it; GroupQueryAttention (a decoder's, with its KV
// cache) as TensorScatter (opset 24) and Attention.
#include <fmt/format.h>

#include <limits>

#include "importer/contrib_writer.h"

namespace stitch::contrib {
namespace {

// The additive mask of onnxruntime's attention ops from their key mask `mask` (Attention's
// mask_index, MultiHeadAttention's key_padding_mask; 1-D: each batch's end position; 2-D [batch,
// total] and 3-D [batch, sequence, total]: 0 masks a key), as [batch, 1, 1 or sequence, total]
// float32: 0 where a key is seen, mask_filter_value where not.
StatusOr<Value*> key_mask(Writer& w, const Node& c, Value* mask, Value* total) {
  const double filter = c.attr_float("mask_filter_value", -10000.0f);
  ASSIGN_OR_RETURN(const size_t rank, rank_or_refuse(c, mask, "key mask"));
  Value* keep = nullptr;
  if (rank == 1) {
    Value* keys = w.op("Range", "key_positions", {w.i64("key_start", 0), total, w.i64("key_step", 1)});
    Value* end = w.op("Cast", "mask_end", {mask}, {{"to", int64_t{7}}});  // int64
    keep =
        w.op("Less", "key_seen", {keys, w.op("Unsqueeze", "mask_column", {end, w.ints("column_axis", {1})})});
  } else if (rank == 2 || rank == 3) {
    Value* m = w.op("Cast", "mask_float", {mask}, {{"to", int64_t{1}}});  // float
    keep = w.op("Greater", "key_seen", {m, w.f32("mask_zero", 0)});
  } else {
    return refuse(c, fmt::format("its key mask '{}' is {}-D; stitch reads the 1-D (end positions), 2-D and "
                                 "3-D forms",
                                 mask->name, rank));
  }
  Value* add = w.op("Where", "key_mask", {keep, w.f32("seen", 0), w.f32("filter", filter)});
  return w.op("Unsqueeze", "key_mask_heads",
              {add, w.ints("head_axes", rank == 3 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2})});
}

// Query i (at position past + i) sees keys up to past + i: onnxruntime leaves the later ones out
// of the softmax, as the lowest float added does. [sequence, total] float32.
Value* causal_mask(Writer& w, Value* past_len, Value* total) {
  Value* rows = w.op("Range", "query_positions", {past_len, total, w.i64("query_step", 1)});
  Value* cols =
      w.op("Range", "causal_key_positions", {w.i64("causal_start", 0), total, w.i64("causal_step", 1)});
  Value* future =
      w.op("Greater", "future", {cols, w.op("Unsqueeze", "query_column", {rows, w.ints("query_axis", {1})})});
  return w.op("Where", "causal_mask",
              {future, w.f32("unseen", std::numeric_limits<float>::lowest()), w.f32("causal_seen", 0)});
}

// The additive mask an attention op's scores take: the key mask (`mask`, may be null), the causal
// mask when the node is unidirectional, in the type of `like`, then the attention bias `bias`
// (already in it). Null when there is none.
StatusOr<Value*> scores_mask(Writer& w, const Node& c, Value* mask, Value* bias, Value* past_len,
                             Value* total, Value* like) {
  Value* m = nullptr;
  if (mask) {
    ASSIGN_OR_RETURN(m, key_mask(w, c, mask, total));
  }
  if (c.attr_int("unidirectional", 0) != 0) {
    Value* causal = causal_mask(w, past_len, total);
    m = m ? w.op("Add", "masks", {m, causal}) : causal;
  }
  if (m) m = w.op("CastLike", "mask_cast", {m, like});
  if (bias) m = m ? w.op("Add", "attention_bias_add", {m, bias}) : bias;
  return m;
}

// A scalar as a vector of one value.
Value* as_vector(Writer& w, Value* x, const std::string& name) {
  return w.op("Unsqueeze", name, {x, w.ints(name + "_axis", {0})});
}

// The shape of `x` [B, N, *, H] with `rows` (a scalar) as its axis 2, for an Expand.
Value* with_rows(Writer& w, Value* x, Value* rows, const std::string& name) {
  Value* shape = w.op("Shape", name + "_of", {x});
  return w.op("Concat", name,
              {w.op("Slice", name + "_lead", {shape, w.ints(name + "_l0", {0}), w.ints(name + "_l1", {2})}),
               as_vector(w, rows, name + "_rows"),
               w.op("Slice", name + "_head", {shape, w.ints(name + "_h0", {3}), w.ints(name + "_h1", {4})})},
              {{"axis", int64_t{0}}});
}

// GroupQueryAttention's present K or V: `past` [B, Nkv, P, H] grown by zero rows to
// max(P, total) (without a past, zeros of `total` rows), `update` [B, Nkv, S, H] written at each
// batch's `at` (TensorScatter). Where the buffer holds the rows already the growth is a zero Pad,
// which the TensorScatter expansion reads through: the update goes into the past's storage.
Value* present_cache(Writer& w, Value* past, Value* update, Value* at, Value* total, Value* out,
                     const std::string& name) {
  Value* base = nullptr;
  if (past) {
    Value* rows = w.dim(past, 2, name + "_past_rows");
    Value* grow = w.op("Sub", name + "_growth", {w.op("Max", name + "_rows", {rows, total}), rows});
    Value* pads = w.op("Concat", name + "_pads",
                       {w.ints(name + "_pads_before", {0, 0, 0, 0, 0, 0}),
                        as_vector(w, grow, name + "_pad_rows"), w.ints(name + "_pads_after", {0})},
                       {{"axis", int64_t{0}}});
    base = w.op("Pad", name + "_grown", {past, pads});
  } else {
    base = w.op("Expand", name + "_zeros",
                {w.op("CastLike", name + "_zero", {w.f32(name + "_0", 0), update}),
                 with_rows(w, update, total, name + "_zeros_shape")});
  }
  return w.op("TensorScatter", name, {base, update, at}, {{"axis", int64_t{2}}}, out, 24);
}

// The keys each query of GroupQueryAttention sees, as onnxruntime's kernel (measured): key j of
// batch b below its count `lens` [B]; for query s, at position past_b + s (`past` [B]), not after
// it (`causal`) and within the window of `window` keys that ends at it. [B, 1, S, rows] booleans.
Value* keys_seen(Writer& w, Value* rows, Value* lens, Value* past, Value* seq, int64_t causal,
                 int64_t window) {
  Value* keys = w.op(
      "Reshape", "key_positions",
      {w.op("Range", "keys", {w.i64("key0", 0), rows, w.i64("key1", 1)}), w.ints("key_row", {1, 1, 1, -1})});
  Value* seen = w.op("Less", "key_written",
                     {keys, w.op("Reshape", "key_ends", {lens, w.ints("per_batch", {-1, 1, 1, 1})})});
  if (causal == 0) return seen;
  Value* steps = w.op("Reshape", "query_steps",
                      {w.op("Range", "queries", {w.i64("query0", 0), seq, w.i64("query1", 1)}),
                       w.ints("query_column", {1, 1, -1, 1})});
  Value* at =
      w.op("Add", "query_positions",
           {w.op("Reshape", "query_starts", {past, w.ints("start_per_batch", {-1, 1, 1, 1})}), steps});
  seen = w.op("And", "causal", {seen, w.op("LessOrEqual", "not_after", {keys, at})});
  if (window <= 0) return seen;
  return w.op("And", "windowed",
              {seen, w.op("Greater", "in_window",
                          {keys, w.op("Sub", "window_start", {at, w.i64("window", window)})})});
}

// onnxruntime's window-sized cache (sliding_window_cache=1; measured on its CPU kernel, 1.32): a
// buffer of C rows, C at least the window W, holding the keys from position start(x) on once x keys
// have been seen: start(x) = 0 while x <= C, else x - W - (x - C - 1) mod (C - W + 1). When the
// buffer would overflow it keeps the last W - 1 keys, moved to its front, and appends after them.
// The period is at least 1 here, so a buffer narrower than the window (which onnxruntime refuses)
// computes something defined.
Value* window_start(Writer& w, Value* x, Value* cap, Value* period, int64_t window, const std::string& name) {
  Value* over =
      w.op("Sub", name + "_over", {w.op("Sub", name + "_past_cap", {x, cap}), w.i64(name + "_1", 1)});
  Value* shift = w.op("Mod", name + "_phase", {over, period});
  Value* late =
      w.op("Sub", name + "_late", {w.op("Sub", name + "_behind", {x, w.i64(name + "_w", window)}), shift});
  return w.op("Where", name, {w.op("LessOrEqual", name + "_fits", {x, cap}), w.i64(name + "_0", 0), late});
}

// GroupQueryAttention over a window-sized cache: the keys attended are the past buffer's rows
// followed by the new ones ([B, Nkv, C + S, H]), each at its position (a past row r at
// start(past_b) + r, valid below past_b - start(past_b); new row i at past_b + i), seen by query s
// (at past_b + s) when not after it and within the window of W keys that ends at it. The present
// [B, Nkv, C, H] holds positions start(T_b) on, gathered from the past and from `kh_present` and
// `vh_present` (the new K and V again); rows past T_b are zero (onnxruntime leaves them unspecified).
struct WindowCache {
  Value *keys, *values, *mask;
};
WindowCache window_cache(Writer& w, Value* past_k, Value* past_v, Value* kh, Value* vh, Value* kh_present,
                         Value* vh_present, Value* lens, Value* past_len, Value* seq, int64_t window,
                         Value* present_k, Value* present_v) {
  Value* cap = w.dim(past_k, 2, "cache_rows");
  Value* period =
      w.op("Max", "cache_period",
           {w.op("Add", "cache_free",
                 {w.op("Sub", "cache_slack", {cap, w.i64("cache_w", window)}), w.i64("cache_1", 1)}),
            w.i64("period_min", 1)});
  Value* past_start = window_start(w, past_len, cap, period, window, "past_start");
  Value* now_start = window_start(w, lens, cap, period, window, "present_start");
  auto per_batch = [&](Value* x, const std::string& name) {
    return w.op("Reshape", name, {x, w.ints(name + "_shape", {-1, 1, 1, 1})});
  };
  Value* ps = per_batch(past_start, "past_start_b");
  Value* pl = per_batch(past_len, "past_length_b");
  // The rows attended: their positions and which hold a key.
  Value* all = w.op("Add", "window_rows", {cap, seq});
  Value* r = w.op(
      "Reshape", "row_index",
      {w.op("Range", "rows", {w.i64("row0", 0), all, w.i64("row1", 1)}), w.ints("row_shape", {1, 1, 1, -1})});
  Value* in_past = w.op("Less", "row_in_past", {r, cap});
  Value* pos = w.op("Where", "row_positions",
                    {in_past, w.op("Add", "past_row_positions", {ps, r}),
                     w.op("Add", "new_row_positions", {pl, w.op("Sub", "new_row_index", {r, cap})})});
  Value* held = w.op("Or", "row_held",
                     {w.op("Not", "row_new", {in_past}),
                      w.op("Less", "past_row_held", {r, w.op("Sub", "past_held", {pl, ps})})});
  Value* steps = w.op("Reshape", "window_query_steps",
                      {w.op("Range", "window_queries", {w.i64("wq0", 0), seq, w.i64("wq1", 1)}),
                       w.ints("wq_column", {1, 1, -1, 1})});
  Value* at = w.op("Add", "window_query_positions", {pl, steps});
  Value* seen = w.op(
      "And", "window_seen",
      {w.op("And", "window_causal", {held, w.op("LessOrEqual", "window_not_after", {pos, at})}),
       w.op("Greater", "window_in", {pos, w.op("Sub", "window_first", {at, w.i64("window_size", window)})})});
  // The present's row i: position start(T_b) + i, from a new row or a past one, each read by a
  // gather of its own (the present's kernels read the inputs, not the rows attended). K's and V's
  // presents compute their rows' sources each, so that their kernels share nothing.
  auto present = [&](Value* past, Value* fresh, Value* out, const std::string& name) {
    Value* i =
        w.op("Reshape", name + "_row_index",
             {w.op("Range", name + "_rows_range", {w.i64(name + "_r0", 0), cap, w.i64(name + "_r1", 1)}),
              w.ints(name + "_row_shape", {1, 1, -1, 1})});
    Value* q = w.op("Add", name + "_positions", {per_batch(now_start, name + "_start_b"), i});
    Value* from_new = w.op("GreaterOrEqual", name + "_from_new_rows", {q, pl});
    Value* filled = w.op("Less", name + "_filled", {q, per_batch(lens, name + "_key_counts_b")});
    Value* zero_row = w.i64(name + "_row0", 0);
    // Rows read out of range are clamped (their values are not taken).
    Value* new_row =
        w.op("Min", name + "_new_row",
             {w.op("Max", name + "_new_low", {w.op("Sub", name + "_new_index", {q, pl}), zero_row}),
              w.op("Sub", name + "_new_last", {seq, w.i64(name + "_1", 1)})});
    Value* past_row =
        w.op("Min", name + "_past_row",
             {w.op("Max", name + "_past_low", {w.op("Sub", name + "_past_index", {q, ps}), zero_row}),
              w.op("Sub", name + "_past_last", {cap, w.i64(name + "_1b", 1)})});
    Value* full = with_rows(w, past, cap, name + "_index_shape");
    Value* from_fresh =
        w.op("GatherElements", name + "_from_new",
             {fresh, w.op("Expand", name + "_new_rows", {new_row, full})}, {{"axis", int64_t{2}}});
    Value* from_past =
        w.op("GatherElements", name + "_from_past",
             {past, w.op("Expand", name + "_past_rows", {past_row, full})}, {{"axis", int64_t{2}}});
    Value* zero = w.op("CastLike", name + "_zero", {w.f32(name + "_0", 0), past});
    Value* picked = w.op("Where", name + "_picked", {from_new, from_fresh, from_past});
    return w.op("Where", name, {filled, picked, zero}, {}, out);
  };
  present(past_k, kh_present, present_k, "present_key");
  present(past_v, vh_present, present_v, "present_value");
  Value* keys_k = w.op("Concat", "window_keys", {past_k, kh}, {{"axis", int64_t{2}}});
  Value* keys_v = w.op("Concat", "window_values", {past_v, vh}, {{"axis", int64_t{2}}});
  return {keys_k, keys_v, seen};
}

}  // namespace

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
  ASSIGN_OR_RETURN(Value * mask, scores_mask(w, c, c.input(3), bias_scores, past_len, total, x));
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

// MultiHeadAttention: Q, K and V already projected (onnxruntime's optimizer writes it for BERT
// when asked to; its modules for T5, Stable Diffusion's UNet, SAM2 and MMDiT write it too). query
// [B, S, D], or Q, K and V packed [B, S, N, 3, H]; key and value [B, L, D], heads first
// [B, N, L, H] (a cross attention's cached K and V), or packed [B, L, N, 2, H] with no value.
// bias [D + D + Dv] is added to Q, K and V, to Q alone where K and V come heads first (as
// onnxruntime adds it). The key padding mask is read as Attention's mask_index, attention_bias
// added, past_key and past_value [B, N, P, H] put in front of K and V, present_key and
// present_value written.
Status multi_head_attention(Writer& w, const Node& c) {
  Value *q = c.input(0), *k = c.input(1), *v = c.input(2), *bias = c.input(3), *past_k = c.input(6),
        *past_v = c.input(7);
  if (!q) return refuse(c, "needs query (input 0)");
  const int64_t heads = c.attr_int("num_heads", 0);
  if (heads < 1) return refuse(c, "needs num_heads, a positive count");
  if (c.input(8)) return refuse(c, "past_sequence_length (input 8, with a shared buffer) is not read");
  if (c.input(9)) return refuse(c, "cache_indirection (input 9, beam search) is not read");
  if (c.output(3))
    return refuse(c, "its qk output (3) is read; stitch writes the attention and the present K and V only");
  // Query i at position past + i only where the keys are as many as the queries (self attention):
  // onnxruntime's CPU kernel masks otherwise in a way that was not reproducible, and the lengths
  // are not known here.
  if (c.attr_int("unidirectional", 0) != 0)
    return refuse(
        c, "unidirectional=1 is not read (a causal mask given as attention_bias or key_padding_mask is)");
  if ((past_k == nullptr) != (past_v == nullptr))
    return refuse(c, "past_key and past_value (inputs 6 and 7) are given together or not at all");
  // [B, L, N, parts, H] as `parts` values [B, L, N * H].
  auto unpack = [&](Value* x, int64_t parts, const std::string& name) {
    std::vector<Value*> outs;
    for (int64_t i = 0; i < parts; ++i) outs.push_back(w.fresh(fmt::format("{}_part{}", name, i)));
    w.node("Split", name + "_split", {x}, outs, {{"axis", int64_t{3}}, {"num_outputs", parts}});
    for (int64_t i = 0; i < parts; ++i)
      outs[static_cast<size_t>(i)] = w.op("Reshape", fmt::format("{}_{}", name, i),
                                          {outs[static_cast<size_t>(i)], w.ints(name + "_flat", {0, 0, -1})});
    return outs;
  };
  ASSIGN_OR_RETURN(const size_t qr, rank_or_refuse(c, q, "query"));
  bool heads_first = false;  // K and V [B, N, L, H]
  if (qr == 5) {
    if (k || v)
      return refuse(c,
                    "its query is packed Q, K and V [batch, sequence, heads, 3, head size] and a key or "
                    "value is given too");
    const auto qkv = unpack(q, 3, "qkv");
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else if (qr == 3) {
    if (!k) return refuse(c, "needs key (input 1) with a 3-D query");
    ASSIGN_OR_RETURN(const size_t kr, rank_or_refuse(c, k, "key"));
    if (kr == 5) {
      if (v)
        return refuse(
            c, "its key is packed K and V [batch, length, heads, 2, head size] and a value is given too");
      const auto kv = unpack(k, 2, "kv");
      k = kv[0], v = kv[1];
    } else if (kr == 3 || kr == 4) {
      if (!v) return refuse(c, "needs value (input 2) with a 3-D or 4-D key");
      ASSIGN_OR_RETURN(const size_t vr, rank_or_refuse(c, v, "value"));
      if (vr != kr) return refuse(c, fmt::format("its key is {}-D and its value {}-D", kr, vr));
      heads_first = kr == 4;
    } else {
      return refuse(
          c, fmt::format("its key '{}' is {}-D; stitch reads 3-D, 4-D (heads first) and 5-D (packed) keys",
                         k->name, kr));
    }
  } else {
    return refuse(
        c, fmt::format("its query '{}' is {}-D; stitch reads 3-D and 5-D (packed) queries", q->name, qr));
  }
  if (heads_first && past_k)
    return refuse(c, "a past with key and value given heads first (a cross attention's cache) is not read");
  if (bias) {  // Q's, K's and V's parts: [0, D), [D, D + Dk), [D + Dk, end)
    auto end = [&](Value* x, const std::string& name) {
      return w.op("Unsqueeze", name, {w.dim(x, 2, name + "_width"), w.ints(name + "_axis", {0})});
    };
    Value* q_end = end(q, "q_bias_end");
    auto part = [&](Value* from, Value* to, const std::string& name) {
      return w.op("Slice", name, {bias, from, to, w.ints(name + "_axes", {0})});
    };
    q = w.op("Add", "q_bias_add", {q, part(w.ints("q_bias_start", {0}), q_end, "q_bias")});
    if (!heads_first) {
      Value* k_end = w.op("Add", "k_bias_end", {q_end, end(k, "k_width")});
      k = w.op("Add", "k_bias_add", {k, part(q_end, k_end, "k_bias")});
      v = w.op("Add", "v_bias_add",
               {v, part(k_end, w.ints("v_bias_end", {std::numeric_limits<int64_t>::max()}), "v_bias")});
    }
  }
  Value* kv_len = w.dim(k, heads_first ? 2 : 1, "key_length");
  Value* past_len = past_k ? w.dim(past_k, 2, "past_length") : w.i64("no_past", 0);
  Value* total = w.op("Add", "total_length", {kv_len, past_len});
  ASSIGN_OR_RETURN(Value * mask, scores_mask(w, c, c.input(4), c.input(5), past_len, total, q));
  std::map<std::string, AttrValue> attrs;
  if (!heads_first) attrs = {{"q_num_heads", heads}, {"kv_num_heads", heads}};
  if (c.attr_float("scale", 0.0f) != 0.0f) attrs["scale"] = c.attr_float("scale", 0.0f);
  if (!heads_first) {
    w.node("Attention", "", {q, k, v, mask, past_k, past_v}, {c.output(0), c.output(1), c.output(2)},
           std::move(attrs));
    return Status::ok();
  }
  // ONNX's Attention reads Q, K and V all 3-D or all 4-D: Q heads first too, and the output back.
  Value* qh = w.op("Transpose", "q_heads_first",
                   {w.op("Reshape", "q_heads", {q, w.ints("q_heads_shape", {0, 0, heads, -1})})},
                   {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  Value* y = w.fresh("heads_first");
  w.node("Attention", "", {qh, k, v, mask}, {y, c.output(1), c.output(2)}, std::move(attrs));
  Value* yt = w.op("Transpose", "heads_back", {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  w.op("Reshape", "output", {yt, w.ints("output_shape", {0, 0, -1})}, {}, c.output(0));
  return Status::ok();
}

// GroupQueryAttention, as onnxruntime's model builder writes every decoder layer of LLaMA, Mistral,
// Phi, Qwen, Gemma and the others (onnxruntime-genai's models): query [B, S, N * H] (or Q, K and V
// packed [B, S, (N + 2 Nkv) H] with no key), key and value [B, S, Nkv * H]; the cache past_key and
// past_value [B, Nkv, P, H], heads first; seqlens_k [B] each batch's key count after this step
// less one (T_b - 1); total_sequence_length, the largest T_b. Written as onnxruntime's CPU kernel
// computes it (measured):
//  - A first prompt (S == total_sequence_length) has no past; otherwise batch b's new keys follow
//    its past_b = T_b - S cached ones.
//  - With do_rotary, Q and K rotate (RotaryEmbedding, opset 23) at positions past_b + s, or at
//    position_ids (a first prompt reads only its first value, an offset); the caches' width gives
//    the rotated part.
//  - present_key and present_value [B, Nkv, max(P, total_sequence_length), H]: the past (zeros
//    after it up to that length) with the new K and V written at past_b (TensorScatter, opset 24,
//    which writes into the past's storage when the past is an input read by nothing else). Rows at
//    or past T_b are unspecified (the op's definition); onnxruntime's CPU kernel zeroes them.
//  - Attention (opset 23) of Q over the present K and V, a boolean mask of the keys each query
//    sees: key j below T_b and, causal unless causal=0, query s at position past_b + s sees the
//    keys up to it, the last local_window_size of them with a window; attention_bias added after
//    the softcap. (Attention's nonpad_kv_seqlen places query s at T_b - S + s, which is the same
//    but in a right-padded first prompt, where onnxruntime puts it at s.)
//  - head_sink [N] (input 11), a logit per head that joins each row of its softmax with no value,
//    or smooth_softmax=1 (sinks of 0 where head_sink is not given): Attention's input 7, which
//    stitch adds to the op (ops/attention.cc).
// Refused, naming the node: a quantized cache, a window-sized cache with a bias or position ids, right-padded
// chunks (query_seqlens), Q and K norms (onnxruntime's CPU kernel does not implement them, so there is no
// reference to check them against), the QK output.
Status group_query_attention(Writer& w, const Node& c) {
  Value *q = c.input(0), *k = c.input(1), *v = c.input(2), *past_k = c.input(3), *past_v = c.input(4),
        *seqlens = c.input(5), *total_in = c.input(6), *cos = c.input(7), *sin = c.input(8),
        *pos = c.input(9), *bias = c.input(10);
  if (!q || !seqlens || !total_in)
    return refuse(c, "needs query, seqlens_k and total_sequence_length (inputs 0, 5 and 6)");
  const int64_t heads = c.attr_int("num_heads", 0), kv_heads = c.attr_int("kv_num_heads", 0);
  if (heads < 1 || kv_heads < 1 || heads % kv_heads != 0)
    return refuse(c, "needs num_heads and kv_num_heads positive, num_heads a multiple of kv_num_heads");
  if (c.input(12) || c.input(13) || c.attr_int("kv_cache_bit_width", 0) != 0 ||
      c.attr_string("k_quant_type", "NONE") != "NONE" || c.attr_string("v_quant_type", "NONE") != "NONE")
    return refuse(c,
                  "a quantized KV cache (k_scale, v_scale, kv_cache_bit_width, k_quant_type, v_quant_type) "
                  "is not read");
  if (c.input(14) || c.input(15))
    return refuse(c,
                  "q_norm_weight and k_norm_weight (inputs 14 and 15) are not read; write the per-head norms "
                  "as SimplifiedLayerNormalization nodes before it");
  if (c.input(16)) return refuse(c, "query_seqlens (input 16, right-padded chunks) is not read");
  if (c.attr_int("qk_output", 0) != 0 || c.output(3))
    return refuse(c, "its QK output (output 3, qk_output) is not written");
  const int64_t causal = c.attr_int("causal", 1), window = c.attr_int("local_window_size", -1);
  if (causal != 0 && causal != 1) return refuse(c, fmt::format("causal={} is not 0 or 1", causal));
  if (causal == 0 && window != -1) return refuse(c, "local_window_size is given with causal=0");
  if ((past_k == nullptr) != (past_v == nullptr))
    return refuse(c, "past_key and past_value (inputs 3 and 4) are given together or not at all");
  const bool sliding = c.attr_int("sliding_window_cache", 0) != 0;
  if (sliding && (window <= 0 || !past_k))
    return refuse(
        c,
        "sliding_window_cache=1 needs local_window_size positive and a past buffer of at least that "
        "many rows (inputs 3 and 4)");
  if (sliding && (bias || pos))
    return refuse(c,
                  "sliding_window_cache=1 with attention_bias or position_ids (inputs 10 and 9) is not read");
  const bool rotary = c.attr_int("do_rotary", 0) != 0;
  if (rotary && (!cos || !sin))
    return refuse(c, "do_rotary=1 needs cos_cache and sin_cache (inputs 7 and 8)");
  Value *k_for_present = k, *v_for_present = v;
  if (!k) {  // packed [B, S, (N + 2 Nkv) H]: H from the width
    if (v) return refuse(c, "its value is given without a key (packed Q, K and V come as the query alone)");
    Value* head =
        w.op("Div", "head_size", {w.dim(q, 2, "packed_width"), w.i64("head_count", heads + 2 * kv_heads)});
    Value* kv_width = as_vector(w, w.op("Mul", "kv_width", {head, w.i64("kv_heads", kv_heads)}), "kv_part");
    Value* sizes = w.op(
        "Concat", "qkv_sizes",
        {as_vector(w, w.op("Mul", "q_width", {head, w.i64("q_heads", heads)}), "q_part"), kv_width, kv_width},
        {{"axis", int64_t{0}}});
    q = w.fresh("q"), k = w.fresh("k"), v = w.fresh("v");
    w.node("Split", "qkv_split", {c.input(0), sizes}, {q, k, v}, {{"axis", int64_t{-1}}});
    if (sliding) {  // the present's own K and V (below)
      k_for_present = w.fresh("k_present"), v_for_present = w.fresh("v_present");
      w.node("Split", "qkv_split_present", {c.input(0), sizes},
             {w.fresh("q_unused"), k_for_present, v_for_present}, {{"axis", int64_t{-1}}});
    }
  } else if (!v) {
    return refuse(c, "its key is given without a value");
  }
  auto heads_first = [&](Value* x, int64_t n, const std::string& name) {
    Value* split = w.op("Reshape", name + "_split", {x, w.ints(name + "_shape", {0, 0, n, -1})});
    return w.op("Transpose", name, {split}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  Value* qh = heads_first(q, heads, "q_heads");
  Value* kh = heads_first(k, kv_heads, "k_heads");
  Value* vh = heads_first(v, kv_heads, "v_heads");
  // A window-sized cache's present is gathered from the new K and V by kernels of its own: they
  // compute them again (a copy of the split, the heads' transposes and the rotation), so that they
  // do not wait for the attention's and run beside them.
  Value* kh_present = sliding ? heads_first(k_for_present, kv_heads, "k_heads_present") : nullptr;
  Value* vh_present = sliding ? heads_first(v_for_present, kv_heads, "v_heads_present") : nullptr;
  // Each batch's key count T_b, and past_b: 0 in a first prompt, T_b - S after.
  Value* seq = w.dim(q, 1, "sequence");
  const std::map<std::string, AttrValue> to_i64 = {{"to", int64_t{7}}};
  Value* total = w.op("Reshape", "total_length",
                      {w.op("Cast", "total_i64", {total_in}, to_i64), w.ints("scalar_shape", {})});
  Value* lens = w.op("Add", "key_counts", {w.op("Cast", "seqlens_i64", {seqlens}, to_i64), w.i64("one", 1)});
  Value* first = w.op("Equal", "first_prompt", {seq, total});
  Value* past_len =
      w.op("Where", "past_lengths", {first, w.i64("no_past", 0), w.op("Sub", "cached", {lens, seq})});
  if (rotary) {
    // Each rotation computes its positions itself: one value read by both would be a kernel of
    // its own, ahead of the two that rotate (they are cheap to compute twice).
    Value* steps = w.op("Range", "steps", {w.i64("step0", 0), seq, w.i64("step1", 1)});
    Value* column = w.op("Unsqueeze", "past_column", {past_len, w.ints("column_axis", {1})});
    Value* p0 = nullptr;
    if (pos)  // a first prompt reads only the first value: an offset
      p0 = w.op("Gather", "first_position",
                {w.op("Reshape", "position_list",
                      {w.op("Cast", "position_ids_i64", {pos}, to_i64), w.ints("list_shape", {-1})}),
                 w.i64("at0", 0)},
                {{"axis", int64_t{0}}});
    auto positions = [&](const std::string& part) {
      if (!pos) return w.op("Add", part + "_positions", {column, steps});
      Value* given = w.op("Cast", part + "_position_ids", {pos}, to_i64);
      return w.op("Where", part + "_positions",
                  {first, w.op("Add", part + "_offset_positions", {steps, p0}), given});
    };
    std::map<std::string, AttrValue> attrs = {{"interleaved", c.attr_int("rotary_interleaved", 0)}};
    if (cos->constant && cos->constant->dims().size() == 2)  // a part of each head rotates
      attrs["rotary_embedding_dim"] = 2 * cos->constant->dims()[1];
    qh = w.op("RotaryEmbedding", "q_rotary", {qh, cos, sin, positions("q")}, attrs);
    kh = w.op("RotaryEmbedding", "k_rotary", {kh, cos, sin, positions("k")}, attrs);
    if (sliding)
      kh_present =
          w.op("RotaryEmbedding", "k_rotary_present", {kh_present, cos, sin, positions("k_present")}, attrs);
  }
  Value *pk = nullptr, *pv = nullptr, *mask = nullptr, *rows = nullptr;
  if (sliding) {
    const WindowCache wc = window_cache(w, past_k, past_v, kh, vh, kh_present, vh_present, lens, past_len,
                                        seq, window, c.output(1), c.output(2));
    pk = wc.keys, pv = wc.values, mask = wc.mask;
  } else {
    pk = present_cache(w, past_k, kh, past_len, total, c.output(1), "present_key");
    pv = present_cache(w, past_v, vh, past_len, total, c.output(2), "present_value");
    rows = w.dim(pk, 2, "present_rows");
    mask = keys_seen(w, rows, lens, past_len, seq, causal, window);
  }
  if (bias) {  // added after the softcap, as the mask is; [.., S, total_sequence_length] grown to the rows
    Value* pads = w.op("Concat", "bias_pads",
                       {w.ints("bias_pads_before", {0, 0, 0, 0, 0, 0, 0}),
                        as_vector(w, w.op("Sub", "bias_growth", {rows, total}), "bias_pad_keys")},
                       {{"axis", int64_t{0}}});
    Value* zero = w.op("CastLike", "seen_zero", {w.f32("zero", 0), bias});
    Value* unseen = w.op("CastLike", "unseen", {w.f32("lowest", std::numeric_limits<float>::lowest()), bias});
    mask = w.op("Add", "bias_masked",
                {w.op("Where", "keys_mask", {mask, zero, unseen}), w.op("Pad", "bias_grown", {bias, pads})});
  }
  std::map<std::string, AttrValue> attrs;
  if (c.attr_float("scale", 0.0f) != 0.0f) attrs["scale"] = c.attr_float("scale", 0.0f);
  if (c.attr_float("softcap", 0.0f) != 0.0f) attrs["softcap"] = c.attr_float("softcap", 0.0f);
  // A sink per head (head_sink; smooth_softmax's are 0 where no head_sink is given, as onnxruntime
  // reads them): Attention's input 7, stitch's own (ops/attention.cc).
  Value* sink = c.input(11);
  if (!sink && c.attr_int("smooth_softmax", 0) != 0)
    sink = w.op(
        "CastLike", "smooth_sinks",
        {w.constant("zero_sinks", Tensor::from_f64(DType::kF32, {heads}, std::vector<double>(heads, 0.0))),
         c.input(0)});
  Value* y = w.fresh("heads_first");
  w.node("Attention", "", {qh, pk, pv, mask, nullptr, nullptr, nullptr, sink}, {y}, std::move(attrs));
  Value* yt = w.op("Transpose", "heads_back", {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  w.op("Reshape", "output", {yt, w.ints("output_shape", {0, 0, -1})}, {}, c.output(0));
  return Status::ok();
}

}  // namespace stitch::contrib
