// Sums and means over a few elements as Adds of Slices (fusion::short_reductions_as_adds), and
// softmaxes over a few elements as element-wise ops: the rewritten graph computes what the
// reduction did (kept axes or not, the axes an attribute or an input, integers exactly), the forms
// it does not take stay, and an MoE token's sum over its slots
// joins the next RMSNorm's row kernel in every planner, run on emu against the reference.
#include <fmt/format.h>

#include "fusion/short_reductions.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("short sums and means as Adds of Slices compute what the reduction did", "[fusion][emu]") {
  const std::vector<OneNodeRewrite> cases = {
      {"a sum over a middle axis, not kept", R"(graph "g" opset 18 {
  input %x: f32[6,3,10]
  const %axes: i64[1] = [1]
  %y = ReduceSum(%x, %axes) {keepdims = 0} @"sum"
  output %y
})",
       "node 'sum' (ReduceSum): 3 elements along axis 1 as 3 Slices and 2 Adds"},
      {"a mean over the first axis, kept", R"(graph "g" opset 18 {
  input %x: f32[5,7]
  const %axes: i64[1] = [0]
  %y = ReduceMean(%x, %axes) @"mean"
  output %y
})",
       "node 'mean' (ReduceMean): 5 elements along axis 0 as 5 Slices and 4 Adds, then a Div by the count"},
      {"a sum over 8, the last axis", R"(graph "g" opset 18 {
  input %x: f32[9,8]
  const %axes: i64[1] = [-1]
  %y = ReduceSum(%x, %axes) @"sum"
  output %y
})",
       "node 'sum' (ReduceSum): 8 elements along axis 1 as 8 Slices and 7 Adds"},
      {"an integer sum", R"(graph "g" opset 18 {
  input %x: i64[4,2,5]
  const %axes: i64[1] = [1]
  %y = ReduceSum(%x, %axes) {keepdims = 0} @"sum"
  output %y
})",
       "node 'sum' (ReduceSum): 2 elements along axis 1 as 2 Slices and 1 Add"},
      {"a mean whose axes are an attribute, one of them of one element", R"(graph "g" opset 13 {
  input %x: f32[3,1,4]
  %y = ReduceMean(%x) {axes = ints[1, 2], keepdims = 0} @"mean"
  output %y
})",
       "node 'mean' (ReduceMean): 4 elements along axis 2 as 4 Slices and 3 Adds, then a Div by the count"},
      {"a sum of a vector to a scalar", R"(graph "g" opset 18 {
  input %x: f32[3]
  const %axes: i64[1] = [0]
  %y = ReduceSum(%x, %axes) {keepdims = 0} @"sum"
  output %y
})",
       "node 'sum' (ReduceSum): 3 elements along axis 0 as 3 Slices and 2 Adds"},
      {"a float16 mean", R"(graph "g" opset 18 {
  input %x: f16[4,6,2]
  const %axes: i64[1] = [2]
  %y = ReduceMean(%x, %axes) @"mean"
  output %y
})",
       "node 'mean' (ReduceMean): 2 elements along axis 2 as 2 Slices and 1 Add, then a Div by the count"},
      {"a sum of a model at opset 9 (its Slices at the graph's opset, which takes their bounds as inputs)",
       R"(graph "g" opset 9 {
  input %x: f32[4,2]
  %y = ReduceSum(%x) {axes = ints[1]} @"r"
  output %y
})",
       "node 'r' (ReduceSum): 2 elements along axis 1 as 2 Slices and 1 Add"},
  };
  one_node_rewrites(
      cases, [](Graph& x) { return fusion::short_reductions_as_adds(x); }, {"ReduceSum", "ReduceMean"}, 900);
}

