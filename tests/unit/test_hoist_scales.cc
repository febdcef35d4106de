// Row scales moved past GEMMs (fusion::hoist_row_scales): RMSNorm in front of a GEMM becomes a
// GEMM of the norm's input with the norm's weight folded into its weight, and the row scale moves
// into the kernel after it, which stitches the norm's reduction with values of another width (wide
// values, analyze_stitch). Every rewrite is checked against the reference interpreter on the
// original graph; every plan on emu against the reference.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <tuple>

#include "fusion/hoist_scales.h"
#include "fusion/merge_gemms.h"
#include "fusion_test_util.h"
#include "ir/graph.h"
#include "rms_norm_spellings.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// RMSNorm's row scale %rs of %h over its last axis (from constants %two and %eps).
constexpr const char* kRowScale = R"(  %sq = Pow(%h, %two) @"pow"
  %ms = ReduceMean(%sq) {axes = ints[-1], keepdims = 1} @"mean"
  %ve = Add(%ms, %eps) @"add_eps"
  %sd = Sqrt(%ve) @"sqrt"
  %rs = Reciprocal(%sd) @"rsqrt"
)";

// LLaMA's MLP input: RMSNorm of %h (rows of 16) in the exporter spelling `norm` (it reads %h,
// writes %y), the gate and up projections (merged into one GEMM of n = 48 by
// merge_sibling_gemms), the SiLU gate; `tail` may add more.
// `t`: the type of %h, the weights and the MLP (the norm's constants stay float32).
std::unique_ptr<Graph> rms_mlp(const std::string& norm, const std::string& tail = "",
                               const std::string& outputs = "  output %o\n", const std::string& t = "f32") {
  uint32_t state = 777;
  const std::string consts = fmt::format(
      "  const %gamma: {0}[16] = {1}\n  const %wg: {0}[16,24] = {2}\n  const %wu: {0}[16,24] = {3}\n", t,
      lcg_values(state, 16, 0.5), lcg_values(state, 16 * 24), lcg_values(state, 16 * 24));
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %h: )" + t + R"([2,5,16]
  const %two: f32[] = [2.0]
  const %one: f32[] = [1.0]
  const %eps: f32[] = [0.000001]
  const %axis: i64[1] = [-1]
)" + consts + norm + R"(
  %g = MatMul(%y, %wg) @"gate"
  %u = MatMul(%y, %wu) @"up"
  %sg = Sigmoid(%g) @"sigmoid"
  %si = Mul(%g, %sg) @"silu"
  %o = Mul(%si, %u) @"gated"
)" + tail + outputs + "}\n");
  run_frontend_or_die(*g);
  return g;
}

// Merges the gate and up GEMMs of rms_mlp's graph and moves the norm's row scale past the merged
// one; returns the rewrite's one line.
std::string merge_then_hoist(Graph& g) {
  auto merged = fusion::merge_sibling_gemms(g);
  REQUIRE(merged.is_ok());
  REQUIRE(merged->size() == 1);
  auto hoisted = fusion::hoist_row_scales(g);
  REQUIRE(hoisted.is_ok());
  REQUIRE(hoisted->size() == 1);
  return hoisted->front();
}

}  // namespace

