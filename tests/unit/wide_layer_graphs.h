// Transformer layers at deployed widths as torch.export writes them (LLaMA and its variants, a
// ViT block, Falcon, BLOOM), their weights constants of seeded values: the graphs of
// test_wide_layers.cc, whose plans must keep 3 memory-intensive kernels a layer.
#pragma once

#include <fmt/format.h>

#include <set>

#include "fusion_test_util.h"

namespace stitch::test::wide {

// Graph inputs named in `weights` become constants of seeded values in [-2, 2).
inline void make_constant(Graph& g, const std::set<std::string>& weights) {
  uint32_t seed = 1;
  std::vector<Value*> kept;
  for (Value* v : g.inputs) {
    if (weights.count(v->name))
      v->constant = random_tensor(v->dtype, *v->dims, seed++);
    else
      kept.push_back(v);
  }
  g.inputs = kept;
}

// HF's rotary embedding on %{p}t (heads first, last axis the head's 64): rotate_half as two
// Slices, a Neg and a Concat, then t * cos + rotate_half(t) * sin, written to %{p}o.
inline std::string rotary_text(const std::string& p) {
  return fmt::format(R"(  %{0}a = Slice(%{0}t, %c0, %chalf, %last) @"{0}half1"
  %{0}b = Slice(%{0}t, %chalf, %chd, %last) @"{0}half2"
  %{0}n = Neg(%{0}b) @"{0}neg"
  %{0}r = Concat(%{0}n, %{0}a) {{axis = -1}} @"{0}rotated"
  %{0}c = Mul(%{0}t, %cos) @"{0}cos"
  %{0}s = Mul(%{0}r, %sin) @"{0}sin"
  %{0}o = Add(%{0}c, %{0}s) @"{0}rotary"
)",
                     p);
}

// A decoder graph's opening: the hidden states %h0 [b, s, d], the rotary tables %cos and %sin
// [s, hd] and the mask [s, s] (graph inputs the caller makes constants), and the constants
// rotary_text reads.
inline std::string decoder_header(const std::string& name, int b, int s, int d, int hd,
                                  const std::string& ty = "f32") {
  return fmt::format(R"(graph "{0}" opset 18 {{
  input %h0: {6}[{1},{2},{3}]
  input %cos: {6}[{2},{4}]
  input %sin: {6}[{2},{4}]
  input %mask: {6}[{2},{2}]
  const %last: i64[1] = [-1]
  const %c0: i64[1] = [0]
  const %chalf: i64[1] = [{5}]
  const %chd: i64[1] = [{4}]
)",
                     name, b, s, d, hd, hd / 2, ty);
}

// A weight `name` of `dims` declared as a graph input in `t` and listed in `weights` (made a
// constant by make_constant once the text is parsed).
inline void add_weight(std::string& t, std::set<std::string>& weights, const std::string& name,
                       const std::string& dims) {
  t += fmt::format("  input %{}: f32[{}]\n", name, dims);
  weights.insert(name);
}

// A LayerNormalization op of %{x} over its last axis (d wide), its scale %{p}g and bias %{p}b
// declared as weights, its output %{p}y.
inline std::string layer_norm_text(std::string& t, std::set<std::string>& weights, const std::string& p,
                                   const std::string& x, int d, double eps) {
  add_weight(t, weights, p + "g", std::to_string(d));
  add_weight(t, weights, p + "b", std::to_string(d));
  return fmt::format(
      "  %{0}y = LayerNormalization(%{1}, %{0}g, %{0}b) {{axis = -1, epsilon = {2}}} @\"{0}norm\"\n", p, x,
      eps);
}

// GELU's erf form as exporters write it, x * (1 + erf(x / sqrt 2)) * 0.5, of %{x} into %{p}gl
// (reads the constants %rs2, %one and %half).
inline std::string erf_gelu_text(const std::string& p, const std::string& x) {
  return fmt::format(R"(  %{0}gd = Div(%{1}, %rs2) @"{0}gelu_div"
  %{0}ge = Erf(%{0}gd) @"{0}gelu_erf"
  %{0}g1 = Add(%{0}ge, %one) @"{0}gelu_add"
  %{0}g2 = Mul(%{1}, %{0}g1) @"{0}gelu_mul"
  %{0}gl = Mul(%{0}g2, %half) @"{0}gelu"
)",
                     p, x);
}