TEST_CASE("a softmax over a few elements as element-wise ops computes what the Softmax did",
          "[fusion][emu]") {
  // A router's softmax over its top 2 (gpt-oss's, GraniteMoE's): rows of 2, which no kernel with
  // rows of the experts takes as a row op. Rows holding infinities and equal values too.
  struct Case {
    const char* what;
    int opset;
    const char* input;  // type and dims
    const char* attrs;
    int64_t axis, len;
    bool half;
  };
  const Case cases[] = {
      {"over the last axis of 2", 18, "f32[9,2]", " {axis = -1}", 1, 2, false},
      {"over a last axis of 8", 13, "f32[3,5,8]", " {axis = 2}", 2, 8, false},
      {"float16 over 4", 18, "f16[6,4]", "", 1, 4, true},
      {"opset 11, the last axis", 11, "f32[2,3,3]", " {axis = 2}", 2, 3, false},
  };
  uint32_t seed = 950;
  for (const Case& c : cases) {
    INFO(c.what);
    auto [g, original, lines] = rewritten(
        fmt::format(
            "graph \"g\" opset {} {{\n  input %x: {}\n  %y = Softmax(%x){} @\"softmax\"\n  output %y\n}}",
            c.opset, c.input, c.attrs),
        [](Graph& x) { return fusion::short_reductions_as_adds(x); });
    REQUIRE(lines.size() == 1);
    CHECK(lines.front() ==
          fmt::format("node 'softmax' (Softmax): {} elements along axis {} as element-wise ops "
                      "(the largest by {} Max, the sum of the exponentials by {} Add{}){}",
                      c.len, c.axis, c.len - 1, c.len - 1, c.len > 2 ? "s" : "",
                      c.half ? ", in float32" : ""));
    CHECK(count_op(*g, "Softmax") == 0);
    rewritten_is_one_kernel(*original, *g, seed);
  }
  SECTION("rows of equal values, infinities and large values") {
    auto [g, original, lines] = rewritten(R"(graph "g" opset 18 {
  input %x: f32[5,3]
  %y = Softmax(%x) @"softmax"
  output %y
})",
                                          [](Graph& x) { return fusion::short_reductions_as_adds(x); });
    REQUIRE(lines.size() == 1);
    TensorMap feed;
    feed["x"] = Tensor::from_f64(DType::kF32, {5, 3},
                                 {1, 1, 1, 1000, 999, -1000, -INFINITY, 0, 2, 80, 88, 87, -3, -3, -2.5});
    auto want = run_reference(*original, feed);
    auto got = run_reference(*g, feed);
    REQUIRE(want.is_ok());
    REQUIRE(got.is_ok());
    const CompareResult r =
        compare_tensors(got->at("y"), want->at("y"), kRewriteReference.rtol, kRewriteReference.atol);
    INFO(r.max_abs << " " << r.problem);
    CHECK(r.ok);
  }
}

TEST_CASE("reductions the Adds do not take stay as they are", "[fusion]") {
  struct Case {
    const char* what;
    const char* text;
  };
  const Case cases[] = {
      {"over 9 elements", R"(graph "g" opset 18 {
  input %x: f32[4,9]
  const %axes: i64[1] = [1]
  %y = ReduceSum(%x, %axes) @"r"
  output %y
})"},
      {"over two axes of more than one element", R"(graph "g" opset 18 {
  input %x: f32[3,2,2]
  const %axes: i64[2] = [1, 2]
  %y = ReduceSum(%x, %axes) @"r"
  output %y
})"},
      {"a maximum", R"(graph "g" opset 18 {
  input %x: f32[4,2]
  const %axes: i64[1] = [1]
  %y = ReduceMax(%x, %axes) @"r"
  output %y
})"},
      {"a mean of integers (truncating)", R"(graph "g" opset 18 {
  input %x: i32[4,3]
  const %axes: i64[1] = [1]
  %y = ReduceMean(%x, %axes) @"r"
  output %y
})"},
      {"no axes with noop_with_empty_axes", R"(graph "g" opset 18 {
  input %x: f32[4,2]
  %y = ReduceSum(%x) {noop_with_empty_axes = 1} @"r"
  output %y
})"},
      {"a softmax over 9 elements", R"(graph "g" opset 18 {
  input %x: f32[4,9]
  %y = Softmax(%x) @"r"
  output %y
})"},
      {"a softmax over a middle axis (a column reduction, as an image's classes over its channels)",
       R"(graph "g" opset 18 {
  input %x: f32[2,4,3,3]
  %y = Softmax(%x) {axis = 1} @"r"
  output %y
})"},
      {"a softmax before opset 13 over an axis that is not the last (rows of the axes after it)",
       R"(graph "g" opset 11 {
  input %x: f32[4,2,3]
  %y = Softmax(%x) {axis = 1} @"r"
  output %y
})"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    rewrite_leaves_alone(c.text, [](Graph& x) { return fusion::short_reductions_as_adds(x); });
  }
  SECTION("--no-fuse on the reduction") {
    auto g = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,2]
  const %axes: i64[1] = [1]
  %y = ReduceSum(%x, %axes) @"r"
  output %y
})");
    run_frontend_or_die(*g);
    auto lines = fusion::short_reductions_as_adds(*g, {"r"});
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    CHECK(count_op(*g, "ReduceSum") == 1);
  }
}

