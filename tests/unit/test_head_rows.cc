// Per-head norms over merged rows (fusion::split_head_rows): onnxruntime-genai writes Qwen3's Q/K
// norms as [B, S, H*D] reshaped to [B, S*H, D], an RMSNorm, and a Reshape back. Computed as
// [B, S, H, D], the same rows, the kernel of the heads' norms can take the token's own statistics
// (an outer reduction) and the head transpose. Checked on emu against the reference interpreter.
#include <fmt/format.h>

#include <algorithm>

#include "fusion/head_rows.h"
#include "fusion/rewrites.h"
#include "fusion_test_util.h"
#include "ir/verifier.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// The input RMSNorm's row scale of x [2, 6, 32] applied to the Q product y, then, as the builder
// writes it, y reshaped to [2, 24, 8] (`merge`, a 0 for the batch), each head's RMSNorm with weight
// g, the Reshape back (`back`), the heads split again and transposed. `extra` adds nodes after the
// norm's weight (reading %w).
std::string merged_heads(uint32_t& state, const std::string& merge = "0, -1, 8",
                         const std::string& back = "0, -1, 32", const std::string& extra = "",
                         const std::string& out = "%t") {
  return fmt::format(R"(graph "genai_q_norm" opset 18 {{
  input %x: f32[2,6,32]
  input %y: f32[2,6,32]
  input %z: f32[2,24,1]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %last: i64[1] = [-1]
  const %second: i64[1] = [1]
  const %third: i64[1] = [2]
  const %merged: i64[3] = [{1}]
  const %back: i64[{4}] = [{2}]
  const %heads: i64[4] = [2, 6, 4, 8]
  const %quarters: i64[4] = [0, 0, 2, 4]
  const %g: f32[8] = {0}
  %p = Pow(%x, %two) @"pow"
  %m = ReduceMean(%p, %last) {{keepdims = 1}} @"mean"
  %a = Add(%m, %eps) @"add_eps"
  %s = Sqrt(%a) @"sqrt"
  %r = Reciprocal(%s) @"rsqrt"
  %q = Mul(%y, %r) @"row_scale"
  %h = Reshape(%q, %merged) @"merge"
  %p2 = Pow(%h, %two) @"pow_head"
  %m2 = ReduceMean(%p2, %third) {{keepdims = 1}} @"mean_head"
  %a2 = Add(%m2, %eps) @"add_eps_head"
  %s2 = Sqrt(%a2) @"sqrt_head"
  %r2 = Reciprocal(%s2) @"rsqrt_head"
  %n = Mul(%h, %r2) @"normalized"
  %w = Mul(%n, %g) @"weighted"{3}
  %b = Reshape(%w, %back) @"back"
  %v = Reshape(%b, %heads) @"split"
  %t = Transpose(%v) {{perm = ints[0, 2, 1, 3]}} @"transpose"
  output {5}
}})",
                     lcg_values(state, 8, 0.5), merge, back, extra,
                     std::count(back.begin(), back.end(), ',') + 1, out);
}

std::unique_ptr<Graph> frontend(const std::string& text) {
  auto g = parse_or_die(text);
  run_frontend_or_die(*g);
  return g;
}

}  // namespace

