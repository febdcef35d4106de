// Attention and RotaryEmbedding (opset 23), Attention's nonpad_kv_seqlen (24) and sliding window
// (25), TensorScatter (24): PyTorch's exporter writes scaled_dot_product_attention and (through its
// rewrites) the rotary embedding as these ops from opset 23; TensorScatter writes an update into a
// KV cache of fixed length. The front end writes them as the ops they are defined by
// (passes/expand_attention.cc) before planning; the rules here check their inputs and the
// reference implementations evaluate them in double.
//
// Attention takes one input beyond ONNX's, written only by the front end's expansion of
// onnxruntime's GroupQueryAttention (importer/contrib_attention.cc): input 7, a sink logit per
// query head ([q_num_heads], Q's type) that joins every row of that head's softmax as one more
// score with no value, so a row's weights sum to less than 1 (gpt-oss's head sinks, onnxruntime's
// smooth_softmax with sinks of 0). A model's own Attention node has at most 7 inputs (the
// importer's schema check refuses more).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/index_check.h"
#include "ops/op_util.h"

namespace stitch::ops {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

bool known(int64_t d) { return d >= 0; }
int64_t times(int64_t a, int64_t b) { return known(a) && known(b) ? a * b : -1; }

// ---- Attention ----------------------------------------------------------------------------------

// The shapes of an Attention node's Q, K and V as [batch, heads, sequence, head size] (-1 where
// unknown), checked against each other.
struct AttentionShape {
  int64_t batch = -1, q_heads = -1, kv_heads = -1, q_len = -1, kv_len = -1, past = 0, head = -1, v_head = -1;
  bool three_d = false;
  int64_t total() const { return known(kv_len) && known(past) ? kv_len + past : -1; }
};

StatusOr<AttentionShape> attention_shape(const Node& n, const Dims& q, const Dims& k, const Dims& v,
                                         const Dims* past_k, const Dims* past_v) {
  AttentionShape s;
  if (q.size() != k.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4))
    return node_error(n, fmt::format("Q, K and V must all be 3-D or all 4-D, got {}, {} and {}",
                                     dims_to_string(q), dims_to_string(k), dims_to_string(v)));
  s.three_d = q.size() == 3;
  s.batch = q[0];
  if (s.three_d) {
    if (!n.has_attr("q_num_heads") || !n.has_attr("kv_num_heads"))
      return node_error(n, "3-D Q, K and V need the q_num_heads and kv_num_heads attributes");
    s.q_heads = n.attr_int("q_num_heads", 0);
    s.kv_heads = n.attr_int("kv_num_heads", 0);
    if (s.q_heads < 1 || s.kv_heads < 1)
      return node_error(
          n, fmt::format("q_num_heads ({}) and kv_num_heads ({}) must be positive", s.q_heads, s.kv_heads));
    for (const auto& [d, h, what] : {std::tuple{q[2], s.q_heads, "Q"}, std::tuple{k[2], s.kv_heads, "K"},
                                     std::tuple{v[2], s.kv_heads, "V"}})
      if (known(d) && d % h != 0)
        return node_error(n,
                          fmt::format("{}'s hidden size {} is not a multiple of its {} heads", what, d, h));
    s.q_len = q[1];
    s.kv_len = k[1];
    s.head = known(q[2]) ? q[2] / s.q_heads : -1;
    const int64_t k_head = known(k[2]) ? k[2] / s.kv_heads : -1;
    if (known(s.head) && known(k_head) && s.head != k_head)
      return node_error(n, fmt::format("Q's head size {} differs from K's {}", s.head, k_head));
    s.v_head = known(v[2]) ? v[2] / s.kv_heads : -1;
    if (known(v[1]) && known(s.kv_len) && v[1] != s.kv_len)
      return node_error(n, fmt::format("K has {} positions, V {}", s.kv_len, v[1]));
  } else {
    s.q_heads = q[1];
    s.kv_heads = k[1];
    s.q_len = q[2];
    s.kv_len = k[2];
    s.head = q[3];
    s.v_head = v[3];
    if (known(k[3]) && known(s.head) && k[3] != s.head)
      return node_error(n, fmt::format("Q's head size {} differs from K's {}", s.head, k[3]));
    if ((known(v[1]) && known(k[1]) && v[1] != k[1]) || (known(v[2]) && known(k[2]) && v[2] != k[2]))
      return node_error(n, fmt::format("K ({}) and V ({}) differ in heads or positions", dims_to_string(k),
                                       dims_to_string(v)));
  }
  for (const Dims* d : {&k, &v})
    if (known((*d)[0]) && known(s.batch) && (*d)[0] != s.batch)
      return node_error(n, fmt::format("Q's batch is {}, K's or V's {}", s.batch, (*d)[0]));
  if (known(s.q_heads) && known(s.kv_heads) && (s.kv_heads < 1 || s.q_heads % s.kv_heads != 0))
    return node_error(
        n, fmt::format("Q's {} heads are not a multiple of K's and V's {}", s.q_heads, s.kv_heads));
  if ((past_k == nullptr) != (past_v == nullptr))
    return node_error(n, "past_key and past_value must be given together");
  if (past_k && (past_k->size() != 4 || past_v->size() != 4))
    return node_error(n,
                      fmt::format("past_key {} and past_value {} must be [batch, kv heads, past, head size]",
                                  dims_to_string(*past_k), dims_to_string(*past_v)));
  if (past_k) {
    const Dims want_k{s.batch, s.kv_heads, (*past_k)[2], s.head},
        want_v{s.batch, s.kv_heads, (*past_v)[2], s.v_head};
    auto fits = [](const Dims& got, const Dims& want) {
      if (got.size() != 4) return false;
      for (size_t i = 0; i < 4; ++i)
        if (known(got[i]) && known(want[i]) && got[i] != want[i]) return false;
      return true;
    };
    if (past_k->size() != 4 || !fits(*past_k, want_k) || !fits(*past_v, want_v) ||
        (*past_k)[2] != (*past_v)[2])
      return node_error(
          n, fmt::format("past_key {} and past_value {} must be [batch, kv heads, past, head size] "
                         "with the same past length",
                         dims_to_string(*past_k), dims_to_string(*past_v)));
    s.past = (*past_k)[2];
  }
  return s;
}

