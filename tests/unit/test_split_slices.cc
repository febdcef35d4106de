// Splits and constant Gathers as Slices (fusion::split_to_slices): every spelling of a Split's
// sizes, and every Gather of a constant run of indices, becomes Slices that compute what it did
// (reference interpreter on both graphs), kept by stitchc only when the plan's estimate is no
// higher; GPT-2's Q/K/V Split and BLOOM's Q/K/V Gathers then let Q.K^T be stitched while P.V
// still reads V in place.
#include "fusion/hoist_scales.h"
#include "fusion/merge_gemms.h"
#include "fusion/split_slices.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

struct Case {
  const char* name;
  const char* text;
  const char* line;  // split_to_slices' line
};

// c's graph through split_to_slices: its one line is c.line, no `gone` op is left, and the
// rewritten graph computes the original's outputs (reference) and fuses. Returns the graph.
std::unique_ptr<Graph> rewritten_as_before(const Case& c, const char* gone, uint32_t& seed) {
  INFO(c.name);
  auto g = parse_or_die(c.text);
  run_frontend_or_die(*g);
  auto original = clone_graph(*g);
  auto lines = fusion::split_to_slices(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  CHECK(lines->front() == c.line);
  for (const auto& n : g->nodes()) CHECK(n->op_type != gone);
  same_as_original(*original, *g, seed++);
  CHECK(fused_matches_reference(*g, seed++) >= 1);
  return g;
}

// The rewrite leaves `text`'s one `op` node as it is (nodes named in `keep` are --no-fuse's).
void left_as_is(const char* text, const std::string& op, const std::set<std::string>& keep = {}) {
  INFO(text);
  auto g = parse_or_die(text);
  run_frontend_or_die(*g);
  auto lines = fusion::split_to_slices(*g, keep);
  REQUIRE(lines.is_ok());
  CHECK(lines->empty());
  int kept = 0;
  for (const auto& n : g->nodes()) kept += n->op_type == op;
  CHECK(kept == 1);
}

}  // namespace

TEST_CASE("Splits of every spelling become Slices that compute the same outputs", "[fusion]") {
  const Case cases[] = {
      {"sizes as an input, negative axis, an unread output",
       R"(graph "g" opset 17 {
  input %x: f32[2,5,12]
  const %sizes: i64[3] = [3, 4, 5]
  %a, %b, %c = Split(%x, %sizes) {axis = -1} @"split"
  %s = Add(%a, %a) @"use_a"
  %t = Exp(%c) @"use_c"
  output %s
  output %t
})",
       "node 'split' (Split): a Slice each along axis 2: 'a' [0, 3), 'c' [7, 12)"},
      {"equal parts from num_outputs, a graph output",
       R"(graph "g" opset 18 {
  input %x: f32[6,4]
  %a, %b = Split(%x) {axis = 0, num_outputs = 2} @"split"
  %s = Neg(%a) @"neg"
  output %s
  output %b
})",
       "node 'split' (Split): a Slice each along axis 0: 'a' [0, 3), 'b' [3, 6)"},
      {"sizes as an attribute (opset 11)",
       R"(graph "g" opset 11 {
  input %x: f32[4,9]
  %a, %b = Split(%x) {axis = 1, split = ints[2, 7]} @"split"
  %s = Mul(%a, %a) @"sq"
  %t = Sigmoid(%b) @"sig"
  output %s
  output %t
})",
       "node 'split' (Split): a Slice each along axis 1: 'a' [0, 2), 'b' [2, 9)"},
  };
  uint32_t seed = 11;
  for (const Case& c : cases) {
    auto g = rewritten_as_before(c, "Split", seed);
    int slices = 0;
    for (const auto& n : g->nodes()) slices += n->op_type == "Slice";
    CHECK(slices == 2);
  }
}

