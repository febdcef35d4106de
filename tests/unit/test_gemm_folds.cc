// GEMM calls taking over their neighbours' work (codegen::find_gemm_folds): bias adds in the
// epilogue, attention's head transposes and scalings read through the call's operand layout and
// alpha, a transpose written by the call, a residual Add as the call's C, and the ordering rules
// that keep such folds correct. Every case runs on the emu backend against the reference
// interpreter. Packing and Splits: test_packs_and_folds.cc.
#include <fmt/format.h>

#include "codegen/gemm_folds.h"
#include "codegen/stitch.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("a transpose that keeps the last axis, alone after a MatMul, is written by the GEMM", "[fusion][emu]") {
  // t (attention's [b,h,s,d] -> [b,s,h,d]) folds; u moves the last axis and w's MatMul output has
  // a second reader, so those two stay kernels.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %p: f32[2,3,5,5]
  input %v: f32[2,3,5,4]
  input %k: f32[4,6]
  const %flat: i64[3] = [2, 5, 12]
  %c = MatMul(%p, %v) @"ctx"
  %t = Transpose(%c) {perm = ints[0, 2, 1, 3]} @"t"
  %f = Reshape(%t, %flat) @"flat"
  %o = Neg(%f) @"neg"
  %c2 = MatMul(%p, %v) @"ctx2"
  %u = Transpose(%c2) {perm = ints[0, 1, 3, 2]} @"u"
  %c3 = MatMul(%v, %k) @"ctx3"
  %w = Transpose(%c3) {perm = ints[1, 0, 2, 3]} @"w"
  %x = Abs(%c3) @"also"
  output %o
  output %u
  output %w
  output %x
}
)");
  test::run_frontend_or_die(*g);
  const auto gf = codegen::find_gemm_folds(*g);
  std::map<std::string, bool> folds;
  for (const auto& n : g->nodes())
    if (n->op_type == "Transpose") folds[n->name] = gf.folded.count(n.get()) > 0;
  CHECK(folds["t"]);
  CHECK_FALSE(folds["u"]);
  CHECK_FALSE(folds["w"]);
  auto plan = fusion::make_plan(*g, opts_lib("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  int folded = 0;
  for (const auto& grp : plan->groups) folded += grp.scheme == "folded";
  CHECK(folded == 1);
  CHECK(fusion::explain(*plan).find("written by node 'ctx' (MatMul)") != std::string::npos);
  const auto groups = groups_of(*plan);
  const auto packs = packs_of(*plan);
  auto s = codegen::build_schedule(*g, &groups, &packs, plan->gemm_folds);
  REQUIRE(s.is_ok());
  CHECK(s->folded == 1);
  for (const auto& call : s->calls)
    if (call.node->name == "ctx") {
      CHECK(call.gemm.ldc == 12);  // a row of the product steps over the 3 heads of 4
      CHECK(call.gemm.stride_c == Dims{60, 4});
      CHECK(call.args[2]->name == "t");
    }
  fused_matches_reference(*g, 21);
}

// BLOOM's attention at batch 2, sequence 5, 3 heads of 4: the fused QKV product viewed as
// [b, s, h, 3, d]; Q, K and V sliced out, put heads first and merged into a [b*h, ...] batch; the
// context [b*h, s, d] split back and put to [b, s, h, d]. `k_perm` and `k_merge` give K's
// heads-first layout and its merged dims.
std::string bloom_attention(const std::string& k_perm, const std::string& k_heads) {
  return fmt::format(R"(graph "g" opset 17 {{
  input %f: f32[2,5,36]
  const %c0: i64[1] = [0]
  const %c1: i64[1] = [1]
  const %c2: i64[1] = [2]
  const %c3: i64[1] = [3]
  const %ax3: i64[1] = [3]
  const %split: i64[5] = [2, 5, 3, 3, 4]
  const %drop: i64[4] = [2, 5, 3, 4]
  const %merged: i64[3] = [6, 5, 4]
  const %kmerged: i64[3] = {k_heads}
  const %heads: i64[4] = [2, 3, 5, 4]
  const %flat: i64[3] = [2, 5, 12]
  %v5 = Reshape(%f, %split) @"qkv_view"
  %qs = Slice(%v5, %c0, %c1, %ax3) @"q_slice"
  %ks = Slice(%v5, %c1, %c2, %ax3) @"k_slice"
  %vs = Slice(%v5, %c2, %c3, %ax3) @"v_slice"
  %qd = Reshape(%qs, %drop) @"q_drop"
  %kd = Reshape(%ks, %drop) @"k_drop"
  %vd = Reshape(%vs, %drop) @"v_drop"
  %qt = Transpose(%qd) {{perm = ints[0, 2, 1, 3]}} @"q_t"
  %kt = Transpose(%kd) {{perm = ints{k_perm}}} @"k_t"
  %vt = Transpose(%vd) {{perm = ints[0, 2, 1, 3]}} @"v_t"
  %qm = Reshape(%qt, %merged) @"q_merge"
  %km = Reshape(%kt, %kmerged) @"k_merge"
  %vm = Reshape(%vt, %merged) @"v_merge"
  %ktt = Transpose(%km) {{perm = ints[0, 2, 1]}} @"k_tt"
  %sc = MatMul(%qm, %ktt) @"scores"
  %p = Softmax(%sc) {{axis = -1}} @"softmax"
  %cx = MatMul(%p, %vm) @"context"
  %ch = Reshape(%cx, %heads) @"context_split"
  %cp = Transpose(%ch) {{perm = ints[0, 2, 1, 3]}} @"context_back"
  %o = Reshape(%cp, %flat) @"flat"
  output %o
}}
)",
                     fmt::arg("k_perm", k_perm), fmt::arg("k_heads", k_heads));
}

