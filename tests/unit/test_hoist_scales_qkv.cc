// Row scales moved past Q/K/V (fusion::hoist_row_scales): RMSNorm in front of the attention's
// projections moves onto Q.K^T's rows and columns and P's columns, or into the rotary's kernel of
// a half model, or, before a merged Q/K/V product read through Slices, onto each part. The MLP's
// case and the wide values it makes are in test_hoist_scales.cc. Every rewrite is checked against
// the reference interpreter on the original graph; every plan on emu against the reference.
#include <fmt/format.h>

#include "fusion/hoist_scales.h"
#include "fusion/merge_gemms.h"
#include "fusion_test_util.h"
#include "ir/graph.h"
#include "rms_norm_spellings.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// A pre-norm attention block as LLaMA's exports spell it, small: RMSNorm of %h (rows of 16), one
// GEMM for Q (2 heads of 8), K and V (1 head each), rotary embeddings on Q and K (the halves
// rotated by Slice, Neg, Concat), K's and V's head repeated for both query heads (Unsqueeze,
// Expand, Reshape), K through a batch-and-heads merge and transpose (as torch.export writes
// Q.K^T), the scale, a mask, the softmax and P.V; `outputs` more than P.V's. `t`: the type of %h,
// the weights and the attention; `norm` the RMSNorm's spelling (half_norm for a half type).
std::unique_ptr<Graph> rms_attention(const std::string& outputs = "", const std::string& t = "f32",
                                     const std::string& norm = kDynamoNorm) {
  uint32_t state = 4242;
  std::string mask = "[";
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) mask += fmt::format("{}{}", i * 5 + j ? ", " : "", j > i ? -10000.0 : 0.0);
  mask += "]";
  const std::string consts = fmt::format(
      "  const %gamma: {0}[16] = {1}\n  const %w: {0}[16,32] = {2}\n  const %cos: {0}[5,8] = {3}\n"
      "  const %sin: {0}[5,8] = {4}\n  const %mask: {0}[5,5] = {5}\n  const %scale: {0}[] = [0.35355339]\n",
      t, lcg_values(state, 16, 0.5), lcg_values(state, 16 * 32), lcg_values(state, 40), lcg_values(state, 40),
      mask);
  auto rotary = [](const std::string& p) {
    return fmt::format(R"(  %{0}a = Slice(%{0}t, %c0, %c4, %last) @"{0}_half1"
  %{0}b = Slice(%{0}t, %c4, %c8, %last) @"{0}_half2"
  %{0}n = Neg(%{0}b) @"{0}_neg"
  %{0}r = Concat(%{0}n, %{0}a) {{axis = -1}} @"{0}_rotated"
  %{0}c = Mul(%{0}t, %cos) @"{0}_cos"
  %{0}s = Mul(%{0}r, %sin) @"{0}_sin"
)",
                       p);
  };
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %h: )" + t + R"([2,5,16]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %last: i64[1] = [-1]
  const %c0: i64[1] = [0]
  const %c4: i64[1] = [4]
  const %c8: i64[1] = [8]
  const %c16: i64[1] = [16]
  const %c24: i64[1] = [24]
  const %c32: i64[1] = [32]
  const %ax2: i64[1] = [2]
  const %qshape: i64[4] = [2, 5, 2, 8]
  const %kvshape: i64[4] = [2, 5, 1, 8]
  const %repeat: i64[5] = [2, 1, 2, 5, 8]
  const %merged: i64[3] = [4, 5, 8]
  const %split: i64[4] = [2, 2, 8, 5]
  const %heads: i64[4] = [2, 2, 5, 8]
)" + consts + norm +
                        R"(
  %p = MatMul(%y, %w) @"qkv"
  %q = Slice(%p, %c0, %c16, %last) @"q_columns"
  %k = Slice(%p, %c16, %c24, %last) @"k_columns"
  %v = Slice(%p, %c24, %c32, %last) @"v_columns"
  %qh = Reshape(%q, %qshape) @"q_heads"
  %qt = Transpose(%qh) {perm = ints[0, 2, 1, 3]} @"q_first"
)" + rotary("q") + R"(  %qo = Add(%qc, %qs) @"q_rotary"
  %kh = Reshape(%k, %kvshape) @"k_heads"
  %kt = Transpose(%kh) {perm = ints[0, 2, 1, 3]} @"k_first"
)" + rotary("k") + R"(  %ko = Add(%kc, %ks) @"k_rotary"
  %ku = Unsqueeze(%ko, %ax2) @"k_unsqueeze"
  %ke = Expand(%ku, %repeat) @"k_repeat"
  %km = Reshape(%ke, %merged) @"k_merged"
  %kx = Transpose(%km) {perm = ints[0, 2, 1]} @"k_transposed"
  %ks2 = Reshape(%kx, %split) @"k_split"
  %qm = Mul(%qo, %scale) @"q_scaled"
  %s = MatMul(%qm, %ks2) @"scores"
  %sm = Add(%s, %mask) @"masked"
  %pr = Softmax(%sm) {axis = -1} @"softmax"
  %vh = Reshape(%v, %kvshape) @"v_heads"
  %vt = Transpose(%vh) {perm = ints[0, 2, 1, 3]} @"v_first"
  %vu = Unsqueeze(%vt, %ax2) @"v_unsqueeze"
  %vx = Expand(%vu, %repeat) @"v_repeat"
  %vr = Reshape(%vx, %heads) @"v_merged"
  %o = MatMul(%pr, %vr) @"attention"
  output %o
)" + outputs + "}\n");
  run_frontend_or_die(*g);
  return g;
}

}  // namespace