TEST_CASE("Gathers of a constant run of indices become Slices that compute the same outputs", "[fusion]") {
  const Case cases[] = {
      {"a scalar index inside a 5-D view (BLOOM's Q/K/V pick)",
       R"(graph "g" opset 17 {
  input %x: f32[2,4,2,3,5]
  const %i: i64[] = [1]
  %y = Gather(%x, %i) {axis = 3} @"pick"
  %z = Exp(%y) @"use"
  output %z
})",
       "node 'pick' (Gather): a Slice along axis 3: [1, 2), the axis dropped by a Reshape"},
      {"a negative scalar index along the first axis, the Gather a graph output",
       R"(graph "g" opset 13 {
  input %x: f32[3,6]
  const %i: i64[] = [-1]
  %y = Gather(%x, %i) {axis = 0} @"pick"
  output %y
})",
       "node 'pick' (Gather): a Slice along axis 0: [2, 3), the axis dropped by a Reshape"},
      {"a run of i32 indices along a negative axis keeps the axis",
       R"(graph "g" opset 17 {
  input %x: f32[4,7]
  const %i: i32[3] = [-5, -4, -3]
  %y = Gather(%x, %i) {axis = -1} @"pick"
  %z = Neg(%y) @"use"
  output %z
})",
       "node 'pick' (Gather): a Slice along axis 1: [2, 5)"},
  };
  uint32_t seed = 31;
  for (const Case& c : cases) rewritten_as_before(c, "Gather", seed);
}

TEST_CASE("GatherNDs of one coordinate per index, a constant run along axis 0, become Slices", "[fusion]") {
  const Case cases[] = {
      {"Falcon's one K head out of the heads: indices [1, 1]",
       R"(graph "g" opset 18 {
  input %x: f32[6,2,3,4]
  const %i: i64[1,1] = [4]
  %y = GatherND(%x, %i) @"pick_k"
  %z = Exp(%y) @"use"
  output %z
})",
       "node 'pick_k' (GatherND): a Slice along axis 0: [4, 5)"},
      {"a negative index of shape [1]: the axis dropped",
       R"(graph "g" opset 13 {
  input %x: f32[5,3]
  const %i: i64[1] = [-1]
  %y = GatherND(%x, %i) @"pick"
  output %y
})",
       "node 'pick' (GatherND): a Slice along axis 0: [4, 5), the axis dropped by a Reshape"},
      {"a run of three i64 indices [3, 1]",
       R"(graph "g" opset 18 {
  input %x: f32[6,5]
  const %i: i64[3,1] = [1, 2, 3]
  %y = GatherND(%x, %i) @"pick"
  %z = Neg(%y) @"use"
  output %z
})",
       "node 'pick' (GatherND): a Slice along axis 0: [1, 4)"},
  };
  uint32_t seed = 37;
  for (const Case& c : cases) rewritten_as_before(c, "GatherND", seed);
  const char* stay[] = {
      R"(graph "g" opset 18 {
  input %x: f32[6,5]
  const %i: i64[1,2] = [1, 2]
  %y = GatherND(%x, %i) @"pick"
  output %y
})",
      R"(graph "g" opset 18 {
  input %x: f32[2,6,5]
  const %i: i64[2,1] = [1, 2]
  %y = GatherND(%x, %i) {batch_dims = 1} @"pick"
  output %y
})",
      R"(graph "g" opset 18 {
  input %x: f32[6,5]
  const %i: i64[2,1] = [2, 1]
  %y = GatherND(%x, %i) @"pick"
  output %y
})",
      R"(graph "g" opset 18 {
  input %x: f32[6,5]
  const %i: i64[1,1,1] = [2]
  %y = GatherND(%x, %i) @"pick"
  output %y
})",
  };
  for (const char* text : stay) left_as_is(text, "GatherND");
}

TEST_CASE("Gathers whose indices are no run, not constant or named in --no-fuse stay Gathers", "[fusion]") {
  const char* texts[] = {
      R"(graph "g" opset 17 {
  input %x: f32[4,7]
  const %i: i64[2] = [0, 2]
  %y = Gather(%x, %i) {axis = 1} @"pick"
  output %y
})",
      R"(graph "g" opset 17 {
  input %x: f32[4,7]
  const %i: i64[2] = [3, 2]
  %y = Gather(%x, %i) {axis = 1} @"pick"
  output %y
})",
      R"(graph "g" opset 17 {
  input %x: f32[4,7]
  const %i: i64[1,2] = [1, 2]
  %y = Gather(%x, %i) {axis = 1} @"pick"
  output %y
})",
      R"(graph "g" opset 17 {
  input %x: f32[4,7]
  input %i: i64[2]
  %y = Gather(%x, %i) {axis = 1} @"pick"
  output %y
})",
  };
  for (const char* text : texts) left_as_is(text, "Gather");
  left_as_is(R"(graph "g" opset 17 {
  input %x: f32[4,7]
  const %i: i64[] = [3]
  %y = Gather(%x, %i) {axis = 1} @"pick"
  output %y
})",
             "Gather", {"pick"});
}

