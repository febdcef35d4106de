// Row kernels that store values moved after the row op: a per-head norm with its head transpose
// and rotary embedding (Qwen3's Q/K path), Transposes after a row op, a row split over blocks whose
// rows are reshaped and transposed, a scaled projection's heads split and transposed, and seeded
// random chains of such moves (the tokens flattened among them). Each must be one stitched kernel;
// all run on the emu backend against the reference interpreter. The other
// transformer and CNN patterns: test_stitch_patterns.cc.
#include <fmt/format.h>

#include <random>

#include "codegen/lower.h"
#include "fusion_test_util.h"
#include "pattern_texts.h"

using namespace stitch;
using namespace stitch::test;
namespace {

// Qwen3's query path: an RMSNorm over each head's 16 values, the head transpose, then the rotary
// embedding (halves swapped along the head dimension). `perm` is the transpose; `rot_axis` the
// axis the halves are cut along.
std::string qk_norm_rotary(const char* perm, int rot_axis, const char* q_dims = "2,6,4,16",
                           const char* trig_dims = "6,16") {
  return fmt::format(R"(graph "qk_norm" opset 18 {{
  input %q: f32[{0}]
  input %w: f32[16]
  input %cos: f32[{1}]
  input %sin: f32[{1}]
  const %ax: i64[1] = [-1]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %s0: i64[1] = [0]
  const %s8: i64[1] = [8]
  const %s16: i64[1] = [16]
  const %ar: i64[1] = [{3}]
{4}  %t = Transpose(%y) {{perm = ints[{2}]}} @"transpose"
{5}  output %o
}}
)",
                     q_dims, trig_dims, perm, rot_axis, rms_lines("q"), rotary_lines("ar", rot_axis, "o"));
}

}  // namespace

TEST_CASE("a per-head norm, its head transpose and the rotary embedding after it are one row kernel",
          "[fusion][emu]") {
  auto g = test::parse_or_die(qk_norm_rotary("0, 2, 1, 3", 3));
  test::run_frontend_or_die(*g);
  auto info = whole_graph_info(*g);
  const std::vector<const Node*> all = all_nodes(*g);
  const std::set<const Value*> out(g->outputs.begin(), g->outputs.end());
  CHECK(info.row);
  CHECK(info.wide_widths.empty());
  REQUIRE(info.permuted.count(g->outputs[0]) == 1);
  CHECK(info.permuted.at(g->outputs[0]) == std::vector<codegen::RowPiece>{{0, 1}, {2, 1}, {1, 1}, {3, 1}});
  CHECK(info.full_row(g->outputs[0]));
  auto k = codegen::lower_stitched(all, out, 0);
  REQUIRE(k.is_ok());
  INFO(k->source);
  CHECK(k->mapping.find("the rows moved by a Transpose") != std::string::npos);
  uint32_t seed = 120;
  one_kernel_in_every_planner(*g, seed);
}

TEST_CASE("a Transpose after a row op whose kept axes have one extent stores the moved rows",
          "[fusion][emu]") {
  // 4 x 4 kept axes: the transposed value has the domain's dims, so only the frame says its rows
  // are elsewhere; a Softmax of it reduces other rows than the norm's and stays apart.
  const std::string square = qk_norm_rotary("0, 2, 1, 3", 3, "2,4,4,16", "4,16");
  auto g = test::parse_or_die(square);
  test::run_frontend_or_die(*g);
  CHECK(one_group_matches_reference(*g, 131));
  const std::string softmax_after = R"(graph "sq" opset 18 {
  input %x: f32[2,4,4,8]
  %a = Softmax(%x) {axis = -1} @"first"
  %t = Transpose(%a) {perm = ints[0, 2, 1, 3]} @"transpose"
  %b = Softmax(%t) {axis = -1} @"second"
  output %b
}
)";
  auto g2 = test::parse_or_die(softmax_after);
  test::run_frontend_or_die(*g2);
  const std::vector<const Node*> all = all_nodes(*g2);
  auto bad = codegen::analyze_stitch(all, {g2->outputs[0]});
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("reduces a value computed from a row op through a Transpose") !=
        std::string::npos);
  uint32_t seed = 132;
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    CHECK(fused_matches_reference(*g2, seed++, mode) == 2);
  }
}