TEST_CASE("RMSNorm before Q/K/V: the row scale moves onto Q.K^T's rows and columns and P's columns",
          "[fusion][emu]") {
  auto g = rms_attention();
  auto original = clone_graph(*g);
  auto kernels_only = fusion::hoist_row_scales(*g, {}, fusion::NormReaders::kOther);
  REQUIRE(kernels_only.is_ok());
  CHECK(kernels_only->empty());  // V and Q.K^T are GEMMs: no product every reader of which is a kernel
  auto hoisted = fusion::hoist_row_scales(*g, {}, fusion::NormReaders::kAttention);
  REQUIRE(hoisted.is_ok());
  REQUIRE(hoisted->size() == 1);
  INFO(hoisted->front());
  CHECK(hoisted->front().find(
            "row scale 'rs' applied to the product and, for attention, at 'scores' (its rows), "
            "'scores' (its columns), 'attention' (A's columns)") != std::string::npos);
  // Q/K/V's GEMM reads %h with gamma in its weight; the normalized rows are never computed, and
  // the three paths read the unscaled product.
  for (const auto& n : g->nodes()) {
    CHECK(n->name != "normalize");
    CHECK(n->name != "weight");
    if (n->name == "qkv/unscaled") CHECK(n->input(0)->name == "h");
    if (n->op_type == "Slice" && n->name.find("columns") != std::string::npos)
      CHECK(n->input(0)->producer->name == "qkv/unscaled");
  }
  // The values between ops are float32 in both graphs, rounded at other places (the normalized
  // rows against the unscaled product and the scaled scores): float32 kernel tolerance, where P.V's
  // outputs cancel (measured 2.4e-6 at an output of -0.0021, terms of about 1).
  same_as_original(*original, *g, 11, kEmuF32);
  // The norm's kernel is gone: the row scale is computed where nothing waits for it but the
  // softmax, which applies it.
  auto before = fusion::make_plan(*original, opts_lib("beam"));
  REQUIRE(before.is_ok());
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    auto plan = fusion::make_plan(*g, opts_lib(mode));
    REQUIRE(plan.is_ok());
    INFO(mode << "\n" << fusion::explain(*plan) << "\nbefore:\n" << fusion::explain(*before));
    CHECK(plan->cost.kernels < before->cost.kernels);
    CHECK(fused_matches_reference(*g, 13, opts_lib(mode)) >= 1);
  }
}

