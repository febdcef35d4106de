// Kernels the planner must make for the shapes transformer and CNN exports have: the decomposed
// transformer patterns (layer norm, RMSNorm + SiLU gate, rotary, scale + mask + softmax, bias +
// GELU) one kernel each, a row kernel caching a value several passes read or recomputing it, and
// element kernels moving 4 elements a thread with 128-bit accesses; and ptxas feedback keeping
// node sets apart. All run on the emu backend against the reference interpreter. The planners
// themselves and random graphs: test_fusion.cc; row kernels storing moved values:
// test_moved_rows.cc.
#include <fmt/format.h>

#include "codegen/lower.h"
#include "fusion_test_util.h"
#include "pattern_texts.h"

using namespace stitch;
using namespace stitch::test;

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
const std::string kRmsNormSiluGate = R"(graph "rms" opset 18 {
  input %x: f32[2,16,64]
  input %w: f32[64]
  input %g: f32[2,16,64]
  const %ax: i64[1] = [-1]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
)" + rms_lines("x") + R"(  %sg = Sigmoid(%g) @"sigmoid"
  %si = Mul(%g, %sg) @"silu"
  %o = Mul(%si, %y) @"gate"
  output %o
}
)";
const std::string kRotary = R"(graph "rope" opset 18 {
  input %q: f32[2,16,4,16]
  input %cos: f32[16,16]
  input %sin: f32[16,16]
  const %s0: i64[1] = [0]
  const %s8: i64[1] = [8]
  const %s16: i64[1] = [16]
  const %a3: i64[1] = [3]
  %t = Transpose(%q) {perm = ints[0, 2, 1, 3]} @"transpose"
)" + rotary_lines("a3", 3, "y") +
                            R"(  output %y
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
  uint32_t seed = 60;
  for (const std::string& text : {std::string(kDecomposedLayerNorm), kRmsNormSiluGate, kRotary,
                                  std::string(kScaleMaskSoftmax), std::string(kBiasGelu)}) {
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    INFO(text);
    one_kernel_in_every_planner(*g, seed);
  }
}