TEST_CASE(
    "a per-head norm over merged rows is computed with the heads apart, in one kernel with its token's "
    "statistics",
    "[fusion][emu]") {
  uint32_t state = 5, seed = 31;
  auto original = frontend(merged_heads(state));
  auto g = clone_graph(*original);
  // As written: the merged rows [2, 24] hold a token's heads among the tokens, so the heads' kernel
  // cannot compute the token's statistics, and the Reshape back merges its rows with the heads: the
  // statistics, the heads' norms and the transpose are a kernel each.
  CHECK(fused_matches_reference(*g, seed++, "beam") == 3);
  auto lines = fusion::split_head_rows(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  INFO(lines->front());
  CHECK(lines->front().find("node 'merge' (Reshape): rows 2x24x8 as 2x6x4x8, 7 node(s) after it; node 'back' "
                            "(Reshape) read(s) them (1 Reshape(s) of them read the rows directly)") !=
        std::string::npos);
  same_as_original(*original, *g, seed++);
  for (const Node* n : all_nodes(*g)) {
    if (n->name == "mean_head") CHECK(dims_to_string(*n->output(0)->dims) == "2x6x4x1");
    if (n->name == "weighted") CHECK(dims_to_string(*n->output(0)->dims) == "2x6x4x8");
    CHECK(n->name != "back");  // nothing reads it: the split reads the rows, in their own shape
    CHECK(n->name != "split");
  }
  one_kernel_in_every_planner(*g, seed);
  // Through the rewrites `stitchc compile` runs, and not with --no-split-head-rows.
  for (const bool on : {true, false}) {
    auto h = clone_graph(*original);
    fusion::RewriteSwitches sw;
    sw.split_head_rows = on;
    sw.short_reductions = false;  // (a head's mean over 8 as Adds would join two of the three)
    auto r = fusion::rewrite_for_planning(h, opts("beam"), sw);
    REQUIRE(r.is_ok());
    CHECK(r->head_rows.size() == (on ? 1u : 0u));
    CHECK((r->text().find("norms over rows a Reshape merged") != std::string::npos) == on);
    auto plan = fusion::make_plan(*h, opts("beam"));
    REQUIRE(plan.is_ok());
    CHECK(plan->cost.kernels == (on ? 1 : 3));
  }
}

TEST_CASE("split_head_rows spells out the Reshapes after the rows and views other operands as the rows",
          "[fusion][emu]") {
  uint32_t state = 7, seed = 41;
  // A Reshape after the rows whose 0s copied the merged axis (24), and a per-row operand z
  // [2, 24, 1] of the merged rows' own arrangement: the rows read z viewed as [2, 6, 4, 1], and
  // that Reshape keeps its result [2, 24, 2, 4].
  auto original = frontend(merged_heads(
      state, "2, 24, 8", "0, -1, 32",
      "\n  %wz = Mul(%w, %z) @\"times_z\"\n  %bz = Reshape(%wz, %quarters) @\"back_z\"", "%t\n  output %bz"));
  auto g = clone_graph(*original);
  auto lines = fusion::split_head_rows(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  INFO(lines->front());
  CHECK(lines->front().find("8 node(s) after it") != std::string::npos);
  same_as_original(*original, *g, seed++);
  bool viewed = false;
  for (const Node* n : all_nodes(*g)) {
    if (n->name == "back_z") CHECK(dims_to_string(*n->output(0)->dims) == "2x24x2x4");
    if (n->op_type == "Reshape" && n->input(0)->name == "z") {
      viewed = true;
      CHECK(dims_to_string(*n->output(0)->dims) == "2x6x4x1");
    }
  }
  CHECK(viewed);
  CHECK(fused_matches_reference(*g, seed++, "beam") >= 1);
}

TEST_CASE("split_head_rows leaves rows read otherwise, kept nodes, and reductions of other axes",
          "[fusion]") {
  uint32_t state = 9;
  struct Case {
    std::string why, text;
    std::set<std::string> keep;
  };
  const std::vector<Case> cases = {
      // The norm's result transposed while merged: a Transpose of the merged rows is not a Reshape.
      {"a Transpose reads the rows",
       merged_heads(state, "0, -1, 8", "0, -1, 32",
                    "\n  %wt = Transpose(%w) {perm = ints[0, 2, 1]} @\"transpose_merged\"",
                    "%t\n  output %wt"),
       {}},
      // A value of the merged rows is a graph output: its shape is the model's.
      {"a graph output", merged_heads(state, "0, -1, 8", "0, -1, 32", "", "%t\n  output %r2"), {}},
      // A reduction over the merged axis is not over the rows.
      {"a reduction over the merged axis",
       merged_heads(state, "0, -1, 8", "0, -1, 32",
                    "\n  %mm = ReduceMean(%w, %second) {keepdims = 1} @\"mean_merged\"", "%t\n  output %mm"),
       {}},
      {"--no-fuse names the Reshape", merged_heads(state), {"merge"}},
      {"--no-fuse names a node after it", merged_heads(state), {"normalized"}},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    auto g = frontend(c.text);
    auto lines = fusion::split_head_rows(*g, c.keep);
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    for (const Node* n : all_nodes(*g))
      if (n->name == "weighted") CHECK(dims_to_string(*n->output(0)->dims) == "2x24x8");
  }
  // Rows that tile nothing: a Reshape into rows of 5 from 32-wide values is not a merge of heads.
  auto odd = frontend(R"(graph "odd" opset 18 {
  input %y: f32[2,5,8]
  const %shape: i64[3] = [2, 8, 5]
  const %back: i64[3] = [2, 5, 8]
  const %last: i64[1] = [-1]
  %h = Reshape(%y, %shape) @"rows_of_5"
  %m = ReduceMax(%h, %last) {keepdims = 1} @"max"
  %d = Sub(%h, %m) @"sub"
  %o = Reshape(%d, %back) @"back"
  output %o
})");
  auto none = fusion::split_head_rows(*odd);
  REQUIRE(none.is_ok());
  CHECK(none->empty());
  // A view that splits the leading axes rather than merging them (a flattened GEMM product [B*S, N]
  // viewed as [B, S, N] for its LayerNorm) is left as it is: unflatten_gemms wants that shape.
  auto unflatten = frontend(R"(graph "unflatten" opset 18 {
  input %y: f32[12,16]
  const %bsn: i64[3] = [2, 6, 16]
  const %flat: i64[2] = [12, 16]
  const %last: i64[1] = [-1]
  %h = Reshape(%y, %bsn) @"unflatten"
  %m = ReduceMean(%h, %last) {keepdims = 1} @"mean"
  %d = Sub(%h, %m) @"centered"
  %o = Reshape(%d, %flat) @"flatten"
  output %o
})");
  auto kept = fusion::split_head_rows(*unflatten);
  REQUIRE(kept.is_ok());
  CHECK(kept->empty());
}

