// Gemms as MatMuls (fusion::gemms_as_matmuls): every attribute combination of a Gemm becomes a
// MatMul with nodes around it that compute what the Gemm did (reference interpreter on both
// graphs, then fused on emu), kept by stitchc only when the plan's estimate is no higher; GPT-2's
// projections (Gemms) then run as loops inside the layer-norm kernels.
#include "fusion/gemm_matmul.h"
#include "fusion/hoist_scales.h"
#include "fusion/merge_gemms.h"
#include "fusion/split_slices.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("Gemms of every attribute combination become MatMuls that compute the same outputs", "[fusion]") {
  uint32_t state = 5;
  const std::string b75 = lcg_values(state, 35), b57 = lcg_values(state, 35), c7 = lcg_values(state, 7);
  struct Case {
    const char* name;
    std::string text;
    const char* line;  // gemms_as_matmuls' line
    int transposes, muls, adds;
  };
  const Case cases[] = {
      {"B transposed (a constant), C a bias vector",
       R"(graph "g" opset 17 {
  input %a: f32[6,5]
  const %b: f32[7,5] = )" +
           b75 + R"(
  const %c: f32[7] = )" +
           c7 + R"(
  %y = Gemm(%a, %b, %c) {transB = 1} @"gemm"
  output %y
})",
       "node 'gemm' (Gemm) -> MatMul [6x5] x [5x7]: B transposed into a constant, C added by an Add", 0, 0,
       1},
      {"A transposed (computed), alpha into the constant B, no C",
       R"(graph "g" opset 13 {
  input %x: f32[5,6]
  const %b: f32[5,7] = )" +
           b57 + R"(
  %a = Relu(%x) @"relu"
  %y = Gemm(%a, %b) {transA = 1, alpha = 0.5} @"gemm"
  output %y
})",
       "node 'gemm' (Gemm) -> MatMul [6x5] x [5x7]: A through a Transpose, alpha 0.5 folded into the "
       "constant B",
       1, 0, 0},
      {"both operands computed, B transposed, alpha as a Mul, beta into a constant C",
       R"(graph "g" opset 11 {
  input %a: f32[6,5]
  input %b: f32[7,5]
  const %c: f32[1,7] = )" +
           c7 + R"(
  %y = Gemm(%a, %b, %c) {transB = 1, alpha = 2.0, beta = 0.5} @"gemm"
  output %y
})",
       "node 'gemm' (Gemm) -> MatMul [6x5] x [5x7]: B through a Transpose, alpha 2 as a Mul of A, beta 0.5 "
       "folded into the constant C, C (scaled) added by an Add",
       1, 1, 1},
      {"beta as a Mul of a computed C",
       R"(graph "g" opset 17 {
  input %a: f32[6,5]
  input %c: f32[6,7]
  const %b: f32[5,7] = )" +
           b57 + R"(
  %y = Gemm(%a, %b, %c) {beta = 0.25} @"gemm"
  output %y
})",
       "node 'gemm' (Gemm) -> MatMul [6x5] x [5x7]: beta 0.25 as a Mul of C, C (scaled) added by an Add", 0,
       1, 1},
      {"beta 0 drops C",
       R"(graph "g" opset 17 {
  input %a: f32[6,5]
  input %c: f32[6,7]
  const %b: f32[5,7] = )" +
           b57 + R"(
  %y = Gemm(%a, %b, %c) {beta = 0.0} @"gemm"
  output %y
})",
       "node 'gemm' (Gemm) -> MatMul [6x5] x [5x7]", 0, 0, 0},
  };
  uint32_t seed = 21;
  for (const Case& c : cases) {
    INFO(c.name);
    auto g = parse_or_die(c.text);
    run_frontend_or_die(*g);
    auto original = clone_graph(*g);
    auto lines = fusion::gemms_as_matmuls(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    CHECK(lines->front() == c.line);
    CHECK(count_op(*g, "Gemm") == 0);
    CHECK(count_op(*g, "MatMul") == 1);
    CHECK(count_op(*g, "Transpose") == c.transposes);
    CHECK(count_op(*g, "Mul") == c.muls);
    CHECK(count_op(*g, "Add") == c.adds);
    // The MatMul keeps the Gemm's name, so messages and --no-fuse still find it.
    bool named = false;
    for (const auto& n : g->nodes()) named |= n->name == "gemm" && n->op_type == "MatMul";
    CHECK(named);
    same_as_original(*original, *g, seed++);
    fused_matches_reference(*g, seed++);
  }
}