Status infer_attention(InferContext& ctx) {
  const Node& n = ctx.node();
  for (size_t i = 0; i < 3; ++i)
    if (!ctx.has_input(i))
      return ctx.error(fmt::format("needs input {} ({})", i, i == 0 ? "Q" : i == 1 ? "K" : "V"));
  if (!is_float(ctx.dtype(0)) || ctx.dtype(1) != ctx.dtype(0) || !is_float(ctx.dtype(2)))
    return ctx.error("expects floating-point Q, K and V, Q and K of one type");
  const Dims* pk = ctx.has_input(4) ? &ctx.dims(4) : nullptr;
  const Dims* pv = ctx.has_input(5) ? &ctx.dims(5) : nullptr;
  if (n.inputs.size() > 8) return ctx.error("has more than 8 inputs");
  if (ctx.has_input(6) && n.opset < 24)
    return ctx.error(
        fmt::format("nonpad_kv_seqlen (input 6) is an opset-24 input; the model's opset is {}", n.opset));
  if ((n.has_attr("left_window_size") || n.has_attr("right_window_size")) && n.opset < 25)
    return ctx.error(
        fmt::format("left_window_size and right_window_size are opset-25 attributes; the model's "
                    "opset is {}",
                    n.opset));
  ASSIGN_OR_RETURN(AttentionShape s, attention_shape(n, ctx.dims(0), ctx.dims(1), ctx.dims(2), pk, pv));
  const Dims scores{s.batch, s.q_heads, s.q_len, s.total()};
  if (ctx.has_input(7)) {  // the head sinks (above)
    const Dims& h = ctx.dims(7);
    if (ctx.dtype(7) != ctx.dtype(0) || h.size() != 1 ||
        (known(h[0]) && known(s.q_heads) && h[0] != s.q_heads))
      return ctx.error(fmt::format(
          "the head sinks (input 7; GroupQueryAttention's head_sink) must be Q's type, one per query "
          "head: [{}], got {} of shape {}",
          s.q_heads, dtype_name(ctx.dtype(7)), dims_to_string(h)));
  }
  if (ctx.has_input(6)) {
    if (pk)
      return ctx.error("nonpad_kv_seqlen (an external cache) must not be given with past_key and past_value");
    const Dims& l = ctx.dims(6);
    if (ctx.dtype(6) != DType::kI64 || l.size() != 1 || (known(l[0]) && known(s.batch) && l[0] != s.batch))
      return ctx.error(fmt::format("nonpad_kv_seqlen must be int64 of shape [batch] = [{}], got {} {}",
                                   s.batch, dtype_name(ctx.dtype(6)), dims_to_string(l)));
    if (const Tensor* c = ctx.constant(6); c && known(s.total())) {  // refused now, not at run time
      RETURN_IF_ERROR(refuse_outside(n, valid_keys_bounds(n, s.total()), c->to_i64()));
    }
  }
  for (const char* w : {"left_window_size", "right_window_size"})
    if (n.attr_int(w, -1) < -1) return ctx.error(fmt::format("{} {} is below -1", w, n.attr_int(w, -1)));
  if (ctx.has_input(3)) {
    const DType mt = ctx.dtype(3);
    if (mt != DType::kBool && mt != ctx.dtype(0))
      return ctx.error(fmt::format("attn_mask must be bool or Q's type, got {}", dtype_name(mt)));
    bool fits = ctx.rank(3) <= 4;
    for (int64_t i = 0; fits && i < ctx.rank(3); ++i) {
      const int64_t m = ctx.dims(3)[ctx.rank(3) - 1 - i], want = scores[3 - i];
      // From opset 24 the keys' axis may be shorter than the scores' (padded with masked keys).
      fits = !known(m) || !known(want) || m == 1 || m == want || (i == 0 && n.opset >= 24 && m < want);
    }
    if (!fits)
      return ctx.error(fmt::format("attn_mask {} does not broadcast to the scores {}",
                                   dims_to_string(ctx.dims(3)), dims_to_string(scores)));
  }
  const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return ctx.error(fmt::format("qk_matmul_output_mode {} is not 0, 1, 2 or 3", mode));
  if (n.has_attr("softmax_precision")) {
    auto t = dtype_from_onnx(static_cast<int>(n.attr_int("softmax_precision", 1)));
    if (!t || !is_float(*t))
      return ctx.error(fmt::format("softmax_precision {} is not a floating-point type",
                                   n.attr_int("softmax_precision", 1)));
  }
  if (s.three_d)
    ctx.set_output(0, ctx.dtype(0), {s.batch, s.q_len, times(s.q_heads, s.v_head)});
  else
    ctx.set_output(0, ctx.dtype(0), {s.batch, s.q_heads, s.q_len, s.v_head});
  ctx.set_output(1, ctx.dtype(0), {s.batch, s.kv_heads, s.total(), s.head});
  ctx.set_output(2, ctx.dtype(2), {s.batch, s.kv_heads, s.total(), s.v_head});
  ctx.set_output(3, ctx.dtype(0), scores);
  return Status::ok();
}