TEST_CASE("BLOOM's Q, K and V picked out of one view: Q.K^T in the softmax kernel, V read in place by P.V",
          "[fusion][emu]") {
  // BLOOM's exporter views the fused Q/K/V product as [batch, seq, heads, 3, head_dim] and picks
  // each with a Gather of a scalar index. As Gathers, Q's and K's join the softmax kernel and V's
  // is a kernel packed with it into one launch (beam's own partition stored all three in one
  // element kernel, two launches; greedy's, finished with its packs, is kept as cheaper); as
  // Slices, V's is P.V's operand strides: the same launch, less traffic.
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %qkv: f32[2,8,96]
  const %shape5: i64[5] = [2, 8, 2, 3, 16]
  const %i0: i64[] = [0]
  const %i1: i64[] = [1]
  const %i2: i64[] = [2]
  const %scale: f32[] = [0.25]
  %v5 = Reshape(%qkv, %shape5) @"view"
  %q = Gather(%v5, %i0) {axis = 3} @"select_q"
  %k = Gather(%v5, %i1) {axis = 3} @"select_k"
  %v = Gather(%v5, %i2) {axis = 3} @"select_v"
  %qt = Transpose(%q) {perm = ints[0, 2, 1, 3]} @"qt"
  %kt = Transpose(%k) {perm = ints[0, 2, 3, 1]} @"kt"
  %vt = Transpose(%v) {perm = ints[0, 2, 1, 3]} @"vt"
  %s = MatMul(%qt, %kt) @"qk"
  %ss = Mul(%s, %scale) @"scale"
  %p = Softmax(%ss) {axis = -1} @"softmax"
  %o = MatMul(%p, %vt) @"pv"
  output %o
})");
  run_frontend_or_die(*g);
  auto before = fusion::make_plan(*g, opts("beam"));
  REQUIRE(before.is_ok());
  INFO(fusion::explain(*before));
  auto sliced = fusion::split_to_slices_if_cheaper(g, opts("beam"));
  REQUIRE(sliced.is_ok());
  INFO(sliced->verdict);
  REQUIRE(sliced->lines.size() == 3);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  const std::string text = fusion::explain(*plan);
  INFO(text);
  CHECK(before->cost.kernels == 1);
  CHECK(plan->cost.kernels == 1);
  CHECK(plan->cost.bytes < before->cost.bytes);
  CHECK(plan->cost.time < before->cost.time);
  CHECK(groups_with(*plan, {"MatMul", "Softmax"}).size() == 1);
  CHECK(text.find("read by node 'pv' (MatMul) through its operand B's offset and strides") !=
        std::string::npos);
  auto s = schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  CHECK(s->kernels.size() == 1);
  CHECK(s->calls.size() == 1);
  CHECK(plan_matches_reference(*g, *plan, 7) == 1);
}

TEST_CASE("a Split whose outputs each need a kernel of their own stays a Split", "[fusion]") {
  // The readers are kept out of every group (--no-fuse): as Slices each output would be a kernel
  // of its own, three launches where the Split is one.
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[4,96]
  const %sizes: i64[3] = [32, 32, 32]
  %a, %b, %c = Split(%x, %sizes) {axis = 1} @"split"
  %ea = Exp(%a) @"r0"
  %eb = Exp(%b) @"r1"
  %ec = Exp(%c) @"r2"
  output %ea
  output %eb
  output %ec
})");
  run_frontend_or_die(*g);
  auto r = fusion::split_to_slices_if_cheaper(g, opts("beam", {"r0", "r1", "r2"}));
  REQUIRE(r.is_ok());
  INFO(r->verdict);
  CHECK(r->lines.empty());
  CHECK(r->verdict.rfind("not applied: estimated", 0) == 0);
  CHECK(r->verdict.find("--no-split-slices skips the comparison") != std::string::npos);
  int splits = 0;
  for (const auto& n : g->nodes()) splits += n->op_type == "Split";
  CHECK(splits == 1);
  // With the readers free to fuse, the Split and its readers are one element kernel, which the
  // Slices do not beat either.
  auto free = fusion::split_to_slices_if_cheaper(g, opts("beam"));
  REQUIRE(free.is_ok());
  INFO(free->verdict);
  CHECK(free->lines.empty());
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  CHECK(plan->cost.kernels == 1);
}

