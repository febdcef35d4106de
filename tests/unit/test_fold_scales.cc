// Constant scales after a GEMM folded into its weight and bias (fusion::fold_column_scales):
// DINOv2's layer scale between a projection and its residual Add. Every fold is checked against
// the reference interpreter on the original graph, every plan on emu against the reference.
#include <fmt/format.h>

#include "fusion/fold_scales.h"
#include "fusion/rewrites.h"
#include "fusion_test_util.h"
#include "ir/graph.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// A transformer block's output projection as DINOv2 writes it: x [2, 5, 16] times a [16, 16]
// weight plus a bias, times the layer scale %ls (`scale`: its declaration, read as the Mul's
// first operand), added to the block's input and normalised. `extra`: more nodes and outputs.
std::unique_ptr<Graph> layer_scaled(const std::string& scale, const std::string& extra = "",
                                    const std::string& t = "f32", double wlo = -1.0) {
  uint32_t state = 4242;
  const std::string consts = fmt::format(
      "  const %w: {0}[16,16] = {1}\n  const %b: {0}[16] = {2}\n  const %gamma: {0}[16] = {3}\n"
      "  const %beta: {0}[16] = {4}\n",
      t, lcg_values(state, 256, wlo), lcg_values(state, 16), lcg_values(state, 16, 0.5),
      lcg_values(state, 16));
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %x: )" + t + R"([2,5,16]
)" + consts + scale + R"(
  %p = MatMul(%x, %w) @"proj"
  %pb = Add(%p, %b) @"proj_bias"
  %s = Mul(%ls, %pb) @"layer_scale"
  %r = Add(%x, %s) @"residual"
  %n = LayerNormalization(%r, %gamma, %beta) {axis = -1, epsilon = 0.00001} @"norm"
  output %n
)" + extra + "}\n");
  run_frontend_or_die(*g);
  return g;
}

}  // namespace

