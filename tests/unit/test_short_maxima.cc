// Maxima and minima over a few elements as Max and Min of Slices (fusion::short_maxima_as_maxes):
// the rewritten graph computes what the reduction did (kept axes or not, float with NaN and
// infinities, integers exactly), the forms it does not take stay, and DeepSeek-V3's group-limited
// router, whose three TopKs run over rows of 2, 4 and 8 of the same tokens, is three row kernels
// without the rewrite and one or two with it, run on emu against the reference.
#include <fmt/format.h>

#include "fusion/rewrites.h"
#include "fusion/short_reductions.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

StatusOr<std::vector<std::string>> maxima(Graph& g) { return fusion::short_maxima_as_maxes(g); }

}  // namespace

TEST_CASE("short maxima and minima as Max and Min of Slices compute what the reduction did",
          "[fusion][emu]") {
  const std::vector<OneNodeRewrite> cases = {
      {"a maximum over a middle axis, not kept", R"(graph "g" opset 18 {
  input %x: f32[6,3,10]
  const %axes: i64[1] = [1]
  %y = ReduceMax(%x, %axes) {keepdims = 0} @"max"
  output %y
})",
       "node 'max' (ReduceMax): 3 elements along axis 1 as 3 Slices and 2 Max"},
      {"a minimum over the first axis, kept", R"(graph "g" opset 18 {
  input %x: f32[5,7]
  const %axes: i64[1] = [0]
  %y = ReduceMin(%x, %axes) @"min"
  output %y
})",
       "node 'min' (ReduceMin): 5 elements along axis 0 as 5 Slices and 4 Min"},
      {"int64 keys over 8, the last axis (a TopK's round)", R"(graph "g" opset 18 {
  input %x: i64[9,8]
  const %axes: i64[1] = [-1]
  %y = ReduceMax(%x, %axes) @"keys"
  output %y
})",
       "node 'keys' (ReduceMax): 8 elements along axis 1 as 8 Slices and 7 Max"},
      {"an int32 minimum whose axes are an attribute, one of them of one element", R"(graph "g" opset 13 {
  input %x: i32[3,1,4]
  %y = ReduceMin(%x) {axes = ints[1, 2], keepdims = 0} @"min"
  output %y
})",
       "node 'min' (ReduceMin): 4 elements along axis 2 as 4 Slices and 3 Min"},
      {"a float16 maximum of a vector to a scalar", R"(graph "g" opset 18 {
  input %x: f16[2]
  const %axes: i64[1] = [0]
  %y = ReduceMax(%x, %axes) {keepdims = 0} @"max"
  output %y
})",
       "node 'max' (ReduceMax): 2 elements along axis 0 as 2 Slices and 1 Max"},
      {"a maximum of a model at opset 9 (its Slices take their bounds as attributes)", R"(graph "g" opset 9 {
  input %x: f32[4,2]
  %y = ReduceMax(%x) {axes = ints[1]} @"r"
  output %y
})",
       "node 'r' (ReduceMax): 2 elements along axis 1 as 2 Slices and 1 Max"},
  };
  one_node_rewrites(cases, maxima, {"ReduceMax", "ReduceMin"}, 1200);
  SECTION("NaN, infinities and signed zeros, as the reduction has them") {
    for (const char* op : {"ReduceMax", "ReduceMin"}) {
      INFO(op);
      auto [g, original, lines] = rewritten(fmt::format(R"(graph "g" opset 18 {{
  input %x: f32[6,3]
  const %axes: i64[1] = [1]
  %y = {}(%x, %axes) @"r"
  output %y
}})",
                                                        op),
                                            maxima);
      REQUIRE(lines.size() == 1);
      TensorMap feed;
      feed["x"] = Tensor::from_f64(
          DType::kF32, {6, 3},
          {NAN, 1, 2, 1, NAN, -INFINITY, 3, 4, NAN, INFINITY, -INFINITY, 0, -0.0, 0, -0.0, -5, -5, -5});
      auto want = run_reference(*original, feed);
      auto got = run_reference(*g, feed);
      REQUIRE(want.is_ok());
      REQUIRE(got.is_ok());
      const Tensor& w = want->at("y");
      const Tensor& v = got->at("y");
      REQUIRE(v.size() == w.size());
      for (int64_t i = 0; i < w.size(); ++i) {
        INFO(i);
        if (std::isnan(w.get_f64(i)))
          CHECK(std::isnan(v.get_f64(i)));
        else
          CHECK(v.get_f64(i) == w.get_f64(i));
      }
      // The first three rows hold a NaN: the result is NaN whichever slice holds it.
      for (int64_t i = 0; i < 3; ++i) CHECK(std::isnan(v.get_f64(i)));
    }
  }
}