TEST_CASE("a row kernel caches a value read by several passes in shared memory, or recomputes it", "[fusion][emu]") {
  auto g = test::parse_or_die(kDecomposedLayerNorm);
  test::run_frontend_or_die(*g);
  const std::vector<const Node*> all = all_nodes(*g);
  std::set<const Value*> stored;
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

TEST_CASE("element kernels move 4 elements per thread with 128-bit accesses when the inner extent allows",
          "[fusion][emu]") {
  struct Case {
    const char* name;
    const char* text;
    int vector_loads;  // float4/int4 loads in the source; -1: not vectorized
    int vector_stores;
  };
  const Case cases[] = {
      // Residual, bias, activation; two stored values. The bias is broadcast over the rows, but
      // its 4 elements under a vector are consecutive: one float4 as well.
      {"residual_bias_relu", R"(graph "g" opset 18 {
  input %x: f32[8,64]
  input %y: f32[8,64]
  input %b: f32[64]
  %s = Add(%x, %y) @"residual"
  %t = Add(%s, %b) @"bias"
  %r = Relu(%t) @"relu"
  output %s
  output %r
})",
       3, 2},
      // Column slices of a merged GEMM's output (SiLU gate): both halves start at a multiple of 4
      // and are read as float4; a slice starting at column 2 is not.
      {"gate_slices", R"(graph "g" opset 18 {
  input %x: f32[2,16,256]
  const %s0: i64[1] = [0]
  const %s1: i64[1] = [128]
  const %s2: i64[1] = [256]
  const %o0: i64[1] = [2]
  const %o1: i64[1] = [130]
  const %ax: i64[1] = [-1]
  %g = Slice(%x, %s0, %s1, %ax) @"gate"
  %u = Slice(%x, %s1, %s2, %ax) @"up"
  %m = Slice(%x, %o0, %o1, %ax) @"odd"
  %sg = Sigmoid(%g) @"sigmoid"
  %a = Mul(%g, %sg) @"silu"
  %b = Mul(%a, %u) @"gated"
  %c = Add(%b, %m) @"plus_odd"
  output %c
})",
       2, 1},
      // int32 in, f16 out: vector loads, scalar stores.
      {"int_to_half", R"(graph "g" opset 18 {
  input %x: i32[3,4,8]
  input %y: i32[3,4,8]
  %s = Add(%x, %y) @"add"
  %h = Cast(%s) {to = 10} @"to_half"
  output %h
})",
       2, 0},
      // A Concat along the inner axis whose boundary (5) falls inside a vector: each lane selects.
      {"concat_inner", R"(graph "g" opset 18 {
  input %x: f32[4,5]
  input %y: f32[4,7]
  input %z: f32[4,12]
  %c = Concat(%x, %y) {axis = 1} @"cat"
  %s = Mul(%c, %z) @"mul"
  output %s
})",
       1, 1},
      // Inner extent 6: one element per thread.
      {"inner_six", R"(graph "g" opset 18 {
  input %x: f32[10,6]
  input %y: f32[10,6]
  %s = Sub(%x, %y) @"sub"
  %e = Exp(%s) @"exp"
  output %e
})",
       -1, 0},
  };
  uint32_t seed = 70;
  for (const Case& c : cases) {
    INFO(c.name);
    auto g = test::parse_or_die(c.text);
    test::run_frontend_or_die(*g);
    const std::vector<const Node*> all = all_nodes(*g);
    const auto users = g->users();
    auto k = codegen::lower_stitched(all, codegen::group_outputs(*g, users, all), 0);
    REQUIRE(k.is_ok());
    INFO(k->source);
    auto count = [&](const std::string& what) {
      size_t hits = 0;
      for (size_t at = k->source.find(what); at != std::string::npos; at = k->source.find(what, at + 1))
        ++hits;
      return static_cast<int>(hits);
    };
    const int loads = count("reinterpret_cast<const float4*>") + count("reinterpret_cast<const int4*>");
    const int stores = count("reinterpret_cast<float4*>") + count("reinterpret_cast<int4*>");
    if (c.vector_loads < 0) {
      CHECK(loads + stores == 0);
      CHECK(k->mapping.find("one thread per element") != std::string::npos);
    } else {
      CHECK(loads == c.vector_loads);
      CHECK(stores == c.vector_stores);
      CHECK(k->mapping.find("one thread per 4 elements") != std::string::npos);
    }
    CHECK(test::one_group_matches_reference(*g, seed++, kEmuF16Output));
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

TEST_CASE("GatherElements and GatherND are index maps inside stitched kernels", "[fusion][emu]") {
  // Exporters build position ids and attention masks with them (RoBERTa's GatherElements over a
  // CumSum, torch.export's GatherND of the padding mask): each used to be a kernel of its own.
  // Constant indices, negative ones among them, each pattern one kernel with its neighbours.
  auto ints = [](int64_t n, auto f) {
    std::string s;
    for (int64_t i = 0; i < n; ++i) s += fmt::format("{}{}", i ? ", " : "", f(i));
    return s;
  };
  const std::string elements =
      fmt::format(R"(graph "ge" opset 18 {{
  input %x: f32[3,37]
  input %w: f32[3,37]
  const %idx: i64[3,37] = [{}]
  %e = Exp(%x) @"exp"
  %y = GatherElements(%e, %idx) {{axis = 1}} @"gather_elements"
  %z = Mul(%y, %w) @"mul"
  output %z
}}
)",
                  ints(3 * 37, [](int64_t i) { return (i * 7 + 3) % 37 - (i % 3 == 0 ? 37 : 0); }));
  const std::string nd = fmt::format(
      R"(graph "gnd" opset 18 {{
  input %x: f32[2,5,6]
  input %r: f32[2,3,6]
  const %idx: i64[2,3,2] = [{}]
  %s = Sigmoid(%x) @"sigmoid"
  %y = GatherND(%s, %idx) @"gather_nd"
  %z = Add(%y, %r) @"add"
  output %z
}}
)",
      ints(12, [](int64_t i) { return i % 2 == 0 ? (i / 2) % 2 : (i * 3) % 5 - 5 * (i % 4 == 1); }));
  const std::string batched = fmt::format(R"(graph "gndb" opset 18 {{
  input %x: f32[2,5,6]
  input %r: f32[2,4,6]
  const %idx: i64[2,4,1] = [{}]
  %t = Tanh(%x) @"tanh"
  %y = GatherND(%t, %idx) {{batch_dims = 1}} @"gather_nd_batched"
  %z = Sub(%y, %r) @"sub"
  output %z
}}
)",
                                          ints(8, [](int64_t i) { return (i * 2) % 5 - (i == 5 ? 5 : 0); }));
  // Along the outer axis of rows of 64: an element kernel of 4 elements a thread.
  const std::string wide =
      fmt::format(R"(graph "gew" opset 18 {{
  input %x: f32[8,64]
  const %idx: i64[8,64] = [{}]
  %e = Neg(%x) @"neg"
  %y = GatherElements(%e, %idx) {{axis = 0}} @"gather_rows"
  %z = Relu(%y) @"relu"
  output %z
}}
)",
                  ints(8 * 64, [](int64_t i) { return (i * 5 + i / 64) % 8 - (i % 7 == 0 ? 8 : 0); }));
  uint32_t seed = 90;
  for (const std::string& text : {elements, nd, batched, wide}) {
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    INFO(text);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      CHECK(fused_matches_reference(*g, seed++, mode) == 1);
    }
    if (text == wide) {  // each of a thread's 4 lanes reads its own index and data element
      const std::vector<const Node*> all = all_nodes(*g);
      auto k = codegen::lower_stitched(all, codegen::group_outputs(*g, g->users(), all), 0);
      REQUIRE(k.is_ok());
      INFO(k->source);
      CHECK(k->mapping.find("one thread per 4 elements") != std::string::npos);
    }
  }
}