TEST_CASE(
    "a layer scale after a projection is folded into its weight and bias, and the call adds the residual",
    "[fusion][emu]") {
  uint32_t state = 99;
  for (const std::string& scale :
       {"  const %ls: f32[16] = " + lcg_values(state, 16, 0.25),
        "  const %ls: f32[1,1,16] = " + lcg_values(state, 16), std::string("  const %ls: f32[] = [0.125]")}) {
    INFO(scale);
    auto g = layer_scaled(scale);
    auto original = clone_graph(*g);
    auto lines = fusion::fold_column_scales(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    CHECK(lines->front().find("node 'layer_scale' (Mul) by a f32[") != std::string::npos);
    CHECK(lines->front().find("-> folded into the weight of node 'proj' (MatMul) and the bias of node "
                              "'proj_bias' (Add)") != std::string::npos);
    CHECK(count_op(*g, "Mul") == 0);
    same_as_original(*original, *g, 7, kEmuF32);
    // The projection is one call adding its bias and the residual; the norm is the one kernel.
    auto plan = fusion::make_plan(*g, opts_lib("beam"));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    auto s = schedule_of(*g, *plan);
    REQUIRE(s.is_ok());
    REQUIRE(s->calls.size() == 1);
    CHECK(s->calls.front().gemm.epilogue == "bias_residual");
    CHECK(s->kernels.size() == 1);
    CHECK(plan_matches_reference(*g, *plan, 21) == 1);
    // Unfolded, the scale stands between the call and the residual: the call adds only its bias.
    auto kept = fusion::make_plan(*original, opts_lib("beam"));
    REQUIRE(kept.is_ok());
    auto ks = schedule_of(*original, *kept);
    REQUIRE(ks.is_ok());
    CHECK(ks->calls.front().gemm.epilogue == "bias");
  }
}

TEST_CASE("scales folded without a bias, before a bias, in a chain, and through stitchc's rewrites",
          "[fusion]") {
  uint32_t state = 5;
  const std::string ls = "  const %ls: f32[16] = " + lcg_values(state, 16, 0.25) + "\n";
  const std::string ls2 = "  const %ls2: f32[16] = " + lcg_values(state, 16, 0.25) + "\n";
  // A second projection whose scale comes before its bias, then another scale (the product's
  // first reader is the Mul: its weight is scaled, its bias is not, then both are by the second).
  auto g = layer_scaled(ls + ls2, R"(  %q = MatMul(%x, %w) @"proj2"
  %qs = Mul(%q, %ls2) @"scale_first"
  %qb = Add(%qs, %b) @"bias_after"
  %qt = Mul(%qb, %ls) @"scale_again"
  output %qt
)");
  auto original = clone_graph(*g);
  auto lines = fusion::fold_column_scales(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 3);
  CHECK((*lines)[1].find("folded into the weight of node 'proj2' (MatMul)") != std::string::npos);
  CHECK((*lines)[1].find("bias") == std::string::npos);
  CHECK((*lines)[2].find("node 'scale_again' (Mul)") != std::string::npos);
  CHECK((*lines)[2].find("and the bias of node 'bias_after' (Add)") != std::string::npos);
  CHECK(count_op(*g, "Mul") == 0);
  // The weight was shared by both projections: each has a constant of its own now.
  const Node* p1 = node_named(*g, "proj");
  const Node* p2 = node_named(*g, "proj2");
  REQUIRE(p1);
  REQUIRE(p2);
  CHECK(p1->input(1) != p2->input(1));
  CHECK(g->find_value("w") == nullptr);  // neither reads the original any more
  same_as_original(*original, *g, 11, kEmuF32);

  // stitchc's rewrites name the fold in the plan's opening lines; --no-fold-scales keeps the Muls.
  for (bool on : {true, false}) {
    auto h = clone_graph(*original);
    fusion::RewriteSwitches sw;
    sw.fold_scales = on;
    auto r = fusion::rewrite_for_planning(h, opts("beam"), sw);
    REQUIRE(r.is_ok());
    CHECK(r->scale_folds.size() == (on ? 3u : 0u));
    CHECK((r->text().find(
               "constant scales and BatchNormalizations after GEMMs folded into their weights (one value "
               "per column):\n") != std::string::npos) == on);
    CHECK(count_op(*h, "Mul") == (on ? 0 : 3));
  }
}

TEST_CASE("scales that are not folded: per row, computed, a read product, --no-fuse, float16 out of range",
          "[fusion]") {
  uint32_t state = 17;
  const std::string ls = "  const %ls: f32[16] = " + lcg_values(state, 16, 0.25) + "\n";
  SECTION("a scale with a value per row, or per token, is not one per column") {
    for (const std::string& scale : {"  const %ls: f32[5,1] = " + lcg_values(state, 5, 0.25),
                                     "  const %ls: f32[2,5,16] = " + lcg_values(state, 160, 0.25)}) {
      INFO(scale);
      auto g = layer_scaled(scale);
      auto lines = fusion::fold_column_scales(*g);
      REQUIRE(lines.is_ok());
      CHECK(lines->empty());
      CHECK(count_op(*g, "Mul") == 1);
    }
  }
  SECTION("a scale computed at run time") {
    auto g = layer_scaled("  input %ls: f32[16]");
    auto lines = fusion::fold_column_scales(*g);
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
  }
  SECTION("the biased product has another reader, or is a graph output") {
    for (const std::string& extra :
         {std::string("  %other = Neg(%pb) @\"other\"\n  output %other\n"), std::string("  output %pb\n")}) {
      auto g = layer_scaled(ls, extra);
      auto lines = fusion::fold_column_scales(*g);
      REQUIRE(lines.is_ok());
      CHECK(lines->empty());
      CHECK(count_op(*g, "Mul") == 1);
    }
  }
  SECTION("a weight given at run time") {
    auto g = parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2,5,16]
  input %w: f32[16,16]
)" + ls + R"(  %p = MatMul(%x, %w) @"proj"
  %s = Mul(%p, %ls) @"layer_scale"
  output %s
}
)");
    run_frontend_or_die(*g);
    auto lines = fusion::fold_column_scales(*g);
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
  }
  SECTION("a node named in --no-fuse") {
    for (const char* name : {"proj", "proj_bias", "layer_scale"}) {
      auto g = layer_scaled(ls);
      auto lines = fusion::fold_column_scales(*g, {name});
      REQUIRE(lines.is_ok());
      CHECK(lines->empty());
    }
  }
  SECTION("float16: a scale that keeps the weights normal is folded, DINOv2's initial 1e-5 is not") {
    auto g = layer_scaled("  const %ls: f16[16] = " + lcg_values(state, 16, 0.25), "", "f16");
    auto original = clone_graph(*g);
    auto lines = fusion::fold_column_scales(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    CHECK(lines->front().find("folded into the weight") != std::string::npos);
    same_as_original(*original, *g, 3, kRewriteF16);

    std::string tiny = "[";
    for (int i = 0; i < 16; ++i) tiny += fmt::format("{}{}", i ? ", " : "", 1e-5 * (1 + i % 3));
    auto h = layer_scaled("  const %ls: f16[16] = " + tiny + "]", "", "f16");
    auto kept = fusion::fold_column_scales(*h);
    REQUIRE(kept.is_ok());
    REQUIRE(kept->size() == 1);
    CHECK(kept->front().find(
              "node 'layer_scale' (Mul) by a f16[16] constant stays a node: scaled into the weight "
              "of node 'proj' (MatMul) and the bias of node 'proj_bias' (Add), a column would be "
              "subnormal in float16 (or a value beyond its range)") != std::string::npos);
    CHECK(count_op(*h, "Mul") == 1);
  }
}