TEST_CASE("maxima the Max and Min do not take stay as they are", "[fusion]") {
  struct Case {
    const char* what;
    const char* text;
  };
  const Case cases[] = {
      {"over 9 elements", R"(graph "g" opset 18 {
  input %x: f32[4,9]
  const %axes: i64[1] = [1]
  %y = ReduceMax(%x, %axes) @"r"
  output %y
})"},
      {"over two axes of more than one element", R"(graph "g" opset 18 {
  input %x: f32[3,2,2]
  const %axes: i64[2] = [1, 2]
  %y = ReduceMin(%x, %axes) @"r"
  output %y
})"},
      {"no axes with noop_with_empty_axes", R"(graph "g" opset 18 {
  input %x: f32[4,2]
  %y = ReduceMax(%x) {noop_with_empty_axes = 1} @"r"
  output %y
})"},
      {"a sum (short_reductions_as_adds's)", R"(graph "g" opset 18 {
  input %x: f32[4,2]
  const %axes: i64[1] = [1]
  %y = ReduceSum(%x, %axes) @"r"
  output %y
})"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    rewrite_leaves_alone(c.text, maxima);
  }
  const char* two = R"(graph "g" opset 18 {
  input %x: f32[4,2]
  const %axes: i64[1] = [1]
  %y = ReduceMax(%x, %axes) @"r"
  output %y
})";
  SECTION("--no-fuse on the reduction") {
    auto g = parse_or_die(two);
    run_frontend_or_die(*g);
    auto lines = fusion::short_maxima_as_maxes(*g, {"r"});
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    CHECK(count_op(*g, "ReduceMax") == 1);
  }
  SECTION("another row length than the one asked for") {
    auto g = parse_or_die(two);
    run_frontend_or_die(*g);
    auto lines = fusion::short_maxima_as_maxes(*g, {}, 4);
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    auto asked = fusion::short_maxima_as_maxes(*g, {}, 2);
    REQUIRE(asked.is_ok());
    CHECK(asked->size() == 1);
  }
}

namespace {

// DeepSeek-V3's routing with its experts in groups (transformers' DeepseekV3TopkRouter at 8 experts
// in 4 groups of 2, the best 2 groups, then the top 2 experts): sigmoid scores plus a correction
// bias; each group's score the sum of its top 2; the best 2 groups as a mask of ones scattered
// into zeros, spread over their experts; the top 2 of the masked scores; their sigmoid scores
// gathered and normalized. Three TopKs over rows of 2, 4 and 8 of the same 24 tokens.
std::string group_router_text() {
  return R"(graph "router" opset 18 {
  input %logits: f32[24,8]
  const %bias: f32[8] = [0.1, -0.2, 0.05, 0.3, -0.1, 0.0, 0.2, -0.05]
  const %k: i64[1] = [2]
  const %last: i64[1] = [-1]
  const %by_group: i64[3] = [24, 4, 2]
  const %groups_shape: i64[2] = [24, 4]
  const %picks_shape: i64[2] = [24, 2]
  const %flat: i64[2] = [24, 8]
  const %zero: f32[] = [0]
  const %one: f32[] = [1]
  %s = Sigmoid(%logits) @"scores"
  %c = Add(%s, %bias) @"corrected"
  %cg = Reshape(%c, %by_group) @"grouped"
  %gv, %gi = TopK(%cg, %k) {axis = -1} @"group_top2"
  %gs = ReduceSum(%gv, %last) {keepdims = 0} @"group_scores"
  %bv, %bi = TopK(%gs, %k) {axis = -1} @"best_groups"
  %zeros = Expand(%zero, %groups_shape) @"zeros"
  %ones = Expand(%one, %picks_shape) @"ones"
  %mask = ScatterElements(%zeros, %bi, %ones) {axis = 1} @"group_mask"
  %m3 = Unsqueeze(%mask, %last) @"mask_column"
  %mx = Expand(%m3, %by_group) @"mask_experts"
  %mf = Reshape(%mx, %flat) @"mask_flat"
  %off = Equal(%mf, %zero) @"off"
  %masked = Where(%off, %zero, %c) @"masked"
  %tv, %ti = TopK(%masked, %k) {axis = -1} @"top2"
  %w = GatherElements(%s, %ti) {axis = 1} @"chosen"
  %ws = ReduceSum(%w, %last) @"chosen_sum"
  %wn = Div(%w, %ws) @"weights"
  output %wn
  output %ti
})";
}

}  // namespace