// A per-head norm, the head transpose and the interleaved rotary embedding (GPT-J's, ERNIE 4.5's: the
// even and odd elements of each head rotated as pairs, stacked along a new axis `pair_axis` of the
// [2, 4, 6, 8] halves, then viewed as [2, 4, 6, 16]).
std::string qk_norm_interleaved(int pair_axis) {
  const std::string pairs = pair_axis == 4 ? "2,4,6,8,1" : "2,4,6,1,8";
  return fmt::format(R"(graph "interleaved" opset 18 {{
  input %q: f32[2,6,4,16]
  input %w: f32[16]
  input %cos: f32[6,8]
  input %sin: f32[6,8]
  const %ax: i64[1] = [-1]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %s0: i64[1] = [0]
  const %s1: i64[1] = [1]
  const %s16: i64[1] = [16]
  const %a3: i64[1] = [3]
  const %st2: i64[1] = [2]
  const %pa: i64[1] = [{0}]
  const %heads: i64[4] = [2, 4, 6, 16]
{1}  %t = Transpose(%y) {{perm = ints[0, 2, 1, 3]}} @"transpose"
  %ev = Slice(%t, %s0, %s16, %a3, %st2) @"even"
  %od = Slice(%t, %s1, %s16, %a3, %st2) @"odd"
  %ec = Mul(%ev, %cos) @"even_cos"
  %os = Mul(%od, %sin) @"odd_sin"
  %re = Sub(%ec, %os) @"real"
  %es = Mul(%ev, %sin) @"even_sin"
  %oc = Mul(%od, %cos) @"odd_cos"
  %im = Add(%es, %oc) @"imag"
  %re1 = Unsqueeze(%re, %pa) @"real_pairs"
  %im1 = Unsqueeze(%im, %pa) @"imag_pairs"
  %pr = Concat(%re1, %im1) {{axis = {0}}} @"pairs"
  %o = Reshape(%pr, %heads) @"interleave"
  output %o
}}
)",
                     pair_axis, rms_lines("q"));
}

TEST_CASE("a per-head norm, its head transpose and the interleaved rotary embedding are one row kernel",
          "[fusion][emu]") {
  // The pairs' Concat stacks the halves along a new innermost axis: element (j, p) of a head's pairs
  // is its element 2 j + p, so the pairs hold whole rows moved, which the view back to 16 values
  // shares. `pairs_info` analyzes the nodes up to the pairs, storing them.
  auto pairs_info = [](const Graph& g) {
    std::vector<const Node*> nodes;
    const Value* pairs = nullptr;
    for (const Node* n : all_nodes(g)) {
      if (n->name == "interleave") continue;
      nodes.push_back(n);
      if (n->name == "pairs") pairs = n->output(0);
    }
    return std::make_pair(codegen::analyze_stitch(nodes, {pairs}), pairs);
  };
  auto g = test::parse_or_die(qk_norm_interleaved(4));
  test::run_frontend_or_die(*g);
  auto [info, pairs] = pairs_info(*g);
  INFO(info.status().message());
  REQUIRE(info.is_ok());
  REQUIRE(info->permuted.count(pairs) == 1);
  CHECK(info->permuted.at(pairs) == std::vector<codegen::RowPiece>{{0, 1}, {2, 1}, {1, 1}, {3, 2}, {3, 1}});
  uint32_t seed = 150;
  one_kernel_in_every_planner(*g, seed);
  // Stacked along a new axis outside the halves ([re; im], as a non-interleaved rotation), the
  // Concat's axis is not the row's innermost piece: it stays out of the kernel, as before.
  auto h = test::parse_or_die(qk_norm_interleaved(3));
  test::run_frontend_or_die(*h);
  auto [bad, unused] = pairs_info(*h);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find(
            "node 'pairs' (Concat) changes the layout of a value computed from a row op "
            "in the group along axis 3, across rows") != std::string::npos);
  CHECK(fused_matches_reference(*h, seed, "beam") >= 2);
}

