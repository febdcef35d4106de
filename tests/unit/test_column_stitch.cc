// Column reductions in stitched kernels: a reduction or softmax over axes before the kept inner
// one takes its per-element prologue and per-column epilogue into one tiled kernel (32 columns
// per block, 8 threads down each), planned by every planner and run on emu against the reference.
#include <fmt/format.h>

#include "codegen/lower.h"
#include "codegen/stitch.h"
#include "fusion_test_util.h"

namespace stitch {
namespace {

using test::opts;

struct Pattern {
  const char* name;
  const char* text;
  int passes;
};

const Pattern kPatterns[] = {
    // A column sum of a prologue, scaled: per-column output with keepdims.
    {"tanh_colsum_scale", R"(graph "g" opset 18 {
  input %x: f32[1000,37]
  const %a0: i64[1] = [0]
  const %k: f32[] = [0.25]
  %t = Tanh(%x) @"tanh"
  %s = ReduceSum(%t, %a0) @"colsum"
  %y = Mul(%s, %k) @"scale"
  output %y
})",
     1},
    // Softmax down the columns with a prologue and an epilogue: three passes, a full-shape output.
    {"column_softmax", R"(graph "g" opset 18 {
  input %x: f32[300,50]
  const %h: f32[] = [0.5]
  %p = Mul(%x, %h) @"half"
  %s = Softmax(%p) {axis = 0} @"softmax"
  %y = Relu(%s) @"relu"
  output %y
})",
     3},
    // Masked mean over the sequence axis (sentence-embedding pooling), no keepdims.
    {"masked_sequence_mean", R"(graph "g" opset 18 {
  input %x: f32[2,128,96]
  input %m: f32[2,128,1]
  const %a1: i64[1] = [1]
  %xm = Mul(%x, %m) @"mask"
  %p = ReduceMean(%xm, %a1) {keepdims = 0} @"mean"
  output %p
})",
     1},
    // Two reductions of one f16 prologue over the same columns, both stored.
    {"max_and_sum_f16", R"(graph "g" opset 18 {
  input %x: f16[200,40]
  const %a0: i64[1] = [0]
  %e = Exp(%x) @"exp"
  %mx = ReduceMax(%e, %a0) @"colmax"
  %sm = ReduceSum(%e, %a0) @"colsum"
  output %mx
  output %sm
})",
     1},  // the maximum and the sum in one pass (StitchInfo::shared_pass)
    // Two leading axes reduced, the inner one kept.
    {"two_leading_axes", R"(graph "g" opset 18 {
  input %x: f32[6,20,33]
  const %ax: i64[2] = [0, 1]
  %a = Abs(%x) @"abs"
  %s = ReduceSum(%a, %ax) @"sum01"
  %q = Sqrt(%s) @"sqrt"
  output %q
})",
     1},
};

}  // namespace

TEST_CASE("a column reduction takes its prologue and epilogue into one tiled kernel, under every planner",
          "[fusion][emu]") {
  uint32_t seed = 500;
  for (const Pattern& p : kPatterns) {
    INFO(p.name);
    auto g = test::parse_or_die(p.text);
    test::run_frontend_or_die(*g);
    const std::vector<const Node*> all = test::all_nodes(*g);
    const auto users = g->users();
    const auto stored = codegen::group_outputs(*g, users, all);
    auto info = codegen::analyze_stitch(all, stored);
    INFO(info.status().message());
    REQUIRE(info.is_ok());
    CHECK(info->row);
    CHECK(info->column);
    CHECK(info->passes == p.passes);
    auto k = codegen::lower_stitched(all, stored, 0);
    REQUIRE(k.is_ok());
    INFO(k->source);
    CHECK(k->block[0] == codegen::kTileBlock);
    CHECK(k->grid[0] == (info->rows + codegen::kTileSegments - 1) / codegen::kTileSegments);
    CHECK(k->mapping.rfind("tiled columns", 0) == 0);
    CHECK(k->source.find("tile_column_reduce(") != std::string::npos);
    // Threads past the last column compute a copy of it and store nothing (identical values
    // written twice would pass any comparison, so the guard is checked in the source).
    const bool guarded = k->source.find("if (lane == 0 && live)") != std::string::npos ||
                         k->source.find("if (live) {") != std::string::npos;
    CHECK(guarded);
    if (std::string(p.name) == "column_softmax") CHECK(k->source.find("if (live) {") != std::string::npos);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      auto plan = fusion::make_plan(*g, opts(mode));
      REQUIRE(plan.is_ok());
      INFO(fusion::explain(*plan));
      // Greedy merges pairs only: where the prologue feeds two reductions, either pair alone would
      // have to store it, which costs more than it saves; beam and ILP take all three.
      const size_t want = std::string(mode) == "greedy" && std::string(p.name) == "max_and_sum_f16" ? 3 : 1;
      CHECK(plan->groups.size() == want);
      // (Greedy's two reductions have no path between them: they share one packed launch.)
      CHECK(test::plan_matches_reference(*g, *plan, seed++, kEmuF16Output) ==
            static_cast<size_t>(plan->cost.kernels));
      CHECK(plan->cost.kernels == (want == 1 ? 1 : 2));
    }
    CHECK(test::one_group_matches_reference(*g, seed++, kEmuF16Output));
  }
}