// x (3-D [B, S, H*D] or 4-D [B, H, S, D]) as [B, H, S, D] values.
std::vector<double> as_heads(const Tensor& x, int64_t heads) {
  std::vector<double> v = x.to_f64();
  if (x.rank() == 4) return v;
  const int64_t b = x.dims()[0], s = x.dims()[1], d = x.dims()[2] / heads;
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < b; ++i)
    for (int64_t t = 0; t < s; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < d; ++e)
          out[((i * heads + h) * s + t) * d + e] = v[((i * s + t) * heads + h) * d + e];
  return out;
}

// [B, H, P, D] and [B, H, S, D] joined along the positions.
std::vector<double> join_positions(const std::vector<double>& past, const std::vector<double>& now,
                                   int64_t bh, int64_t p, int64_t s, int64_t d) {
  std::vector<double> out(static_cast<size_t>(bh * (p + s) * d));
  for (int64_t i = 0; i < bh; ++i) {
    std::copy(past.begin() + i * p * d, past.begin() + (i + 1) * p * d, out.begin() + i * (p + s) * d);
    std::copy(now.begin() + i * s * d, now.begin() + (i + 1) * s * d, out.begin() + i * (p + s) * d + p * d);
  }
  return out;
}

Status eval_attention(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
  const Tensor* mask = in.size() > 3 ? in[3] : nullptr;
  const Tensor* pk = in.size() > 4 ? in[4] : nullptr;
  const Tensor* pv = in.size() > 5 ? in[5] : nullptr;
  const Tensor* nonpad = in.size() > 6 ? in[6] : nullptr;
  const std::vector<double> sinks = in.size() > 7 && in[7] ? in[7]->to_f64() : std::vector<double>{};
  ASSIGN_OR_RETURN(AttentionShape s, attention_shape(n, q.dims(), k.dims(), v.dims(),
                                                     pk ? &pk->dims() : nullptr, pv ? &pv->dims() : nullptr));
  const int64_t B = s.batch, Hq = s.q_heads, Hk = s.kv_heads, Sq = s.q_len, P = s.past, T = s.total(),
                D = s.head, Dv = s.v_head, group = Hq / Hk;
  std::vector<double> qv = as_heads(q, Hq), kv = as_heads(k, Hk), vv = as_heads(v, Hk);
  if (pk) {
    kv = join_positions(pk->to_f64(), kv, B * Hk, P, s.kv_len, D);
    vv = join_positions(pv->to_f64(), vv, B * Hk, P, s.kv_len, Dv);
  }
  const double scale = n.has_attr("scale") ? n.attr_float("scale", 1.0f) : 1.0 / std::sqrt(double(D));
  const double softcap = n.attr_float("softcap", 0.0f);
  const AttentionWindow window = AttentionWindow::of(n);
  const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
  std::vector<int64_t> valid(static_cast<size_t>(B), T);  // keys [0, valid[b]) are not padding
  if (nonpad) {  // a count outside [0, T] is refused (passes/expand_attention.cc checks it the same way)
    valid = nonpad->to_i64();
    RETURN_IF_ERROR(refuse_outside(n, valid_keys_bounds(n, T), valid));
  }
  // The mask as an additive bias over [B, Hq, Sq, T] (keys past a shorter mask masked).
  const Dims sd{B, Hq, Sq, T};
  std::vector<double> bias(static_cast<size_t>(num_elements(sd)), 0.0);
  if (mask) {
    const std::vector<double> m = mask->to_f64();
    const bool boolean = mask->dtype() == DType::kBool;
    Dims md = mask->dims();
    const int64_t mlen = md.empty() ? 1 : md.back();
    const bool shorter = !md.empty() && mlen != 1 && mlen < T;
    if (shorter) md.back() = T;
    BroadcastWalker(sd, {broadcast_strides(md, sd)}).run([&](int64_t i, const std::vector<int64_t>& o) {
      const int64_t j = i % T;
      if (shorter && j >= mlen) {
        bias[i] = kNegInf;
        return;
      }
      const int64_t at = shorter ? o[0] / T * mlen + j : o[0];
      bias[i] = boolean ? (m[at] != 0 ? 0.0 : kNegInf) : m[at];
    });
  }
  std::vector<double> y(static_cast<size_t>(B * Hq * Sq * Dv)), qk(bias.size()), row(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = b * Hk + h / group;
      // The queries' offset: the cached keys before them (past_key's, or the batch's valid keys
      // beyond the queries for an external cache).
      const int64_t offset = nonpad ? valid[b] - Sq : P;
      for (int64_t i = 0; i < Sq; ++i) {
        const int64_t r = ((b * Hq + h) * Sq + i) * T;
        bool any = false;
        double mx = kNegInf;
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e)
            dot += qv[((b * Hq + h) * Sq + i) * D + e] * kv[(kh * T + j) * D + e];
          dot *= scale;
          if (mode == 0) qk[r + j] = dot;
          if (softcap > 0) dot = softcap * std::tanh(dot / softcap);
          if (mode == 1) qk[r + j] = dot;
          double b_ij = bias[r + j];
          if (j >= valid[b] || !window.visible(offset, i, j)) b_ij = kNegInf;
          any |= b_ij != kNegInf;
          row[j] = dot + b_ij;
          if (mode == 2) qk[r + j] = row[j];
          mx = std::max(mx, row[j]);
        }
        double sum = 0;
        if (!sinks.empty()) {  // one more score, with no value: a fully masked row is zero
          const double sink = sinks[static_cast<size_t>(h)];
          mx = std::max(mx, sink);
          sum = std::exp(sink - mx);
          any = true;
        }
        for (int64_t j = 0; j < T; ++j) sum += (row[j] = any ? std::exp(row[j] - mx) : 0.0);
        for (int64_t j = 0; j < T; ++j) {
          if (any) row[j] /= sum;  // a fully masked row is zero
          if (mode == 3) qk[r + j] = row[j];
        }
        for (int64_t e = 0; e < Dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < T; ++j) acc += row[j] * vv[(kh * T + j) * Dv + e];
          const int64_t at = s.three_d ? ((b * Sq + i) * Hq + h) * Dv + e : ((b * Hq + h) * Sq + i) * Dv + e;
          y[at] = acc;
        }
      }
    }
  out[0] = Tensor::from_f64(q.dtype(), s.three_d ? Dims{B, Sq, Hq * Dv} : Dims{B, Hq, Sq, Dv}, y);
  if (out.size() > 1) out[1] = Tensor::from_f64(q.dtype(), {B, Hk, T, D}, kv);
  if (out.size() > 2) out[2] = Tensor::from_f64(v.dtype(), {B, Hk, T, Dv}, vv);
  if (out.size() > 3) out[3] = Tensor::from_f64(q.dtype(), sd, qk);
  return Status::ok();
}

