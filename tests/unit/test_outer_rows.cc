// Outer reductions in row kernels (StitchInfo::outer): a reduction over rows that hold several of
// the kernel's rows, each kernel row running its passes itself. Qwen3's per-head Q/K norms after
// the input RMSNorm's scale moved past the Q/K/V projection read the token's statistics in the
// kernel whose rows are the token's heads. Checked on emu against the reference interpreter.
#include <fmt/format.h>

#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// The input RMSNorm's row scale of x [2, 6, 32] applied to the Q product y, split into 4 heads of
// 8, each head's RMSNorm with weight g, then the head transpose (or, with `per_token_out`, also the
// token scale stored: a per-row value of rows the kernel's are not).
std::string qk_norm_block(uint32_t& state, bool store_scale = false) {
  return fmt::format(R"(graph "q_norm" opset 18 {{
  input %x: f32[2,6,32]
  input %y: f32[2,6,32]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %last: i64[1] = [-1]
  const %heads: i64[4] = [2, 6, 4, 8]
  const %g: f32[8] = {0}
  %p = Pow(%x, %two) @"pow"
  %m = ReduceMean(%p, %last) {{keepdims = 1}} @"mean"
  %a = Add(%m, %eps) @"add_eps"
  %s = Sqrt(%a) @"sqrt"
  %r = Reciprocal(%s) @"rsqrt"
  %q = Mul(%y, %r) @"row_scale"
  %h = Reshape(%q, %heads) @"view"
  %p2 = Pow(%h, %two) @"pow_head"
  %m2 = ReduceMean(%p2, %last) {{keepdims = 1}} @"mean_head"
  %a2 = Add(%m2, %eps) @"add_eps_head"
  %s2 = Sqrt(%a2) @"sqrt_head"
  %r2 = Reciprocal(%s2) @"rsqrt_head"
  %n = Mul(%h, %r2) @"normalized"
  %w = Mul(%n, %g) @"weighted"
  %t = Transpose(%w) {{perm = ints[0, 2, 1, 3]}} @"transpose"
  output %t{1}
}})",
                     lcg_values(state, 8, 0.5), store_scale ? "\n  output %r" : "");
}

// The analysis of all of `g`'s nodes as one kernel storing its outputs: its error (an empty
// message, which no expected text contains, when it succeeds).
std::string one_kernel_error(const Graph& g) {
  std::vector<const Node*> nodes;
  std::set<const Value*> stored;
  for (const Node* n : all_nodes(g)) nodes.push_back(n);
  for (const Value* v : g.outputs) stored.insert(v);
  auto info = codegen::analyze_stitch(nodes, stored);
  return info.is_ok() ? std::string() : info.status().message();
}

}  // namespace

TEST_CASE("a token's RMSNorm statistics computed in the kernel of its heads' norms", "[fusion][emu]") {
  // One kernel in every planner: rows of 8 (a token's head), each computing its token's mean square
  // over 32 first (an outer reduction), against the reference interpreter.
  uint32_t state = 3, seed = 11;
  auto g = parse_or_die(qk_norm_block(state));
  run_frontend_or_die(*g);
  test::one_kernel_in_every_planner(*g, seed, [](const fusion::FusionPlan& plan) {
    for (const auto& grp : plan.groups)
      if (has_op(grp, "ReduceMean"))
        CHECK(grp.mapping.find("node 'mean' (ReduceMean) over its own 12 rows x 32") != std::string::npos);
  });
}

TEST_CASE("an outer reduction's result read along the rows, or stored, is not stitched", "[fusion]") {
  // The token scale as a graph output too: a value per outer row is not one the kernel's rows store,
  // so its statistics stay in a kernel of their own.
  uint32_t state = 3, seed = 21;
  auto g = parse_or_die(qk_norm_block(state, true));
  run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(plan->cost.kernels == 2);
  CHECK(fused_matches_reference(*g, seed, "beam") == 2);
  // A value read at coordinates along the row: x's statistics per token, transposed into a row
  // whose elements are the tokens (the kernel's rows are u's), cannot be a register of the row.
  auto h = parse_or_die(R"(graph "along" opset 18 {
  input %u: f32[1,6]
  input %x: f32[6,32]
  const %last: i64[1] = [-1]
  %k = ReduceMax(%u, %last) {keepdims = 1} @"max"
  %m = ReduceMean(%x, %last) {keepdims = 1} @"mean"
  %t = Transpose(%m) {perm = ints[1, 0]} @"t"
  %b = Add(%t, %u) @"add"
  %s = ReduceSum(%b, %last) {keepdims = 1} @"sum"
  output %s
  output %k
})");
  run_frontend_or_die(*h);
  CHECK_THAT(one_kernel_error(*h), Catch::Contains("its result is read along the group's rows"));
}