TEST_CASE("RMSNorm before a gated MLP: the row scale moves past the GEMM into the gate's kernel",
          "[fusion][emu]") {
  for (const char* norm : {kDynamoNorm, kScriptNorm}) {
    auto g = rms_mlp(norm);
    auto original = clone_graph(*g);
    const std::string hoisted = merge_then_hoist(*g);
    INFO(hoisted);
    // torch.export: 1/sqrt is Reciprocal, one value; TorchScript: Div(1, sqrt), so the row scale
    // is sqrt (a divisor) and 1 is one more column scale.
    const std::string want = norm == kDynamoNorm
                                 ? "row scale 'rs' applied to the product, 1 column scale(s) folded"
                                 : "row scale 'sd' applied to the product, 2 column scale(s) folded";
    CHECK(hoisted.find(want) != std::string::npos);
    // The GEMM reads %h (through the same-type cast, or directly) with gamma in its weight; the
    // norm's Muls are gone.
    int matmuls = 0;
    for (const auto& n : g->nodes()) {
      CHECK(n->name != "normalize");
      CHECK(n->name != "weight");
      if (n->op_type != "MatMul") continue;
      ++matmuls;
      REQUIRE(n->input(1)->is_constant());
      const Value* a = n->input(0);
      CHECK((a->name == "h" || a->name == "hc"));
    }
    CHECK(matmuls == 1);
    same_as_original(*original, *g, 5);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      auto plan = fusion::make_plan(*g, opts_lib(mode));
      REQUIRE(plan.is_ok());
      INFO(mode << "\n" << fusion::explain(*plan));
      // One kernel: the norm's reduction over rows of 16, the row scale and the gate over rows
      // of 48 and 24 (wide values).
      CHECK(plan->cost.kernels == 1);
      CHECK(fused_matches_reference(*g, 9, opts_lib(mode)) == 1);
    }
  }
}

TEST_CASE("a half model's RMSNorm, in float32 between two Casts, moves past the GEMM too", "[fusion][emu]") {
  // The GEMM reads %h itself (the widening Cast is exact; it stays for the sum of squares), the
  // weight folded in; the product is cast to float32, scaled by the row factor and cast back.
  for (const auto& [t, to] : {std::pair<std::string, int>{"f16", 10}, {"bf16", 16}}) {
    INFO(t);
    auto g = rms_mlp(half_norm(to), "", "  output %o\n", t);
    auto original = clone_graph(*g);
    const std::string hoisted = merge_then_hoist(*g);
    INFO(hoisted);
    CHECK(hoisted.find("row scale 'rs' applied to the product, 1 column scale(s) folded") !=
          std::string::npos);
    int matmuls = 0, casts_after = 0;
    for (const auto& n : g->nodes()) {
      CHECK(n->name != "normalize");
      CHECK(n->name != "cast_out");
      if (n->op_type == "Cast" && n->name.find("row_scale_cast") != std::string::npos) ++casts_after;
      if (n->op_type != "MatMul") continue;
      ++matmuls;
      CHECK(n->input(0)->name == "h");
      CHECK(dtype_name(n->output(0)->dtype) == t);
    }
    CHECK(matmuls == 1);
    CHECK(casts_after == 2 * 2);  // two per column part (the gate's and the up projection's)
    // The original rounds the normalized rows and their weighting to the half type before the
    // product, the rewrite the folded weight and the unscaled product: a few steps of the type,
    // relative to the sum of the product's terms rather than to outputs that cancel (up to 39
    // here; measured 3 float16 steps at 22.4, 2 bfloat16 steps at 20), as between a model in a
    // half type and PyTorch.
    same_as_original(*original, *g, 5, t == "f16" ? kModelF16 : kModelBF16);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      auto plan = fusion::make_plan(*g, opts_lib(mode));
      REQUIRE(plan.is_ok());
      INFO(mode << "\n" << fusion::explain(*plan));
      CHECK(plan->cost.kernels == 1);
      CHECK(fused_matches_reference(*g, 9, opts_lib(mode), t == "f16" ? kEmuF16Chain : kEmuBF16Chain) == 1);
    }
  }
}