TEST_CASE("a column kernel and a row kernel with no path between them share one launch", "[fusion][emu]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %c: f32[1000,37]
  input %x: f32[37,770]
  input %r: f32[37,770]
  input %s: f32[770]
  const %a0: i64[1] = [0]
  %t = Tanh(%c) @"tanh"
  %cs = ReduceSum(%t, %a0) @"colsum"
  %h = Add(%x, %r) @"residual"
  %n = LayerNormalization(%h, %s) {axis = -1} @"ln"
  output %cs
  output %n
})");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  REQUIRE(plan->groups.size() == 2);
  CHECK(plan->groups[0].pack >= 0);
  CHECK(plan->groups[0].pack == plan->groups[1].pack);
  CHECK(plan->cost.kernels == 1);
  auto s = test::schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  REQUIRE(s->kernels.size() == 1);
  INFO(s->kernels[0].source);
  CHECK(s->kernels[0].scheme == "independent");
  CHECK(s->kernels[0].source.find("tile_column_reduce(") != std::string::npos);
  // The column part's tile (256 floats) counts in the packed kernel's shared memory.
  CHECK(s->kernels[0].static_smem_bytes >= 256 * 4);
  CHECK(test::plan_matches_reference(*g, *plan, 41) == 1);
}

TEST_CASE("rows and columns do not share a kernel, and a reduction of inner and outer axes is not stitched",
          "[fusion]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[64,48]
  input %z: f32[8,64,48]
  const %a0: i64[1] = [0]
  const %a1: i64[1] = [1]
  const %a02: i64[2] = [0, 2]
  %e = Exp(%x) @"exp"
  %c = ReduceSum(%e, %a0) @"colsum"
  %r = ReduceSum(%e, %a1) @"rowsum"
  %m = ReduceMax(%z, %a02) @"mixed"
  output %c
  output %r
  output %m
})");
  test::run_frontend_or_die(*g);
  const Node* exp = g->nodes()[0].get();
  const Node* colsum = g->nodes()[1].get();
  const Node* rowsum = g->nodes()[2].get();
  const Node* mixed = g->nodes()[3].get();
  const auto users = g->users();
  const std::vector<const Node*> both{exp, colsum, rowsum};
  auto info = codegen::analyze_stitch(both, codegen::group_outputs(*g, users, both));
  REQUIRE_FALSE(info.is_ok());
  CHECK_THAT(info.status().message(), Catch::Contains("node 'rowsum' (ReduceSum)") &&
                                          Catch::Contains("over axes [1]") &&
                                          Catch::Contains("over axes [0]"));
  CHECK(codegen::stitch_role(*mixed) == codegen::StitchRole::kNone);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  // exp joins one of the two reductions; the other and the mixed reduction are kernels of their own.
  CHECK(plan->groups.size() == 3);
  CHECK(test::fused_matches_reference(*g, 9) == 3);
}

}  // namespace stitch