TEST_CASE(
    "split_head_rows takes Softmax and LayerNormalization ops over merged rows, not InstanceNormalization",
    "[fusion][emu]") {
  // The axis each op names (2, the last of the merged rows) becomes the new last axis, 3. An
  // InstanceNormalization over [N, C, L] (here C = 8 = L, so its scale would broadcast like a
  // weight) reduces every axis after the channels, so it stays as it is.
  uint32_t seed = 61;
  struct Case {
    std::string op, node;
    bool rewritten;
  };
  for (const Case& c : {Case{"Softmax(%h) {axis = 2}", "Softmax", true},
                        Case{"LayerNormalization(%h, %g, %b) {axis = 2}", "LayerNormalization", true},
                        Case{"InstanceNormalization(%h, %c, %c)", "InstanceNormalization", false}}) {
    INFO(c.op);
    auto original = frontend(fmt::format(R"(graph "ops" opset 17 {{
  input %y: f32[2,4,16]
  input %g: f32[8]
  input %b: f32[8]
  input %c: f32[8]
  const %merged: i64[3] = [2, 8, 8]
  const %back: i64[3] = [2, 4, 16]
  %h = Reshape(%y, %merged) @"merge"
  %n = {} @"op"
  %o = Reshape(%n, %back) @"back"
  output %o
}})",
                                         c.op));
    auto g = clone_graph(*original);
    auto lines = fusion::split_head_rows(*g);
    REQUIRE(lines.is_ok());
    CHECK(lines->size() == (c.rewritten ? 1u : 0u));
    same_as_original(*original, *g, seed++);
    for (const Node* n : all_nodes(*g))
      if (n->op_type == c.node) {
        CHECK(dims_to_string(*n->output(0)->dims) == (c.rewritten ? "2x4x2x8" : "2x8x8"));
        if (c.rewritten) CHECK(n->attr_int("axis", 0) == 3);
      }
    CHECK(fused_matches_reference(*g, seed++, "beam") >= 1);
  }
}