TEST_CASE("gpt2_tiny as stitchc compiles it: Q.K^T stitched, V read in place, 8 launches per layer",
          "[fusion][models][emu]") {
  // The exporter splits the Q/K/V product with one Split. As Slices, Q's and K's go into the
  // kernel of Q.K^T + mask + softmax and V's into P.V's operand, so the scores GEMM is no call.
  auto g = prepared_model("gpt2_tiny");
  REQUIRE(fusion::merge_sibling_gemms(*g).is_ok());
  auto sliced = fusion::split_to_slices_if_cheaper(g, opts("beam"));
  REQUIRE(sliced.is_ok());
  INFO(sliced->verdict);
  REQUIRE(sliced->lines.size() == 2);  // one Split per layer
  REQUIRE(fusion::hoist_row_scales_if_cheaper(g, opts("beam")).is_ok());
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(groups_with(*plan, {"MatMul", "Softmax"}).size() == 2);
  auto s = schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  CHECK(s->kernels.size() == 1 + 2 * 3);  // per layer: softmax, two layer norms; the final norm
  CHECK(s->calls.size() == 2 * 5);        // per layer: Q/K/V, P.V, projection, c_fc, c_proj
  const IntInputsIn ids(-100, 99);  // token ids over the 100-entry vocabulary, negative ones from its end
  CHECK(plan_matches_reference(*g, *plan, 5) == s->kernels.size());
}

TEST_CASE("nodes named in --no-fuse are left to the planner by every rewrite, which keeps them apart",
          "[fusion]") {
  // A rewrite that replaced a named node would leave --no-fuse naming no node (a user error) and
  // fuse what the user kept apart: the Split stays a Split, the named MatMul keeps its weight,
  // the norm's named Mul stays in front of its GEMM.
  auto gpt2 = prepared_model("gpt2_tiny");
  REQUIRE(fusion::split_to_slices(*gpt2, {"/model/h.0/attn/Split"}).is_ok());
  int splits = 0;
  for (const auto& n : gpt2->nodes()) splits += n->op_type == "Split";
  CHECK(splits == 1);
  auto plan = fusion::make_plan(*gpt2, opts("beam", {"/model/h.0/attn/Split"}));
  REQUIRE(plan.is_ok());

  auto llama = prepared_model("llama_tiny");
  auto merged = fusion::merge_sibling_gemms(*llama, {"node_linear_4"});  // the first layer's gate
  REQUIRE(merged.is_ok());
  for (const std::string& line : *merged) CHECK(line.find("node_linear_4") == std::string::npos);
  CHECK(merged->size() == 3);  // Q/K/V twice and the second layer's gate/up, not 4
  REQUIRE(fusion::make_plan(*llama, opts("beam", {"node_linear_4"})).is_ok());

  // The second layer's RMSNorm in front of its gate/up GEMM: x * rsqrt (node_mul_192), then the
  // weight (node_mul_193). Kept, only the first layer's row scale moves.
  auto norm = prepared_model("llama_tiny");
  REQUIRE(fusion::merge_sibling_gemms(*norm).is_ok());
  auto all = clone_graph(*norm);
  auto free = fusion::hoist_row_scales(*all, {}, fusion::NormReaders::kOther);  // the MLPs' norms
  REQUIRE(free.is_ok());
  CHECK(free->size() == 2);
  auto hoisted = fusion::hoist_row_scales(*norm, {"node_mul_193"}, fusion::NormReaders::kOther);
  REQUIRE(hoisted.is_ok());
  REQUIRE(hoisted->size() == 1);
  CHECK(hoisted->front().find("node_linear_4/merged") != std::string::npos);
  std::set<std::string> names;
  for (const auto& n : norm->nodes()) names.insert(n->name);
  CHECK(names.count("node_mul_192"));
  CHECK(names.count("node_mul_193"));
  REQUIRE(fusion::make_plan(*norm, opts("beam", {"node_mul_193"})).is_ok());
}