struct Layers {
  std::unique_ptr<Graph> graph;
  int layers = 0;
};

// LLaMA (HF LlamaModel through torch.export) at hidden d, `heads` query heads of 64 and `kv`
// key/value heads, MLP width `ffn`, batch 8 x sequence 128, `n` layers then the final RMSNorm:
// RMSNorm, Q/K/V projections, heads first, rotary embeddings (rotate_half with constant cos/sin),
// the grouped-query repeat (Unsqueeze, Expand, Reshape), scaled scores + mask + softmax, P.V, the
// output projection and residual; RMSNorm, SiLU-gated MLP and residual.
// `qk`: Q and K normalised before the rotary embedding (RMSNorm with a weight), per head over its
// 64 features after the head split (Qwen3) or over all heads before it (OLMo2). `ty`: the model's
// type; in f16 or bf16 each RMSNorm computes in float32 between two Casts, as PyTorch's LLaMA does.
enum class QkNorm { kNone, kPerHead, kAllHeads };
// `layer_norm`: LayerNormalization ops with a weight and a bias instead of RMSNorms (StableLM's
// norms), in float32.
inline Layers llama(int n, int d = 1024, int heads = 16, int kv = 4, int ffn = 2816,
                    QkNorm qk = QkNorm::kNone, const std::string& ty = "f32", bool layer_norm = false,
                    int b = 8, int s = 128) {
  const int hd = 64;
  std::string t = decoder_header("llama_wide", b, s, d, hd, ty) +
                  fmt::format(R"(  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %scale: {ty}[] = [0.125]
  const %ax2: i64[1] = [2]
  const %qshape: i64[4] = [{b}, {s}, {heads}, {hd}]
  const %kvshape: i64[4] = [{b}, {s}, {kv}, {hd}]
  const %repeat: i64[5] = [{b}, {kv}, {rep}, {s}, {hd}]
  const %heads: i64[4] = [{b}, {heads}, {s}, {hd}]
  const %flat: i64[3] = [{b}, {s}, {d}]
)",
                              fmt::arg("b", b), fmt::arg("s", s), fmt::arg("d", d), fmt::arg("hd", hd),
                              fmt::arg("half", hd / 2), fmt::arg("heads", heads), fmt::arg("kv", kv),
                              fmt::arg("rep", heads / kv), fmt::arg("ty", ty));
  std::set<std::string> weights = {"cos", "sin", "mask"};
  const bool half = ty != "f32";
  auto norm = [&](const std::string& p, const std::string& x, int width = 0) {
    if (layer_norm) return layer_norm_text(t, weights, p, x, width ? width : d, 1e-5);
    t += fmt::format("  input %{0}g: {2}[{1}]\n", p, width ? width : d, ty);
    weights.insert(p + "g");
    if (half)
      return fmt::format(R"(  %{0}hc = Cast(%{1}) {{to = 1}} @"{0}cast_in"
  %{0}sq = Pow(%{0}hc, %two) @"{0}pow"
  %{0}ms = ReduceMean(%{0}sq, %last) {{keepdims = 1}} @"{0}mean"
  %{0}ve = Add(%{0}ms, %eps) @"{0}add_eps"
  %{0}sd = Sqrt(%{0}ve) @"{0}sqrt"
  %{0}rs = Reciprocal(%{0}sd) @"{0}rsqrt"
  %{0}xn = Mul(%{0}hc, %{0}rs) @"{0}normalize"
  %{0}xc = Cast(%{0}xn) {{to = {2}}} @"{0}cast_out"
  %{0}y = Mul(%{0}g, %{0}xc) @"{0}weight"
)",
                         p, x, ty == "f16" ? 10 : 16);
    return fmt::format(R"(  %{0}sq = Pow(%{1}, %two) @"{0}pow"
  %{0}ms = ReduceMean(%{0}sq, %last) {{keepdims = 1}} @"{0}mean"
  %{0}ve = Add(%{0}ms, %eps) @"{0}add_eps"
  %{0}sd = Sqrt(%{0}ve) @"{0}sqrt"
  %{0}rs = Reciprocal(%{0}sd) @"{0}rsqrt"
  %{0}xn = Mul(%{1}, %{0}rs) @"{0}normalize"
  %{0}y = Mul(%{0}g, %{0}xn) @"{0}weight"
)",
                       p, x);
  };
  auto weight = [&](const std::string& name, int k, int m) {
    t += fmt::format("  input %{}: {}[{},{}]\n", name, ty, k, m);
    weights.insert(name);
  };
  std::string body;
  for (int l = 0; l < n; ++l) {
    const std::string p = fmt::format("l{}_", l);
    weight(p + "wq", d, heads * hd);
    weight(p + "wk", d, kv * hd);
    weight(p + "wv", d, kv * hd);
    weight(p + "wo", heads * hd, d);
    weight(p + "wg", d, ffn);
    weight(p + "wu", d, ffn);
    weight(p + "wd", ffn, d);
    body += norm(p + "n1", fmt::format("h{}", l));
    body += fmt::format(R"(  %{0}q = MatMul(%{0}n1y, %{0}wq) @"{0}q_proj"
  %{0}k = MatMul(%{0}n1y, %{0}wk) @"{0}k_proj"
  %{0}v = MatMul(%{0}n1y, %{0}wv) @"{0}v_proj"
)",
                        p);
    std::string q = p + "q", k = p + "k";  // what the head split reads
    if (qk == QkNorm::kAllHeads) {
      body += norm(p + "qn", q, heads * hd) + norm(p + "kn", k, kv * hd);
      q = p + "qny";
      k = p + "kny";
    }
    body += fmt::format(R"(  %{0}qh = Reshape(%{1}, %qshape) @"{0}q_heads"
  %{0}kh = Reshape(%{2}, %kvshape) @"{0}k_heads"
)",
                        p, q, k);
    q = p + "qh";
    k = p + "kh";
    if (qk == QkNorm::kPerHead) {
      body += norm(p + "qn", q, hd) + norm(p + "kn", k, hd);
      q = p + "qny";
      k = p + "kny";
    }
    body += fmt::format(R"(  %{0}qt = Transpose(%{1}) {{perm = ints[0, 2, 1, 3]}} @"{0}q_first"
  %{0}kt = Transpose(%{2}) {{perm = ints[0, 2, 1, 3]}} @"{0}k_first"
)",
                        p, q, k);
    body += rotary_text(p + "q") + rotary_text(p + "k");
    body += fmt::format(R"(  %{0}ku = Unsqueeze(%{0}ko, %ax2) @"{0}k_unsqueeze"
  %{0}ke = Expand(%{0}ku, %repeat) @"{0}k_repeat"
  %{0}km = Reshape(%{0}ke, %heads) @"{0}k_merged"
  %{0}kx = Transpose(%{0}km) {{perm = ints[0, 1, 3, 2]}} @"{0}k_transposed"
  %{0}s = MatMul(%{0}qo, %{0}kx) @"{0}scores"
  %{0}ss = Mul(%{0}s, %scale) @"{0}scaled"
  %{0}sm = Add(%{0}ss, %mask) @"{0}masked"
  %{0}pr = Softmax(%{0}sm) {{axis = -1}} @"{0}softmax"
  %{0}vh = Reshape(%{0}v, %kvshape) @"{0}v_heads"
  %{0}vt = Transpose(%{0}vh) {{perm = ints[0, 2, 1, 3]}} @"{0}v_first"
  %{0}vu = Unsqueeze(%{0}vt, %ax2) @"{0}v_unsqueeze"
  %{0}ve2 = Expand(%{0}vu, %repeat) @"{0}v_repeat"
  %{0}vr = Reshape(%{0}ve2, %heads) @"{0}v_merged"
  %{0}ctx = MatMul(%{0}pr, %{0}vr) @"{0}attention"
  %{0}ct = Transpose(%{0}ctx) {{perm = ints[0, 2, 1, 3]}} @"{0}heads_back"
  %{0}cf = Reshape(%{0}ct, %flat) @"{0}heads_merged"
  %{0}op = MatMul(%{0}cf, %{0}wo) @"{0}o_proj"
  %{0}hm = Add(%h{1}, %{0}op) @"{0}residual1"
)",
                        p, l);
    body += norm(p + "n2", p + "hm");
    body += fmt::format(R"(  %{0}gt = MatMul(%{0}n2y, %{0}wg) @"{0}gate_proj"
  %{0}up = MatMul(%{0}n2y, %{0}wu) @"{0}up_proj"
  %{0}sg = Sigmoid(%{0}gt) @"{0}sigmoid"
  %{0}si = Mul(%{0}gt, %{0}sg) @"{0}silu"
  %{0}gu = Mul(%{0}si, %{0}up) @"{0}gated"
  %{0}dn = MatMul(%{0}gu, %{0}wd) @"{0}down_proj"
  %h{2} = Add(%{0}hm, %{0}dn) @"{0}residual2"
)",
                        p, l, l + 1);
  }
  body += norm("final_", fmt::format("h{}", n));
  t += body + "  output %final_y\n}\n";
  auto g = parse_or_die(t);
  make_constant(*g, weights);
  run_frontend_or_die(*g);
  return {std::move(g), n};
}