TEST_CASE("row scales stay in front of GEMMs whose product is read by another GEMM or stored", "[fusion]") {
  uint32_t state = 99;
  const std::string w = lcg_values(state, 16 * 16);
  const std::string consts = "  const %w: f32[16,16] = " + w +
                             "\n  const %gamma: f32[16] = " + lcg_values(state, 16, 0.5) + "\n" +
                             "  const %w5: f32[5,3] = " + lcg_values(state, 15) + "\n";
  auto build = [&](const std::string& body, const std::string& outputs) {
    auto g = parse_or_die(R"(graph "g" opset 17 {
  input %h: f32[2,5,16]
  input %h2: f32[2,5,16]
  input %q: f32[2,5,3]
  input %c: f32[16]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
)" + consts + kRowScale + body +
                          outputs + "}\n");
    run_frontend_or_die(*g);
    return g;
  };
  struct Case {
    const char* what;
    std::string body, outputs;
  };
  const std::vector<Case> cases = {
      {"the product feeds a GEMM of a constant weight through a transpose (its rows summed)",
       "  %xn = Mul(%h, %rs)\n  %y = Mul(%xn, %gamma)\n  %p = MatMul(%y, %w)\n"
       "  %t = Transpose(%p) {perm = ints[0, 2, 1]}\n  %o = MatMul(%t, %w5)\n",
       "  output %o\n"},
      {"the product is a graph output", "  %xn = Mul(%h, %rs)\n  %p = MatMul(%xn, %w)\n", "  output %p\n"},
      {"two values of A's shape",
       "  %xn = Mul(%h, %rs)\n  %x2 = Mul(%xn, %h2)\n  %p = MatMul(%x2, %w)\n  %o = Neg(%p)\n",
       "  output %o\n"},
      {"no row factor", "  %xn = Mul(%h, %gamma)\n  %p = MatMul(%xn, %w)\n  %o = Neg(%p)\n  %o2 = Neg(%rs)\n",
       "  output %o\n  output %o2\n"},
      {"a column factor that is not constant",
       "  %xn = Mul(%h, %rs)\n  %y = Mul(%xn, %c)\n  %p = MatMul(%y, %w)\n  %o = Neg(%p)\n", "  output %o\n"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto g = build(c.body, c.outputs);
    const size_t nodes = g->nodes().size();
    auto hoisted = fusion::hoist_row_scales(*g);
    REQUIRE(hoisted.is_ok());
    CHECK(hoisted->empty());
    CHECK(g->nodes().size() == nodes);
  }
}

TEST_CASE("a row scale moves past a GEMM whose activation others read too, the norm staying for them",
          "[fusion][emu]") {
  uint32_t state = 123;
  const std::string consts = "  const %w: f32[16,16] = " + lcg_values(state, 16 * 16) +
                             "\n  const %gamma: f32[16] = " + lcg_values(state, 16, 0.5) +
                             "\n  const %router: f32[16,4] = " + lcg_values(state, 16 * 4) +
                             "\n  const %experts: f32[16,32] = " + lcg_values(state, 16 * 32) + "\n";
  auto build = [&](const std::string& body, const std::string& outputs) {
    auto g = parse_or_die(R"(graph "g" opset 17 {
  input %h: f32[2,6,16]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
)" + consts + kRowScale + R"(  %xn = Mul(%h, %rs) @"normalized"
  %y = Mul(%xn, %gamma) @"weighted"
)" + body + outputs + "}\n");
    run_frontend_or_die(*g);
    return g;
  };
  SECTION("another reader of the normalized value keeps the norm") {
    auto g = build("  %p = MatMul(%y, %w) @\"mm\"\n  %o = Neg(%p) @\"neg\"\n  %o2 = Neg(%y) @\"other\"\n",
                   "  output %o\n  output %o2\n");
    auto original = clone_graph(*g);
    auto hoisted = fusion::hoist_row_scales(*g);
    REQUIRE(hoisted.is_ok());
    REQUIRE(hoisted->size() == 1);
    INFO(hoisted->front());
    CHECK(hoisted->front().find("node 'mm' (MatMul): row scale 'rs' applied to the product") == 0);
    CHECK(hoisted->front().find(", the norm stays for its other readers") != std::string::npos);
    CHECK(count_op(*g, "ReduceMean") == 1);  // the GEMM's reader computes its row scale from it
    same_as_original(*original, *g, 124);
    CHECK(fused_matches_reference(*g, 125) >= 1);
  }
  SECTION("an MoE router's norm: the router's kernel computes the statistic, beside the norm's") {
    // The normalized activation feeds the router (a projection to 4 experts and its softmax) and
    // the experts' GEMM (SiLU after it). Moved past the router's GEMM, the row scale is computed in
    // the softmax's kernel from the norm's input, so that kernel no longer waits for the norm's:
    // the two share a launch. The GEMMs are library calls, as a real layer's (as loops in one
    // kernel, these small ones need no move: the norm's statistics are an outer reduction there,
    // read in the projections' A operands).
    auto g = build(
        "  %logits = MatMul(%y, %router) @\"router\"\n  %probs = Softmax(%logits) {axis = -1} @\"softmax\"\n"
        "  %e = MatMul(%y, %experts) @\"experts\"\n  %sg = Sigmoid(%e) @\"sigmoid\"\n"
        "  %act = Mul(%e, %sg) @\"silu\"\n",
        "  output %probs\n  output %act\n");
    auto original = clone_graph(*g);
    auto before = fusion::make_plan(*g, opts_lib("beam"));
    REQUIRE(before.is_ok());
    auto kept = fusion::hoist_row_scales_if_cheaper(g, opts_lib("beam"));
    REQUIRE(kept.is_ok());
    INFO(kept->verdict);
    REQUIRE(!kept->lines.empty());
    CHECK(kept->lines.front().find("node 'router' (MatMul): row scale 'rs' applied to the product") == 0);
    same_as_original(*original, *g, 126);
    auto after = fusion::make_plan(*g, opts_lib("beam"));
    REQUIRE(after.is_ok());
    INFO(fusion::explain(*after));
    CHECK(after->cost.launches < before->cost.launches);
    CHECK(after->cost.time < before->cost.time);
    const auto with_softmax = groups_with(*after, {"Softmax", "ReduceMean"});
    CHECK(with_softmax.size() == 1);
    CHECK(plan_matches_reference(*g, *after, 127) >= 1);
  }
}