// ---- RotaryEmbedding ----------------------------------------------------------------------------

struct RotaryShape {
  int64_t heads = -1, head = -1, rot = -1;
};

StatusOr<RotaryShape> rotary_shape(const Node& n, const Dims& x, const Dims& cos, const Dims& sin,
                                   const Dims* pos) {
  RotaryShape r;
  if (x.size() != 3 && x.size() != 4)
    return node_error(
        n, fmt::format("X must be [batch, heads, sequence, head size] or [batch, sequence, hidden], "
                       "got {}",
                       dims_to_string(x)));
  if (x.size() == 3) {
    if (n.attr_int("num_heads", 0) < 1) return node_error(n, "a 3-D X needs a positive num_heads attribute");
    r.heads = n.attr_int("num_heads", 0);
    if (known(x[2]) && x[2] % r.heads != 0)
      return node_error(n,
                        fmt::format("X's hidden size {} is not a multiple of num_heads {}", x[2], r.heads));
    r.head = known(x[2]) ? x[2] / r.heads : -1;
  } else {
    r.heads = x[1];
    r.head = x[3];
  }
  r.rot = n.attr_int("rotary_embedding_dim", 0);
  if (r.rot == 0) r.rot = r.head;
  if (known(r.head) && (r.rot < 0 || r.rot > r.head || r.rot % 2 != 0))
    return node_error(
        n, fmt::format("rotary_embedding_dim {} must be even and at most the head size {}", r.rot, r.head));
  const int64_t seq = x.size() == 3 ? x[1] : x[2];
  if (cos != sin)
    return node_error(
        n, fmt::format("cos_cache {} and sin_cache {} differ", dims_to_string(cos), dims_to_string(sin)));
  const size_t want_rank = pos ? 2 : 3;
  if (cos.size() != want_rank || (known(cos.back()) && known(r.rot) && cos.back() * 2 != r.rot))
    return node_error(
        n,
        fmt::format("cos_cache and sin_cache must be {} with {} values per row (the rotated half), "
                    "got {}",
                    pos ? "[positions, half]" : "[batch, sequence, half]", r.rot / 2, dims_to_string(cos)));
  const auto differs = [](int64_t a, int64_t b) { return known(a) && known(b) && a != b; };
  if (pos && (pos->size() != 2 || differs((*pos)[0], x[0]) || differs((*pos)[1], seq)))
    return node_error(n, fmt::format("position_ids must be [batch, sequence] = [{}, {}], got {}", x[0], seq,
                                     dims_to_string(*pos)));
  if (!pos && differs(cos[1], seq))
    return node_error(n, fmt::format("cos_cache has {} positions, X {}", cos[1], seq));
  if (!pos && differs(cos[0], x[0]) && differs(cos[0], 1))
    return node_error(n, fmt::format("cos_cache's batch is {}; X's is {}", cos[0], x[0]));
  return r;
}