// A pre-norm ViT block as DINOv2 writes it (HF Dinov2Model through torch.export) at ViT-B/16's
// widths, batch 2 x 197 tokens: LayerNorm, merged-able Q/K/V with biases, scaled softmax, output
// projection with its bias times the layer scale, residual; LayerNorm, FFN1 + erf GELU, FFN2 times
// its layer scale, residual; `n` blocks then the final LayerNorm. `layer_scale` false: ViT's block.
// `flattened`: each projection as onnxruntime's level-1 optimizations write it, a Reshape to
// [b*s, k], a Gemm with the bias as C and a Reshape back to [b, s, n].
inline Layers vit(int n, bool layer_scale, bool flattened = false, int d = 768, int heads = 12,
                  int ffn = 3072) {
  const int b = 2, s = 197, hd = 64;
  std::string t = fmt::format(R"(graph "vit_wide" opset 18 {{
  input %h0: f32[{b},{s},{d}]
  const %scale: f32[] = [0.125]
  const %half: f32[] = [0.5]
  const %one: f32[] = [1.0]
  const %rs2: f32[] = [1.41421356]
  const %qshape: i64[4] = [{b}, {s}, {heads}, {hd}]
  const %flat: i64[3] = [{b}, {s}, {d}]
  const %rows_d: i64[2] = [-1, {d}]
  const %rows_f: i64[2] = [-1, {ffn}]
  const %back_d: i64[3] = [{b}, {s}, {d}]
  const %back_f: i64[3] = [{b}, {s}, {ffn}]
)",
                              fmt::arg("b", b), fmt::arg("s", s), fmt::arg("d", d), fmt::arg("hd", hd),
                              fmt::arg("heads", heads), fmt::arg("ffn", ffn));
  std::set<std::string> weights;
  auto input = [&](const std::string& name, const std::string& dims) { add_weight(t, weights, name, dims); };
  auto norm = [&](const std::string& p, const std::string& x) {
    return layer_norm_text(t, weights, p, x, d, 1e-6);
  };
  // %{out} = %{x} W + bias, named `name`: a MatMul and an Add, or flattened, a Gemm between
  // Reshapes (`k` and `width` say which shape constants: "d" or "f").
  auto dense = [&](const std::string& out, const std::string& x, const std::string& w,
                   const std::string& bias, const std::string& name, const char* k, const char* width) {
    if (!flattened)
      return fmt::format("  %{0}m = MatMul(%{1}, %{2}) @\"{4}\"\n  %{0} = Add(%{0}m, %{3}) @\"{4}_bias\"\n",
                         out, x, w, bias, name);
    return fmt::format(R"(  %{0}r = Reshape(%{1}, %rows_{5}) @"{4}_input_reshape"
  %{0}g = Gemm(%{0}r, %{2}, %{3}) @"{4}"
  %{0} = Reshape(%{0}g, %back_{6}) @"{4}_output_reshape"
)",
                       out, x, w, bias, name, k, width);
  };
  std::string body;
  for (int l = 0; l < n; ++l) {
    const std::string p = fmt::format("l{}_", l);
    for (const char* w : {"wq", "wk", "wv", "wo"}) input(p + w, fmt::format("{},{}", d, d));
    for (const char* w : {"bq", "bk", "bv", "bo", "bf2"}) input(p + w, std::to_string(d));
    input(p + "wf1", fmt::format("{},{}", d, ffn));
    input(p + "bf1", std::to_string(ffn));
    input(p + "wf2", fmt::format("{},{}", ffn, d));
    if (layer_scale) {
      input(p + "ls1", std::to_string(d));
      input(p + "ls2", std::to_string(d));
    }
    body += norm(p + "n1", fmt::format("h{}", l));
    for (const std::string x : {"q", "k", "v"}) {
      body += dense(p + x, p + "n1y", p + "w" + x, p + "b" + x, p + x + "_proj", "d", "d");
      body += fmt::format("  %{0}{1}h = Reshape(%{0}{1}, %qshape) @\"{0}{1}_heads\"\n", p, x);
    }
    body += fmt::format(R"(  %{0}qt = Transpose(%{0}qh) {{perm = ints[0, 2, 1, 3]}} @"{0}q_first"
  %{0}kt = Transpose(%{0}kh) {{perm = ints[0, 2, 3, 1]}} @"{0}k_first"
  %{0}vt = Transpose(%{0}vh) {{perm = ints[0, 2, 1, 3]}} @"{0}v_first"
  %{0}s = MatMul(%{0}qt, %{0}kt) @"{0}scores"
  %{0}ss = Mul(%{0}s, %scale) @"{0}scaled"
  %{0}pr = Softmax(%{0}ss) {{axis = -1}} @"{0}softmax"
  %{0}ctx = MatMul(%{0}pr, %{0}vt) @"{0}attention"
  %{0}ct = Transpose(%{0}ctx) {{perm = ints[0, 2, 1, 3]}} @"{0}heads_back"
  %{0}cf = Reshape(%{0}ct, %flat) @"{0}heads_merged"
)",
                        p);
    body += dense(p + "ob", p + "cf", p + "wo", p + "bo", p + "o_proj", "d", "d");
    body += layer_scale ? fmt::format("  %{0}os = Mul(%{0}ob, %{0}ls1) @\"{0}layer_scale1\"\n", p)
                        : fmt::format("  %{0}os = Identity(%{0}ob) @\"{0}no_scale1\"\n", p);
    body += fmt::format("  %{0}hm = Add(%{0}os, %h{1}) @\"{0}residual1\"\n", p, l);
    body += norm(p + "n2", p + "hm");
    body += dense(p + "f1b", p + "n2y", p + "wf1", p + "bf1", p + "ffn1", "d", "f");
    body += erf_gelu_text(p, p + "f1b");
    body += dense(p + "f2b", p + "gl", p + "wf2", p + "bf2", p + "ffn2", "f", "d");
    body += layer_scale ? fmt::format("  %{0}fs = Mul(%{0}f2b, %{0}ls2) @\"{0}layer_scale2\"\n", p)
                        : fmt::format("  %{0}fs = Identity(%{0}f2b) @\"{0}no_scale2\"\n", p);
    body += fmt::format("  %h{2} = Add(%{0}fs, %{0}hm) @\"{0}residual2\"\n", p, l, l + 1);
  }
  body += norm("final_", fmt::format("h{}", n));
  t += body + "  output %final_y\n}\n";
  auto g = parse_or_die(t);
  make_constant(*g, weights);
  run_frontend_or_die(*g);
  return {std::move(g), n};
}

