// GEMMs of expert weights gathered per slot as GEMMs of every expert's weights
// (fusion::all_expert_gemms): transformers' MoE exports gather a whole expert's weight [M, K] for
// each routed slot and multiply it by the slot's activation (for the first projection, its token's
// row repeated over the token's slots: then the GEMM runs once per token). Rewritten, the reference
// interpreter computes the same outputs, the plan runs on emu, and stitchc keeps it when the estimate is
// lower: many slots over few experts, but not a step of two slots over 64 experts, whose gathered weights are
// fewer bytes than all of them.
#include <fmt/format.h>

#include "fusion/expert_gemms.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// `slots` slots routed over `experts` experts (each slot's expert the ArgMax of its logits), their
// activations times the gathered weights: left, weights [E, M, K] times x [S, K, 1]; else x
// [S, 1, K] times weights [E, K, M] (gpt-oss's spelling).
std::string gathered(int64_t slots, int64_t experts, int64_t m, int64_t k, bool left, uint32_t seed) {
  const std::string wdims =
      left ? fmt::format("{},{},{}", experts, m, k) : fmt::format("{},{},{}", experts, k, m);
  return fmt::format(R"(graph "experts" opset 18 {{
  input %logits: f32[{0},{1}]
  input %x: f32[{4}]
  const %w: f32[{2}] = {3}
  %idx = ArgMax(%logits) {{axis = 1, keepdims = 1}} @"route"
  %g = GatherND(%w, %idx) @"gather"
  %y = MatMul({5}) @"bmm"
  output %y
}}
)",
                     slots, experts, wdims, lcg_values(seed, experts * m * k),
                     left ? fmt::format("{},{},1", slots, k) : fmt::format("{},1,{}", slots, k),
                     left ? "%g, %x" : "%x, %g");
}

int count_gathers(const Graph& g, int64_t batch_dims) {
  int n = 0;
  for (const auto& node : g.nodes())
    n += node->op_type == "GatherND" && node->attr_int("batch_dims", 0) == batch_dims;
  return n;
}

}  // namespace

TEST_CASE("gathered expert GEMMs as one GEMM of every expert's weights compute the same outputs",
          "[fusion][emu]") {
  uint32_t seed = 700;
  for (const bool left : {true, false}) {
    INFO(std::string(left ? "weights [E, M, K] by x [S, K, 1]" : "x [S, 1, K] by weights [E, K, N]"));
    auto g = parse_or_die(gathered(12, 4, 8, 6, left, seed++));
    run_frontend_or_die(*g);
    auto original = clone_graph(*g);
    auto lines = fusion::all_expert_gemms(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    CHECK(lines->front() ==
          fmt::format(
              "node 'bmm' (MatMul): every expert's weights 'w' [{}] in one GEMM, [12, 6] by [6, 32], the "
              "slot's expert's part of the product picked by node 'bmm/all_experts/picked' (GatherND) "
              "(was node 'gather' (GatherND) copying an expert's weights for each of 12 slots)",
              left ? "4x8x6" : "4x6x8"));
    CHECK(count_gathers(*g, 0) == 0);
    CHECK(count_gathers(*g, 1) == 1);
    const Node* mm = nullptr;
    for (const auto& n : g->nodes())
      if (n->op_type == "MatMul") mm = n.get();
    REQUIRE(mm != nullptr);
    REQUIRE(mm->input(1)->is_constant());
    CHECK(*mm->input(1)->dims == Dims{6, 32});
    CHECK(*g->outputs[0]->dims == (left ? Dims{12, 8, 1} : Dims{12, 1, 8}));
    same_as_original(*original, *g, seed++);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      CHECK(fused_matches_reference(*g, seed++, mode) >= 1);
    }
  }
}

