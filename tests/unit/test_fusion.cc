// Fusion: greedy local stitching on the shipped models (launch counts that must not grow, fused
// artifacts matching the reference), and seeded random graphs of per-element ops with every kind
// of broadcast, fused and run on the emu backend against the reference interpreter.
#include <fmt/format.h>

#include <random>

#include "backend_test_util.h"
#include "fusion/plan.h"

using namespace stitch;

namespace {

codegen::NodeGroups groups_of(const fusion::FusionPlan& p) {
  codegen::NodeGroups out;
  for (const auto& grp : p.groups) out.push_back(grp.nodes);
  return out;
}

// Fuses greedily, then compiles, runs on emu and compares with the reference.
size_t fused_matches_reference(const Graph& g, uint32_t seed) {
  auto plan = fusion::make_plan(g, {"greedy", {}, 64});
  REQUIRE(plan.is_ok());
  const auto groups = groups_of(*plan);
  return test::emu_matches_reference(g, &groups, seed);
}

}  // namespace

TEST_CASE("greedy local stitching: launch counts of the shipped models do not grow", "[fusion][models]") {
  // Unfused counts are 62, 102, 104 and 18 (test_codegen.cc).
  const std::map<std::string, size_t> most = {{"bert_tiny", 34}, {"gpt2_tiny", 57}, {"llama_tiny", 62}, {"cnn_small", 14}};
  for (const auto& [name, limit] : most) {
    INFO(name);
    auto g = test::prepared_model(name);
    auto plan = fusion::make_plan(*g, {"greedy", {}, 64});
    REQUIRE(plan.is_ok());
    const auto groups = groups_of(*plan);
    size_t nodes = 0;
    for (const auto& grp : groups) nodes += grp.size();
    CHECK(nodes == g->nodes().size());  // every node exactly once
    auto s = codegen::build_schedule(*g, &groups);
    REQUIRE(s.is_ok());
    CHECK(s->kernels.size() <= limit);
    Status st = verify_memory_plan(s->requests, s->plan);
    CHECK(st.is_ok());
  }
}

TEST_CASE("the no-fuse list and the group size cap are honoured, and bad values rejected", "[fusion]") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[4,8]
  %a = Relu(%x) @"a"
  %b = Neg(%a) @"b"
  %c = Abs(%b) @"c"
  output %c
}
)");
  test::run_frontend_or_die(*g);
  auto all = fusion::make_plan(*g, {"greedy", {}, 64});
  REQUIRE(all.is_ok());
  CHECK(all->groups.size() == 1);
  auto capped = fusion::make_plan(*g, {"greedy", {}, 2});
  REQUIRE(capped.is_ok());
  CHECK(capped->groups.size() == 2);
  auto kept = fusion::make_plan(*g, {"greedy", {"b"}, 64});
  REQUIRE(kept.is_ok());
  CHECK(kept->groups.size() == 3);
  CHECK(fusion::explain(*kept).find("the producer is in --no-fuse") != std::string::npos);
  auto bad = fusion::make_plan(*g, {"greedy", {"nosuch"}, 64});
  CHECK(!bad.is_ok());
  CHECK(bad.status().message().find("no node of that name") != std::string::npos);
  CHECK(!fusion::make_plan(*g, {"beam", {}, 64}).is_ok());
}

TEST_CASE("a merge that would make a cycle is rejected", "[fusion]") {
  // c reads a (in the group) and r, which reads a through a reduction outside the group:
  // fusing c with a would need r before and after the group.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[4,8]
  const %ax: i64[1] = [1]
  %a = Relu(%x) @"a"
  %r = ReduceSum(%a, %ax) @"r"
  %c = Add(%a, %r) @"c"
  output %c
}
)");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, {"greedy", {}, 64});
  REQUIRE(plan.is_ok());
  CHECK(plan->groups.size() == 3);
  CHECK(fusion::explain(*plan).find("a cycle") != std::string::npos);
  fused_matches_reference(*g, 3);
}

