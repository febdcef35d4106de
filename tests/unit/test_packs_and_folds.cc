// Work that leaves fewer launches than groups: independent packing of stitched kernels (one
// launch for groups no path joins, shared-memory budget), GEMM calls taking over bias adds,
// head transposes, Splits and scalings (codegen::find_gemm_folds), and Split as a stitched layout
// op. Every case runs on the emu backend against the reference interpreter.
#include <fmt/format.h>

#include "codegen/gemm_folds.h"
#include "codegen/stitch.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("independent kernels are packed into one launch when no path joins them and block sizes agree",
          "[fusion][emu]") {
  // An element chain on x and a softmax on y (warp per row, 256 threads like element kernels),
  // and a softmax over long rows of z (block per row, 512 threads): the first two pack.
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[37,770]
  input %y: f32[5,770]
  input %z: f32[3,5000]
  input %c: f32[770]
  %a = Add(%x, %c) @"add"
  %r = Relu(%a) @"relu"
  %p = Softmax(%y) {axis = -1} @"softmax"
  %q = Softmax(%z) {axis = -1} @"softmax_long"
  output %r
  output %p
  output %q
}
)");
  test::run_frontend_or_die(*g);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, opts(mode));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    REQUIRE(plan->packs.size() == 1);
    CHECK(plan->packs[0].size() == 2);
    CHECK(plan->cost.kernels == 2);
    CHECK(fusion::explain(*plan).find("pack 0: groups") != std::string::npos);
    CHECK(fused_matches_reference(*g, 7, mode) == 2);
  }
  fusion::FusionOptions off = opts("beam");
  off.horizontal = false;
  auto plan = fusion::make_plan(*g, off);
  REQUIRE(plan.is_ok());
  CHECK(plan->packs.empty());
  CHECK(plan->cost.kernels == 3);
}

TEST_CASE("kernels joined by a path are never packed, even through a library call", "[fusion]") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[4,8]
  input %w: f32[8,8]
  input %u: f32[4,8]
  %a = Relu(%x) @"a"
  %m = MatMul(%a, %w) @"m"
  %c = Neg(%m) @"c"
  %d = Abs(%u) @"d"
  output %c
  output %d
}
)");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts_lib("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  // a and c are joined through the GEMM; d is independent of both and packs with one of them.
  REQUIRE(plan->packs.size() == 1);
  std::set<std::string> packed;
  for (int gi : plan->packs[0])
    for (const Node* n : plan->groups[gi].nodes) packed.insert(n->name);
  CHECK(packed.count("d") == 1);
  CHECK(packed.count("a") + packed.count("c") == 1);
  fused_matches_reference(*g, 11);
}

TEST_CASE("packed row kernels share one block's shared-memory budget: a part that would overflow it recomputes",
          "[fusion][emu]") {
  // Each softmax alone caches its 8 rows x 1000 floats (32000 B); together they would need 64000 B.
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[16,1000]
  input %y: f32[16,1000]
  %p = Softmax(%x) {axis = -1} @"sx"
  %q = Softmax(%y) {axis = -1} @"sy"
  output %p
  output %q
}
)");
  test::run_frontend_or_die(*g);
  std::vector<codegen::StitchPart> parts;
  for (const auto& n : g->nodes()) parts.push_back({{n.get()}, {n->output(0)}});
  auto alone = codegen::lower_stitched(parts[0].nodes, parts[0].stored, 0);
  REQUIRE(alone.is_ok());
  CHECK(alone->static_smem_bytes >= 32000);
  auto packed = codegen::lower_packed(parts, 0);
  REQUIRE(packed.is_ok());
  INFO(packed->source);
  CHECK(packed->static_smem_bytes <= codegen::kRowCacheBudget + 1024);
  CHECK(packed->grid[0] == 4);  // two blocks of 8 rows per part
  CHECK(packed->source.find(packed->name + "_part0(") != std::string::npos);
  CHECK(packed->source.find(packed->name + "_part1(") != std::string::npos);
  CHECK(fused_matches_reference(*g, 5) == 1);
}

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