TEST_CASE("a wide value flattened after the row scale is stored by the row kernel at its own rank",
          "[fusion][emu]") {
  // The scaled product [1, 6, 16] viewed as [6, 16] before its SiLU (an MoE's shared expert reads
  // its rows flattened), the GEMM a library call: the row kernel (rows of 8, the norm's) stores a
  // wide value of rank 2, its coordinates the moved value's own, not the domain's three.
  uint32_t state = 321;
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %h: f32[1,6,8]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %gamma: f32[8] = )" +
                        lcg_values(state, 8, 0.5) + R"(
  const %w: f32[8,16] = )" +
                        lcg_values(state, 8 * 16) + R"(
  const %rows: i64[2] = [6, 16]
)" + std::string(kRowScale) +
                        R"(  %xn = Mul(%h, %rs) @"normalized"
  %y = Mul(%xn, %gamma) @"weighted"
  %p = MatMul(%y, %w) @"mm"
  %f = Reshape(%p, %rows) @"flattened"
  %sg = Sigmoid(%f) @"sigmoid"
  %o = Mul(%f, %sg) @"silu"
  output %o
})");
  run_frontend_or_die(*g);
  auto original = clone_graph(*g);
  auto hoisted = fusion::hoist_row_scales(*g);
  REQUIRE(hoisted.is_ok());
  REQUIRE(hoisted->size() == 1);
  same_as_original(*original, *g, 322);
  uint32_t seed = 323;
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, opts_lib(mode));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    const auto rows = groups_with(*plan, {"ReduceMean", "Sigmoid"});
    REQUIRE(rows.size() == 1);
    CHECK(plan_matches_reference(*g, *plan, seed++) >= 1);
  }
}

