// Fusion: the planners on the shipped models (launch counts that must not grow, beam never worse
// than greedy, ILP equal to brute force), stitched kernels on seeded random graphs of
// memory-intensive ops (per-element, layout, row ops; odd shapes and every broadcast kind) run on
// the emu backend against the reference interpreter. The transformer patterns the planner must
// put in one kernel each and 128-bit element kernels: test_stitch_patterns.cc. Independent
// packing and GEMM folds: test_packs_and_folds.cc and test_gemm_folds.cc.
#include <fmt/format.h>

#include <random>

#include "codegen/lower.h"
#include "codegen/node_facts.h"
#include "codegen/scalar_ops.h"
#include "fusion/gemm_matmul.h"
#include "fusion/hoist_scales.h"
#include "fusion/merge_gemms.h"
#include "fusion/output_copies.h"
#include "fusion/split_slices.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("planners on the shipped models: launch counts do not grow, beam >= greedy, ilp >= beam", "[fusion][models]") {
  // Unfused counts are 61, 94, 104 and 17 (test_codegen.cc); these are beam's counts with
  // independent packing, GEMM calls taking over bias adds, head transposes and scalings
  // (find_gemm_folds), Gemm biases in the epilogue, GPT-2's tanh-form GELU in cuBLASLt's GELU
  // epilogue and Split stitched (without these: 21, 28, 20, 12; gpt2_tiny 9 before the GELU epilogue),
  // and attention's Q.K^T stitched into its softmax kernel in bert_tiny and llama_tiny (llama_tiny
  // 12 before). Launches, kernels and library calls together: since MatMuls with a constant weight
  // may join kernels too, bert_tiny runs every MatMul in a kernel (13 kernels + its pooler's Gemm;
  // before, 11 kernels + 13 calls) and llama_tiny every MatMul (14 kernels, no call); gpt2_tiny
  // (Gemms) and cnn_small as before. The half-precision models (2026-11-24): gpt2_tiny_f16, from the
  // torch.export exporter, 21 launches here and 11 kernels + 2 calls after the rewrites (below);
  // llama_tiny_bf16 13, as llama_tiny. llama_tiny_dec, one decoding step (2026-11-24): 11, every
  // MatMul a loop at 2 rows; 13 since its one-token heads-first Transposes are Reshapes
  // (relabel_transposes, 2026-11-25): beam joins Q's views and scale to the softmax kernel first,
  // so the Q projection is left a call (67.0 against 62.1 us estimated). With the rewrites stitchc
  // runs (the next test) it stays at 7 + 4 and 59.8 us. seg_small (2026-11-25): 14, 8 kernels and
  // its 6 convolutions. Since a fine-grained GEMM's loop pays for its steps (loop_step, measured on
  // an H100 on 2026-11-25, where these loops ran slower than the calls), the projections of the
  // raw graphs are calls again: bert_tiny 26, llama_tiny and llama_tiny_bf16 25, llama_tiny_dec 19
  // (Q.K^T stays in the softmax kernels).
  const std::map<std::string, size_t> most = {
      {"bert_tiny", 26},     {"gpt2_tiny", 19},       {"llama_tiny", 25},     {"cnn_small", 21},
      {"gpt2_tiny_f16", 21}, {"llama_tiny_bf16", 25}, {"llama_tiny_dec", 19}, {"seg_small", 14}};
  for (const auto& [name, limit] : most) {
    INFO(name);
    auto g = test::prepared_model(name);
    std::map<std::string, double> cost;
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      auto plan = fusion::make_plan(*g, opts(mode));
      REQUIRE(plan.is_ok());
      cost[mode] = plan->cost.time;
      // >= 2x less traffic (transformers over a sequence; a decoding step's traffic is its weights
      // and its cache, which fusion does not remove, and here its GEMM loops read the weights)
      if (name != "cnn_small" && name != "llama_tiny_dec") CHECK(plan->cost.bytes * 2 <= plan->unfused.bytes);
      const auto groups = groups_of(*plan);
      const auto packs = packs_of(*plan);
      size_t nodes = 0;
      for (const auto& grp : groups) nodes += grp.size();
      CHECK(nodes == g->nodes().size());  // every node exactly once
      auto s = codegen::build_schedule(*g, &groups, &packs, plan->gemm_folds);
      REQUIRE(s.is_ok());
      CHECK(static_cast<int>(s->kernels.size()) == plan->cost.kernels);
      if (std::string(mode) != "greedy") CHECK(s->kernels.size() + s->calls.size() <= limit);
      Status st = verify_memory_plan(s->requests, s->plan);
      CHECK(st.is_ok());
    }
    CHECK(cost["beam"] <= cost["greedy"] + 1e-12);
    CHECK(cost["ilp"] <= cost["beam"] + 1e-12);
  }
}

