// Fusion: the planners on the shipped models (launch counts that must not grow, beam never worse
// than greedy, ILP equal to brute force), stitched kernels on seeded random graphs of
// memory-intensive ops (per-element, layout, row ops; odd shapes and every broadcast kind) run on
// the emu backend against the reference interpreter, and the transformer patterns the planner
// must put in one kernel each.
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
std::vector<int> packs_of(const fusion::FusionPlan& p) {
  std::vector<int> out;
  for (const auto& grp : p.groups) out.push_back(grp.pack);
  return out;
}

fusion::FusionOptions opts(const std::string& mode, std::set<std::string> no_fuse = {}, int max_group = 64) {
  fusion::FusionOptions o;
  o.mode = mode;
  o.no_fuse = std::move(no_fuse);
  o.max_group_size = max_group;
  return o;
}

// Plans with `mode`, then compiles, runs on emu and compares with the reference; returns the
// number of generated kernels.
size_t fused_matches_reference(const Graph& g, uint32_t seed, const std::string& mode = "beam") {
  auto plan = fusion::make_plan(g, opts(mode));
  REQUIRE(plan.is_ok());
  const auto groups = groups_of(*plan);
  const auto packs = packs_of(*plan);
  return test::emu_matches_reference(g, &groups, seed, kEmuF32, &packs, plan->gemm_folds);
}

}  // namespace

TEST_CASE("planners on the shipped models: launch counts do not grow, beam >= greedy, ilp >= beam", "[fusion][models]") {
  // Unfused counts are 61, 94, 104 and 17 (test_codegen.cc); these are beam's counts with
  // independent packing, GEMM calls taking over bias adds, head transposes and scalings
  // (find_gemm_folds), Gemm biases in the epilogue and Split stitched (without these: 21, 28, 20, 12).
  const std::map<std::string, size_t> most = {{"bert_tiny", 11}, {"gpt2_tiny", 9}, {"llama_tiny", 12}, {"cnn_small", 11}};
  for (const auto& [name, limit] : most) {
    INFO(name);
    auto g = test::prepared_model(name);
    std::map<std::string, double> cost;
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      auto plan = fusion::make_plan(*g, opts(mode));
      REQUIRE(plan.is_ok());
      cost[mode] = plan->cost.time;
      if (name != "cnn_small") CHECK(plan->cost.bytes * 2 <= plan->unfused.bytes);  // >= 2x less traffic (transformers)
      const auto groups = groups_of(*plan);
      const auto packs = packs_of(*plan);
      size_t nodes = 0;
      for (const auto& grp : groups) nodes += grp.size();
      CHECK(nodes == g->nodes().size());  // every node exactly once
      auto s = codegen::build_schedule(*g, &groups, &packs, plan->gemm_folds);
      REQUIRE(s.is_ok());
      CHECK(static_cast<int>(s->kernels.size()) == plan->cost.kernels);
      if (std::string(mode) != "greedy") CHECK(s->kernels.size() <= limit);
      Status st = verify_memory_plan(s->requests, s->plan);
      CHECK(st.is_ok());
    }
    CHECK(cost["beam"] <= cost["greedy"] + 1e-12);
    CHECK(cost["ilp"] <= cost["beam"] + 1e-12);
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
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto all = fusion::make_plan(*g, opts(mode));
    REQUIRE(all.is_ok());
    CHECK(all->groups.size() == 1);
    auto capped = fusion::make_plan(*g, opts(mode, {}, 2));
    REQUIRE(capped.is_ok());
    CHECK(capped->groups.size() == 2);
    auto kept = fusion::make_plan(*g, opts(mode, {"b"}));
    REQUIRE(kept.is_ok());
    CHECK(kept->groups.size() == 3);
    CHECK(fusion::explain(*kept).find("is in --no-fuse") != std::string::npos);
  }
  auto bad = fusion::make_plan(*g, opts("greedy", {"nosuch"}));
  CHECK(!bad.is_ok());
  CHECK(bad.status().message().find("no node of that name") != std::string::npos);
  CHECK(!fusion::make_plan(*g, opts("bogus")).is_ok());
  CHECK(!fusion::make_plan(*g, opts("beam", {}, 0)).is_ok());
}

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
  auto plan = fusion::make_plan(*g, opts("beam"));
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
  auto plan = fusion::make_plan(*g, opts("beam"));
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
  auto plan = fusion::make_plan(*g, opts("beam"));
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
  CHECK(fused_matches_reference(*g, 41) == 2);
  // Without fusion every node keeps its step.
  auto none = fusion::make_plan(*g, opts("none"));
  REQUIRE(none.is_ok());
  CHECK_FALSE(none->gemm_folds);
  CHECK(none->cost.kernels == 11);  // 3 bias adds, 4 transposes, 2 scalings, softmax, Neg
  CHECK(plan->unfused.kernels == 11);
}