// Falcon (HF FalconModel through torch.export) at hidden 1024, 16 query heads of 64 and one
// key/value head, batch 8 x sequence 128, `n` layers then the final LayerNorm: one LayerNorm
// feeds both the fused QKV projection and the parallel MLP (merged into one GEMM); the QKV
// product is viewed as 18 heads, Q sliced off, K and V picked by a GatherND of a constant
// negative index after a heads-first Transpose; rotary on Q and K; K read by every query head
// (broadcast); P.V; the dense projection; attention + MLP + residual, then the next LayerNorm.
inline Layers falcon(int n, int d = 1024, int heads = 16, int ffn = 4096) {
  const int b = 8, s = 128, hd = 64, all = heads + 2;
  std::string t = decoder_header("falcon_wide", b, s, d, hd) +
                  fmt::format(R"(  const %scale: f32[] = [0.35355339]
  const %half: f32[] = [0.5]
  const %one: f32[] = [1.0]
  const %rs2: f32[] = [1.41421356]
  const %ax2: i64[1] = [2]
  const %cheads: i64[1] = [{heads}]
  const %k_index: i64[1,1] = [-2]
  const %v_index: i64[1,1] = [-1]
  const %all_heads: i64[4] = [{b}, {s}, {all}, {hd}]
  const %k_flat: i64[3] = [{b}, {s}, {hd}]
  const %k_split: i64[4] = [{b}, 1, {hd}, {s}]
  const %flat: i64[3] = [{b}, {s}, {d}]
)",
                              fmt::arg("b", b), fmt::arg("s", s), fmt::arg("d", d), fmt::arg("hd", hd),
                              fmt::arg("half", hd / 2), fmt::arg("heads", heads), fmt::arg("all", all));
  std::set<std::string> weights = {"cos", "sin", "mask"};
  auto input = [&](const std::string& name, const std::string& dims) { add_weight(t, weights, name, dims); };
  auto norm = [&](const std::string& p, const std::string& x) {
    return layer_norm_text(t, weights, p, x, d, 1e-5);
  };
  std::string body = norm("l0_n", "h0");
  for (int l = 0; l < n; ++l) {
    const std::string p = fmt::format("l{}_", l);
    input(p + "wqkv", fmt::format("{},{}", d, all * hd));
    input(p + "wo", fmt::format("{},{}", d, d));
    input(p + "w1", fmt::format("{},{}", d, ffn));
    input(p + "w2", fmt::format("{},{}", ffn, d));
    body += fmt::format(R"(  %{0}qkv = MatMul(%{0}ny, %{0}wqkv) @"{0}qkv_proj"
  %{0}hv = Reshape(%{0}qkv, %all_heads) @"{0}heads"
  %{0}qsl = Slice(%{0}hv, %c0, %cheads, %ax2) @"{0}q_heads"
  %{0}qt = Transpose(%{0}qsl) {{perm = ints[0, 2, 1, 3]}} @"{0}q_first"
  %{0}hf = Transpose(%{0}hv) {{perm = ints[2, 0, 1, 3]}} @"{0}heads_first"
  %{0}kg = GatherND(%{0}hf, %k_index) @"{0}k_pick"
  %{0}vg = GatherND(%{0}hf, %v_index) @"{0}v_pick"
  %{0}kt = Transpose(%{0}kg) {{perm = ints[1, 0, 2, 3]}} @"{0}k_first"
  %{0}vt = Transpose(%{0}vg) {{perm = ints[1, 0, 2, 3]}} @"{0}v_first"
)",
                        p);
    body += rotary_text(p + "q") + rotary_text(p + "k");
    body += fmt::format(R"(  %{0}kf = Reshape(%{0}ko, %k_flat) @"{0}k_flat"
  %{0}kx = Transpose(%{0}kf) {{perm = ints[0, 2, 1]}} @"{0}k_transposed"
  %{0}ks2 = Reshape(%{0}kx, %k_split) @"{0}k_split"
  %{0}qm = Mul(%{0}qo, %scale) @"{0}q_scaled"
  %{0}km = Mul(%{0}ks2, %scale) @"{0}k_scaled"
  %{0}sc = MatMul(%{0}qm, %{0}km) @"{0}scores"
  %{0}sm = Add(%{0}sc, %mask) @"{0}masked"
  %{0}pr = Softmax(%{0}sm) {{axis = -1}} @"{0}softmax"
  %{0}ctx = MatMul(%{0}pr, %{0}vt) @"{0}attention"
  %{0}ct = Transpose(%{0}ctx) {{perm = ints[0, 2, 1, 3]}} @"{0}heads_back"
  %{0}cf = Reshape(%{0}ct, %flat) @"{0}heads_merged"
  %{0}ao = MatMul(%{0}cf, %{0}wo) @"{0}dense"
  %{0}f1 = MatMul(%{0}ny, %{0}w1) @"{0}ffn1"
)",
                        p, l + 1, l);
    body += erf_gelu_text(p, p + "f1");
    body += fmt::format(R"(  %{0}f2 = MatMul(%{0}gl, %{0}w2) @"{0}ffn2"
  %{0}mo = Add(%{0}f2, %{0}ao) @"{0}attention_and_mlp"
  %h{1} = Add(%{0}mo, %h{2}) @"{0}residual"
)",
                        p, l + 1, l);
    body += norm(fmt::format("l{}_n", l + 1), fmt::format("h{}", l + 1));
  }
  t += body + fmt::format("  output %l{}_ny\n}}\n", n);
  auto g = parse_or_die(t);
  make_constant(*g, weights);
  run_frontend_or_die(*g);
  return {std::move(g), n};
}