TEST_CASE("a node's remembered facts are the ones it has, and an inner scope leaves the outer one open",
          "[fusion]") {
  for (const char* name : {"bert_tiny", "llama_tiny", "cnn_small"}) {
    INFO(name);
    auto g = test::prepared_model(name);
    std::vector<codegen::StitchRole> roles;
    std::vector<int> instructions;
    for (const auto& n : g->nodes()) {
      roles.push_back(codegen::stitch_role(*n));
      instructions.push_back(codegen::op_instructions(*n));
    }
    const codegen::NodeFactsScope outer;
    {
      const codegen::NodeFactsScope inner;
      for (size_t i = 0; i < g->nodes().size(); ++i) {
        CHECK(codegen::stitch_role(*g->nodes()[i]) == roles[i]);
        CHECK(codegen::op_instructions(*g->nodes()[i]) == instructions[i]);
      }
    }
    for (size_t i = 0; i < g->nodes().size(); ++i) {  // from memory now
      CHECK(codegen::stitch_role(*g->nodes()[i]) == roles[i]);
      CHECK(codegen::op_instructions(*g->nodes()[i]) == instructions[i]);
    }
  }
  // Kept by address while the outer scope is open (so a graph must not change then), forgotten after.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[4,8]
  %a = Relu(%x) @"a"
  output %a
}
)");
  test::run_frontend_or_die(*g);
  Node& a = *g->nodes()[0];
  const int relu = codegen::op_instructions(a);
  {
    const codegen::NodeFactsScope outer;
    CHECK(codegen::op_instructions(a) == relu);
    { const codegen::NodeFactsScope inner; }
    a.op_type = "Exp";
    CHECK(codegen::op_instructions(a) == relu);
  }
  CHECK(codegen::op_instructions(a) == relu + 10);  // expf: 10 instructions (scalar_ops.h)
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

TEST_CASE("views do not count toward the group size cap", "[fusion]") {
  // Three element-wise nodes with views between them: a cap of 3 holds the five nodes in one
  // kernel (a view emits no code in a kernel); a cap of 1 leaves each element-wise node a kernel
  // of its own, and greedy's reason says what the cap counts.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[4,8]
  const %flat: i64[1] = [32]
  const %first: i64[1] = [0]
  %a = Relu(%x) @"a"
  %r = Reshape(%a, %flat) @"r"
  %b = Neg(%r) @"b"
  %u = Unsqueeze(%b, %first) @"u"
  %c = Abs(%u) @"c"
  output %c
}
)");
  test::run_frontend_or_die(*g);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto three = fusion::make_plan(*g, opts(mode, {}, 3));
    REQUIRE(three.is_ok());
    const auto groups = groups_of(*three);
    REQUIRE(groups.size() == 1);
    CHECK(groups[0].size() == 5);
    auto one = fusion::make_plan(*g, opts(mode, {}, 1));
    REQUIRE(one.is_ok());
    CHECK(one->cost.kernels == 3);
    if (std::string(mode) == "greedy")  // beam's boundaries here are views, named as such
      CHECK(fusion::explain(*one).find("exceed --max-group-size 1 (nodes other than views)") !=
            std::string::npos);
  }
}