TEST_CASE("GEMM operands that need a copy keep their kernels; those a view can describe are read in place",
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
  const auto folds = codegen::find_gemm_folds(*g);
  std::set<std::string> folded;
  for (const auto& [n, why] : folds.folded) folded.insert(n->name);
  CHECK(folded == std::set<std::string>{"b_t", "c_t"});
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
  const auto hf = codegen::find_gemm_folds(*h);
  std::set<std::string> hfolded;
  for (const auto& [n, why] : hf.folded) hfolded.insert(n->name);
  CHECK(hfolded == std::set<std::string>{"k_t", "k_tt"});
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
  const auto folds = codegen::find_gemm_folds(*g);
  std::set<std::string> folded;
  for (const auto& [n, why] : folds.folded) folded.insert(n->name);
  CHECK(folded == std::set<std::string>{"bias_input"});
  fused_matches_reference(*g, 47);
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
    auto plan = fusion::make_plan(*g, opts("beam"));
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

TEST_CASE("a merge that would make a cycle is rejected", "[fusion]") {
  // c reads a and m, and m reads a through a library call: fusing a with c would need the GEMM
  // both before and after the group.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[4,8]
  input %w: f32[8,8]
  %a = Relu(%x) @"a"
  %m = MatMul(%a, %w) @"m"
  %c = Add(%a, %m) @"c"
  output %c
}
)");
  test::run_frontend_or_die(*g);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    auto plan = fusion::make_plan(*g, opts(mode));
    REQUIRE(plan.is_ok());
    CHECK(plan->groups.size() == 3);
    CHECK(fusion::explain(*plan).find("a cycle") != std::string::npos);
  }
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

TEST_CASE("row kernels: prologues into softmax and layer norm, per-row epilogues, column reductions alone",
          "[fusion][emu]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[3,100000]
  input %m: f32[1,100000]
  input %y: f32[37,770]
  input %r: f32[37,770]
  input %b: f32[770]
  input %s: f32[770]
  input %c: f32[1000,37]
  input %h: f32[6,1000]
  const %k: f32[] = [0.125]
  const %ax0: i64[1] = [0]
  const %ax1: i64[1] = [1]
  const %zero: f32[] = [0.0]
  const %eps: f32[] = [0.000001]
  %x1 = Mul(%x, %k) @"scale"
  %x2 = Add(%x1, %m) @"mask"
  %p = Softmax(%x2) {axis = -1} @"softmax"
  %nan = IsNaN(%p) @"isnan"
  %q = Where(%nan, %zero, %p) @"guard"
  %y1 = Add(%y, %b) @"bias"
  %y2 = Add(%y1, %r) @"residual"
  %n = LayerNormalization(%y2, %s, %b) {axis = -1} @"ln"
  %c1 = Tanh(%c) @"tanh"
  %cs = ReduceSum(%c1, %ax0) {keepdims = 0} @"colsum"
  %sq = Mul(%h, %h) @"square"
  %ms = ReduceMean(%sq, %ax1) @"mean"
  %me = Add(%ms, %eps) @"add_eps"
  %rs = Sqrt(%me) @"sqrt"
  %inv = Reciprocal(%rs) @"recip"
  %leak = Neg(%rs) @"leak"
  output %q
  output %n
  output %cs
  output %inv
  output %leak
}
)");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  int regional = 0;
  for (const auto& grp : plan->groups) regional += grp.scheme == "regional";
  CHECK(regional == 3);
  // scale+mask+softmax+isnan+where (3 x 100000: block per row); bias+residual+LN (37 x 770: warp
  // per row); square+mean+eps+sqrt+recip+neg (two per-row outputs); tanh and the column sum alone.
  // Five groups; the independent ones with 256-thread blocks share launches (three in all).
  CHECK(plan->groups.size() == 5);
  CHECK(plan->cost.kernels == 3);
  CHECK(fused_matches_reference(*g, 40) == 3);
}