TEST_CASE("GEMM calls read and write attention heads merged into the batch: BLOOM's Q, K, V and context",
          "[fusion][emu]") {
  // Q and K both merge batch and heads into the scores' batch dim, split alike (2 then 3): both are
  // read in place; the context is written straight into [b, s, h, d] through its split batch.
  auto g = test::parse_or_die(bloom_attention("[0, 2, 1, 3]", "[6, 5, 4]"));
  test::run_frontend_or_die(*g);
  CHECK(folded_names(*g) == std::set<std::string>{"q_slice", "q_t", "k_slice", "k_t", "k_tt", "v_slice",
                                                  "v_t", "context_split", "context_back"});
  auto plan = fusion::make_plan(*g, opts_lib("beam"));
  REQUIRE(plan.is_ok());
  const std::string text = fusion::explain(*plan);
  INFO(text);
  CHECK(plan->cost.kernels == 1);  // the softmax
  CHECK_THAT(text,
             Catch::Contains("written by node 'context' (MatMul) in the layout of the Transpose it feeds"));
  const auto groups = groups_of(*plan);
  const auto packs = packs_of(*plan);
  auto s = codegen::build_schedule(*g, &groups, &packs, plan->gemm_folds);
  REQUIRE(s.is_ok());
  for (const auto& call : s->calls) {
    INFO(call.node->name);
    CHECK(call.gemm.batch == Dims{2, 3});  // batch and heads stepped apart
    if (call.node->name == "scores") {
      CHECK(call.gemm.stride_a == Dims{180, 12});  // Q: a batch is 5 x 36 apart, a head 3 x 4
      CHECK(call.gemm.stride_b == Dims{180, 12});
      CHECK(call.gemm.trans_b);
    }
    if (call.node->name == "context") {
      CHECK(call.gemm.ldc == 12);  // a row of the context steps over the 3 heads of 4
      CHECK(call.gemm.stride_c == Dims{60, 4});
      CHECK(call.args[2]->name == "cp");  // the Transpose's output
    }
  }
  CHECK(fused_matches_reference(*g, 61, opts_lib("beam")) == 1);  // the softmax kernel

  // K merged heads first (3 then 2): no refinement steps Q's split and K's, so K keeps a kernel.
  auto h = test::parse_or_die(bloom_attention("[2, 0, 1, 3]", "[6, 5, 4]"));
  test::run_frontend_or_die(*h);
  const std::set<std::string> hf = folded_names(*h);
  CHECK(hf.count("q_t") == 1);
  CHECK(hf.count("k_t") == 0);
  CHECK(hf.count("context_back") == 1);
  CHECK(fused_matches_reference(*h, 62, opts_lib("beam")) == 2);  // K's copy and the softmax
}