// BLOOM (HF BloomModel through torch.export) at hidden 1024, 16 heads of 64, batch 8 x sequence
// 128, `n` layers then the final LayerNorm: LayerNorm; the fused QKV projection with its bias,
// viewed as [b, s, heads, 3, 64] and Q, K and V picked by Gathers of a scalar index; each put heads
// first and merged into a [b*heads, ...] batch (K then transposed); baddbmm's alibi + scaled
// scores, viewed back to [b, heads, s, s] for the mask and softmax; P.V; the context split back
// and put to [b, s, heads, 64]; the dense projection with bias and residual; LayerNorm; the MLP
// with bias and GELU's tanh form as BLOOM writes it; the down projection with bias and residual.
inline Layers bloom(int n, int d = 1024, int heads = 16, int ffn = 4096) {
  const int b = 8, s = 128, hd = 64;
  std::string t = fmt::format(R"(graph "bloom_wide" opset 18 {{
  input %h0: f32[{b},{s},{d}]
  input %alibi: f32[{bh},1,{s}]
  input %mask: f32[{s},{s}]
  const %inv_norm: f32[] = [0.125]
  const %half: f32[] = [0.5]
  const %one: f32[] = [1.0]
  const %gelu_c: f32[] = [0.79788456]
  const %gelu_k: f32[] = [0.044715]
  const %i0: i64[] = [0]
  const %i1: i64[] = [1]
  const %i2: i64[] = [2]
  const %fused: i64[5] = [{b}, {s}, {heads}, 3, {hd}]
  const %merged: i64[3] = [{bh}, {s}, {hd}]
  const %scores4: i64[4] = [{b}, {heads}, {s}, {s}]
  const %scores3: i64[3] = [{bh}, {s}, {s}]
  const %context4: i64[4] = [{b}, {heads}, {s}, {hd}]
  const %flat: i64[3] = [{b}, {s}, {d}]
)",
                              fmt::arg("b", b), fmt::arg("s", s), fmt::arg("d", d), fmt::arg("hd", hd),
                              fmt::arg("heads", heads), fmt::arg("bh", b * heads));
  std::set<std::string> weights = {"alibi", "mask"};
  auto norm = [&](const std::string& p, const std::string& x) {
    return layer_norm_text(t, weights, p, x, d, 1e-5);
  };
  std::string body = norm("l0_n", "h0");
  for (int l = 0; l < n; ++l) {
    const std::string p = fmt::format("l{}_", l);
    add_weight(t, weights, p + "wqkv", fmt::format("{},{}", d, 3 * d));
    add_weight(t, weights, p + "bqkv", std::to_string(3 * d));
    add_weight(t, weights, p + "wo", fmt::format("{},{}", d, d));
    add_weight(t, weights, p + "bo", std::to_string(d));
    add_weight(t, weights, p + "w1", fmt::format("{},{}", d, ffn));
    add_weight(t, weights, p + "b1", std::to_string(ffn));
    add_weight(t, weights, p + "w2", fmt::format("{},{}", ffn, d));
    add_weight(t, weights, p + "b2", std::to_string(d));
    body += fmt::format(R"(  %{0}qkv0 = MatMul(%{0}ny, %{0}wqkv) @"{0}qkv_proj"
  %{0}qkv = Add(%{0}qkv0, %{0}bqkv) @"{0}qkv_bias"
  %{0}fv = Reshape(%{0}qkv, %fused) @"{0}qkv_view"
  %{0}q = Gather(%{0}fv, %i0) {{axis = 3}} @"{0}q_select"
  %{0}k = Gather(%{0}fv, %i1) {{axis = 3}} @"{0}k_select"
  %{0}v = Gather(%{0}fv, %i2) {{axis = 3}} @"{0}v_select"
  %{0}qt = Transpose(%{0}q) {{perm = ints[0, 2, 1, 3]}} @"{0}q_first"
  %{0}qm = Reshape(%{0}qt, %merged) @"{0}q_merged"
  %{0}kt = Transpose(%{0}k) {{perm = ints[0, 2, 1, 3]}} @"{0}k_first"
  %{0}km = Reshape(%{0}kt, %merged) @"{0}k_merged"
  %{0}kx = Transpose(%{0}km) {{perm = ints[0, 2, 1]}} @"{0}k_transposed"
  %{0}vt = Transpose(%{0}v) {{perm = ints[0, 2, 1, 3]}} @"{0}v_first"
  %{0}vm = Reshape(%{0}vt, %merged) @"{0}v_merged"
  %{0}sc = MatMul(%{0}qm, %{0}kx) @"{0}scores"
  %{0}ss = Mul(%{0}sc, %inv_norm) @"{0}scaled"
  %{0}sa = Add(%{0}ss, %alibi) @"{0}baddbmm"
  %{0}s4 = Reshape(%{0}sa, %scores4) @"{0}scores_heads"
  %{0}sm = Add(%{0}s4, %mask) @"{0}masked"
  %{0}pr = Softmax(%{0}sm) {{axis = -1}} @"{0}softmax"
  %{0}p3 = Reshape(%{0}pr, %scores3) @"{0}probs_merged"
  %{0}ctx = MatMul(%{0}p3, %{0}vm) @"{0}attention"
  %{0}c4 = Reshape(%{0}ctx, %context4) @"{0}context_heads"
  %{0}ct = Transpose(%{0}c4) {{perm = ints[0, 2, 1, 3]}} @"{0}heads_back"
  %{0}cf = Reshape(%{0}ct, %flat) @"{0}heads_merged"
  %{0}ao0 = MatMul(%{0}cf, %{0}wo) @"{0}dense"
  %{0}ao = Add(%{0}ao0, %{0}bo) @"{0}dense_bias"
  %{0}hm = Add(%{0}ao, %h{1}) @"{0}residual1"
)",
                        p, l);
    body += norm(p + "n2", p + "hm");
    body += fmt::format(R"(  %{0}u0 = MatMul(%{0}n2y, %{0}w1) @"{0}ffn1"
  %{0}u = Add(%{0}u0, %{0}b1) @"{0}ffn1_bias"
  %{0}gh = Mul(%{0}u, %half) @"{0}gelu_half"
  %{0}gc = Mul(%{0}u, %gelu_c) @"{0}gelu_c"
  %{0}gk = Mul(%{0}u, %gelu_k) @"{0}gelu_k"
  %{0}gkx = Mul(%{0}gk, %{0}u) @"{0}gelu_kx"
  %{0}g1 = Add(%{0}gkx, %one) @"{0}gelu_1"
  %{0}gi = Mul(%{0}gc, %{0}g1) @"{0}gelu_inner"
  %{0}gt = Tanh(%{0}gi) @"{0}gelu_tanh"
  %{0}g2 = Add(%{0}gt, %one) @"{0}gelu_2"
  %{0}gl = Mul(%{0}gh, %{0}g2) @"{0}gelu"
  %{0}f0 = MatMul(%{0}gl, %{0}w2) @"{0}ffn2"
  %{0}f = Add(%{0}f0, %{0}b2) @"{0}ffn2_bias"
  %h{2} = Add(%{0}f, %{0}hm) @"{0}residual2"
)",
                        p, l, l + 1);
    body += norm(fmt::format("l{}_n", l + 1), fmt::format("h{}", l + 1));
  }
  t += body + fmt::format("  output %l{}_ny\n}}\n", n);
  auto g = parse_or_die(t);
  make_constant(*g, weights);
  run_frontend_or_die(*g);
  return {std::move(g), n};
}

}  // namespace stitch::test::wide