Status infer_rotary(InferContext& ctx) {
  const Node& n = ctx.node();
  for (size_t i = 0; i < 3; ++i)
    if (!ctx.has_input(i)) return ctx.error(fmt::format("needs input {}", i));
  if (!is_float(ctx.dtype(0)) || ctx.dtype(1) != ctx.dtype(0) || ctx.dtype(2) != ctx.dtype(0))
    return ctx.error("expects X, cos_cache and sin_cache of one floating-point type");
  if (ctx.has_input(3) && ctx.dtype(3) != DType::kI64) return ctx.error("expects int64 position_ids");
  RETURN_IF_ERROR(
      rotary_shape(n, ctx.dims(0), ctx.dims(1), ctx.dims(2), ctx.has_input(3) ? &ctx.dims(3) : nullptr)
          .status());
  return same_as_input0(ctx);
}

Status eval_rotary(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const Tensor* pos = in.size() > 3 ? in[3] : nullptr;
  ASSIGN_OR_RETURN(RotaryShape r,
                   rotary_shape(n, x.dims(), in[1]->dims(), in[2]->dims(), pos ? &pos->dims() : nullptr));
  const bool four = x.rank() == 4, interleaved = n.attr_int("interleaved", 0) != 0;
  const int64_t B = x.dims()[0], S = four ? x.dims()[2] : x.dims()[1], H = r.heads, D = r.head,
                half = r.rot / 2;
  const std::vector<double> xv = x.to_f64(), cv = in[1]->to_f64(), sv = in[2]->to_f64();
  const std::vector<int64_t> pv = pos ? pos->to_i64() : std::vector<int64_t>{};
  const int64_t positions = pos ? in[1]->dims()[0] : 0, cache_batch = pos ? 1 : in[1]->dims()[0];
  if (pos) RETURN_IF_ERROR(refuse_outside(n, position_ids_bounds(positions), pv));
  std::vector<double> y = xv;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S; ++t) {
      const int64_t crow = pos ? pv[b * S + t] : (cache_batch == 1 ? 0 : b) * S + t;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = four ? ((b * H + h) * S + t) * D : ((b * S + t) * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t a = base + (interleaved ? 2 * i : i), c = base + (interleaved ? 2 * i + 1 : i + half);
          const double co = cv[crow * half + i], si = sv[crow * half + i];
          y[a] = co * xv[a] - si * xv[c];
          y[c] = si * xv[a] + co * xv[c];
        }
      }
    }
  out[0] = Tensor::from_f64(x.dtype(), x.dims(), y);
  return Status::ok();
}