TEST_CASE("a row scale stays in front of Q/K/V when V is stored or its path is named in --no-fuse",
          "[fusion]") {
  // V's heads also a graph output (a decoder's present values): P.V's operand must be stored
  // scaled, so no reader of the product takes the factor. A node on V's path in --no-fuse: the
  // same, V's path being no kernel either.
  struct Case {
    const char* what;
    std::string outputs;
    std::set<std::string> keep;
  };
  for (const Case& c :
       {Case{"V stored", "  output %vt\n", {}}, Case{"V's transpose in --no-fuse", "", {"v_first"}}}) {
    INFO(c.what);
    auto g = rms_attention(c.outputs);
    const size_t nodes = g->nodes().size();
    auto hoisted = fusion::hoist_row_scales(*g, c.keep);
    REQUIRE(hoisted.is_ok());
    CHECK(hoisted->empty());
    CHECK(g->nodes().size() == nodes);
  }
}

namespace {

// The largest absolute difference between `got` and `want` over output `name`.
double max_diff(const TensorMap& got, const TensorMap& want, const std::string& name) {
  const std::vector<double> a = got.at(name).to_f64(), b = want.at(name).to_f64();
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace

TEST_CASE("a half model's RMSNorm before Q/K/V: the row scale scales the product in the rotary's kernel",
          "[fusion][emu]") {
  // In float16 or bfloat16 the factor does not go past attention's GEMMs (Q.K^T of unscaled rows
  // could overflow the type, P would take a float32 factor): the product is cast to float32,
  // scaled and cast back where it is read, as for the gate's kernel. One kernel then computes the
  // norm's statistics, scales the product, stores what P.V reads and the rotated Q and K heads
  // first (values moved from a row wider or narrower than the norm's); the norm's own kernel is
  // gone.
  for (const auto& [t, to] : {std::pair<std::string, int>{"f16", 10}, {"bf16", 16}}) {
    INFO(t);
    auto exact = rms_attention("", "f32");
    auto g = rms_attention("", t, half_norm(to));
    auto original = clone_graph(*g);
    auto hoisted = fusion::hoist_row_scales(*g, {}, fusion::NormReaders::kAttention);
    REQUIRE(hoisted.is_ok());
    REQUIRE(hoisted->size() == 1);
    INFO(hoisted->front());
    CHECK(hoisted->front().find("row scale 'rs' applied to the product") != std::string::npos);
    CHECK(hoisted->front().find("for attention") == std::string::npos);
    for (const auto& n : g->nodes()) {
      CHECK(n->name != "normalize");
      CHECK(n->name != "cast_out");
      if (n->name == "qkv/unscaled") CHECK(n->input(0)->name == "h");
    }
    auto before = fusion::make_plan(*original, opts_lib("beam"));
    REQUIRE(before.is_ok());
    auto plan = fusion::make_plan(*g, opts_lib("beam"));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan) << "\nbefore:\n" << fusion::explain(*before));
    CHECK(plan->cost.kernels < before->cost.kernels);
    // Each half graph rounds at other places, and the softmax amplifies a score's few steps of
    // the type into outputs a few percent apart (measured up to 0.07 at 1.76 in float16 between
    // the two, and between emu's float32 intermediates and the reference's per-op rounding). So
    // the oracle is the model in float32 (the same constants and inputs, the reference
    // interpreter): the rewritten graph, in the reference and fused on emu, is as close to it as
    // the original graph is (over 5 seeds: the sum of the largest differences within 1.5 times
    // the original's, and each within 3 times the original's largest).
    const auto groups = groups_of(*plan);
    const auto packs = packs_of(*plan);
    double sum_original = 0, sum_rewritten = 0, sum_emu = 0, worst_original = 0, worst = 0;
    for (uint32_t seed = 21; seed < 26; ++seed) {
      TensorMap feed, feed32;
      for (const Value* v : original->inputs) {
        feed[v->name] = random_tensor(v->dtype, *v->dims, seed);
        feed32[v->name] = Tensor::from_f64(DType::kF32, *v->dims, feed[v->name].to_f64());
      }
      auto want = run_reference(*exact, feed32);
      auto a = run_reference(*original, feed);
      auto b = run_reference(*g, feed);
      REQUIRE(want.is_ok());
      REQUIRE(a.is_ok());
      REQUIRE(b.is_ok());
      const TensorMap e = emu_run(*g, &groups, feed, nullptr, &packs, plan->gemm_folds);
      const double da = max_diff(*a, *want, "o"), db = max_diff(*b, *want, "o"), de = max_diff(e, *want, "o");
      INFO("seed " << seed << ": original " << da << ", rewritten " << db << ", on emu " << de);
      sum_original += da;
      sum_rewritten += db;
      sum_emu += de;
      worst_original = std::max(worst_original, da);
      worst = std::max({worst, db, de});
    }
    INFO("sums: original " << sum_original << ", rewritten " << sum_rewritten << ", on emu " << sum_emu);
    CHECK(sum_original > 0);
    CHECK(sum_rewritten <= 1.5 * sum_original);
    CHECK(sum_emu <= 1.5 * sum_original);
    CHECK(worst <= 3 * worst_original);
  }
}