namespace {

// A token's RMSNorm over its hidden vector t [2, 6, 32] (4 heads of 8), its heads transposed:
// `heads`, for a graph to go on from.
constexpr const char* kTokenNormHeads = R"(  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %last: i64[1] = [-1]
  const %heads: i64[4] = [2, 6, 4, 8]
  %p = Pow(%t, %two) @"pow"
  %m = ReduceMean(%p, %last) {keepdims = 1} @"mean"
  %a = Add(%m, %eps) @"add_eps"
  %q = Sqrt(%a) @"sqrt"
  %r = Reciprocal(%q) @"rsqrt"
  %n = Mul(%t, %r) @"normalized"
  %h = Reshape(%n, %heads) @"view"
  %ht = Transpose(%h) {perm = ints[0, 2, 1, 3]} @"heads"
)";

// The graph text `head`, then kTokenNormHeads, then `tail`. (Appended rather than joined with +:
// GCC 12 reports a false -Warray-bounds on `std::string(a) + b + c` of long literals.)
std::string around_token_norm_heads(const char* head, const char* tail) {
  std::string text = head;
  text += kTokenNormHeads;
  text += tail;
  return text;
}

}  // namespace

TEST_CASE("a token's statistics read in a fine-grained GEMM's A operand join the softmax's kernel",
          "[fusion][emu]") {
  // OLMoE's Q norm over the whole hidden vector before Q K^T: the rows are the softmax's (a head's
  // query, 48 rows of 6 keys); each computes its token's mean square over 32 first and reads it
  // across the contraction of its Q row with K^T, at the row's token alone.
  uint32_t seed = 31;
  auto g = parse_or_die(around_token_norm_heads(R"(graph "norm_as_a" opset 18 {
  input %s: f32[2,4,6,6]
  input %t: f32[2,6,32]
  input %u: f32[2,4,8,6]
)", R"(  %g = MatMul(%ht, %u) @"scores"
  %x = Add(%g, %s) @"mask"
  %w = Softmax(%x) {axis = -1} @"softmax"
  output %w
})"));
  run_frontend_or_die(*g);
  test::one_kernel_in_every_planner(*g, seed, [](const fusion::FusionPlan& plan) {
    for (const auto& grp : plan.groups)
      if (has_op(grp, "ReduceMean"))
        CHECK(grp.mapping.find("node 'mean' (ReduceMean) over its own 12 rows x 32") != std::string::npos);
  });
}

TEST_CASE("a token's statistics read along a fine-grained GEMM's contraction are not an outer reduction",
          "[fusion]") {
  // The normalized heads as B: the contraction runs over the tokens, so within a row (z's, over 8)
  // the statistics of every token are read, and a register of the row cannot hold them.
  auto g = parse_or_die(around_token_norm_heads(R"(graph "norm_as_b" opset 18 {
  input %s: f32[2,4,6,6]
  input %t: f32[2,6,32]
  input %z: f32[2,4,6,8]
  const %axis: i64[1] = [-1]
  %k = ReduceMax(%z, %axis) {keepdims = 1} @"max"
)", R"(  %o = MatMul(%s, %ht) @"mix"
  %b = Add(%o, %z) @"add"
  %y = ReduceSum(%b, %axis) {keepdims = 1} @"sum"
  output %y
  output %k
})"));
  run_frontend_or_die(*g);
  CHECK_THAT(one_kernel_error(*g), Catch::Contains("its result is read along the group's rows"));
}