TEST_CASE("GEMM calls take over attention's bias adds, head transposes and scalings", "[fusion][emu]") {
  // BERT's self-attention as exported: Q, K, V projections with bias, heads split by a Reshape
  // and a Transpose, both Q and K scaled by d^-1/4, scores Q K^T, context P V, heads merged back.
  auto g = test::parse_or_die(R"(graph "attn" opset 17 {
  input %x: f32[2,5,12]
  input %wq: f32[12,12]
  input %wk: f32[12,12]
  input %wv: f32[12,12]
  const %bq: f32[12] = [0.1, -0.2, 0.3, 0.0, 0.5, -0.6, 0.7, 0.1, -0.9, 1.0, 0.2, -0.1]
  const %bk: f32[12] = [0.2, 0.1, -0.3, 0.4, 0.0, 0.6, -0.7, 0.8, 0.1, -1.0, 0.3, 0.2]
  const %bv: f32[12] = [-0.1, 0.2, 0.3, -0.4, 0.5, 0.1, 0.7, -0.8, 0.9, 0.0, -0.2, 0.4]
  const %heads: i64[4] = [2, 5, 3, 4]
  const %flat: i64[3] = [2, 5, 12]
  const %s: f32[] = [0.70710677]
  %q = MatMul(%x, %wq) @"q"
  %qb = Add(%q, %bq) @"q_bias"
  %qr = Reshape(%qb, %heads) @"q_heads"
  %qt = Transpose(%qr) {perm = ints[0, 2, 1, 3]} @"q_t"
  %qs = Mul(%qt, %s) @"q_scale"
  %k = MatMul(%x, %wk) @"k"
  %kb = Add(%bk, %k) @"k_bias"
  %kr = Reshape(%kb, %heads) @"k_heads"
  %kt = Transpose(%kr) {perm = ints[0, 2, 3, 1]} @"k_t"
  %ks = Mul(%s, %kt) @"k_scale"
  %sc = MatMul(%qs, %ks) @"scores"
  %p = Softmax(%sc) {axis = -1} @"softmax"
  %v = MatMul(%x, %wv) @"v"
  %vb = Add(%v, %bv) @"v_bias"
  %vr = Reshape(%vb, %heads) @"v_heads"
  %vt = Transpose(%vr) {perm = ints[0, 2, 1, 3]} @"v_t"
  %c = MatMul(%p, %vt) @"context"
  %ct = Transpose(%c) {perm = ints[0, 2, 1, 3]} @"c_t"
  %cf = Reshape(%ct, %flat) @"merge"
  %o = Neg(%cf) @"out"
  output %o
}
)");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts_lib("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(plan->gemm_folds);
  std::set<std::string> folded;
  for (const auto& grp : plan->groups)
    if (grp.scheme == "folded") folded.insert(grp.nodes.front()->name);
  CHECK(folded == std::set<std::string>{"q_bias", "q_t", "q_scale", "k_bias", "k_t", "k_scale", "v_bias", "v_t", "c_t"});
  CHECK(plan->cost.kernels == 2);  // the softmax and the Neg
  const auto groups = groups_of(*plan);
  const auto packs = packs_of(*plan);
  auto s = codegen::build_schedule(*g, &groups, &packs, true);
  REQUIRE(s.is_ok());
  for (const auto& call : s->calls) {
    INFO(call.node->name);
    const auto& gp = call.gemm;
    if (call.node->name == "q" || call.node->name == "k" || call.node->name == "v") CHECK(gp.epilogue == "bias");
    if (call.node->name == "scores") {
      CHECK(call.args[0]->name == "qb");  // read through the head layout, no copy
      CHECK(call.args[1]->name == "kb");
      CHECK_FALSE(gp.trans_a);
      CHECK(gp.trans_b);  // K^T: rows of K are read as columns
      CHECK(gp.lda == 12);
      CHECK(gp.ldb == 12);
      CHECK(gp.stride_a == Dims{60, 4});
      CHECK(gp.alpha == Approx(0.5));  // both scalings
    }
    if (call.node->name == "context") {
      CHECK(call.args[1]->name == "vb");
      CHECK(call.args[2]->name == "ct");
      CHECK(gp.ldc == 12);
    }
  }
  CHECK(fused_matches_reference(*g, 41, opts_lib("beam")) == 2);
  // Without fusion every node keeps its step.
  auto none = fusion::make_plan(*g, opts("none"));
  REQUIRE(none.is_ok());
  CHECK_FALSE(none->gemm_folds);
  CHECK(none->cost.kernels == 11);  // 3 bias adds, 4 transposes, 2 scalings, softmax, Neg
  CHECK(plan->unfused.kernels == 11);
}