TEST_CASE("wide values after a row op: Slices along the row only, never a row split over blocks",
          "[fusion][emu]") {
  // r is one value per row of x (16 wide); p is 40 wide. A Slice along the row after the scale is
  // stitched; one along the rows is not (the row op's result is held for the current row only).
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[6,16]
  input %p: f32[6,40]
  const %s0: i64[1] = [8]
  const %e0: i64[1] = [40]
  const %a1: i64[1] = [1]
  const %s1: i64[1] = [1]
  const %e1: i64[1] = [6]
  const %a0: i64[1] = [0]
  %m = ReduceMax(%x) {axes = ints[1], keepdims = 1} @"row_max"
  %sc = Mul(%p, %m) @"scale"
  %cut = Slice(%sc, %s0, %e0, %a1) @"along_row"
  %e = Exp(%cut) @"exp"
  %down = Slice(%sc, %s1, %e1, %a0) @"along_rows"
  %n = Neg(%down) @"neg"
  output %e
  output %n
}
)");
  run_frontend_or_die(*g);
  std::map<std::string, const Node*> by;
  for (const auto& n : g->nodes()) by[n->name] = n.get();
  auto ok = codegen::analyze_stitch({by["row_max"], by["scale"], by["along_row"], by["exp"]},
                                    {by["exp"]->output(0)});
  INFO(ok.status().message());
  REQUIRE(ok.is_ok());
  CHECK(ok->row);
  CHECK(ok->wide_widths == std::vector<int64_t>{32});  // one store loop of 32 per row over rows of 16
  auto bad = codegen::analyze_stitch({by["row_max"], by["scale"], by["along_rows"], by["neg"]},
                                     {by["neg"]->output(0)});
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("changes the layout of a value computed from a row op") !=
        std::string::npos);
  const codegen::NodeGroups groups{
      {by["row_max"], by["scale"], by["along_row"], by["exp"]}, {by["along_rows"]}, {by["neg"]}};
  // scale is read by the second group too, so the first stores it: a wide value of 40 and one of 32.
  CHECK(emu_matches_reference(*g, &groups, 31) == 3);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    CHECK(fused_matches_reference(*g, 33, mode) >= 1);
  }
}