TEST_CASE("split_head_rows takes a decoding step's one token, whose merged rows are its heads",
          "[fusion][emu]") {
  // [2, 1, 32] viewed as [2, 4, 8]: the heads alone, the sequence of 1 gone. As [2, 1, 4, 8] the
  // Reshape back to [2, 1, 32] and the split into [2, 1, 4, 8] read the rows directly.
  uint32_t seed = 81;
  auto original = frontend(R"(graph "step" opset 18 {
  input %y: f32[2,1,32]
  input %g: f32[8]
  const %merged: i64[3] = [0, -1, 8]
  const %back: i64[3] = [0, -1, 32]
  const %heads: i64[4] = [2, 1, 4, 8]
  const %last: i64[1] = [-1]
  const %two: f32[] = [2.0]
  %h = Reshape(%y, %merged) @"merge"
  %p = Pow(%h, %two) @"pow"
  %m = ReduceMean(%p, %last) {keepdims = 1} @"mean"
  %r = Reciprocal(%m) @"inv"
  %n = Mul(%h, %r) @"normalized"
  %w = Mul(%n, %g) @"weighted"
  %b = Reshape(%w, %back) @"back"
  %v = Reshape(%b, %heads) @"split"
  %t = Transpose(%v) {perm = ints[0, 2, 1, 3]} @"transpose"
  output %t
})");
  auto g = clone_graph(*original);
  auto lines = fusion::split_head_rows(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  CHECK(lines->front().find("rows 2x4x8 as 2x1x4x8") != std::string::npos);
  same_as_original(*original, *g, seed++);
  one_kernel_in_every_planner(*g, seed);
}

TEST_CASE("split_head_rows sets a row op's axis that reduced a positive axis before the rows were apart",
          "[fusion][emu]") {
  // Ergo's per-expert RMSNorm: x [N, D] viewed as [N, 1, D], summed over the axis of one (the
  // front end makes that a Reshape back to [N, D]), then an RMSNorm over axis 1, positive. With the
  // rows as [N, 1, D] that axis is the one of one element, which is no row op: the ReduceMean must
  // still be the one the region found, its axis set to 2.
  uint32_t seed = 91;
  auto original = frontend(R"(graph "ergo_expert_norm" opset 18 {
  input %y: f32[6,16]
  input %g: f32[16]
  const %one: i64[3] = [6, 1, 16]
  const %back: i64[3] = [2, 3, 16]
  const %axis: i64[1] = [1]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  %v = Reshape(%y, %one) @"view"
  %s = ReduceSum(%v, %axis) {keepdims = 0} @"sum"
  %p = Pow(%s, %two) @"pow"
  %m = ReduceMean(%p, %axis) {keepdims = 1} @"mean"
  %a = Add(%m, %eps) @"add_eps"
  %r = Reciprocal(%a) @"inv"
  %n = Mul(%s, %r) @"normalized"
  %w = Mul(%n, %g) @"weighted"
  %b = Reshape(%w, %back) @"back"
  output %b
})");
  auto g = clone_graph(*original);
  auto lines = fusion::split_head_rows(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  CHECK(lines->front().find("rows 6x16 as 6x1x16") != std::string::npos);
  const Status verified = verify_graph(*g);
  INFO(verified.message());
  REQUIRE(verified.is_ok());
  for (const Node* n : all_nodes(*g))
    if (n->op_type == "ReduceMean") CHECK(dims_to_string(*n->output(0)->dims) == "6x1x1");
  same_as_original(*original, *g, seed++);
  one_kernel_in_every_planner(*g, seed);
}
