// The opset-23 ops PyTorch's exporter writes for transformers (RMSNormalization, RotaryEmbedding,
// Attention): the front end writes each as the ops that define it (passes/expand_attention.cc).
// Each expansion computes what the op's own reference implementation does (the interpreter on both
// graphs), and the expanded ops fuse as the opset-18 spelling does. ONNX's reference outputs for
// the same ops are node tests (tests/onnx_node/extra, *_23).
#include <fmt/format.h>

#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// `count` seeded values in [-scale, scale) as an IR-text constant.
std::string small_values(uint32_t& state, int64_t count, double scale) {
  std::string out;
  for (int64_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    out +=
        fmt::format("{}{:.4f}", i ? ", " : "", (static_cast<double>(state >> 8) / (1 << 23) - 1.0) * scale);
  }
  return "[" + out + "]";
}

}  // namespace

TEST_CASE("RMSNormalization becomes its statistics and Muls, in float32 and from half inputs", "[frontend]") {
  // Over the last axis and over two; a float16 input computes in float32 (stash_type 1) and rounds
  // the normalized value to half before the scale.
  expands_to_same(R"(graph "rms" opset 23 {
  input %x: f32[2,5,16]
  input %w: f32[16]
  %y = RMSNormalization(%x, %w) {epsilon = 0.000001} @"rms"
  output %y
})",
                  "RMSNormalization", 1);
  expands_to_same(R"(graph "rms" opset 23 {
  input %x: f32[3,4,6]
  input %w: f32[4,6]
  %y = RMSNormalization(%x, %w) {axis = 1} @"rms"
  output %y
})",
                  "RMSNormalization", 2);
  expands_to_same(R"(graph "rms" opset 23 {
  input %x: f16[2,3,32]
  input %w: f16[32]
  %y = RMSNormalization(%x, %w) @"rms"
  output %y
})",
                  "RMSNormalization", 3, kRewriteF16);
}

TEST_CASE("RotaryEmbedding becomes Slices of the halves, their rotation and a Concat", "[frontend]") {
  // Heads [B, H, S, D] with per-batch caches; a hidden state [B, S, H*D] with position ids into
  // 2-D caches; interleaved over part of each head; a float16 input.
  expands_to_same(R"(graph "rope" opset 23 {
  input %x: f32[2,3,5,8]
  input %c: f32[2,5,4]
  input %s: f32[2,5,4]
  %y = RotaryEmbedding(%x, %c, %s) @"rope"
  output %y
})",
                  "RotaryEmbedding", 4);
  {
    // Position ids index the caches' 7 rows.
    const test::IntInputsIn positions(0, 6);
    expands_to_same(R"(graph "rope" opset 23 {
  input %x: f32[2,5,12]
  const %c: f32[7,2] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]
  const %s: f32[7,2] = [1.4, 1.3, 1.2, 1.1, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]
  input %p: i64[2,5]
  %y = RotaryEmbedding(%x, %c, %s, %p) {num_heads = 3} @"rope"
  output %y
})",
                    "RotaryEmbedding", 5);
    expands_to_same(R"(graph "rope" opset 23 {
  input %x: f32[1,2,4,8]
  input %c: f32[7,2]
  input %s: f32[7,2]
  input %p: i64[1,4]
  %y = RotaryEmbedding(%x, %c, %s, %p) {interleaved = 1, rotary_embedding_dim = 4} @"rope"
  output %y
})",
                    "RotaryEmbedding", 6);
  }
  expands_to_same(R"(graph "rope" opset 23 {
  input %x: f16[1,2,4,8]
  input %c: f16[1,4,4]
  input %s: f16[1,4,4]
  %y = RotaryEmbedding(%x, %c, %s) @"rope"
  output %y
})",
                  "RotaryEmbedding", 7, kRewriteF16);
}