TEST_CASE(
    "llama_tiny with its row scales moved past the gate/up GEMM: 3 generated kernels and 6 launches per "
    "layer",
    "[fusion][models][emu]") {
  // Per layer: the Q/K/V GEMM, rotary + Q.K^T + mask + softmax, P.V, one kernel with the output
  // projection as a loop, its residual and the second RMSNorm's reduction, the gate/up GEMM of the
  // unscaled norm input, then one kernel with the moved row scale, the SiLU gate (computed once per
  // row into shared memory), the down MatMul as a loop, the residual and the next layer's first
  // RMSNorm. Besides the layers: the embedding's RMSNorm packed with the mask's kernel (Cast,
  // GatherND, And, Where; 3 launches before the GatherND was an index map). (Before MatMuls with a
  // constant weight could join kernels: 5 calls and 8 launches per layer; before A rows were
  // cached, the output GEMM added its residual as its C and the gate/up MatMul was a loop in the
  // second RMSNorm's kernel.) stitchc weighs the move against leaving the scales in place (the
  // same kernels, the norm scaling the GEMM's input); 0.02 us apart in the estimate, it now moves
  // them (test_fusion.cc), and the rewrite is applied here as such. The loops are priced as
  // before loop_step was measured (opts_free_loops): with it, these projections are calls.
  auto g = test::prepared_model("llama_tiny");
  REQUIRE(fusion::merge_sibling_gemms(*g).is_ok());
  auto hoisted = fusion::hoist_row_scales(*g, {}, fusion::NormReaders::kOther);  // the MLPs' norms
  REQUIRE(hoisted.is_ok());
  REQUIRE(hoisted->size() == 2);
  auto plan = fusion::make_plan(*g, opts_free_loops("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(groups_with(*plan, {"ReduceMean", "Sigmoid", "MatMul"}).size() ==
        2);  // one per layer: the gate, the down projection and the next norm in one kernel
  const auto groups = groups_of(*plan);
  const auto packs = packs_of(*plan);
  auto s = codegen::build_schedule(*g, &groups, &packs, plan->gemm_folds);
  REQUIRE(s.is_ok());
  CHECK(s->calls.size() == 2 * 3);
  CHECK(s->kernels.size() == 1 + 2 * 3);
  // Both layers take one layout: the output projection a loop in the second RMSNorm's kernel and
  // the gate/up MatMul a call. (Before the gate's and the up projection's columns were scaled each
  // on their own, the estimate had that layout and the other, the output projection a call adding
  // its residual as its C with the gate/up MatMul a loop, equal, and the search took one each.)
  int residuals = 0;
  for (const auto& c : s->calls) residuals += c.gemm.epilogue == "residual";
  CHECK(residuals == 0);
}

TEST_CASE("wide values are spread over replicas of the rows' blocks, each with its share of every store",
          "[fusion]") {
  // The rule: the row's own mapping, then blocks per block's rows until each thread stores at most
  // 4 elements of the widest value, within 1024 blocks in all; shares are whole multiples of the
  // lanes and cover the width.
  struct Case {
    int64_t rows, cols, width;
    bool warp;
    int64_t replicas, chunk;
  };
  for (const Case& c : {Case{64, 256, 688, true, 6, 128},     // LLaMA's gate at 64 rows: 48 blocks
                        Case{2048, 256, 688, true, 4, 192},   // 256 blocks of rows: 4 replicas fill 1024
                        Case{8192, 256, 688, true, 1, 704},   // enough rows: one block each
                        Case{4, 2048, 8192, false, 8, 1024},  // block per row, 32 elements per thread
                        Case{10, 16, 48, true, 1, 64},        // 2 per thread: no replicas
                        Case{3, 3000, 100000, false, 98, 1024}}) {  // rows that alone would split
    INFO(c.rows << " rows of " << c.cols << ", wide " << c.width);
    codegen::StitchInfo info;
    info.row = true;
    info.rows = c.rows;
    info.cols = c.cols;
    info.wide_widths = {c.width};
    const codegen::RowMapping m = codegen::row_mapping(info);
    CHECK(m.warp_per_row == c.warp);
    CHECK_FALSE(m.split());
    CHECK(m.replicas == c.replicas);
    const int64_t chunk = codegen::wide_chunk(m, c.width);
    CHECK(chunk == c.chunk);
    CHECK(chunk % m.lanes() == 0);
    CHECK(chunk * m.replicas >= c.width);
    CHECK(chunk * (m.replicas - 1) < c.width);  // no replica without a share
  }
}

TEST_CASE("a row kernel with replicas stores every element once: rows' values, per-row values and wide ones",
          "[fusion][emu]") {
  // 5 rows of 24: the softmax over x (two passes and a store pass of the rows' shape, x cached in
  // shared memory), the row max stored once per row, p scaled by it (300 per row) and a Slice of
  // that along the row (283 per row), each wide value stored in shares by 3 replicas.
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[5,24]
  input %p: f32[5,300]
  const %s0: i64[1] = [7]
  const %e0: i64[1] = [290]
  const %a1: i64[1] = [1]
  %sm = Softmax(%x) {axis = 1} @"softmax"
  %m = ReduceMax(%x) {axes = ints[1], keepdims = 1} @"row_max"
  %sc = Mul(%p, %m) @"scale"
  %cut = Slice(%sc, %s0, %e0, %a1) @"along_row"
  %e = Exp(%cut) @"exp"
  output %sm
  output %m
  output %sc
  output %e
}
)");
  run_frontend_or_die(*g);
  const codegen::Kernel k = lower_whole_graph(*g);
  INFO(k.source);
  CHECK(k.grid[0] == 3);  // one block of 8 warps for the 5 rows, 3 replicas (10 elements per thread of 300)
  CHECK(k.source.find("const int rep = (int)((int)blockIdx.x % 3);") != std::string::npos);
  CHECK(k.source.find("j < (rep + 1) * 128 && j < 300") != std::string::npos);  // 300: shares of 128
  CHECK(k.source.find("j < (rep + 1) * 96 && j < 283") != std::string::npos);   // 283: shares of 96
  CHECK(k.source.find("j < (rep + 1) * 32 && j < 24") != std::string::npos);    // the rows: replica 0
  CHECK(k.source.find("if (lane == 0 && rep == 0)") != std::string::npos);      // the row max, once
  CHECK(k.source.find("__shared__ float cache0") != std::string::npos);
  CHECK(one_group_matches_reference(*g, 41));
}