TEST_CASE("GEMM operands that need a copy keep their kernels, those a view can describe are read in place",
          "[fusion][emu]") {
  // a_t: a Transpose then a Reshape merging the transposed axes (no single stride): a kernel.
  // b_t: a Transpose of a Reshape that split a contiguous axis: read in place (trans_b).
  // c_t: a Transpose moving a size-1 axis into the rows: read in place.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[4,3,5]
  input %w: f32[5,2]
  input %y: f32[6,5]
  input %z: f32[1,5,7]
  const %m: i64[2] = [12, 5]
  const %sp: i64[3] = [2, 3, 5]
  %xt = Transpose(%x) {perm = ints[1, 0, 2]} @"a_t"
  %xm = Reshape(%xt, %m) @"a_merge"
  %o1 = MatMul(%xm, %w) @"mm_a"
  %ys = Reshape(%y, %sp) @"b_split"
  %yt = Transpose(%ys) {perm = ints[0, 2, 1]} @"b_t"
  %o2 = MatMul(%ys, %yt) @"mm_b"
  %zt = Transpose(%z) {perm = ints[2, 0, 1]} @"c_t"
  %o3 = MatMul(%zt, %z) @"mm_c"
  output %o1
  output %o2
  output %o3
}
)");
  test::run_frontend_or_die(*g);
  CHECK(folded_names(*g) == std::set<std::string>{"b_t", "c_t"});
  // torch.export's attention: heads merged into the batch ([b,h,s,d] -> [b*h,s,d], which no single
  // stride describes in the transposed layout), transposed, then split back: read in place.
  auto h = test::parse_or_die(R"(graph "h" opset 17 {
  input %x: f32[2,5,8]
  input %wk: f32[8,12]
  input %q: f32[2,3,5,4]
  const %heads: i64[4] = [2, 5, 3, 4]
  const %bh: i64[3] = [6, 5, 4]
  const %back: i64[4] = [2, 3, 4, 5]
  %k = MatMul(%x, %wk) @"k"
  %kh = Reshape(%k, %heads) @"k_heads"
  %kt = Transpose(%kh) {perm = ints[0, 2, 1, 3]} @"k_t"
  %km = Reshape(%kt, %bh) @"k_merge"
  %ktt = Transpose(%km) {perm = ints[0, 2, 1]} @"k_tt"
  %kb = Reshape(%ktt, %back) @"k_back"
  %s = MatMul(%q, %kb) @"scores"
  output %s
}
)");
  test::run_frontend_or_die(*h);
  CHECK(folded_names(*h) == std::set<std::string>{"k_t", "k_tt"});
  CHECK(fused_matches_reference(*h, 59) == 0);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(plan->cost.kernels == 1);  // a_t
  CHECK(fused_matches_reference(*g, 57) == 1);
}

