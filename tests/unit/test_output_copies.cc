// Graph outputs computed again for their readers (fusion::copy_output_cones): a decoding step's
// present keys and values, Concat(cache, this token's), returned and read by Q.K^T and P.V.
// Without the copies the appends are kernels the attention waits for; with them the readers
// compute what they need and the appends pack into one launch. Every rewritten graph computes what it did
// (reference interpreter) and runs on emu against the reference.
#include "fusion/output_copies.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// One token's attention over a cache of 6 at 2 heads of 8: Q, K and V sliced out of one product
// by a constant weight (a library call, as Q/K/V in a decoder), viewed heads-first; K scaled per
// column (a stand-in for the rotary embedding), K and V appended to the cache and returned, Q.K^T
// and P.V over the appended cache.
std::string decode_attention() {
  uint32_t state = 7;
  return fmt::format(R"(graph "g" opset 18 {{
  input %h: f32[2,1,64]
  input %past_k: f32[2,2,6,8]
  input %past_v: f32[2,2,6,8]
  const %w: f32[64,48] = {}
  const %shape: i64[4] = [2, 1, 6, 8]
  const %zero: i64[1] = [0]
  const %one: i64[1] = [1]
  const %two: i64[1] = [2]
  const %four: i64[1] = [4]
  const %six: i64[1] = [6]
  const %rot: f32[8] = [0.5, -1.0, 1.5, 0.25, 1.0, 2.0, -0.5, 0.75]
  const %scale: f32[] = [0.35]
  %qkv = MatMul(%h, %w) @"qkv"
  %v4 = Reshape(%qkv, %shape) @"view"
  %t = Transpose(%v4) {{perm = ints[0, 2, 1, 3]}} @"heads"
  %q = Slice(%t, %zero, %two, %one) @"q"
  %k = Slice(%t, %two, %four, %one) @"k"
  %v = Slice(%t, %four, %six, %one) @"v"
  %kr = Mul(%k, %rot) @"rotary"
  %pk = Concat(%past_k, %kr) {{axis = 2}} @"append_k"
  %pv = Concat(%past_v, %v) {{axis = 2}} @"append_v"
  %kt = Transpose(%pk) {{perm = ints[0, 1, 3, 2]}} @"k_t"
  %s = MatMul(%q, %kt) @"qk"
  %ss = Mul(%s, %scale) @"scale"
  %p = Softmax(%ss) {{axis = -1}} @"softmax"
  %o = MatMul(%p, %pv) @"pv"
  output %o
  output %pk
  output %pv
}})",
                     lcg_values(state, 64 * 48, -1.0));
}

// The group holding node `name`.
const fusion::FusionGroup& group_of(const fusion::FusionPlan& p, const std::string& name) {
  for (const auto& grp : p.groups)
    for (const Node* n : grp.nodes)
      if (n->name == name) return grp;
  FAIL("no group holds node " << name);
  return p.groups.front();
}

}  // namespace

TEST_CASE("a decoding step's present keys computed again by the softmax kernel: one launch fewer",
          "[fusion][emu]") {
  auto g = parse_or_die(decode_attention());
  run_frontend_or_die(*g);
  auto original = clone_graph(*g);
  auto before = fusion::make_plan(*g, opts("beam"));
  REQUIRE(before.is_ok());
  INFO(fusion::explain(*before));
  // Before: the softmax kernel reads the stored present keys, written by a kernel before it.
  REQUIRE(&group_of(*before, "append_k") != &group_of(*before, "softmax"));

  auto r = fusion::copy_output_cones_if_cheaper(g, opts("beam"));
  REQUIRE(r.is_ok());
  INFO(r->verdict << "\n" << fmt::format("{}", fmt::join(r->lines, "\n")));
  CHECK(r->verdict.rfind("estimated", 0) == 0);
  // K's cone back to the product: the view, the heads-first view of one token (a Reshape since
  // the front end), the Slice, K's scale, the Concat. V's copy would be stored for P.V, a call
  // reading the present values in place, so it is left out.
  REQUIRE(r->lines.size() == 1);
  CHECK(r->lines[0] ==
        "output 'pk' (5 node(s) from node 'append_k' (Concat)): its readers node 'k_t' (Transpose) read a "
        "copy");
  same_as_original(*original, *g, 3);
  auto after = fusion::make_plan(*g, opts("beam"));
  REQUIRE(after.is_ok());
  INFO(fusion::explain(*after));
  // One launch fewer: the softmax kernel no longer waits for the appends, which pack into one
  // launch, and it computes Q/K/V as a loop itself.
  CHECK(after->cost.kernels + after->cost.library_calls ==
        before->cost.kernels + before->cost.library_calls - 1);
  CHECK(after->cost.time < before->cost.time);
  CHECK(&group_of(*after, "append_k/for_readers") == &group_of(*after, "softmax"));
  for (const Node* n : group_of(*after, "softmax").nodes)
    for (const Value* in : n->inputs) {
      INFO(n->describe());
      CHECK((in == nullptr || in->name != "pk"));
    }
  CHECK(group_of(*after, "pv").scheme == "library");
  CHECK(fused_matches_reference(*g, 11) == static_cast<size_t>(after->cost.kernels));
}