TEST_CASE("RMSNorm and the SiLU gate stay one kernel at 64 rows: replicas fill the GPU", "[fusion][emu]") {
  // The gate/up product is 2 x 160 per row over rows of 16: one block per 8 rows would leave each
  // thread 5 gate elements to store in 8 blocks; 2 replicas per block's rows halve that.
  uint32_t state = 4242;
  const std::string consts = fmt::format(
      "  const %gamma: f32[16] = {}\n  const %wg: f32[16,160] = {}\n  const %wu: f32[16,160] = {}\n",
      lcg_values(state, 16, 0.5), lcg_values(state, 16 * 160), lcg_values(state, 16 * 160));
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %h: f32[2,32,16]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
)" + consts + kDynamoNorm +
                        R"(
  %g = MatMul(%y, %wg) @"gate"
  %u = MatMul(%y, %wu) @"up"
  %sg = Sigmoid(%g) @"sigmoid"
  %si = Mul(%g, %sg) @"silu"
  %o = Mul(%si, %u) @"gated"
  output %o
}
)");
  run_frontend_or_die(*g);
  auto original = clone_graph(*g);
  REQUIRE(fusion::merge_sibling_gemms(*g).is_ok());
  auto hoisted = fusion::hoist_row_scales_if_cheaper(g, opts_lib("beam"));
  REQUIRE(hoisted.is_ok());
  INFO(hoisted->verdict);
  REQUIRE(hoisted->lines.size() == 1);
  same_as_original(*original, *g, 7);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    auto plan = fusion::make_plan(*g, opts_lib(mode));
    REQUIRE(plan.is_ok());
    INFO(mode << "\n" << fusion::explain(*plan));
    CHECK(plan->cost.kernels == 1);
    for (const auto& grp : plan->groups)
      if (grp.nodes.size() > 1) CHECK(grp.mapping.find("2 blocks per 8 rows") != std::string::npos);
    CHECK(fused_matches_reference(*g, 11, opts_lib(mode)) == 1);
  }
}

TEST_CASE("row kernels with replicas compile with nvcc for sm_80 and sm_90 without spills",
          "[fusion][nvcc]") {
  // LLaMA's gate kernel at 64 rows as a graph of inputs: RMSNorm's reduction over 256, its row
  // scale on the gate/up product (1376 per row), the SiLU gate (688 per row), 6 replicas. With a
  // 64-bit share loop ptxas spilled around the division's slow path on sm_90.
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2,32,256]
  input %p: f32[2,32,1376]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %zero: i64[1] = [0]
  const %half: i64[1] = [688]
  const %end: i64[1] = [1376]
  const %axis: i64[1] = [-1]
  %sq = Pow(%x, %two) @"pow"
  %ms = ReduceMean(%sq) {axes = ints[-1], keepdims = 1} @"mean"
  %ve = Add(%ms, %eps) @"add_eps"
  %sd = Sqrt(%ve) @"sqrt"
  %rs = Reciprocal(%sd) @"rsqrt"
  %sc = Mul(%p, %rs) @"row_scale"
  %g = Slice(%sc, %zero, %half, %axis) @"gate"
  %u = Slice(%sc, %half, %end, %axis) @"up"
  %sg = Sigmoid(%g) @"sigmoid"
  %si = Mul(%g, %sg) @"silu"
  %o = Mul(%si, %u) @"gated"
  output %o
}
)");
  run_frontend_or_die(*g);
  const codegen::NodeGroups groups{all_nodes(*g)};
  auto s = codegen::build_schedule(*g, &groups);
  REQUIRE(s.is_ok());
  REQUIRE(s->kernels.size() == 1);
  INFO(s->kernels[0].mapping);
  CHECK(s->kernels[0].grid[0] == 8 * 6);
  const auto dir = compile_without_spills(*g, *s, "replicas");
  std::filesystem::remove_all(dir);
  CHECK(one_group_matches_reference(*g, 23));
}