// ---- TensorScatter --------------------------------------------------------------------------------

// The cache's sequence axis, checked: update differs from past_cache only along it, and is no longer.
StatusOr<int64_t> scatter_axis(const Node& n, const Dims& past, const Dims& update) {
  const int64_t r = static_cast<int64_t>(past.size());
  if (r < 2 || update.size() != past.size())
    return node_error(n, fmt::format("past_cache {} and update {} must have one rank of at least 2",
                                     dims_to_string(past), dims_to_string(update)));
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, n.attr_int("axis", -2), r));
  if (axis == 0) return node_error(n, "axis must not be 0 (the batch axis)");
  for (int64_t d = 0; d < r; ++d) {
    const bool bad = d == axis ? known(past[d]) && known(update[d]) && update[d] > past[d]
                               : known(past[d]) && known(update[d]) && update[d] != past[d];
    if (bad)
      return node_error(n, fmt::format("update {} must match past_cache {} except along axis {}, where it "
                                       "may be shorter",
                                       dims_to_string(update), dims_to_string(past), axis));
  }
  const std::string mode = n.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return node_error(n, fmt::format("mode '{}' is not 'linear' or 'circular'", mode));
  return axis;
}

Status infer_tensor_scatter(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs past_cache and update");
  if (ctx.dtype(1) != ctx.dtype(0)) return ctx.error("update must have past_cache's element type");
  ASSIGN_OR_RETURN(const int64_t axis, scatter_axis(ctx.node(), ctx.dims(0), ctx.dims(1)));
  if (ctx.has_input(2)) {
    const Dims& w = ctx.dims(2);
    if (ctx.dtype(2) != DType::kI64 || w.size() != 1 ||
        (known(w[0]) && known(ctx.dims(0)[0]) && w[0] != ctx.dims(0)[0]))
      return ctx.error(fmt::format("write_indices must be int64 of shape [batch] = [{}], got {} {}",
                                   ctx.dims(0)[0], dtype_name(ctx.dtype(2)), dims_to_string(w)));
    const int64_t len = ctx.dims(0)[axis], count = ctx.dims(1)[axis];
    if (const Tensor* c = ctx.constant(2); c && known(len) && known(count)) {  // refused now, not at run time
      RETURN_IF_ERROR(refuse_outside(ctx.node(), tensor_scatter_bounds(ctx.node(), len, count), c->to_i64()));
    }
  }
  return same_as_input0(ctx);
}