TEST_CASE("a bias the epilogue adds must be ready before the call: a constant or a graph input", "[fusion][emu]") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[3,4]
  input %w: f32[4,6]
  input %b: f32[6]
  input %c: f32[6]
  %y = MatMul(%x, %w) @"m1"
  %yb = Add(%y, %b) @"bias_input"
  %cc = Exp(%c) @"computed"
  %z = MatMul(%x, %w) @"m2"
  %zb = Add(%z, %cc) @"bias_computed"
  output %yb
  output %zb
}
)");
  test::run_frontend_or_die(*g);
  CHECK(folded_names(*g) == std::set<std::string>{"bias_input"});
  fused_matches_reference(*g, 47);
}

TEST_CASE("a residual Add is the GEMM's C when its other input is written before the call", "[fusion][emu]") {
  // r1: bias then a residual computed earlier (Relu); r2: a Gemm's product reshaped, then a
  // residual that is a graph input; late: the other input is computed after the MatMul in graph
  // order, bcast: it broadcasts. Both of those stay Adds in kernels.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2,3,4]
  input %w: f32[4,4]
  input %b: f32[4]
  input %x2: f32[6,4]
  input %res: f32[2,3,4]
  input %row: f32[4]
  const %shape: i64[3] = [2, 3, 4]
  %h = Relu(%x) @"h"
  %y = MatMul(%h, %w) @"m1"
  %yb = Add(%y, %b) @"bias"
  %r1 = Add(%h, %yb) @"r1"
  %p = Gemm(%x2, %w, %b) @"gemm"
  %p3 = Reshape(%p, %shape) @"view"
  %r2 = Add(%p3, %res) @"r2"
  %z = MatMul(%x, %w) @"m3"
  %e = Exp(%x) @"late_input"
  %r3 = Add(%z, %e) @"late"
  %u = MatMul(%x, %w) @"m4"
  %r4 = Add(%u, %row) @"bcast_row"
  %v = MatMul(%r1, %w) @"m5"
  %r5 = Add(%v, %row) @"row_bias"
  output %r2
  output %r3
  output %r4
  output %r5
}
)");
  test::run_frontend_or_die(*g);
  // bcast_row and row_bias are bias epilogues (a constant-shaped graph input), not residuals.
  CHECK(folded_names(*g) == std::set<std::string>{"bias", "r1", "view", "r2", "bcast_row", "row_bias"});
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    auto plan = fusion::make_plan(*g, opts_lib(mode));
    REQUIRE(plan.is_ok());
    INFO(mode << "\n" << fusion::explain(*plan));
    const auto groups = groups_of(*plan);
    const auto packs = packs_of(*plan);
    auto s = codegen::build_schedule(*g, &groups, &packs, plan->gemm_folds);
    REQUIRE(s.is_ok());
    std::map<std::string, int> step_of;  // node -> its step
    for (size_t i = 0; i < s->steps.size(); ++i) {
      const auto& st = s->steps[i];
      if (st.kind == codegen::Step::kLibrary) step_of[s->calls[st.item].node->name] = static_cast<int>(i);
      if (st.kind == codegen::Step::kKernel)
        for (const Node* n : s->kernels[st.item].nodes) step_of[n->name] = static_cast<int>(i);
    }
    REQUIRE(step_of.count("h"));
    CHECK(step_of.at("h") < step_of.at("m1"));  // the call reads h as its C: h is written first
    for (const auto& call : s->calls) {
      const std::string& name = call.node->name;
      if (name == "m1") {
        CHECK(call.gemm.epilogue == "bias_residual");
        REQUIRE(call.args.size() == 5);
        CHECK(call.args[2]->name == "r1");
        CHECK(call.args[4]->name == "h");
        CHECK(call.gemm.beta == 0);
      }
      if (name == "gemm") {
        CHECK(call.gemm.epilogue == "bias_residual");
        REQUIRE(call.args.size() == 5);
        CHECK(call.args[2]->name == "r2");
        CHECK(call.args[4]->name == "res");
      }
      if (name == "m3") CHECK(call.gemm.epilogue.empty());
    }
    CHECK(step_of.count("late"));  // a kernel of its own, or with late_input
    CHECK(fused_matches_reference(*g, 61, opts_lib(mode)) >= 1);
  }
}