TEST_CASE(
    "after a row op, Transposes that move the row axis and Concats across rows stay out of the row kernel",
    "[fusion]") {
  struct Case {
    std::string text, why;
  };
  const std::vector<Case> cases = {
      // The head dimension moved in front of the sequence: rows would not stay contiguous.
      {qk_norm_rotary("0, 1, 3, 2", 2, "2,6,4,16", "16,4"), "moves the innermost axis"},
      // Halves cut along the heads (a kept axis): another row's values.
      {qk_norm_rotary("0, 2, 1, 3", 1, "2,6,16,16", "6,16"), "across rows"},
  };
  for (const Case& c : cases) {
    auto g = test::parse_or_die(c.text);
    test::run_frontend_or_die(*g);
    INFO(c.text);
    const std::vector<const Node*> all = all_nodes(*g);
    auto bad = codegen::analyze_stitch(all, {g->outputs[0]});
    REQUIRE_FALSE(bad.is_ok());
    INFO(bad.status().message());
    CHECK(bad.status().message().find(c.why) != std::string::npos);
    CHECK(fused_matches_reference(*g, 140, "beam") >= 2);
  }
}

TEST_CASE(
    "a norm over all heads, the Reshape into heads, their transpose and the rotary embedding are one row "
    "kernel",
    "[fusion][emu]") {
  // OLMo2's query path: the RMSNorm runs over the whole projection (4 heads of 16), then the
  // heads are split off, moved in front of the sequence and rotated. The stored value's axes are
  // (batch, a piece of the row, sequence, a piece of the row).
  auto text = [](const char* shape) {
    return fmt::format(R"(graph "olmo2_q" opset 18 {{
  input %q: f32[2,6,64]
  input %w: f32[64]
  input %cos: f32[6,16]
  input %sin: f32[6,16]
  const %ax: i64[1] = [-1]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %heads: i64[4] = [{0}]
  const %s0: i64[1] = [0]
  const %s8: i64[1] = [8]
  const %s16: i64[1] = [16]
  const %a3: i64[1] = [3]
{1}  %h = Reshape(%y, %heads) @"view"
  %t = Transpose(%h) {{perm = ints[0, 2, 1, 3]}} @"transpose"
{2}  output %o
}}
)",
                       shape, rms_lines("q"), rotary_lines("a3", 3, "o"));
  };
  auto g = test::parse_or_die(text("2, 6, 4, 16"));
  test::run_frontend_or_die(*g);
  auto info = whole_graph_info(*g);
  REQUIRE(info.permuted.count(g->outputs[0]) == 1);
  // batch, the heads (the row's coordinate / 16), sequence, the head's features.
  CHECK(info.permuted.at(g->outputs[0]) == std::vector<codegen::RowPiece>{{0, 1}, {2, 16}, {1, 1}, {2, 1}});
  uint32_t seed = 150;
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    CHECK(fused_matches_reference(*g, seed++, mode) == 1);
  }
  CHECK(one_group_matches_reference(*g, seed++));
  // A Reshape merging the sequence (kept) into the row is not a move of rows.
  auto g2 = test::parse_or_die(R"(graph "merge" opset 18 {
  input %x: f32[2,6,64]
  const %flat: i64[2] = [2, 384]
  %s = Softmax(%x) {axis = -1} @"softmax"
  %f = Reshape(%s, %flat) @"flatten"
  %n = Neg(%f) @"neg"
  output %n
}
)");
  test::run_frontend_or_die(*g2);
  auto bad = codegen::analyze_stitch(all_nodes(*g2), {g2->outputs[0]});
  REQUIRE_FALSE(bad.is_ok());
  INFO(bad.status().message());
  CHECK(bad.status().message().find("changes the layout of a value computed from a row op") !=
        std::string::npos);
  CHECK(fused_matches_reference(*g2, seed++, "beam") == 2);
}