Status eval_tensor_scatter(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor &past = *in[0], &update = *in[1];
  ASSIGN_OR_RETURN(int64_t axis, scatter_axis(n, past.dims(), update.dims()));
  const bool circular = n.attr_string("mode", "linear") == "circular";
  const std::vector<int64_t> w = in.size() > 2 && in[2] ? in[2]->to_i64() : std::vector<int64_t>{};
  const Dims& pd = past.dims();
  const int64_t M = pd[axis], S = update.dims()[axis];
  int64_t inner = 1, per_batch = 1;
  for (size_t d = axis + 1; d < pd.size(); ++d) inner *= pd[d];
  for (int64_t d = 1; d < axis; ++d) per_batch *= pd[d];
  Tensor y = past;
  const int esz = dtype_size(past.dtype());
  for (int64_t b = 0; b < pd[0]; ++b) {
    const int64_t start = w.empty() ? 0 : w[b];
    if (start < 0 || (!circular && start + S > M))
      return node_error(n,
                        fmt::format("write index {} of batch {} puts the {} updates outside the cache's {} "
                                    "positions (mode linear)",
                                    start, b, S, M));
    for (int64_t o = 0; o < per_batch; ++o)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t c = circular ? (start + s) % M : start + s;
        std::memcpy(y.data() + ((b * per_batch + o) * M + c) * inner * esz,
                    update.data() + ((b * per_batch + o) * S + s) * inner * esz, inner * esz);
      }
  }
  out[0] = std::move(y);
  return Status::ok();
}

}  // namespace

void register_attention(std::vector<OpDef>& t) {
  t.push_back(
      {"TensorScatter", 24, kMaxOpset, OpCategory::kOpaque, infer_tensor_scatter, eval_tensor_scatter});
  t.push_back({"Attention", 23, kMaxOpset, OpCategory::kOpaque, infer_attention, eval_attention});
  t.push_back({"RotaryEmbedding", 23, kMaxOpset, OpCategory::kOpaque, infer_rotary, eval_rotary});
}

}  // namespace stitch::ops