TEST_CASE("Attention becomes head reshapes, scaled MatMuls, masks and a Softmax", "[frontend]") {
  // Grouped K/V heads with the causal mask; 3-D inputs with a boolean mask; a past K/V with a float
  // mask and the present outputs; softcap with the scores as an output (mode 1); the masked scores
  // (mode 2) and the probabilities (mode 3); softmax in float32 for float16 inputs.
  expands_to_same(R"(graph "attn" opset 23 {
  input %q: f32[2,4,5,8]
  input %k: f32[2,2,5,8]
  input %v: f32[2,2,5,8]
  %y = Attention(%q, %k, %v) {is_causal = 1} @"attn"
  output %y
})",
                  "Attention", 8);
  expands_to_same(R"(graph "attn" opset 23 {
  input %q: f32[2,5,12]
  input %k: f32[2,6,12]
  input %v: f32[2,6,9]
  input %m: bool[2,1,5,6]
  %y = Attention(%q, %k, %v, %m) {q_num_heads = 3, kv_num_heads = 3} @"attn"
  output %y
})",
                  "Attention", 9);
  expands_to_same(R"(graph "attn" opset 23 {
  input %q: f32[1,2,3,4]
  input %k: f32[1,2,3,4]
  input %v: f32[1,2,3,4]
  input %m: f32[3,7]
  input %pk: f32[1,2,4,4]
  input %pv: f32[1,2,4,4]
  %y, %ko, %vo = Attention(%q, %k, %v, %m, %pk, %pv) {is_causal = 1, scale = 0.3} @"attn"
  output %y
  output %ko
  output %vo
})",
                  "Attention", 10);
  for (int mode : {1, 2, 3}) {
    expands_to_same(fmt::format(R"(graph "attn" opset 23 {{
  input %q: f32[1,2,4,8]
  input %k: f32[1,2,6,8]
  input %v: f32[1,2,6,8]
  input %m: bool[4,6]
  %y, _, _, %qk = Attention(%q, %k, %v, %m) {{softcap = 2.0, scale = 0.5, qk_matmul_output_mode = {}}} @"attn"
  output %y
  output %qk
}})",
                                mode),
                    "Attention", 11 + mode);
  }
  expands_to_same(R"(graph "attn" opset 23 {
  input %q: f16[1,2,4,8]
  input %k: f16[1,2,6,8]
  input %v: f16[1,2,6,8]
  %y = Attention(%q, %k, %v) {softmax_precision = 1, is_causal = 1} @"attn"
  output %y
})",
                  "Attention", 15, kRewriteF16);
}

TEST_CASE("an opset-23 LLaMA attention block is two kernels and matches the reference on emu",
          "[fusion][emu]") {
  // RMSNormalization, the Q/K/V projections, RotaryEmbedding on Q and K, grouped-query Attention
  // with the causal mask, in every planner. Weights of at most 0.3 keep the scores, and the
  // softmax's sensitivity to float32 sums in another order, at a transformer's scale.
  uint32_t state = 5;
  const std::string text = fmt::format(R"(graph "llama_block" opset 23 {{
  input %x: f32[2,6,32]
  const %w: f32[32] = {0}
  const %wq: f32[32,32] = {1}
  const %wk: f32[32,16] = {2}
  const %wv: f32[32,16] = {3}
  input %cos: f32[1,6,4]
  input %sin: f32[1,6,4]
  %n = RMSNormalization(%x, %w) {{epsilon = 0.000001}} @"norm"
  %q2 = MatMul(%n, %wq) @"q_proj"
  %k2 = MatMul(%n, %wk) @"k_proj"
  %v2 = MatMul(%n, %wv) @"v_proj"
  const %qs: i64[4] = [2, 6, 4, 8]
  const %ks: i64[4] = [2, 6, 2, 8]
  %q3 = Reshape(%q2, %qs) @"q_heads"
  %k3 = Reshape(%k2, %ks) @"k_heads"
  %v3 = Reshape(%v2, %ks) @"v_heads"
  %q = Transpose(%q3) {{perm = ints[0, 2, 1, 3]}} @"q_t"
  %k = Transpose(%k3) {{perm = ints[0, 2, 1, 3]}} @"k_t"
  %v = Transpose(%v3) {{perm = ints[0, 2, 1, 3]}} @"v_t"
  %qr = RotaryEmbedding(%q, %cos, %sin) @"q_rope"
  %kr = RotaryEmbedding(%k, %cos, %sin) @"k_rope"
  %y = Attention(%qr, %kr, %v) {{is_causal = 1}} @"attn"
  output %y
}})",
                                       lcg_values(state, 32, 0.5), small_values(state, 32 * 32, 0.3),
                                       small_values(state, 32 * 16, 0.3), small_values(state, 32 * 16, 0.3));
  INFO(text);
  auto g = parse_or_die(text);
  run_frontend_or_die(*g);
  uint32_t seed = 40;
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, opts(mode));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    // At this size: the norm with its scale, then one row kernel with the Q projection and the
    // scores as loops, both rotary embeddings and the softmax; the K/V projections and P.V are
    // library calls, the repeated K/V heads read in place.
    CHECK(plan->cost.kernels == 2);
    CHECK(fused_matches_reference(*g, seed++, mode) == static_cast<size_t>(plan->cost.kernels));
  }
}