namespace {

// An RMSNorm in front of a merged Q/K/V product [2,5,32] read through a Slice each (Q 16 columns,
// K and V 8: two query heads of 8, one key/value head), as merge_gemms leaves it, optionally
// with the merged bias row added first. `q_path` and `k_path` take %qh and %kh (heads, tokens
// first) to %qa (heads first) and %ka (transposed for Q.K^T), with constants %qg and %kg.
std::unique_ptr<Graph> merged_qkv(uint32_t state, bool bias, const std::string& q_path,
                                  const std::string& k_path) {
  const std::string src = R"(graph "g" opset 17 {
  input %h: f32[2,5,16]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %gamma: f32[16] = )" +
                          lcg_values(state, 16, 0.5) +
                          "\n  const %w: f32[16,32] = " + lcg_values(state, 16 * 32) +
                          "\n  const %b: f32[32] = " + lcg_values(state, 32) +
                          "\n  const %qg: f32[8] = " + lcg_values(state, 8, 0.5) +
                          "\n  const %kg: f32[8] = " + lcg_values(state, 8, 0.5) + R"(
  const %last: i64[1] = [-1]
  const %c0: i64[1] = [0]
  const %c16: i64[1] = [16]
  const %c24: i64[1] = [24]
  const %c32: i64[1] = [32]
  const %qshape: i64[4] = [2, 5, 2, 8]
  const %kvshape: i64[4] = [2, 5, 1, 8]
)" + kDynamoNorm + R"(
  %p = MatMul(%y, %w) @"qkv"
)" + (bias ? "  %pb = Add(%p, %b) @\"bias\"\n" : "") +
                          fmt::format(R"(  %q = Slice({0}, %c0, %c16, %last) @"q_columns"
  %k = Slice({0}, %c16, %c24, %last) @"k_columns"
  %v = Slice({0}, %c24, %c32, %last) @"v_columns"
)",
                                      bias ? "%pb" : "%p") +
                          R"(  %qh = Reshape(%q, %qshape) @"q_heads"
  %kh = Reshape(%k, %kvshape) @"k_heads"
)" + q_path + k_path +
                          R"(  %s = MatMul(%qa, %ka) @"scores"
  %pr = Softmax(%s) {axis = -1} @"softmax"
  %vh = Reshape(%v, %kvshape) @"v_heads"
  %vt = Transpose(%vh) {perm = ints[0, 2, 1, 3]} @"v_first"
  %o = MatMul(%pr, %vt) @"attention"
  output %o
}
)";
  auto g = parse_or_die(src);
  run_frontend_or_die(*g);
  return g;
}

// An RMSNorm over each head of `x` (q or k), its weight %xg, then the Transpose `perm` to %xa.
std::string head_norm(const std::string& x, const std::string& perm) {
  return fmt::format(R"(  %{0}sq = Pow(%{0}h, %two) @"{0}_pow"
  %{0}ms = ReduceMean(%{0}sq) {{axes = ints[-1], keepdims = 1}} @"{0}_mean"
  %{0}ve = Add(%{0}ms, %eps) @"{0}_add_eps"
  %{0}sd = Sqrt(%{0}ve) @"{0}_sqrt"
  %{0}n = Div(%{0}h, %{0}sd) @"{0}_normalize"
  %{0}w = Mul(%{0}n, %{0}g) @"{0}_weight"
  %{0}a = Transpose(%{0}w) {{perm = ints[{1}]}} @"{0}_first"
)",
                     x, perm);
}