namespace {

// The decomposed transformer patterns of PyTorch exports; each must be one kernel.
const char* kDecomposedLayerNorm = R"(graph "ln" opset 18 {
  input %x: f32[37,770]
  input %res: f32[37,770]
  input %bias: f32[770]
  input %w: f32[770]
  input %b: f32[770]
  const %ax: i64[1] = [-1]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.00001]
  %h = Add(%x, %bias) @"bias"
  %hr = Add(%h, %res) @"residual"
  %mu = ReduceMean(%hr, %ax) @"mean"
  %d = Sub(%hr, %mu) @"sub"
  %d2 = Pow(%d, %two) @"pow"
  %var = ReduceMean(%d2, %ax) @"var"
  %ve = Add(%var, %eps) @"add_eps"
  %sd = Sqrt(%ve) @"sqrt"
  %nx = Div(%d, %sd) @"div"
  %sc = Mul(%nx, %w) @"mul_w"
  %y = Add(%sc, %b) @"add_b"
  output %y
}
)";
const char* kRmsNormSiluGate = R"(graph "rms" opset 18 {
  input %x: f32[2,16,64]
  input %w: f32[64]
  input %g: f32[2,16,64]
  const %ax: i64[1] = [-1]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  %p = Pow(%x, %two) @"pow"
  %m = ReduceMean(%p, %ax) @"mean"
  %e = Add(%m, %eps) @"add_eps"
  %s = Sqrt(%e) @"sqrt"
  %r = Reciprocal(%s) @"rsqrt"
  %n = Mul(%x, %r) @"norm"
  %y = Mul(%w, %n) @"weight"
  %sg = Sigmoid(%g) @"sigmoid"
  %si = Mul(%g, %sg) @"silu"
  %o = Mul(%si, %y) @"gate"
  output %o
}
)";
const char* kRotary = R"(graph "rope" opset 18 {
  input %q: f32[2,16,4,16]
  input %cos: f32[16,16]
  input %sin: f32[16,16]
  const %s0: i64[1] = [0]
  const %s8: i64[1] = [8]
  const %s16: i64[1] = [16]
  const %a3: i64[1] = [3]
  %t = Transpose(%q) {perm = ints[0, 2, 1, 3]} @"transpose"
  %x1 = Slice(%t, %s0, %s8, %a3) @"slice_lo"
  %x2 = Slice(%t, %s8, %s16, %a3) @"slice_hi"
  %nx2 = Neg(%x2) @"neg"
  %rot = Concat(%nx2, %x1) {axis = 3} @"cat"
  %a = Mul(%t, %cos) @"mul_cos"
  %b = Mul(%rot, %sin) @"mul_sin"
  %y = Add(%a, %b) @"add"
  output %y
}
)";
const char* kScaleMaskSoftmax = R"(graph "attn" opset 18 {
  input %s: f32[2,4,16,16]
  input %mask: f32[2,1,1,16]
  const %k: f32[] = [0.25]
  const %one: f32[] = [1.0]
  const %big: f32[] = [-10000.0]
  %sc = Mul(%s, %k) @"scale"
  %inv = Sub(%one, %mask) @"invert"
  %mb = Mul(%inv, %big) @"mask_bias"
  %z = Add(%sc, %mb) @"add_mask"
  %p = Softmax(%z) {axis = -1} @"softmax"
  output %p
}
)";
const char* kBiasGelu = R"(graph "gelu" opset 18 {
  input %x: f32[32,128]
  input %b: f32[128]
  const %half: f32[] = [0.5]
  const %one: f32[] = [1.0]
  const %rs2: f32[] = [0.70710678]
  %h = Add(%x, %b) @"bias"
  %u = Mul(%h, %rs2) @"scale"
  %e = Erf(%u) @"erf"
  %e1 = Add(%e, %one) @"add_one"
  %hh = Mul(%h, %half) @"half"
  %y = Mul(%hh, %e1) @"gelu"
  output %y
}
)";

}  // namespace