TEST_CASE("a token's slots repeating its row: the GEMM of every expert's weights once per token",
          "[fusion][emu]") {
  // 6 tokens, each repeated over its 2 slots (transformers' repeat_interleave: an Expand of
  // [6, 1, K] to [6, 2, K] read as [12, K, 1]); with the repeated rows read elsewhere too, the
  // Expand stays for that reader.
  uint32_t seed = 760;
  for (const bool shared : {false, true}) {
    INFO(std::string(shared ? "the repeated rows read elsewhere too" : "read by the GEMM alone"));
    auto g = parse_or_die(fmt::format(R"(graph "slots" opset 18 {{
  input %logits: f32[12,4]
  input %x: f32[6,6]
  const %w: f32[4,8,6] = {}
  const %one: i64[1] = [1]
  const %last: i64[1] = [-1]
  const %repeat: i64[3] = [6, 2, 6]
  const %flat: i64[2] = [12, 6]
  %idx = ArgMax(%logits) {{axis = 1, keepdims = 1}} @"route"
  %u = Unsqueeze(%x, %one) @"token_axis"
  %e = Expand(%u, %repeat) @"repeat"
  %r = Reshape(%e, %flat) @"repeat_interleave"
  %b = Unsqueeze(%r, %last) @"column"
  %g = GatherND(%w, %idx) @"gather"
  %y = MatMul(%g, %b) @"bmm"
  output %y
{}}}
)",
                                      lcg_values(seed, 4 * 8 * 6), shared ? "  output %r\n" : ""));
    run_frontend_or_die(*g);
    auto original = clone_graph(*g);
    auto lines = fusion::all_expert_gemms(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    CHECK_THAT(
        lines->front(),
        Catch::Contains("in one GEMM, [6, 6] by [6, 32] once per token, its 2 slots' rows being its row"));
    CHECK(count_op(*g, "Expand") == (shared ? 1 : 0));
    same_as_original(*original, *g, seed++);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      CHECK(fused_matches_reference(*g, seed++, mode) >= 1);
    }
  }
}

TEST_CASE("gathered expert GEMMs the rewrite does not take stay as they are", "[fusion]") {
  uint32_t seed = 720;
  SECTION("weights that are not constants") {
    auto g = parse_or_die(R"(graph "g" opset 18 {
  input %logits: f32[5,4]
  input %w: f32[4,8,6]
  input %x: f32[5,6,1]
  %idx = ArgMax(%logits) {axis = 1, keepdims = 1} @"route"
  %g = GatherND(%w, %idx) @"gather"
  %y = MatMul(%g, %x) @"bmm"
  output %y
})");
    run_frontend_or_die(*g);
    auto lines = fusion::all_expert_gemms(*g);
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    CHECK(count_gathers(*g, 0) == 1);
  }
  SECTION("a gather read by another node too") {
    auto g = parse_or_die(fmt::format(R"(graph "g" opset 18 {{
  input %logits: f32[5,4]
  input %x: f32[5,6,1]
  const %w: f32[4,8,6] = {}
  %idx = ArgMax(%logits) {{axis = 1, keepdims = 1}} @"route"
  %g = GatherND(%w, %idx) @"gather"
  %y = MatMul(%g, %x) @"bmm"
  %z = Relu(%g) @"other"
  output %y
  output %z
}}
)",
                                      lcg_values(seed, 4 * 8 * 6)));
    run_frontend_or_die(*g);
    auto lines = fusion::all_expert_gemms(*g);
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
  }
  SECTION("--no-fuse on the MatMul or on the gather") {
    for (const char* name : {"bmm", "gather"}) {
      auto g = parse_or_die(gathered(5, 4, 8, 6, true, seed++));
      run_frontend_or_die(*g);
      auto lines = fusion::all_expert_gemms(*g, {name});
      REQUIRE(lines.is_ok());
      CHECK(lines->empty());
    }
  }
}

TEST_CASE("the GEMM of every expert's weights is kept when the plan's estimate is lower", "[fusion]") {
  // 256 slots over 4 experts: the gathered form copies 64 times the weights' bytes. Two slots over
  // 64 experts (a decoding step): it copies 2 experts' weights, the rewrite would read all 64.
  struct Case {
    int64_t slots, experts;
    bool kept;
  };
  uint32_t seed = 740;
  for (const Case& c : {Case{256, 4, true}, Case{2, 64, false}}) {
    INFO(fmt::format("{} slots over {} experts", c.slots, c.experts));
    std::unique_ptr<Graph> g = parse_or_die(gathered(c.slots, c.experts, 64, 64, true, seed++));
    run_frontend_or_die(*g);
    auto r = fusion::all_expert_gemms_if_cheaper(g, opts("beam"));
    REQUIRE(r.is_ok());
    INFO(r->verdict);
    CHECK(r->lines.empty() != c.kept);
    CHECK(count_gathers(*g, 0) == (c.kept ? 0 : 1));
    CHECK((r->verdict.rfind("not applied", 0) == 0) != c.kept);
  }
}