TEST_CASE("a merge that would make a cycle is rejected", "[fusion]") {
  // c reads a and m, and m reads a through a library call: fusing a with c would need the GEMM
  // both before and after the group. (A Mul: an Add would be the GEMM's residual, folded.)
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[4,8]
  input %w: f32[8,8]
  %a = Relu(%x) @"a"
  %m = MatMul(%a, %w) @"m"
  %c = Mul(%a, %m) @"c"
  output %c
}
)");
  test::run_frontend_or_die(*g);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    auto plan = fusion::make_plan(*g, opts_lib(mode));
    REQUIRE(plan.is_ok());
    CHECK(plan->groups.size() == 3);
    CHECK(fusion::explain(*plan).find("a cycle") != std::string::npos);
  }
  fused_matches_reference(*g, 3, opts_lib("beam"));
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

TEST_CASE(
    "row kernels: prologues into softmax and layer norm, per-row epilogues, a column reduction with its "
    "prologue",
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
  int regional = 0, global = 0, columns = 0;
  for (const auto& grp : plan->groups) {
    regional += grp.scheme == "regional";
    global += grp.scheme == "global";
    columns += grp.mapping.rfind("tiled columns", 0) == 0;
  }
  CHECK(regional == 3);
  CHECK(global == 1);
  CHECK(columns == 1);
  // scale+mask+softmax+isnan+where (3 x 100000: each row split over blocks, a grid barrier after
  // each reduction); bias+residual+LN (37 x 770: warp per row); square+mean+eps+sqrt+recip+neg
  // (two per-row outputs); tanh+column sum (1000 x 37: tiled columns). Four groups; the three
  // with 256-thread blocks share a launch (two in all).
  CHECK(plan->groups.size() == 4);
  CHECK(plan->cost.kernels == 2);
  CHECK(fused_matches_reference(*g, 40) == 2);
}

TEST_CASE("the cost of a column reduction counts its loop over each segment, split over a tile's threads",
          "[fusion][cost]") {
  auto d = fusion::device_spec("sm_90");
  REQUIRE(d.is_ok());
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[1000,37]
  input %w: f32[100,20000]
  const %a0: i64[1] = [0]
  %s = ReduceSum(%x, %a0) @"tiled"
  %t = ReduceSum(%w, %a0) @"thread_each"
  output %s
  output %t
}
)");
  test::run_frontend_or_die(*g);
  auto tiled = codegen::segment_shape(*g->nodes()[0]);
  auto each = codegen::segment_shape(*g->nodes()[1]);
  REQUIRE(tiled.is_ok());
  REQUIRE(each.is_ok());
  CHECK(tiled->tiled);
  CHECK(tiled->lanes == 8);
  CHECK(tiled->threads == 2 * codegen::kTileBlock);
  CHECK_FALSE(each->tiled);
  CHECK(each->threads == 20000);
  // 1000 rows over 8 threads, 4 loads in flight: 32 round trips and the combine; 100 rows on one
  // thread: 25 round trips.
  const fusion::Cost ct = fusion::single_cost(*g->nodes()[0], *d);
  const fusion::Cost ce = fusion::single_cost(*g->nodes()[1], *d);
  CHECK(ct.time >= d->launch + 33 * d->latency);
  CHECK(ct.time < d->launch + 34 * d->latency + 1e-6);
  CHECK(ce.time >= d->launch + 25 * d->latency);
}