TEST_CASE("seeded random per-element graphs: fused equals the reference", "[fusion][emu]") {
  const char* shapes[] = {"37,770", "1,770", "37,1", "1"};
  const char* unary[] = {"Relu", "Neg", "Abs", "Tanh", "Sigmoid"};
  const char* binary[] = {"Add", "Sub", "Mul", "Max", "Min"};
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 6; ++trial) {
    INFO("trial " << trial);
    std::string text = "graph \"r\" opset 17 {\n";
    std::vector<std::string> pool;
    for (int i = 0; i < 4; ++i) {
      text += fmt::format("  input %in{}: f32[{}]\n", i, i == 0 ? "37,770" : shapes[rng() % 4]);
      pool.push_back(fmt::format("%in{}", i));
    }
    std::vector<std::string> made;
    for (int k = 0; k < 10; ++k) {
      const std::string v = fmt::format("%v{}", k);
      // The first operand is always a full-shape value, so every result has the domain's shape.
      const std::string a = made.empty() ? "%in0" : made[rng() % made.size()];
      const std::string b = pool[rng() % pool.size()];
      switch (rng() % 3) {
        case 0: text += fmt::format("  {} = {}({}) @\"n{}\"\n", v, unary[rng() % 5], a, k); break;
        case 1: text += fmt::format("  {} = {}({}, {}) @\"n{}\"\n", v, binary[rng() % 5], a, b, k); break;
        default:
          text += fmt::format("  %c{} = Greater({}, {}) @\"g{}\"\n", k, a, b, k);
          text += fmt::format("  {} = Where(%c{}, {}, {}) @\"n{}\"\n", v, k, a, b, k);
      }
      made.push_back(v);
      pool.push_back(v);
    }
    text += "  output " + made.back() + "\n  output " + made[rng() % (made.size() - 1)] + "\n}\n";
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    const size_t kernels = fused_matches_reference(*g, 10 + trial);
    CHECK(kernels < g->nodes().size());
  }
}

TEST_CASE("regional stitching: per-element chains recomputed inside softmax, layer norm and reductions",
          "[fusion][emu]") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[3,100000]
  input %m: f32[1,100000]
  input %y: f32[37,770]
  input %r: f32[37,770]
  input %b: f32[770]
  input %s: f32[770]
  input %c: f32[1000,37]
  const %k: f32[] = [0.125]
  const %ax0: i64[1] = [0]
  %x1 = Mul(%x, %k) @"scale"
  %x2 = Add(%x1, %m) @"mask"
  %p = Softmax(%x2) {axis = -1} @"softmax"
  %y1 = Add(%y, %b) @"bias"
  %y2 = Add(%y1, %r) @"residual"
  %n = LayerNormalization(%y2, %s, %b) {axis = -1} @"ln"
  %c1 = Tanh(%c) @"tanh"
  %cs = ReduceSum(%c1, %ax0) {keepdims = 0} @"colsum"
  output %p
  output %n
  output %cs
}
)");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, {"greedy", {}, 64});
  REQUIRE(plan.is_ok());
  int regional = 0;
  for (const auto& grp : plan->groups) regional += grp.scheme == "regional";
  CHECK(regional == 3);
  CHECK(fused_matches_reference(*g, 40) == 3);  // one kernel each: scale+mask+softmax, bias+residual+LN, tanh+sum
}

TEST_CASE("epilogues: per-element consumers of a segment op's output applied before its store", "[fusion][emu]") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[37,770]
  input %h: f32[6,1000]
  const %zero: f32[] = [0.0]
  const %eps: f32[] = [0.000001]
  const %ax: i64[1] = [1]
  %p = Softmax(%x) {axis = -1} @"softmax"
  %nan = IsNaN(%p) @"isnan"
  %q = Where(%nan, %zero, %p) @"guard"
  %sq = Mul(%h, %h) @"square"
  %ms = ReduceMean(%sq, %ax) @"mean"
  %me = Add(%ms, %eps) @"add_eps"
  %rs = Sqrt(%me) @"sqrt"
  %inv = Reciprocal(%rs) @"recip"
  %leak = Neg(%rs) @"leak"
  output %q
  output %inv
  output %leak
}
)");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, {"greedy", {}, 64});
  REQUIRE(plan.is_ok());
  const std::string text = fusion::explain(*plan);
  INFO(text);
  // softmax + isnan + where; square + mean + add_eps + sqrt (sqrt is also read by 'leak', so the
  // epilogue stops there and recip runs alone, as does leak).
  CHECK(text.find("taken out of the epilogue") != std::string::npos);
  CHECK(fused_matches_reference(*g, 50) == 4);
}