TEST_CASE("a residual whose producer would have to run after the GEMM is not folded", "[fusion][emu]") {
  // The other input of the Add reads the MatMul's input through another path that comes after
  // the MatMul in graph order: folding it would need the call after that path, so it is left.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[5,8]
  input %w: f32[8,8]
  %y = MatMul(%x, %w) @"m"
  %n = Neg(%x) @"after"
  %s = Add(%n, %y) @"sum"
  output %s
}
)");
  test::run_frontend_or_die(*g);
  CHECK(folded_names(*g).empty());
  CHECK(fused_matches_reference(*g, 62, opts_lib("beam")) == 1);
}

TEST_CASE("a kernel that writes a GEMM's residual cannot also read the GEMM's result", "[fusion][emu]") {
  // h is the call's C; k reads h and (through q) the call's result. Grouping h with q and k would
  // need the kernel both before and after the call: the planner sees the residual as an edge into
  // the call and rejects that merge as a cycle.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[5,8]
  input %w: f32[8,8]
  %h = Relu(%x) @"h"
  %y = MatMul(%x, %w) @"m"
  %r = Add(%y, %h) @"res"
  %q = Exp(%r) @"q"
  %k = Mul(%h, %q) @"k"
  output %k
}
)");
  test::run_frontend_or_die(*g);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    auto plan = fusion::make_plan(*g, opts_lib(mode));
    REQUIRE(plan.is_ok());
    INFO(mode << "\n" << fusion::explain(*plan));
    CHECK(fusion::explain(*plan).find("added by node 'm' (MatMul) as its C") != std::string::npos);
    for (const auto& grp : plan->groups) {
      std::set<std::string> names;
      for (const Node* n : grp.nodes) names.insert(n->name);
      CHECK_FALSE((names.count("h") && names.count("k")));
    }
    CHECK(fused_matches_reference(*g, 63, opts_lib(mode)) == 2);  // h; q with k
  }
}

TEST_CASE("a GEMM call runs after the kernel that writes its residual", "[fusion][emu]") {
  // h's kernel also computes p, which waits for the second call (m2, after m in graph order):
  // the order must put m after that kernel although m reads nothing else of it.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[5,8]
  input %w: f32[8,8]
  input %w2: f32[8,8]
  %h = Relu(%x) @"h"
  %y = MatMul(%x, %w) @"m"
  %z = MatMul(%x, %w2) @"m2"
  %p = Mul(%h, %z) @"p"
  %r = Add(%y, %h) @"res"
  output %r
  output %p
}
)");
  test::run_frontend_or_die(*g);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    auto plan = fusion::make_plan(*g, opts_lib(mode));
    REQUIRE(plan.is_ok());
    INFO(mode << "\n" << fusion::explain(*plan));
    std::map<std::string, size_t> at;  // node -> position of its group in execution order
    for (size_t i = 0; i < plan->groups.size(); ++i)
      for (const Node* n : plan->groups[i].nodes) at[n->name] = i;
    CHECK(at.at("h") == at.at("p"));  // one kernel
    CHECK(at.at("h") < at.at("m"));
    CHECK(fused_matches_reference(*g, 64, opts_lib(mode)) == 1);
  }
}