// After the rewrite: no value of the merged product's width but the unscaled product, and each of
// `parts` (value names) written by `last_op` over a chain from a Slice of the unscaled product.
void check_column_parts(const Graph& g, const std::vector<std::string>& parts, const std::string& last_op) {
  int found = 0;
  for (const auto& n : g.nodes()) {
    CHECK(n->name != "normalize");
    const Value* out = n->output(0);
    if (out && out->dims && out->dims->back() == 32) CHECK(n->name == "qkv/unscaled");
    if (!out || std::find(parts.begin(), parts.end(), out->name) == parts.end()) continue;
    INFO(out->name);
    CHECK(n->op_type == last_op);
    const Node* slice = n->input(0)->producer;
    while (slice && slice->op_type != "Slice") slice = slice->input(0)->producer;
    REQUIRE(slice != nullptr);
    CHECK(slice->input(0)->producer->name == "qkv/unscaled");
    ++found;
  }
  CHECK(found == static_cast<int>(parts.size()));
}

}  // namespace

TEST_CASE(
    "RMSNorm before Q/K/V with per-head Q/K norms: Q's and K's columns are scaled in their norms' kernel, "
    "V's "
    "row scale goes onto P",
    "[fusion][emu]") {
  // Qwen3's layout: a per-head RMSNorm on Q and on K is not linear in the product, so those paths
  // read the scaled product; V's path reaches P.V and reads the unscaled one. Q's and K's columns
  // are each scaled on their own (a Slice of the unscaled product times the row scale), so the
  // per-head norms' kernel computes them and no value of the merged product's width is scaled.
  auto g = merged_qkv(99, false, head_norm("q", "0, 2, 1, 3"), head_norm("k", "0, 2, 3, 1"));
  auto original = clone_graph(*g);
  auto hoisted = fusion::hoist_row_scales(*g, {}, fusion::NormReaders::kAttention);
  REQUIRE(hoisted.is_ok());
  REQUIRE(hoisted->size() == 1);
  INFO(hoisted->front());
  CHECK(hoisted->front().find("for attention, at 'attention' (A's columns)") != std::string::npos);
  check_column_parts(*g, {"q", "k"}, "Mul");  // the row scale
  for (const auto& n : g->nodes())
    if (n->name == "v_columns") CHECK(n->input(0)->producer->name == "qkv/unscaled");
  same_as_original(*original, *g, 17, kEmuF32);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    CHECK(fused_matches_reference(*g, 19, opts_lib(mode)) >= 1);
  }
}

TEST_CASE(
    "RMSNorm before Q/K/V with biases: each column part is scaled, then takes its bias, in the kernels "
    "that read it",
    "[fusion][emu]") {
  // GLM's layout after merge_gemms: one product, the merged bias row added, a Slice each for Q, K
  // and V. The row scale goes before the bias in each part, and the merged Add goes, so Q's and K's
  // parts are computed where they are read and only V's is stored for P.V.
  auto g = merged_qkv(123, true,
                      "  %qt = Transpose(%qh) {perm = ints[0, 2, 1, 3]} @\"q_first\"\n"
                      "  %qa = Exp(%qt) @\"q_exp\"\n",
                      "  %ka = Transpose(%kh) {perm = ints[0, 2, 3, 1]} @\"k_first\"\n");
  auto original = clone_graph(*g);
  auto hoisted = fusion::hoist_row_scales(*g, {}, fusion::NormReaders::kOther);
  REQUIRE(hoisted.is_ok());
  REQUIRE(hoisted->size() == 1);
  INFO(hoisted->front());
  CHECK(hoisted->front().find("applied to the product before node 'bias' (Add)'s bias") != std::string::npos);
  for (const auto& n : g->nodes()) CHECK(n->name != "bias");
  check_column_parts(*g, {"q", "k", "v"}, "Add");  // the part's bias, after its row scale
  same_as_original(*original, *g, 23, kEmuF32);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    CHECK(fused_matches_reference(*g, 29, opts_lib(mode)) >= 1);
  }
}