TEST_CASE("a group-limited router's top 2 of each group and of the groups join its rows over every expert",
          "[fusion][emu]") {
  auto original = parse_or_die(group_router_text());
  run_frontend_or_die(*original);
  uint32_t seed = 1250;
  std::map<bool, int64_t> kernels;
  for (const bool on : {true, false}) {
    INFO(on);
    auto g = clone_graph(*original);
    fusion::RewriteSwitches sw;
    sw.short_maxima = on;
    // The router is about 100 nodes: groups of up to 128, stitchc's default.
    auto r = fusion::rewrite_for_planning(g, opts("beam", {}, 128), sw);
    REQUIRE(r.is_ok());
    INFO(r->text());
    same_as_original(*original, *g, seed++);
    auto plan = fusion::make_plan(*g, opts("beam", {}, 128));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    kernels[on] = plan->cost.kernels;
    if (!on) {
      CHECK(r->short_maxima.verdict.empty());
      continue;
    }
    // The rounds over rows of 2 and of 4 element-wise, each judged by itself and each leaving fewer
    // kernels; those over every expert (rows of 8) too here, where no other row op is left beside
    // them (in a whole layer a norm's statistics are, and they stay row reductions there).
    CHECK(r->short_maxima.verdict.rfind("over 2: estimated", 0) == 0);
    CHECK(r->short_maxima.verdict.find("; over 4: estimated") != std::string::npos);
    CHECK(
        r->text().find("maxima and minima over a few elements as element-wise ops, judged per row length") !=
        std::string::npos);
    CHECK(count_op(*g, "TopK") == 0);
    for (const auto& np : g->nodes())
      if (np->op_type == "ReduceMax") CHECK(np->input(0)->dims->back() == 8);
    // One kernel but for the group size: the router written out element-wise is more than 128
    // nodes, so that its gather and normalization are a kernel of their own.
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      CHECK(fused_matches_reference(*g, seed++, opts(mode, {}, 128)) <= 2);
    }
    CHECK(fused_matches_reference(*g, seed++, opts("beam", {}, 256)) == 1);
  }
  // Without them, the rows of 2, 4 and 8 are three row kernels at least.
  CHECK(kernels[true] <= 2);
  CHECK(kernels[false] >= 3);
}

TEST_CASE("short maxima are kept only with no more kernels than without", "[fusion]") {
  // The estimate handed in stands for the graph as it is: a second of time and no kernel. The
  // copy is faster by the estimate but has a kernel more, so it is not kept, and the verdict says so.
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,2]
  const %axes: i64[1] = [1]
  %y = ReduceMax(%x, %axes) @"r"
  output %y
})");
  run_frontend_or_die(*g);
  fusion::Cost slow_none;
  slow_none.time = 1.0;
  auto lost = fusion::short_maxima_as_maxes_if_cheaper(g, opts("beam"), slow_none);
  REQUIRE(lost.is_ok());
  INFO(lost->verdict);
  CHECK(lost->lines.empty());
  CHECK(lost->verdict.rfind("over 2: not applied: estimated ", 0) == 0);
  CHECK(lost->verdict.find("us against 1000000.0 us without, 1 kernels against 0 (1 candidates;") !=
        std::string::npos);
  CHECK(count_op(*g, "ReduceMax") == 1);
  // With as many kernels as the plan without, it is kept.
  fusion::Cost slow_one = slow_none;
  slow_one.kernels = 1;
  auto kept = fusion::short_maxima_as_maxes_if_cheaper(g, opts("beam"), slow_one);
  REQUIRE(kept.is_ok());
  INFO(kept->verdict);
  CHECK(kept->lines.size() == 1);
  CHECK(count_op(*g, "ReduceMax") == 0);
}