namespace {

// transformers' MoE: each slot's expert output weighted by the slot's routing weight, summed over
// the token's 2 slots (a column reduction: a kernel of its own), added to the residual, then the
// next layer's RMSNorm (rows of 24). With the sum as Adds, one row kernel.
std::string moe_combine_text() {
  return R"(graph "combine" opset 18 {
  input %experts: f32[20,2,24]
  input %weights: f32[20,2]
  input %residual: f32[20,24]
  const %last: i64[1] = [-1]
  const %slots: i64[1] = [1]
  const %eps: f32[] = [0.00001]
  const %gamma: f32[24] = [)" +
         [] {
           std::string s;
           for (int i = 0; i < 24; ++i) s += fmt::format("{}{}", i ? ", " : "", 0.5 + 0.05 * i);
           return s;
         }() +
         R"(]
  %w = Unsqueeze(%weights, %last) @"column"
  %weighted = Mul(%experts, %w) @"weighted"
  %moe = ReduceSum(%weighted, %slots) {keepdims = 0} @"slot_sum"
  %h = Add(%residual, %moe) @"residual"
  %sq = Mul(%h, %h) @"square"
  %ms = ReduceMean(%sq, %last) @"mean_square"
  %e = Add(%ms, %eps) @"eps"
  %root = Sqrt(%e) @"root"
  %inv = Reciprocal(%root) @"inverse"
  %n = Mul(%h, %inv) @"normalized"
  %y = Mul(%n, %gamma) @"scaled"
  output %h
  output %y
})";
}

}  // namespace

TEST_CASE("an MoE token's sum over its slots joins the residual and the next RMSNorm", "[fusion][emu]") {
  auto g = parse_or_die(moe_combine_text());
  run_frontend_or_die(*g);
  {
    auto before = fusion::make_plan(*g, opts("beam"));
    REQUIRE(before.is_ok());
    INFO(fusion::explain(*before));
    CHECK(before->cost.kernels == 2);
  }
  auto original = clone_graph(*g);
  auto kept = fusion::short_reductions_as_adds_if_cheaper(g, opts("beam"));
  REQUIRE(kept.is_ok());
  INFO(kept->verdict);
  REQUIRE(kept->lines.size() == 1);  // the RMSNorm's mean (over 24) stays a row op
  CHECK(kept->lines.front() == "node 'slot_sum' (ReduceSum): 2 elements along axis 1 as 2 Slices and 1 Add");
  same_as_original(*original, *g, 950);
  uint32_t seed = 951;
  one_kernel_in_every_planner(*g, seed, [](const fusion::FusionPlan& p) { CHECK(p.cost.kernels == 1); });
}

TEST_CASE("a judged rewrite given the estimate of the graph as it stands plans only its copy", "[fusion]") {
  // rewrite_for_planning hands each judged rewrite the estimate its predecessor kept: the verdict
  // must read the same as when the rewrite plans the graph itself, and the estimate handed in is
  // what the copy is judged against.
  auto g = parse_or_die(moe_combine_text());
  run_frontend_or_die(*g);
  auto planned = clone_graph(*g), handed = clone_graph(*g), free = clone_graph(*g);
  auto own = fusion::short_reductions_as_adds_if_cheaper(planned, opts("beam"));
  REQUIRE(own.is_ok());
  REQUIRE(own->lines.size() == 1);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  auto given = fusion::short_reductions_as_adds_if_cheaper(handed, opts("beam"), plan->cost);
  REQUIRE(given.is_ok());
  CHECK(given->verdict == own->verdict);
  CHECK(given->lines == own->lines);
  REQUIRE(given->kept);
  CHECK(given->kept->time == own->kept->time);
  // An estimate of no time for the graph as it stands: the copy cannot beat it, and g stays.
  fusion::Cost nothing;
  auto lost = fusion::short_reductions_as_adds_if_cheaper(free, opts("beam"), nothing);
  REQUIRE(lost.is_ok());
  INFO(lost->verdict);
  CHECK(lost->lines.empty());
  CHECK(lost->verdict.find("against 0.0 us without") != std::string::npos);
  CHECK(lost->kept->time == 0);
}
