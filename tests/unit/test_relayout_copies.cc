// Shared relayouts copied per reader (fusion::copy_shared_relayouts): Falcon's attention, whose
// one Transpose feeds K's pick (stitched into the softmax kernel) and V's (P.V's operand), and the
// cases the rewrite leaves alone. Every rewritten graph computes what it did (reference
// interpreter) and runs on emu against the reference.
#include "fusion/relayout_copies.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// Falcon's multi-query attention at 4 query heads of 4, one K head and one V head: the fused
// product viewed as [batch, seq, 6, 4], Q's heads sliced out of the view, K's and V's out of
// one heads-first Transpose of it.
const char* kFalconAttention = R"(graph "g" opset 18 {
  input %x: f32[2,8,16]
  input %w: f32[16,24]
  const %shape: i64[4] = [2, 8, 6, 4]
  const %zero: i64[1] = [0]
  const %two: i64[1] = [2]
  const %four: i64[1] = [4]
  const %five: i64[1] = [5]
  const %six: i64[1] = [6]
  const %scale: f32[] = [0.5]
  %qkv = MatMul(%x, %w) @"qkv"
  %v4 = Reshape(%qkv, %shape) @"view"
  %q = Slice(%v4, %zero, %four, %two) @"q"
  %qt = Transpose(%q) {perm = ints[0, 2, 1, 3]} @"q_heads"
  %hf = Transpose(%v4) {perm = ints[2, 0, 1, 3]} @"heads_first"
  %k = Slice(%hf, %four, %five, %zero) @"k"
  %v = Slice(%hf, %five, %six, %zero) @"v"
  %kt = Transpose(%k) {perm = ints[1, 0, 3, 2]} @"k_t"
  %vb = Transpose(%v) {perm = ints[1, 0, 2, 3]} @"v_b"
  %s = MatMul(%qt, %kt) @"qk"
  %ss = Mul(%s, %scale) @"scale"
  %p = Softmax(%ss) {axis = -1} @"softmax"
  %o = MatMul(%p, %vb) @"pv"
  output %o
})";

}  // namespace

TEST_CASE("Falcon's shared heads-first Transpose copied per reader: V read in place, no kernel stores it",
          "[fusion][emu]") {
  auto g = parse_or_die(kFalconAttention);
  run_frontend_or_die(*g);
  auto original = clone_graph(*g);
  auto before = fusion::make_plan(*g, opts("beam"));
  REQUIRE(before.is_ok());
  // Before: the Transpose is stored for V's read in place, a kernel of its own.
  REQUIRE(groups_with(*before, {"Transpose", "Slice", "Softmax"}).size() == 1);
  bool stored = false;
  for (const auto& grp : before->groups)
    for (const Node* n : grp.nodes) stored |= n->name == "heads_first" && grp.nodes.size() == 1;
  CHECK(stored);

  auto r = fusion::copy_shared_relayouts_if_cheaper(g, opts("beam"));
  REQUIRE(r.is_ok());
  INFO(r->verdict);
  CHECK(r->verdict.rfind("estimated", 0) == 0);
  REQUIRE(r->lines.size() == 2);
  CHECK(r->lines[0] ==
        "node 'heads_first' (Transpose): read by 2 nodes; copies 'heads_first/copy' for node 'v' (Slice)");
  CHECK(r->lines[1] ==
        "node 'view' (Reshape): read by 3 nodes; copies 'view/copy' for node 'heads_first' (Transpose), "
        "'view/copy2' for node 'heads_first/copy' (Transpose)");
  same_as_original(*original, *g, 5);
  auto after = fusion::make_plan(*g, opts("beam"));
  REQUIRE(after.is_ok());
  INFO(fusion::explain(*after));
  CHECK(after->cost.kernels == before->cost.kernels - 1);
  CHECK(after->cost.time < before->cost.time);
  // V's chain is P.V's operand: every node of it folded into the call, or a view (its Transpose
  // moves only the one head's axis, a Reshape since the front end).
  const std::set<std::string> folded = folded_names(*g, codegen::FoldOptions(true));
  for (const char* name : {"heads_first/copy", "v"}) {
    INFO(name);
    CHECK(folded.count(name) == 1);
  }
  const Value* vb = g->find_value("vb");
  REQUIRE(vb != nullptr);
  CHECK(vb->producer->op_type == "Reshape");
  CHECK(fused_matches_reference(*g, 7) == static_cast<size_t>(after->cost.kernels));
}

TEST_CASE("relayouts no GEMM reads, graph outputs and --no-fuse names are not copied", "[fusion]") {
  // Two element-wise readers of one Transpose: one kernel can take both, nothing to save.
  auto no_gemm = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,6]
  %t = Transpose(%x) {perm = ints[1, 0]} @"t"
  %a = Exp(%t) @"exp"
  %b = Neg(%t) @"neg"
  output %a
  output %b
})");
  run_frontend_or_die(*no_gemm);
  auto lines = fusion::copy_shared_relayouts(*no_gemm);
  REQUIRE(lines.is_ok());
  CHECK(lines->empty());
  // A Transpose read by a MatMul and a kernel, but also a graph output: it is stored anyway.
  auto as_output = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,6]
  input %w: f32[4,3]
  %t = Transpose(%x) {perm = ints[1, 0]} @"t"
  %m = MatMul(%t, %w) @"mm"
  %b = Neg(%t) @"neg"
  output %m
  output %b
  output %t
})");
  run_frontend_or_die(*as_output);
  lines = fusion::copy_shared_relayouts(*as_output);
  REQUIRE(lines.is_ok());
  CHECK(lines->empty());
  auto named = parse_or_die(kFalconAttention);
  run_frontend_or_die(*named);
  lines = fusion::copy_shared_relayouts(*named, {"heads_first", "view"});
  REQUIRE(lines.is_ok());
  CHECK(lines->empty());
}