TEST_CASE("a Split whose every output feeds a GEMM operand is read in place through offsets", "[fusion][emu]") {
  // GPT-2: one projection for Q, K and V, split along the last axis, heads split and transposed.
  // In `g` all three outputs reach GEMMs; in `h` V is also read by a Neg, so the Split stays a
  // kernel and the GEMMs read its outputs.
  const char* text = R"(graph "g" opset 18 {
  input %x: f32[2,5,8]
  input %w: f32[8,36]
  const %sizes: i64[3] = [12, 12, 12]
  const %heads: i64[4] = [2, 5, 3, 4]
  const %s: f32[] = [0.5]
  %qkv = MatMul(%x, %w) @"c_attn"
  %q, %k, %v = Split(%qkv, %sizes) {axis = 2} @"split"
  %qr = Reshape(%q, %heads) @"q_heads"
  %kr = Reshape(%k, %heads) @"k_heads"
  %vr = Reshape(%v, %heads) @"v_heads"
  %qt = Transpose(%qr) {perm = ints[0, 2, 1, 3]} @"q_t"
  %kt = Transpose(%kr) {perm = ints[0, 2, 3, 1]} @"k_t"
  %vt = Transpose(%vr) {perm = ints[0, 2, 1, 3]} @"v_t"
  %sc = MatMul(%qt, %kt) @"scores"
  %ss = Mul(%sc, %s) @"scale"
  %p = Softmax(%ss) {axis = -1} @"softmax"
  %c = MatMul(%p, %vt) @"context"
  output %c%EXTRA_OUT%
}
)";
  auto make = [&](bool extra) {
    std::string t = text;
    t.replace(t.find("%EXTRA_OUT%"), 11, extra ? "\n  output %nv" : "");
    if (extra) t.replace(t.find("  output %c"), 0, "  %nv = Neg(%v) @\"neg\"\n");
    return test::parse_or_die(t);
  };
  for (bool extra : {false, true}) {
    INFO("V also read by a Neg: " << extra);
    auto g = make(extra);
    test::run_frontend_or_die(*g);
    auto plan = fusion::make_plan(*g, opts_lib("beam"));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    bool split_folded = false;
    for (const auto& grp : plan->groups) split_folded |= grp.scheme == "folded" && grp.nodes.front()->name == "split";
    CHECK(split_folded == !extra);
    const auto groups = groups_of(*plan);
    const auto packs = packs_of(*plan);
    auto s = codegen::build_schedule(*g, &groups, &packs, true);
    REQUIRE(s.is_ok());
    for (const auto& call : s->calls)
      if (call.node->name == "scores" && !extra) {
        CHECK(call.args[0]->name == "qkv");
        CHECK(call.args[1]->name == "qkv");
        CHECK(call.gemm.offset_a == 0);
        CHECK(call.gemm.offset_b == 12);  // K starts 12 columns in
        CHECK(call.gemm.lda == 36);
        CHECK(call.gemm.trans_b);
      }
    fused_matches_reference(*g, 43);
  }
}

TEST_CASE("Split outputs are slices pulled through index maps", "[fusion][emu]") {
  // GPT-2's fused QKV projection is split in three along the last axis; equal parts and their
  // consumers become one kernel. Unequal parts along a middle axis match the reference too.
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[2,5,3,12]
  const %sizes: i64[3] = [4, 4, 4]
  %q, %k, %v = Split(%x, %sizes) {axis = 3} @"split"
  %qt = Transpose(%q) {perm = ints[0, 2, 1, 3]} @"tq"
  %kt = Transpose(%k) {perm = ints[0, 2, 1, 3]} @"tk"
  %vt = Transpose(%v) {perm = ints[0, 2, 1, 3]} @"tv"
  %qs = Neg(%qt) @"neg"
  output %qs
  output %kt
  output %vt
}
)");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(plan->cost.kernels == 1);
  CHECK(fused_matches_reference(*g, 31) == 1);
  auto h = test::parse_or_die(R"(graph "h" opset 18 {
  input %x: f32[3,9,37]
  input %y: f32[3,4,37]
  const %sizes: i64[3] = [2, 3, 4]
  %a, %b, %c = Split(%x, %sizes) {axis = 1} @"split"
  %e = Exp(%b) @"exp"
  %d = Add(%c, %y) @"add"
  %s = Softmax(%d) {axis = -1} @"softmax"
  output %a
  output %e
  output %s
}
)");
  test::run_frontend_or_die(*h);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    fused_matches_reference(*h, 33, mode);
  }
}