TEST_CASE(
    "reductions are read stored, not computed again, and unread outputs and --no-fuse names are not copied",
    "[fusion]") {
  // A reduction's result is a source of a cone, never in one: the mean is not copied, the
  // centred value computed from it is (one Sub, reading the mean).
  auto reduced = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,6]
  const %axes: i64[1] = [1]
  %m = ReduceMean(%x, %axes) @"mean"
  %d = Sub(%x, %m) @"center"
  %e = Exp(%d) @"exp"
  output %m
  output %d
  output %e
})");
  run_frontend_or_die(*reduced);
  auto original = clone_graph(*reduced);
  auto lines = fusion::copy_output_cones(*reduced);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  CHECK((*lines)[0] ==
        "output 'd' (1 node(s) from node 'center' (Sub)): its readers node 'exp' (Exp) read a copy");
  same_as_original(*original, *reduced, 5);
  // Outputs nothing else reads.
  auto unread = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,6]
  %a = Exp(%x) @"exp"
  output %a
})");
  run_frontend_or_die(*unread);
  lines = fusion::copy_output_cones(*unread);
  REQUIRE(lines.is_ok());
  CHECK(lines->empty());
  // A --no-fuse name anywhere in the cone.
  auto named = parse_or_die(decode_attention());
  run_frontend_or_die(*named);
  lines = fusion::copy_output_cones(*named, {"heads"});
  REQUIRE(lines.is_ok());
  CHECK(lines->empty());
}

TEST_CASE("copies every reader would store are not made", "[fusion]") {
  // With every MatMul a library call, Q.K^T and P.V read their operands stored: a copy of the
  // present keys or values would be one more stored tensor.
  auto g = parse_or_die(decode_attention());
  run_frontend_or_die(*g);
  const size_t nodes = g->nodes().size();
  auto r = fusion::copy_output_cones_if_cheaper(g, opts_lib("beam"));
  REQUIRE(r.is_ok());
  CHECK(r->lines.empty());
  CHECK(r->verdict == "not applied: every copy of the 2 candidate(s) would be stored");
  CHECK(g->nodes().size() == nodes);
}

TEST_CASE("an output whose cone reads another output copied before it: the copies chain", "[fusion]") {
  // DynamicQuantizeLinear written out returns its scale and its zero point, the zero point computed
  // from the scale: once the scale's readers read its copy, the zero point's cone reaches that copy
  // (a node made by the first copy), and takes its own copy of it.
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,6]
  const %two: f32[] = [2.0]
  %s = Mul(%x, %two) @"scale"
  %z = Neg(%s) @"zero"
  %y = Div(%x, %s) @"ratio"
  %q = Add(%y, %z) @"shift"
  output %q
  output %s
  output %z
})");
  run_frontend_or_die(*g);
  auto original = clone_graph(*g);
  auto lines = fusion::copy_output_cones(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 2);
  CHECK((*lines)[0] ==
        "output 's' (1 node(s) from node 'scale' (Mul)): its readers node 'zero' (Neg), node 'ratio' (Div) read a "
        "copy");
  CHECK((*lines)[1] ==
        "output 'z' (2 node(s) from node 'zero' (Neg)): its readers node 'shift' (Add) read a copy");
  same_as_original(*original, *g, 5);
}