TEST_CASE("Gemms left alone: named in --no-fuse, an unbound dim", "[fusion]") {
  const char* texts[] = {
      R"(graph "g" opset 17 {
  input %a: f32[4,3]
  input %b: f32[3,2]
  %y = Gemm(%a, %b) @"keep_me"
  output %y
})",
      R"(graph "g" opset 17 {
  input %a: f32[n,3]
  input %b: f32[3,2]
  %y = Gemm(%a, %b) @"gemm"
  output %y
})",
  };
  for (const char* t : texts) {
    INFO(t);
    auto g = parse_or_die(t);
    if (std::string(t).find("f32[n") == std::string::npos) run_frontend_or_die(*g);
    auto lines = fusion::gemms_as_matmuls(*g, {"keep_me"});
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    CHECK(count_op(*g, "Gemm") == 1);
  }
}

TEST_CASE("a large Gemm is one call either way: the call takes back the transposed weight, alpha, bias and C",
          "[fusion]") {
  // At 256 x 256 x 256 no loop beats the call, so the rewrite only pays if the GEMM folds take
  // every node around the MatMul back: the weight transposed (and scaled by alpha) into a
  // constant, the bias vector into its epilogue. A computed C scaled by beta
  // costs one kernel either way (the Gemm call copies C into its output first).
  uint32_t state = 9;
  const std::string w = lcg_values(state, 256 * 256), bias = lcg_values(state, 256);
  struct Case {
    const char* name;
    std::string text;
    int kernels;
  };
  const Case cases[] = {
      {"transB, alpha, bias",
       R"(graph "g" opset 17 {
  input %a: f32[256,256]
  const %b: f32[256,256] = )" +
           w + R"(
  const %c: f32[256] = )" +
           bias + R"(
  %y = Gemm(%a, %b, %c) {transB = 1, alpha = 0.125} @"gemm"
  output %y
})",
       0},
      {"a computed C scaled by beta",
       R"(graph "g" opset 17 {
  input %a: f32[256,256]
  input %b: f32[256,256]
  input %c: f32[256,256]
  %y = Gemm(%a, %b, %c) {beta = 0.5} @"gemm"
  output %y
})",
       1},
  };
  uint32_t seed = 41;
  for (const Case& c : cases) {
    INFO(c.name);
    auto g = parse_or_die(c.text);
    run_frontend_or_die(*g);
    auto before = fusion::make_plan(*g, opts("beam"));
    REQUIRE(before.is_ok());
    auto r = fusion::gemms_as_matmuls_if_cheaper(g, opts("beam"));
    REQUIRE(r.is_ok());
    INFO(r->verdict);
    CHECK(r->lines.size() == 1);
    CHECK(count_op(*g, "Gemm") == 0);
    auto plan = fusion::make_plan(*g, opts("beam"));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    CHECK(plan->cost.time <= before->cost.time);
    auto s = schedule_of(*g, *plan);
    REQUIRE(s.is_ok());
    CHECK(static_cast<int>(s->kernels.size()) == c.kernels);
    CHECK(s->calls.size() == 1);
    CHECK(plan_matches_reference(*g, *plan, seed++) == s->kernels.size());
  }
}

TEST_CASE("gpt2_tiny's Gemms as MatMuls: projections inside the layer-norm kernels, 6 launches per layer",
          "[fusion][models][emu]") {
  // The exporter writes GPT-2's Conv1D projections as Gemms on the flattened activation. As
  // MatMuls the attention output projection (+ bias + residual) joins the second layer norm's
  // kernel and the MLP's down projection the next layer's first; Q/K/V and c_fc (its tanh GELU
  // in cuBLASLt's epilogue) stay calls at this size. Before: 3 kernels + 5 calls per layer.
  // The loops are priced as before loop_step was measured (opts_free_loops): with it, every
  // projection is a call at this size, as it is under --no-gemms-as-matmuls.
  auto g = prepared_model("gpt2_tiny");
  const fusion::FusionOptions o = opts_free_loops("beam");
  auto gemms = fusion::gemms_as_matmuls_if_cheaper(g, o);
  REQUIRE(gemms.is_ok());
  INFO(gemms->verdict);
  REQUIRE(gemms->lines.size() == 8);  // four per layer
  REQUIRE(fusion::merge_sibling_gemms(*g).is_ok());
  REQUIRE(fusion::split_to_slices_if_cheaper(g, o).is_ok());
  REQUIRE(fusion::hoist_row_scales_if_cheaper(g, o).is_ok());
  auto plan = fusion::make_plan(*g, o);
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(groups_with(*plan, {"MatMul", "ReduceMean"}).size() == 4);  // c_proj and mlp c_proj, per layer
  auto s = schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  CHECK(s->kernels.size() == 1 + 2 * 3);  // per layer: softmax, two layer norms; the final norm
  CHECK(s->calls.size() == 2 * 3);        // per layer: Q/K/V, P.V, c_fc
  const IntInputsIn ids(-100, 99);  // token ids over the 100-entry vocabulary, negative ones from its end
  CHECK(plan_matches_reference(*g, *plan, 7) == s->kernels.size());
}