TEST_CASE("transformer patterns are one kernel each: decomposed LN, RMSNorm + SiLU gate, rotary, scale+mask+softmax, "
          "bias+GELU", "[fusion][emu]") {
  int seed = 60;
  for (const char* text : {kDecomposedLayerNorm, kRmsNormSiluGate, kRotary, kScaleMaskSoftmax, kBiasGelu}) {
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    INFO(text);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      auto plan = fusion::make_plan(*g, opts(mode));
      REQUIRE(plan.is_ok());
      INFO(fusion::explain(*plan));
      CHECK(fused_matches_reference(*g, seed++, mode) == 1);
    }
  }
}

TEST_CASE("a row kernel caches a value read by several passes in shared memory, or recomputes it", "[fusion][emu]") {
  auto g = test::parse_or_die(kDecomposedLayerNorm);
  test::run_frontend_or_die(*g);
  std::vector<const Node*> all;
  std::set<const Value*> stored;
  for (const auto& n : g->nodes()) all.push_back(n.get());
  stored.insert(g->nodes().back()->output(0));
  auto cached = codegen::lower_stitched(all, stored, 0, true);
  auto recomputed = codegen::lower_stitched(all, stored, 0, false);
  REQUIRE(cached.is_ok());
  REQUIRE(recomputed.is_ok());
  CHECK(cached->source.find("__shared__ float cache0") != std::string::npos);
  INFO(cached->source);
  CHECK(cached->source.find("cached by an earlier pass") != std::string::npos);
  CHECK(recomputed->source.find("cache0") == std::string::npos);
  CHECK(cached->mapping.find("warp per row") != std::string::npos);
}