TEST_CASE("a BatchNormalization of a projection's flattened tokens is folded into its weight and bias",
          "[fusion][emu]") {
  // LeViT's Linear then BatchNorm1d: x [2, 5, 16] times a [16, 8] weight (with a bias or without),
  // flattened to [10, 8], normalised per column, viewed back as [2, 5, 8].
  uint32_t state = 17;
  const std::string consts = fmt::format(
      "  const %w: f32[16,8] = {}\n  const %b: f32[8] = {}\n  const %gamma: f32[8] = {}\n"
      "  const %beta: f32[8] = {}\n  const %mean: f32[8] = {}\n  const %var: f32[8] = {}\n"
      "  const %rows: i64[2] = [10, 8]\n  const %back: i64[3] = [2, 5, 8]\n",
      lcg_values(state, 128), lcg_values(state, 8), lcg_values(state, 8, 0.5), lcg_values(state, 8),
      lcg_values(state, 8), lcg_values(state, 8, 0.1));
  for (bool biased : {true, false}) {
    INFO("bias: " << biased);
    auto g =
        parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2,5,16]
)" + consts + R"(  %p = MatMul(%x, %w) @"proj"
)" +
                     (biased ? "  %pb = Add(%p, %b) @\"proj_bias\"\n  %f = Reshape(%pb, %rows) @\"flat\"\n"
                             : "  %f = Reshape(%p, %rows) @\"flat\"\n") +
                     R"(  %n = BatchNormalization(%f, %gamma, %beta, %mean, %var) {epsilon = 0.001} @"bn"
  %u = Reshape(%n, %back) @"unflat"
  %o = HardSwish(%u) @"act"
  output %o
}
)");
    run_frontend_or_die(*g);
    auto original = clone_graph(*g);
    auto lines = fusion::fold_column_scales(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    CHECK(lines->front() ==
          "node 'bn' (BatchNormalization) -> folded into the weight and bias of node 'proj' (MatMul)");
    CHECK(count_op(*g, "BatchNormalization") == 0);
    CHECK(count_op(*g, "Add") == 1);  // the bias Add, made when there was none
    same_as_original(*original, *g, 13, kEmuF32);
    // One call with its bias epilogue and the HardSwish's kernel.
    auto plan = fusion::make_plan(*g, opts_lib("beam"));
    REQUIRE(plan.is_ok());
    auto s = schedule_of(*g, *plan);
    REQUIRE(s.is_ok());
    REQUIRE(s->calls.size() == 1);
    CHECK(s->calls.front().gemm.epilogue == "bias");
    CHECK(s->kernels.size() == 1);
    CHECK(plan_matches_reference(*g, *plan, 23) == 1);
  }
  // Not folded: a norm over [N, C, L] (its channels are not the product's columns), one whose
  // mean is a graph input, one of a product read elsewhere.
  const std::vector<std::string> kept = {
      R"(  %p = MatMul(%x, %w) @"proj"
  %t = Transpose(%p) {perm = ints[0, 2, 1]}
  %n = BatchNormalization(%t, %gamma, %beta, %mean, %var) @"bn"
  output %n
)",
      R"(  input %m2: f32[8]
  %p = MatMul(%x, %w) @"proj"
  %f = Reshape(%p, %rows)
  %n = BatchNormalization(%f, %gamma, %beta, %m2, %var) @"bn"
  output %n
)",
      R"(  %p = MatMul(%x, %w) @"proj"
  %f = Reshape(%p, %rows)
  %n = BatchNormalization(%f, %gamma, %beta, %mean, %var) @"bn"
  output %n
  output %p
)"};
  for (const std::string& body : kept) {
    INFO(body);
    auto g = parse_or_die("graph \"g\" opset 17 {\n  input %x: f32[2,5,16]\n" + consts + body + "}\n");
    run_frontend_or_die(*g);
    auto lines = fusion::fold_column_scales(*g);
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    CHECK(count_op(*g, "BatchNormalization") == 1);
  }
}