TEST_CASE(
    "seeded random graphs with layout, row and column ops: fused equals the reference, ilp equals brute "
    "force",
    "[fusion][emu]") {
  // Rows of 1, 37, 770 and 3000 elements (thread-, warp- and block-per-row), broadcasts of every
  // kind into them, transposes and slices in front of the row ops, per-row epilogues after them;
  // column reductions and softmax down the columns (tiled column kernels) among them.
  const char* row_shapes[] = {"5,1", "4,37", "37,770", "3,3000"};
  const char* unary[] = {"Relu", "Neg", "Tanh", "Sigmoid", "Exp"};
  const char* binary[] = {"Add", "Sub", "Mul", "Max"};
  const char* rows[] = {"Softmax", "ReduceMean", "ReduceMax", "ReduceSum", "LogSoftmax"};
  std::mt19937 rng(77);
  int column_groups = 0;
  for (int trial = 0; trial < 8; ++trial) {
    INFO("trial " << trial);
    const std::string shape = row_shapes[trial % 4];
    const std::string r = shape.substr(0, shape.find(',')), c = shape.substr(shape.find(',') + 1);
    std::string text = "graph \"r\" opset 18 {\n";
    text += fmt::format("  input %x: f32[{},{}]\n  input %xt: f32[{},{}]\n  input %col: f32[1,{}]\n  input %row: f32[{},1]\n", r, c, c, r, c, r);
    text += "  input %one: f32[1]\n  const %ax: i64[1] = [-1]\n  const %ax0: i64[1] = [0]\n";
    text += "  %t = Transpose(%xt) {perm = ints[1, 0]} @\"tr\"\n";
    std::vector<std::string> full = {"%x", "%t"};
    std::vector<std::string> bcast = {"%col", "%row", "%one"};
    std::vector<std::string> outs;
    for (int k = 0; k < 7; ++k) {
      const std::string v = fmt::format("%v{}", k);
      const std::string a = full[rng() % full.size()];
      switch (rng() % 5) {
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
        case 3: {  // down the columns: a column op's per-column value broadcast back over the rows
          const std::string op = rows[rng() % 5];
          if (op == "Softmax" || op == "LogSoftmax") {
            text += fmt::format("  {} = {}({}) {{axis = 0}} @\"n{}\"\n", v, op, a, k);
          } else {
            const std::string red = fmt::format("%red{}", k);
            text += fmt::format("  {} = {}({}, %ax0) @\"n{}\"\n", red, op, a, k);
            text += fmt::format("  {} = Sub({}, {}) @\"e{}\"\n", v, a, red, k);
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
    const AllPlans plans = plans_agree(*g);
    for (const auto& grp : plans.beam.groups) column_groups += grp.mapping.rfind("tiled columns", 0) == 0;
  }
  CHECK(column_groups > 0);  // the column ops joined stitched groups somewhere
}

TEST_CASE("launches of the shipped models as stitchc compiles them (sibling GEMMs merged) do not grow",
          "[fusion][models]") {
  // Kernels + library calls: bert_tiny 10 + 2 (a layer: 4 kernels and FFN1's GEMM with its bias:
  // Q/K/V + bias + Q.K^T + mask + softmax; P.V; output projection + residual + LN; erf GELU +
  // FFN2 + residual + LN, the GELU row computed once into shared memory; the pooler's Gemm, as a
  // MatMul, in one kernel with its first-token Slice, once a Gather, and Tanh), gpt2_tiny 7 + 6 (3 kernels, 3
  // GEMMs: its Gemms as MatMuls, the attention and MLP output projections inside the layer-norm kernels;
  // Q/K/V Split as Slices, Q.K^T inside the softmax kernel), llama_tiny 7 + 6 (a layer: 3
  // kernels, 3 GEMMs: Q/K/V, P.V and, in one layer gate/up, in the other the output projection;
  // the SiLU gate and the down GEMM inside the next RMSNorm's kernel, the gate's row computed
  // once into shared memory; the mask's Cast, GatherND, And and Where one kernel, packed with the
  // embedding's RMSNorm: 9 + 6 while the GatherND was a kernel of its own), cnn_small 11 + 9 (the
  // classifier's Gemm and bias in the kernel of the Softmax after it). (Before fine-grained GEMMs cached
  // their A rows: bert_tiny 14 + 0, each FFN a loop in a kernel, and llama_tiny with its row scale moved past
  // the gate/up GEMM, the gate/up a loop in the norm's kernel. Before Gemms became MatMuls: bert_tiny 15 + 1,
  // gpt2_tiny 7 + 10, cnn_small 11 + 10; before MatMuls with a constant weight could join kernels: bert_tiny
  // 11 + 11, llama_tiny 9 + 10; before Q.K^T was stitched: bert_tiny 11 + 13, llama_tiny 12 + 12; before the
  // row scale moved, llama_tiny 11 + 10; before the Split became Slices, gpt2_tiny 7 + 12.)
  // The half-precision models: gpt2_tiny_f16 (torch.export's Gemms, Q/K/V a Split) 11 + 2, and
  // llama_tiny_bf16 7 + 6, its RMSNorms (in float32 between two Casts) moved like llama_tiny's
  // (57.1 -> 56.8 us estimated; 7 + 6 before too). llama_tiny_dec, one decoding step of llama_tiny
  // (2026-11-24): 7 + 4, a layer 3 kernels (the cache appends packed with the attention kernel,
  // which computes the present keys again; P.V and the output projection as loops with the
  // residual and RMSNorm; the SiLU gate with the down projection as a loop, the residual and the
  // next RMSNorm) and 2 calls (Q/K/V, gate/up). seg_small (2026-11-25): 8 + 6, its convolutions the
  // calls; each Resize (Gathers and weighted sums) in one kernel with the ops around it, the last
  // two and the class softmax in one.
  // Since loop_step (2026-11-25: on an H100 the loops above were slower than library calls, the
  // decoding step's gate/up loop 95 us against 14 us; bench/gpu/results/2026-11-25-h100), every
  // projection is a call: bert_tiny 10 + 11, gpt2_tiny 7 + 10, gpt2_tiny_f16 9 + 10, llama_tiny,
  // llama_tiny_bf16 and llama_tiny_dec 7 + 10 (3 kernels and 5 calls per layer; Q.K^T still in the
  // softmax kernels); cnn_small and seg_small as they were.
  const std::map<std::string, std::pair<size_t, size_t>> most = {
      {"bert_tiny", {10, 11}},     {"gpt2_tiny", {7, 10}},     {"llama_tiny", {7, 10}},
      {"cnn_small", {11, 9}},      {"gpt2_tiny_f16", {9, 10}}, {"llama_tiny_bf16", {7, 10}},
      {"llama_tiny_dec", {7, 10}}, {"seg_small", {8, 6}}};
  for (const auto& [name, limit] : most) {
    INFO(name);
    auto g = test::prepared_model(name);
    auto gemms = fusion::gemms_as_matmuls_if_cheaper(g, opts("beam"));
    REQUIRE(gemms.is_ok());
    const bool gpt2 = name.starts_with("gpt2_tiny"), llama = name.starts_with("llama_tiny");
    // bert_tiny's pooler Gemm and cnn_small's classifier; seg_small has none
    CHECK(gemms->lines.size() == (gpt2 ? 8u : llama || name == "seg_small" ? 0u : 1u));
    auto merged = fusion::merge_sibling_gemms(*g);
    REQUIRE(merged.is_ok());
    auto sliced = fusion::split_to_slices_if_cheaper(g, opts("beam"));
    REQUIRE(sliced.is_ok());
    // gpt2_tiny's two Q/K/V Splits; bert_tiny's pooler Gather of the first token
    CHECK(sliced->lines.size() == (gpt2 ? 2u : name == "bert_tiny" ? 1u : 0u));
    auto hoisted = fusion::hoist_row_scales_if_cheaper(g, opts("beam"));
    REQUIRE(hoisted.is_ok());
    // The RMSNorms in front of the gate/up GEMMs move in llama_tiny, llama_tiny_bf16 and
    // llama_tiny_dec (their norm and the SiLU gate then one kernel: 75.8 against 83.6 us estimated
    // for the decoding step); llama_tiny's in front of Q/K/V move too, for attention (67.0 against
    // 68.0 us). (Before loop_step: llama_tiny's and llama_tiny_bf16's gate/up norms only, 0.02 and
    // 0.3 us ahead, the decoding step's none.)
    CHECK(hoisted->lines.size() == (name == "llama_tiny" ? 4u : llama ? 2u : 0u));
    // A decoding step's present keys: the attention kernel computes them again, and packs with
    // the cache append; its present values are read by P.V's call and not copied.
    auto outputs = fusion::copy_output_cones_if_cheaper(g, opts("beam"));
    REQUIRE(outputs.is_ok());
    CHECK(outputs->lines.size() == (name == "llama_tiny_dec" ? 2u : 0u));
    for (const std::string& line : outputs->lines) CHECK(line.find("present_key_") != std::string::npos);
    auto plan = fusion::make_plan(*g, opts("beam"));
    REQUIRE(plan.is_ok());
    const auto groups = groups_of(*plan);
    const auto packs = packs_of(*plan);
    auto s = codegen::build_schedule(*g, &groups, &packs, plan->gemm_folds);
    REQUIRE(s.is_ok());
    CHECK(s->kernels.size() <= limit.first);
    CHECK(s->calls.size() <= limit.second);
  }
}