TEST_CASE("a row split over blocks stores its rows moved by a Reshape and a Transpose", "[fusion][emu]") {
  // 3 rows of 20000 (global stitching: each row split over blocks, a grid barrier per pass); the
  // softmax's rows cut into 4 pieces of 5000 that move in front of the rows.
  auto g = test::parse_or_die(R"(graph "split_moved" opset 18 {
  input %x: f32[3,20000]
  const %pieces: i64[3] = [3, 4, 5000]
  %p = Softmax(%x) {axis = -1} @"softmax"
  %r = Reshape(%p, %pieces) @"pieces"
  %t = Transpose(%r) {perm = ints[1, 0, 2]} @"pieces_first"
  %y = Neg(%t) @"neg"
  output %y
}
)");
  test::run_frontend_or_die(*g);
  const std::vector<const Node*> all = all_nodes(*g);
  auto k = codegen::lower_stitched(all, {g->outputs[0]}, 0);
  INFO(k.status().message());
  REQUIRE(k.is_ok());
  INFO(k->source);
  CHECK(k->scheme == "global");
  CHECK(k->mapping.find("the rows moved by a Transpose or Reshape") != std::string::npos);
  CHECK(one_group_matches_reference(*g, 160));
  CHECK(fused_matches_reference(*g, 161, "beam") == 1);
}

TEST_CASE("a row kernel stores wide values moved: a scaled projection's heads, split and transposed",
          "[fusion][emu]") {
  // RMSNorm's row scale (rows of 32) applied to a Q/K projection 64 wide (RMSNorm moved past its
  // GEMM), then Q (3 heads of 16) and K (one head) split off, moved heads first and rotated or
  // negated: each stored by a loop over its own width per row (48 and 16), not the row's 32.
  auto g = test::parse_or_die(R"(graph "wide_moved" opset 18 {
  input %x: f32[2,6,32]
  input %p: f32[2,6,64]
  input %cos: f32[6,16]
  input %sin: f32[6,16]
  const %ax: i64[1] = [-1]
  const %eps: f32[] = [0.000001]
  const %c0: i64[1] = [0]
  const %c8: i64[1] = [8]
  const %c16: i64[1] = [16]
  const %c48: i64[1] = [48]
  const %c64: i64[1] = [64]
  const %qshape: i64[4] = [2, 6, 3, 16]
  const %kshape: i64[4] = [2, 6, 1, 16]
  %sq = Mul(%x, %x) @"square"
  %ms = ReduceMean(%sq, %ax) @"mean"
  %e = Add(%ms, %eps) @"add_eps"
  %sd = Sqrt(%e) @"sqrt"
  %rs = Reciprocal(%sd) @"rsqrt"
  %ps = Mul(%p, %rs) @"row_scale"
  %q = Slice(%ps, %c0, %c48, %ax) @"q_columns"
  %qh = Reshape(%q, %qshape) @"q_heads"
  %qt = Transpose(%qh) {perm = ints[0, 2, 1, 3]} @"q_first"
  %qa = Slice(%qt, %c0, %c8, %ax) @"half1"
  %qb = Slice(%qt, %c8, %c16, %ax) @"half2"
  %qn = Neg(%qb) @"neg"
  %qr = Concat(%qn, %qa) {axis = -1} @"rotated"
  %qc = Mul(%qt, %cos) @"cos"
  %qs = Mul(%qr, %sin) @"sin"
  %qo = Add(%qc, %qs) @"rotary"
  %k = Slice(%ps, %c48, %c64, %ax) @"k_columns"
  %kh = Reshape(%k, %kshape) @"k_heads"
  %kt = Transpose(%kh) {perm = ints[0, 2, 1, 3]} @"k_first"
  %ko = Tanh(%kt) @"k_out"
  output %qo
  output %ko
}
)");
  test::run_frontend_or_die(*g);
  auto info = whole_graph_info(*g);
  CHECK(info.permuted.count(g->outputs[0]) == 1);
  CHECK(info.permuted.count(g->outputs[1]) == 1);
  CHECK(info.moved_width(g->outputs[0]) == 48);
  CHECK(info.moved_width(g->outputs[1]) == 16);
  CHECK(info.wide_widths == std::vector<int64_t>{16, 48});
  CHECK_FALSE(info.full_row(g->outputs[0]));
  CHECK(one_group_matches_reference(*g, 170));
  uint32_t seed = 171;
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    CHECK(fused_matches_reference(*g, seed++, mode) == 1);
  }
}

