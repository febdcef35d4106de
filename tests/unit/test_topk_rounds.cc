// TopK as rounds of row reductions (fusion::topk_as_rounds): the rounds pick what TopK picks, in
// its order (ties to the lower index, NaN above every number, infinities, zeros of either sign),
// for the largest and the smallest, of float32, float16 and bfloat16, with indices inside the axis
// by their own nodes' bounds; the forms the rewrite does not take stay; and a router's softmax
// with its top 2 become one row kernel in every planner, run on emu against the reference.
#include <fmt/format.h>

#include "fusion/topk_rounds.h"
#include "fusion_test_util.h"
#include "ops/value_range.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// TopK of `k` along the last axis of a [5, 6] tensor of `type` holding ties, NaNs, infinities and
// zeros of both signs exactly (a random input times 0 plus the pattern, so that nothing folds it).
std::string special_rows(int64_t k, bool largest, const char* type = "f32") {
  return fmt::format(R"(graph "topk" opset 18 {{
  input %r: {2}[5,6]
  const %zero: {2}[] = [0.0]
  const %p: {2}[5,6] = [1, 3, 3, 2, 3, 0, nan, 1, inf, nan, -inf, 2, -inf, -inf, -inf, -inf, -inf, -inf, inf, nan, inf, 5, -1, nan, -0.0, 0.0, -0.0, -1, 1, 0.0]
  const %k: i64[1] = [{0}]
  %z = Mul(%r, %zero) @"zeroed"
  %x = Add(%z, %p) @"pattern"
  %v, %i = TopK(%x, %k) {{axis = -1, largest = {1}, sorted = 1}} @"topk"
  output %v
  output %i
}}
)",
                     k, largest ? 1 : 0, type);
}

StatusOr<std::vector<std::string>> rounds(Graph& g) { return fusion::topk_as_rounds(g); }

}  // namespace

TEST_CASE("TopK as rounds picks what TopK picks: ties to the lower index, NaN above every number",
          "[fusion][emu]") {
  uint32_t seed = 800;
  for (const char* type : {"f32", "f16", "bf16"})
    for (const bool largest : {true, false})
      for (const int64_t k : {1, 3, 6}) {
        INFO(fmt::format("{} k {} {}", type, k, largest ? "largest" : "smallest"));
        auto [g, original, lines] = rewritten(special_rows(k, largest, type), rounds);
        REQUIRE(lines.size() == 1);
        CHECK(lines.front() ==
              fmt::format(
                  "node 'topk' (TopK): {} rounds over rows of 6 ({} first), one row reduction of keys each",
                  k, largest ? "the largest" : "the smallest"));
        CHECK(count_op(*g, "TopK") == 0);
        // Inside the axis by the rounds' own nodes: a reader's index check has nothing to check.
        const auto bounds = ops::int_range(g->find_value("i"));
        REQUIRE(bounds);
        CHECK(bounds->min == 0);
        CHECK(bounds->max == 5);
        same_as_original(*original, *g, seed++);  // values copied, indices compared exactly
        for (const char* mode : {"greedy", "beam", "ilp"}) {
          INFO(mode);
          CHECK(fused_matches_reference(*g, seed++, mode) >= 1);
        }
      }
}