TEST_CASE("grouped-query attention: P.V reads the repeated K/V heads in place (stride 0)", "[fusion][emu]") {
  // LLaMA's repeat_kv as exported: V's 2 kv heads unsqueezed, expanded to 2 repeats and merged
  // into 4 query heads. The call reads V through a stride of 0 along the repeats (its batch split
  // into kv heads and repeats) and writes the context transposed, so no kernel copies V's heads.
  // When A's heads are merged from a repeat too, only one operand may be (the batch would need
  // two splittings): B's Expand then stays a kernel. Both match the reference on emu.
  for (const bool both : {false, true}) {
    INFO("A repeated too: " << both);
    auto g = test::parse_or_die(fmt::format(R"(graph "gqa" opset 17 {{
  input %p0: f32[2,{},5,5]
  input %v: f32[2,5,8]
  const %vshape: i64[4] = [2, 5, 2, 4]
  const %ax: i64[1] = [2]
  const %rep: i64[5] = [2, 2, 2, 5, 4]
  const %prep: i64[5] = [2, 2, 2, 5, 5]
  const %heads: i64[4] = [2, 4, 5, 4]
  const %pheads: i64[4] = [2, 4, 5, 5]
  %vr = Reshape(%v, %vshape) @"v_view"
  %vt = Transpose(%vr) {{perm = ints[0, 2, 1, 3]}} @"v_heads"
  %vu = Unsqueeze(%vt, %ax) @"v_unsq"
  %ve = Expand(%vu, %rep) @"v_repeat"
  %vh = Reshape(%ve, %heads) @"v_merge"
  {}
  %c = MatMul(%p, %vh) @"pv"
  %t = Transpose(%c) {{perm = ints[0, 2, 1, 3]}} @"ctx"
  output %t
}}
)",
                                            both ? 2 : 4,
                                            both ? R"(%pu = Unsqueeze(%p0, %ax) @"p_unsq"
  %pe = Expand(%pu, %prep) @"p_repeat"
  %p = Reshape(%pe, %pheads) @"p_merge")"
                                                 : R"(%p = Identity(%p0) @"p_same")"));
    test::run_frontend_or_die(*g);
    auto plan = fusion::make_plan(*g, opts_lib("beam"));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    auto is_folded = [&](const std::string& name) {
      for (const auto& grp : plan->groups)
        for (const Node* n : grp.nodes)
          if (n->name == name) return grp.scheme == "folded";
      return false;
    };
    CHECK(is_folded("v_repeat") == !both);
    CHECK(is_folded("p_repeat") == both);
    CHECK(is_folded("ctx"));
    auto s = schedule_of(*g, *plan);
    REQUIRE(s.is_ok());
    REQUIRE(s->calls.size() == 1);
    const auto& p = s->calls[0].gemm;
    if (!both) {
      CHECK(s->kernels.empty());
      CHECK(p.batch.size() == 3);  // batch, kv heads, repeats
      CHECK(std::count(p.stride_b.begin(), p.stride_b.end(), 0) == 1);
      CHECK(fusion::explain(*plan).find("operand B steps 0 along the repeated axis") != std::string::npos);
    }
    fused_matches_reference(*g, 41);
  }
}