TEST_CASE("seeded random row-op epilogues that move the rows: one kernel equals the reference",
          "[fusion][emu]") {
  // A row op over [batch, sequence, heads x dim] (softmax, layer norm, a decomposed RMSNorm), then
  // a random chain of what attention does to its result: the Reshape into heads and back, the
  // heads-first Transpose and back, rotary halves (Slices, Neg, Concat along the row), scales by
  // per-feature and per-position constants, element-wise ops, and the tokens flattened to
  // [batch x sequence, heads x dim] and back (as an MoE block reads them). Each graph is checked as one
  // forced kernel (every value pulled inside the current row, the result stored with its rows moved) and as
  // the planner fuses it.
  std::mt19937 rng(2026);
  const char* unary[] = {"Tanh", "Neg", "Sigmoid"};
  std::set<std::string> ops;
  int moved = 0, flattened = 0;
  for (int trial = 0; trial < 16; ++trial) {
    INFO("trial " << trial);
    const int64_t b = 2 + trial % 2, s = trial % 3 == 0 ? 1 : 5, h = trial % 4 < 2 ? 2 : 4,
                  d = trial % 2 ? 8 : 12;
    std::string text = "graph \"moves\" opset 18 {\n";
    text += fmt::format(
        "  input %x: f32[{},{},{}]\n  input %wf: f32[{}]\n  input %wd: f32[{}]\n  input %pos: f32[{},{}]\n",
        b, s, h * d, h * d, d, s, d);
    text += fmt::format("  const %heads: i64[4] = [{}, {}, {}, {}]\n  const %flat: i64[3] = [{}, {}, {}]\n",
                        b, s, h, d, b, s, h * d);
    text += fmt::format("  const %tokens: i64[2] = [{}, {}]\n", b * s, h * d);
    text += "  const %ax: i64[1] = [-1]\n  const %eps: f32[] = [0.00001]\n";
    std::string v;
    switch (trial % 3) {
      case 0:
        text += "  %r = Softmax(%x) {axis = -1} @\"row\"\n";
        break;
      case 1:
        text += "  %r = LayerNormalization(%x, %wf, %wf) {axis = -1} @\"row\"\n";
        break;
      default:
        text += "  %sq = Mul(%x, %x) @\"square\"\n  %ms = ReduceMean(%sq, %ax) @\"row\"\n";
        text +=
            "  %me = Add(%ms, %eps) @\"eps\"\n  %rs = Sqrt(%me) @\"sqrt\"\n  %r = Div(%x, %rs) @\"norm\"\n";
    }
    v = "%r";
    enum Layout { kFlat, kHeads, kHeadsFirst, kTokens } layout = kFlat;
    for (int k = 0; k < 6; ++k) {
      const std::string o = fmt::format("%m{}", k);
      const int64_t last = layout == kFlat || layout == kTokens ? h * d : d;
      switch (rng() % 7) {
        case 0:
          if (layout == kTokens) {
            text += fmt::format("  {} = {}({}) @\"m{}\"\n", o, unary[rng() % 3], v, k);
          } else if (layout == kFlat) {
            text += fmt::format("  {} = Reshape({}, %heads) @\"m{}\"\n", o, v, k);
            layout = kHeads;
          } else {
            text += fmt::format("  {} = Transpose({}) {{perm = ints[0, 2, 1, 3]}} @\"m{}\"\n", o, v, k);
            layout = layout == kHeads ? kHeadsFirst : kHeads;
          }
          break;
        case 1: {  // rotary halves along the row
          text += fmt::format("  %lo{0} = Slice({1}, %z{0}, %h{0}, %ax) @\"lo{0}\"\n", k, v);
          text += fmt::format("  %hi{0} = Slice({1}, %h{0}, %e{0}, %ax) @\"hi{0}\"\n", k, v);
          text += fmt::format("  %ng{0} = Neg(%hi{0}) @\"neg{0}\"\n", k);
          text += fmt::format("  {} = Concat(%ng{}, %lo{}) {{axis = -1}} @\"cat{}\"\n", o, k, k, k);
          text += fmt::format(
              "  const %z{}: i64[1] = [0]\n  const %h{}: i64[1] = [{}]\n  const %e{}: i64[1] = [{}]\n", k, k,
              last / 2, k, last);
          break;
        }
        case 2:
          text += fmt::format("  {} = Mul({}, {}) @\"m{}\"\n", o, v, last == h * d ? "%wf" : "%wd", k);
          break;
        case 3:
          if (layout == kHeadsFirst)
            text += fmt::format("  {} = Mul({}, %pos) @\"m{}\"\n", o, v, k);
          else
            text += fmt::format("  {} = {}({}) @\"m{}\"\n", o, unary[rng() % 3], v, k);
          break;
        case 4:
          if (layout == kHeads) {
            text += fmt::format("  {} = Reshape({}, %flat) @\"m{}\"\n", o, v, k);
            layout = kFlat;
          } else {
            text += fmt::format("  {} = Add({}, {}) @\"m{}\"\n", o, v, v, k);
          }
          break;
        case 5:  // the tokens flattened, and back
          if (layout == kFlat || layout == kTokens) {
            text += fmt::format("  {} = Reshape({}, {}) @\"m{}\"\n", o, v,
                                layout == kFlat ? "%tokens" : "%flat", k);
            layout = layout == kFlat ? kTokens : kFlat;
            flattened += layout == kTokens && s > 1;
          } else {  // heads: the heads-first Transpose, or back
            text += fmt::format("  {} = Transpose({}) {{perm = ints[0, 2, 1, 3]}} @\"m{}\"\n", o, v, k);
            layout = layout == kHeads ? kHeadsFirst : kHeads;
          }
          break;
        default:
          text += fmt::format("  {} = {}({}) @\"m{}\"\n", o, unary[rng() % 3], v, k);
      }
      v = o;
    }
    // A view is stored by its producer's kernel, never as a group's result (and a Transpose of a
    // one-token sequence becomes a Reshape).
    text += fmt::format("  %out = Neg({}) @\"out\"\n", v);
    v = "%out";
    text += "  output " + v + "\n}\n";
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    INFO(text);
    CHECK(one_group_matches_reference(*g, 300 + trial));
    CHECK(fused_matches_reference(*g, 400 + trial) == 1);
    for (const auto& n : g->nodes()) ops.insert(n->op_type);
    moved += layout != kFlat;
  }
  // The chains took every kind of move, and some ended with the rows moved.
  for (const char* op : {"Reshape", "Transpose", "Slice", "Concat"}) {
    INFO(op);
    CHECK(ops.count(op) == 1);
  }
  CHECK(moved >= 3);
  CHECK(flattened >= 2);  // batch and sequence merged in some chains
}