TEST_CASE("bad RMSNormalization, RotaryEmbedding or Attention input is an error naming the node",
          "[errors]") {
  struct Case {
    std::string node, inputs, call, message;
  };
  const std::vector<Case> cases = {
      {"RMSNormalization", "input %x: f32[2,8]\n  input %w: f32[3]", "RMSNormalization(%x, %w)",
       "scale of shape 3 does not broadcast to the input's shape 2x8"},
      {"RMSNormalization", "input %x: i64[2,8]\n  input %w: f32[8]", "RMSNormalization(%x, %w)",
       "expects a floating-point input and scale"},
      {"RMSNormalization", "input %x: f32[2,8]\n  input %w: f32[8]", "RMSNormalization(%x, %w) {axis = 2}",
       "axis 2 is out of range for rank 2"},
      {"RotaryEmbedding", "input %x: f32[2,5,12]\n  input %c: f32[2,5,3]\n  input %s: f32[2,5,3]",
       "RotaryEmbedding(%x, %c, %s)", "a 3-D X needs a positive num_heads attribute"},
      {"RotaryEmbedding", "input %x: f32[2,3,5,8]\n  input %c: f32[2,5,3]\n  input %s: f32[2,5,3]",
       "RotaryEmbedding(%x, %c, %s)", "with 4 values per row (the rotated half), got 2x5x3"},
      {"RotaryEmbedding", "input %x: f32[2,3,5,8]\n  input %c: f32[2,5,4]\n  input %s: f32[2,5,4]",
       "RotaryEmbedding(%x, %c, %s) {rotary_embedding_dim = 5}", "rotary_embedding_dim 5 must be even"},
      {"Attention", "input %q: f32[2,4,5,8]\n  input %k: f32[2,5,8]\n  input %v: f32[2,5,8]",
       "Attention(%q, %k, %v)", "Q, K and V must all be 3-D or all 4-D"},
      {"Attention", "input %q: f32[2,5,12]\n  input %k: f32[2,5,12]\n  input %v: f32[2,5,12]",
       "Attention(%q, %k, %v)", "3-D Q, K and V need the q_num_heads and kv_num_heads attributes"},
      {"Attention", "input %q: f32[2,3,5,8]\n  input %k: f32[2,2,5,8]\n  input %v: f32[2,2,5,8]",
       "Attention(%q, %k, %v)", "Q's 3 heads are not a multiple of K's and V's 2"},
      {"Attention", "input %q: f32[2,4,5,8]\n  input %k: f32[2,2,5,4]\n  input %v: f32[2,2,5,8]",
       "Attention(%q, %k, %v)", "Q's head size 8 differs from K's 4"},
      {"Attention",
       "input %q: f32[2,4,5,8]\n  input %k: f32[2,2,5,8]\n  input %v: f32[2,2,5,8]\n  input %m: bool[3,6]",
       "Attention(%q, %k, %v, %m)", "attn_mask 3x6 does not broadcast to the scores 2x4x5x5"},
      {"Attention", "input %q: f32[2,4,5,8]\n  input %k: f32[2,2,5,8]\n  input %v: f32[2,2,5,8]",
       "Attention(%q, %k, %v) {qk_matmul_output_mode = 4}", "qk_matmul_output_mode 4 is not 0, 1, 2 or 3"},
      {"Attention",
       "input %q: f32[2,4,5,8]\n  input %k: f32[2,2,5,8]\n  input %v: f32[2,2,5,8]\n  input %p: f32[2,2,3,8]",
       "Attention(%q, %k, %v, _, %p)", "past_key and past_value must be given together"},
      {"Attention",
       "input %q: f32[2,4,5,8]\n  input %k: f32[2,2,5,8]\n  input %v: f32[2,2,5,8]\n  input %p: f32[]\n  "
       "input %pv: f32[2,2,3,8]",
       "Attention(%q, %k, %v, _, %p, %pv)",
       "past_key scalar and past_value 2x2x3x8 must be [batch, kv heads"},
      {"RotaryEmbedding",
       "input %x: f32[2,5,12]\n  input %c: f32[10,2]\n  input %s: f32[10,2]\n  input %p: i64[3,5]",
       "RotaryEmbedding(%x, %c, %s, %p) {num_heads = 3}",
       "position_ids must be [batch, sequence] = [2, 5], got 3x5"},
      {"RotaryEmbedding", "input %x: f32[2,3,5,8]\n  input %c: f32[3,5,4]\n  input %s: f32[3,5,4]",
       "RotaryEmbedding(%x, %c, %s)", "cos_cache's batch is 3; X's is 2"},
  };
  for (const Case& c : cases) {
    const std::string text =
        fmt::format("graph \"g\" opset 23 {{\n  {}\n  %y = {} @\"n\"\n  output %y\n}}\n", c.inputs, c.call);
    INFO(text);
    const std::string msg = frontend_error(text);
    INFO(msg);
    CHECK(msg.find(fmt::format("node 'n' ({})", c.node)) != std::string::npos);
    CHECK(msg.find(c.message) != std::string::npos);
  }
}