TEST_CASE("seeded random graphs with wide values: fused equals the reference, ilp equals brute force",
          "[fusion][emu]") {
  // Rows of 16, 37, 770 and 3000 elements (warp and block per row), a per-row statistic of them
  // applied to a wider input (50 to 100000 per row), per-element ops and broadcasts on the wide
  // values, Slices along the row, and sometimes the rows' own values and the statistic stored too:
  // every kind of store a kernel with replicas makes.
  const char* row_shapes[] = {"6,16", "4,37", "37,770", "3,3000"};
  const int64_t widths[] = {50, 1000, 5001, 100000};
  const char* reduce[] = {"ReduceMean", "ReduceMax", "ReduceSum", "ReduceL2"};
  const char* unary[] = {"Relu", "Neg", "Tanh", "Sigmoid"};
  const char* binary[] = {"Add", "Sub", "Mul"};
  std::mt19937 rng(404);
  int wide_groups = 0, replicated = 0;
  for (int trial = 0; trial < 8; ++trial) {
    INFO("trial " << trial);
    const std::string shape = row_shapes[trial % 4];
    const std::string r = shape.substr(0, shape.find(','));
    const int64_t w = widths[(trial / 4 + trial) % 4];
    const int64_t cut0 = static_cast<int64_t>(rng() % 7), cut1 = w - static_cast<int64_t>(rng() % 5);
    std::string text = "graph \"w\" opset 18 {\n";
    text +=
        fmt::format("  input %x: f32[{}]\n  input %p: f32[{},{}]\n  input %q: f32[1,{}]\n", shape, r, w, w);
    text += fmt::format(
        "  const %ax: i64[1] = [-1]\n  const %s0: i64[1] = [{}]\n  const %s1: i64[1] = [{}]\n", cut0, cut1);
    text += fmt::format("  %red = {}(%x, %ax) @\"stat\"\n", reduce[rng() % 4]);
    text += "  %w0 = Mul(%p, %red) @\"scale\"\n";
    text += fmt::format("  %w1 = {}(%w0) @\"u1\"\n", unary[rng() % 4]);
    text += fmt::format("  %w2 = {}(%w1, %q) @\"b2\"\n", binary[rng() % 3]);
    text += "  %w3 = Slice(%w2, %s0, %s1, %ax) @\"along_row\"\n";
    text += fmt::format("  %w4 = {}(%w3) @\"u4\"\n", unary[rng() % 4]);
    text += "  %e = Sub(%x, %red) @\"centre\"\n";
    text += "  output %w4\n";
    if (rng() % 2) text += "  output %w1\n";   // a second width
    if (rng() % 2) text += "  output %e\n";    // the rows' own shape
    if (rng() % 2) text += "  output %red\n";  // one value per row
    text += "}\n";
    INFO(text);
    auto g = parse_or_die(text);
    run_frontend_or_die(*g);
    const size_t kernels = fused_matches_reference(*g, 300 + trial);
    CHECK(kernels < g->nodes().size());
    const AllPlans plans = plans_agree(*g);
    for (const auto& grp : plans.beam.groups) {
      wide_groups += grp.mapping.find("a store loop of") != std::string::npos;
      replicated += grp.mapping.find("blocks per") != std::string::npos;
    }
    // The whole graph as one kernel, whatever the planner chose: every store of a replicated kernel.
    CHECK(one_group_matches_reference(*g, 400 + trial));
  }
  CHECK(wide_groups > 0);  // the planner stitched wide values somewhere...
  CHECK(replicated > 0);   // ...and replicated some rows' blocks
}