TEST_CASE("Tile is an index map inside stitched kernels: before a row op, and along the inner axis",
          "[fusion][emu]") {
  // DiffLlama repeats V's heads with Tile (value_states.repeat): a kernel of its own before. Each
  // output coordinate reads the input at itself modulo the input's extent along a repeated axis.
  // Heads repeated in front of a softmax (rows of 16, kept axes tiled), and an element kernel
  // whose inner axis is tiled (8 -> 24: its 4 lanes read their own elements, not one float4).
  const char* heads = R"(graph "tile_heads" opset 18 {
  input %x: f32[2,3,5,16]
  input %s: f32[2,6,5,16]
  const %rep: i64[4] = [1, 2, 1, 1]
  %e = Exp(%x) @"exp"
  %t = Tile(%e, %rep) @"tile"
  %a = Add(%t, %s) @"add"
  %y = Softmax(%a) {axis = -1} @"softmax"
  output %y
}
)";
  const char* inner = R"(graph "tile_inner" opset 18 {
  input %x: f32[4,1,8]
  input %s: f32[4,3,24]
  const %rep: i64[3] = [1, 3, 3]
  %n = Neg(%x) @"neg"
  %t = Tile(%n, %rep) @"tile"
  %y = Mul(%t, %s) @"mul"
  output %y
}
)";
  uint32_t seed = 140;
  for (const char* text : {heads, inner}) {
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    INFO(text);
    for (const Node* n : all_nodes(*g))
      if (n->op_type == "Tile") CHECK(codegen::stitch_role(*n) == codegen::StitchRole::kLayout);
    one_kernel_in_every_planner(*g, seed);
  }
}

TEST_CASE("Pad is an index map inside stitched kernels in every mode", "[fusion][emu]") {
  // MobileBERT's trigram embedding pads the sequence: a kernel of its own before. Constant (with
  // a fill value, and a negative pad that crops), edge, reflect and wrap, each between element-wise
  // ops and in front of a softmax, one kernel against the reference interpreter.
  struct Case {
    const char* mode;
    const char* pads;
    const char* extra;  // the fill value input, for constant mode
  };
  uint32_t seed = 150;
  for (const Case& c : {Case{"constant", "[0, 1, 2, 0, 2, -1]", ", %fill"},
                        Case{"constant", "[0, 0, 3, 0, 0, 2]", ""}, Case{"edge", "[0, 2, 1, 0, 1, 2]", ""},
                        Case{"reflect", "[0, 2, 3, 0, 2, 3]", ""}, Case{"wrap", "[0, 3, 1, 0, 1, 4]", ""}}) {
    const std::string text = fmt::format(R"(graph "pad" opset 19 {{
  input %x: f32[2,5,7]
  const %pads: i64[6] = {}
  const %fill: f32[] = [-1.5]
  %e = Sigmoid(%x) @"sigmoid"
  %p = Pad(%e, %pads{}) {{mode = "{}"}} @"pad"
  %m = Mul(%p, %p) @"square"
  %y = Softmax(%m) {{axis = -1}} @"softmax"
  output %y
}}
)",
                                         c.pads, c.extra, c.mode);
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    INFO(text);
    for (const Node* n : all_nodes(*g))
      if (n->op_type == "Pad") CHECK(codegen::stitch_role(*n) == codegen::StitchRole::kLayout);
    one_kernel_in_every_planner(*g, seed);
  }
}