TEST_CASE("TopKs the rounds do not take stay as they are", "[fusion]") {
  struct Case {
    const char* what;
    const char* text;
  };
  const Case cases[] = {
      {"along an axis other than the last", R"(graph "g" opset 18 {
  input %x: f32[6,4]
  const %k: i64[1] = [2]
  %v, %i = TopK(%x, %k) {axis = 0} @"topk"
  output %v
  output %i
})"},
      {"of integers", R"(graph "g" opset 18 {
  input %x: i64[4,6]
  const %k: i64[1] = [2]
  %v, %i = TopK(%x, %k) {axis = -1} @"topk"
  output %v
  output %i
})"},
      {"of more than 8", R"(graph "g" opset 18 {
  input %x: f32[4,16]
  const %k: i64[1] = [9]
  %v, %i = TopK(%x, %k) {axis = -1} @"topk"
  output %v
  output %i
})"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto g = parse_or_die(c.text);
    run_frontend_or_die(*g);  // (a K known only at run time the front end refuses, naming the node)
    auto lines = fusion::topk_as_rounds(*g);
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    CHECK(count_op(*g, "TopK") == 1);
  }
  SECTION("only the indices read: no node computes the values") {
    auto [g, original, lines] = rewritten(R"(graph "g" opset 18 {
  input %x: f32[5,6]
  const %k: i64[1] = [2]
  %v, %i = TopK(%x, %k) {axis = -1} @"topk"
  output %i
})",
                                          rounds);
    CHECK(lines.size() == 1);
    const auto users = g->users();
    for (const auto& n : g->nodes())
      for (const Value* o : n->outputs) {
        INFO(n->describe());
        auto it = users.find(o);
        CHECK((g->is_graph_output(o) || (it != users.end() && !it->second.empty())));
      }
    same_as_original(*original, *g, 830);
    CHECK(fused_matches_reference(*g, 831) >= 1);
  }
  SECTION("--no-fuse on the TopK") {
    auto g = parse_or_die(special_rows(2, true));
    run_frontend_or_die(*g);
    auto lines = fusion::topk_as_rounds(*g, {"topk"});
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
  }
}

TEST_CASE("a router's softmax and its top 2 as rounds are one row kernel", "[fusion][emu]") {
  // Mixtral's routing: the softmax of 40 tokens' logits over 8 experts, the top 2 with their
  // experts, the 2 weights normalized by their sum (rows of 2: a kernel of their own). Two kernels,
  // where the TopK would make three.
  auto g = parse_or_die(R"(graph "router" opset 18 {
  input %logits: f32[40,8]
  const %k: i64[1] = [2]
  const %last: i64[1] = [-1]
  %p = Softmax(%logits) {axis = -1} @"softmax"
  %v, %i = TopK(%p, %k) {axis = -1} @"topk"
  %s = ReduceSum(%v, %last) @"sum"
  %w = Div(%v, %s) @"normalized"
  output %w
  output %i
})");
  run_frontend_or_die(*g);
  auto lines = fusion::topk_as_rounds(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  uint32_t seed = 820;
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, opts(mode));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    std::map<std::string, size_t> group_of;
    for (size_t i = 0; i < plan->groups.size(); ++i)
      for (const Node* n : plan->groups[i].nodes) group_of[n->name] = i;
    // The rounds' row reductions with the softmax; the values and indices they give, per-row values,
    // may go with the normalization, which reads the values (rows of 2).
    for (const char* part : {"topk/round0_best", "topk/round1_best"})
      CHECK(group_of.at(part) == group_of.at("softmax"));
    CHECK(plan->groups.size() == 2);
    CHECK(fused_matches_reference(*g, seed++, mode) >= 1);
  }
}

TEST_CASE("TopK rounds over rows long enough to split over blocks match in every planner", "[fusion][emu]") {
  // A vocabulary's logits: rows of 100000, their softmax and its top 2 as rounds of keys (int64
  // reductions beside the softmax's float ones), whatever the planners make of them.
  auto [g, original, lines] = rewritten(R"(graph "vocab" opset 18 {
  input %logits: f32[3,100000]
  const %k: i64[1] = [2]
  %p = Softmax(%logits) {axis = -1} @"softmax"
  %v, %i = TopK(%p, %k) {axis = -1} @"topk"
  output %v
  output %i
})",
                                        rounds);
  REQUIRE(lines.size() == 1);
  uint32_t seed = 850;
  same_as_original(*original, *g, seed++);
  for (const char* mode : {"greedy", "beam"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, opts(mode));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    // Rows split over blocks: the keys' int64 partials meet at grid barriers beside the softmax's.
    CHECK(std::any_of(plan->groups.begin(), plan->groups.end(), [](const fusion::FusionGroup& grp) {
      return grp.scheme == "global" && has_op(grp, "ReduceMax");
    }));
    CHECK(fused_matches_reference(*g, seed++, mode) >= 1);
  }
}