TEST_CASE("seeded random graphs with layout and row ops: fused equals the reference; ilp equals brute force",
          "[fusion][emu]") {
  // Rows of 1, 37, 770 and 3000 elements (thread-, warp- and block-per-row), broadcasts of every
  // kind into them, transposes and slices in front of the row ops, per-row epilogues after them.
  const char* row_shapes[] = {"5,1", "4,37", "37,770", "3,3000"};
  const char* unary[] = {"Relu", "Neg", "Tanh", "Sigmoid", "Exp"};
  const char* binary[] = {"Add", "Sub", "Mul", "Max"};
  const char* rows[] = {"Softmax", "ReduceMean", "ReduceMax", "ReduceSum", "LogSoftmax"};
  std::mt19937 rng(77);
  for (int trial = 0; trial < 8; ++trial) {
    INFO("trial " << trial);
    const std::string shape = row_shapes[trial % 4];
    const std::string r = shape.substr(0, shape.find(',')), c = shape.substr(shape.find(',') + 1);
    std::string text = "graph \"r\" opset 18 {\n";
    text += fmt::format("  input %x: f32[{},{}]\n  input %xt: f32[{},{}]\n  input %col: f32[1,{}]\n  input %row: f32[{},1]\n", r, c, c, r, c, r);
    text += "  input %one: f32[1]\n  const %ax: i64[1] = [-1]\n";
    text += "  %t = Transpose(%xt) {perm = ints[1, 0]} @\"tr\"\n";
    std::vector<std::string> full = {"%x", "%t"};
    std::vector<std::string> bcast = {"%col", "%row", "%one"};
    std::vector<std::string> outs;
    for (int k = 0; k < 7; ++k) {
      const std::string v = fmt::format("%v{}", k);
      const std::string a = full[rng() % full.size()];
      switch (rng() % 4) {
        case 0: text += fmt::format("  {} = {}({}) @\"n{}\"\n", v, unary[rng() % 5], a, k); break;
        case 1: {
          const auto& pool = rng() % 2 ? full : bcast;
          text += fmt::format("  {} = {}({}, {}) @\"n{}\"\n", v, binary[rng() % 4], a, pool[rng() % pool.size()], k);
          break;
        }
        case 2: {
          const std::string op = rows[rng() % 5];
          if (op == "Softmax" || op == "LogSoftmax") {
            text += fmt::format("  {} = {}({}) {{axis = -1}} @\"n{}\"\n", v, op, a, k);
          } else {
            const std::string red = fmt::format("%red{}", k);
            text += fmt::format("  {} = {}({}, %ax) @\"n{}\"\n", red, op, a, k);
            text += fmt::format("  {} = Sub({}, {}) @\"e{}\"\n", v, a, red, k);  // per-row value broadcast back
          }
          break;
        }
        default:
          text += fmt::format("  %c{} = Greater({}, {}) @\"g{}\"\n", k, a, full[rng() % full.size()], k);
          text += fmt::format("  {} = Where(%c{}, {}, %row) @\"n{}\"\n", v, k, a, k);
      }
      full.push_back(v);
    }
    text += "  output " + full.back() + "\n  output " + full[2 + rng() % (full.size() - 3)] + "\n}\n";
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    const size_t kernels = fused_matches_reference(*g, 100 + trial);
    CHECK(kernels < g->nodes().size());
    auto beam = fusion::make_plan(*g, opts("beam"));
    auto greedy = fusion::make_plan(*g, opts("greedy"));
    auto ilp = fusion::make_plan(*g, opts("ilp"));
    auto brute = fusion::plan_brute_force(*g, opts("brute"));
    REQUIRE(beam.is_ok());
    REQUIRE(greedy.is_ok());
    REQUIRE(ilp.is_ok());
    REQUIRE(brute.is_ok());
    CHECK(beam->cost.time <= greedy->cost.time + 1e-12);
    CHECK(std::abs(ilp->cost.time - brute->cost.time) <= 1e-12);
    CHECK(ilp->cost.time <= beam->cost.time + 1e-12);
  }
}

TEST_CASE("ptxas feedback: node sets kept apart are never in one group, and their groups not packed",
          "[fusion][emu]") {
  auto g = test::parse_or_die(kBiasGelu);
  test::run_frontend_or_die(*g);
  std::set<std::string> all;
  for (const auto& n : g->nodes()) all.insert(n->name);
  fusion::FusionOptions o = opts("beam");
  auto one = fusion::make_plan(*g, o);
  REQUIRE(one.is_ok());
  REQUIRE(one->cost.kernels == 1);
  o.keep_apart.push_back(all);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    o.mode = mode;
    auto plan = fusion::make_plan(*g, o);
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    CHECK(plan->cost.kernels >= 2);
    for (const auto& grp : plan->groups) CHECK(grp.nodes.size() < all.size());
    CHECK(fusion::explain(*plan).find("they are kept apart") != std::string::npos);
    const auto groups = groups_of(*plan);
    const auto packs = packs_of(*plan);
    test::emu_matches_reference(*g, &groups, 53, kEmuF32, &packs, plan->gemm_folds);
  }
}
