// Work that leaves fewer launches than groups: independent packing of stitched kernels (one
// launch for groups no path joins, shared-memory budget), Splits read in place by GEMMs or pulled
// as slices by stitched kernels, and repeated K/V heads read in place. Every case runs on the emu
// backend against the reference interpreter. GEMM calls taking over bias adds, head transposes,
// scalings and residuals: test_gemm_folds.cc.
#include <fmt/format.h>

#include "codegen/gemm_folds.h"
#include "codegen/lower.h"
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

TEST_CASE("ptxas feedback: a kernel given register room is declared with fewer blocks per SM",
          "[fusion][emu]") {
  // The pack of the test above, scheduled with and without room for 128 and 64 registers per
  // thread: __launch_bounds__(256) becomes (256, 2) and (256, 4), and the kernel still matches.
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[37,770]
  input %y: f32[5,770]
  input %c: f32[770]
  %a = Add(%x, %c) @"add"
  %r = Relu(%a) @"relu"
  %p = Softmax(%y) {axis = -1} @"softmax"
  output %r
  output %p
}
)");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  REQUIRE(plan->packs.size() == 1);
  const auto groups = groups_of(*plan);
  const auto packs = packs_of(*plan);
  auto plain = codegen::build_schedule(*g, &groups, &packs);
  REQUIRE(plain.is_ok());
  REQUIRE(plain->kernels.size() == 1);
  const codegen::Kernel& k = plain->kernels[0];
  CHECK(k.min_blocks_per_sm == 0);
  CHECK_THAT(k.source, Catch::Contains(fmt::format("__launch_bounds__(256) {}(", k.name)));
  std::set<std::string> names;
  for (const Node* n : k.nodes) names.insert(n->name);
  for (const auto& [registers, blocks] : {std::pair{128, 2}, std::pair{64, 4}}) {
    INFO(registers);
    codegen::RegisterRoom room{{names}, registers};
    auto roomy = codegen::build_schedule(*g, &groups, &packs, {}, &room);
    REQUIRE(roomy.is_ok());
    codegen::Kernel r = roomy->kernels[0];
    CHECK(r.min_blocks_per_sm == blocks);
    CHECK_THAT(r.source, Catch::Contains(fmt::format("__launch_bounds__(256, {}) {}(", blocks, r.name)));
    CHECK(r.source.find("__launch_bounds__(256) ") == std::string::npos);
    CHECK_FALSE(codegen::give_register_room(r, registers));
    auto widen = [&](codegen::Schedule& s) { REQUIRE(codegen::give_register_room(s.kernels[0], registers)); };
    CHECK(test::emu_matches_reference(*g, &groups, 3, kEmuF32, &packs, {}, widen) == 1);
  }
  // Kernels it does not name keep their bounds.
  codegen::RegisterRoom other{{{"relu"}}, 128};
  auto same = codegen::build_schedule(*g, &groups, &packs, {}, &other);
  REQUIRE(same.is_ok());
  CHECK(same->kernels[0].source == k.source);
}

TEST_CASE("ptxas feedback: blocks resident per SM follow the registers a thread uses, in units of 8",
          "[codegen]") {
  // An H100's SM: 65536 registers, 2048 threads, 228 KB of shared memory, 32 blocks. A block of
  // 256 threads is 8 warps; a warp at r registers per thread takes 32 * r rounded up to 256.
  const codegen::SmLimits h100{65536, 2048, 228 * 1024};
  codegen::Kernel k;
  k.block = {256, 1, 1};
  auto per_sm = [&](int registers) { return codegen::resident_blocks_per_sm(k, registers, h100); };
  CHECK(per_sm(16) == 8);   // the 2048 threads bound it, not the registers (16 blocks' worth)
  CHECK(per_sm(32) == 8);   // 8192 registers a block
  CHECK(per_sm(33) == 6);   // 40 per thread: 10240 a block
  CHECK(per_sm(128) == 2);  // the default budget: 2 blocks
  CHECK(per_sm(129) == 1);  // 136 per thread
  CHECK(per_sm(255) == 1);  // 256 per thread: 65536, one block still fits
  k.block = {1024, 1, 1};
  CHECK(per_sm(64) == 1);
  CHECK(per_sm(65) == 0);  // 72 x 1024 registers do not fit in one SM
  k.block = {32, 1, 1};
  CHECK(per_sm(16) == 32);  // the 32-block limit
  k.block = {256, 1, 1};
  k.smem_bytes = 48 * 1024;  // 49 KB a block with the system's 1 KB: 4 fit in 228 KB
  CHECK(per_sm(32) == 4);
  k.static_smem_bytes = 8 * 1024;  // 57 KB: 4 still
  CHECK(per_sm(32) == 4);
  k.smem_bytes = 56 * 1024;  // 65 KB: 3
  CHECK(per_sm(32) == 3);
  k.smem_bytes = k.static_smem_bytes = 0;
  // Every block at once: on 132 SMs at 248 registers, blocks of 256 threads fit one per SM.
  k.block = {256, 1, 1};
  k.grid = {132, 1, 1};
  CHECK(codegen::grid_resident(k, 248, 132, h100));
  k.grid = {133, 1, 1};
  CHECK_FALSE(codegen::grid_resident(k, 248, 132, h100));
  CHECK(codegen::grid_resident(k, 128, 132, h100));         // 2 per SM at the budget
  k.grid = {2, 3, 4};                                       // 24 blocks on one SM: 8 at 32 registers
  CHECK_FALSE(codegen::grid_resident(k, 32, 1, h100));
  CHECK(codegen::grid_resident(k, 32, 3, h100));
  k.block = {1024, 1, 1};
  k.grid = {1, 1, 1};
  CHECK_FALSE(codegen::grid_resident(k, 65, 132, h100));  // not even one block fits
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
  // When A's heads are merged from a repeat too, split the same way (2 kv heads, 2 repeats), both
  // operands are read in place along one splitting of the batch. Both match the reference on emu.
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
    CHECK(is_folded("v_repeat"));
    CHECK(is_folded("p_repeat") == both);
    CHECK(is_folded("ctx"));
    auto s = schedule_of(*g, *plan);
    REQUIRE(s.is_ok());
    REQUIRE(s->calls.size() == 1);
    const auto& p = s->calls[0].gemm;
    CHECK(s->kernels.empty());
    CHECK(p.batch.size() == 3);  // batch, kv heads, repeats
    CHECK(std::count(p.stride_b.begin(), p.stride_b.end(), 0) == 1);
    CHECK(std::count(p.stride_a.begin(), p.stride_a.end(), 0) == (both ? 1 : 0));
    CHECK(fusion::explain(*plan).find("operand B steps 0 along the repeated axis") != std::string::npos);
    CHECK(fused_matches_reference(*g, 41) == 0);
  }
}
