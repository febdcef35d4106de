// Row kernels that store values whose rows a Reshape flattened (RowPiece::span): an MoE block reads
// its tokens as [B * S, H] while the norm before it holds them as [B, S, H], so its router's work
// and its experts' weighting stay in the norm's kernel only if the kernel keeps the merged kept axes
// as the row index they are. Every case runs on the emu backend against the reference
// interpreter; the refusals name the Reshape and why.
#include <fmt/format.h>

#include "codegen/lower.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;
namespace {

// An RMSNorm of %x over its last axis: %r its root, %y the normalised rows (with its constants).
const std::string kNorm = R"(  const %ax: i64[1] = [-1]
  const %eps: f32[] = [0.000001]
  %sq = Mul(%x, %x) @"square"
  %ms = ReduceMean(%sq, %ax) @"mean"
  %e = Add(%ms, %eps) @"eps"
  %r = Sqrt(%e) @"root"
  %y = Div(%x, %r) @"normed"
)";

// An RMSNorm over [b, s, h], its result flattened to [b * s, h] and scaled there.
std::string flattened_norm(int64_t b, int64_t s, int64_t h) {
  return fmt::format(R"(graph "flat" opset 18 {{
  input %x: f32[{0},{1},{2}]
  input %w: f32[{2}]
  const %tokens: i64[2] = [{3}, {2}]
{4}  %f = Reshape(%y, %tokens) @"flatten"
  %o = Mul(%f, %w) @"scaled"
  output %o
}}
)",
                     b, s, h, b * s, kNorm);
}

// A norm's statistics fixing products computed outside (GEMMs of the unnormalised tokens: the
// router's logits [b, s, e] and the experts' up projection [b, s, e * f]), both then flattened as an
// MoE block reads its tokens: sigmoid scores over each token's e experts ([b * s, e], DeepSeek's
// scoring) and each expert's activations ([b * s, e, f]).
std::string flattened_router(int64_t b, int64_t s, int64_t e, int64_t f) {
  return fmt::format(R"(graph "router" opset 18 {{
  input %x: f32[{0},{1},16]
  input %logits: f32[{0},{1},{2}]
  input %up: f32[{0},{1},{4}]
  input %bias: f32[{2}]
  const %ax: i64[1] = [-1]
  const %eps: f32[] = [0.00001]
  const %tokens: i64[2] = [{5}, {2}]
  const %experts: i64[3] = [{5}, {2}, {3}]
  %sq = Mul(%x, %x) @"square"
  %ms = ReduceMean(%sq, %ax) @"mean"
  %e = Add(%ms, %eps) @"eps"
  %r = Sqrt(%e) @"root"
  %lf = Div(%logits, %r) @"logits_fixed"
  %uf = Div(%up, %r) @"up_fixed"
  %lt = Reshape(%lf, %tokens) @"flat_logits"
  %sc = Sigmoid(%lt) @"scores"
  %w = Add(%sc, %bias) @"biased"
  %ut = Reshape(%uf, %experts) @"flat_up"
  %act = Sigmoid(%ut) @"act"
  %gate = Mul(%ut, %act) @"silu"
  output %w
  output %gate
}}
)",
                     b, s, e, f, e * f, b * s);
}

}  // namespace

TEST_CASE("a norm's result flattened over its batch and sequence axes stays in the norm's kernel",
          "[fusion][emu]") {
  uint32_t seed = 700;
  for (const auto& [b, s, h] : std::vector<std::array<int64_t, 3>>{{2, 5, 8}, {3, 7, 16}, {1, 9, 4}}) {
    INFO(fmt::format("{} x {} x {}", b, s, h));
    auto g = test::parse_or_die(flattened_norm(b, s, h));
    test::run_frontend_or_die(*g);
    auto info = whole_graph_info(*g);
    const Value* out = g->outputs[0];
    CHECK(info.row);
    REQUIRE(info.permuted.count(out) == 1);
    // Kept axes 0 and 1 as one (1 x 9 rows need no merge: its batch axis has one element).
    const codegen::RowPiece tokens = b > 1 ? codegen::RowPiece{0, 1, 2} : codegen::RowPiece{1, 1, 1};
    CHECK(info.permuted.at(out) == std::vector<codegen::RowPiece>{tokens, {2, 1, 1}});
    CHECK(info.full_row(out));
    auto k = codegen::lower_stitched(all_nodes(*g), {out}, 0);
    REQUIRE(k.is_ok());
    INFO(k->source);
    CHECK(k->mapping.find("the rows moved by a Transpose or Reshape") != std::string::npos);
    one_kernel_in_every_planner(*g, seed);
  }
}

TEST_CASE("an MoE router and its experts' weighting over flattened tokens join the norm's kernel",
          "[fusion][emu]") {
  uint32_t seed = 710;
  for (const auto& [b, s, e, f] :
       std::vector<std::array<int64_t, 4>>{{2, 4, 4, 8}, {3, 5, 2, 3}, {1, 7, 8, 4}}) {
    INFO(fmt::format("{} x {}, {} experts of {}", b, s, e, f));
    auto g = test::parse_or_die(flattened_router(b, s, e, f));
    test::run_frontend_or_die(*g);
    auto info = whole_graph_info(*g);
    CHECK(info.domain == Dims{b, s, 16});
    const codegen::RowPiece tokens = b > 1 ? codegen::RowPiece{0, 1, 2} : codegen::RowPiece{1, 1, 1};
    const Value* w = g->outputs[0];
    const Value* gate = g->outputs[1];
    REQUIRE(info.permuted.count(w) == 1);
    REQUIRE(info.permuted.count(gate) == 1);
    CHECK(info.permuted.at(w) == std::vector<codegen::RowPiece>{tokens, {2, 1, 1}});
    // The up projection's e * f elements of each token split into experts: pieces of the row.
    CHECK(info.permuted.at(gate) == std::vector<codegen::RowPiece>{tokens, {2, f, 1}, {2, 1, 1}});
    CHECK(info.wide_widths == std::vector<int64_t>{e, e * f});
    one_kernel_in_every_planner(*g, seed);
  }
}

TEST_CASE("a per-row value flattened with the rows is stored one per row", "[fusion][emu]") {
  // The norm's reciprocal root [2, 5, 1] flattened to [10, 1] beside the normalised rows.
  auto g = test::parse_or_die(R"(graph "per_row" opset 18 {
  input %x: f32[2,5,8]
  const %tokens: i64[2] = [10, 1]
)" + kNorm + R"(  %rf = Reshape(%r, %tokens) @"flat_root"
  %inv = Reciprocal(%rf) @"inverse"
  output %y
  output %inv
})");
  test::run_frontend_or_die(*g);
  auto info = whole_graph_info(*g);
  const Value* inv = g->outputs[1];
  REQUIRE(info.permuted.count(inv) == 1);
  CHECK(info.moved_width(inv) == 1);
  CHECK(!info.full_row(inv));
  uint32_t seed = 720;
  one_kernel_in_every_planner(*g, seed);
}

TEST_CASE("flattened rows split back into the norm's axes are in the domain again", "[fusion][emu]") {
  auto g = test::parse_or_die(R"(graph "round_trip" opset 18 {
  input %x: f32[2,5,8]
  input %w: f32[8]
  const %tokens: i64[2] = [10, 8]
  const %back: i64[3] = [2, 5, 8]
)" + kNorm + R"(  %f = Reshape(%y, %tokens) @"flatten"
  %s = Mul(%f, %w) @"scaled"
  %o = Reshape(%s, %back) @"unflatten"
  %z = Add(%o, %x) @"residual"
  output %z
})");
  test::run_frontend_or_die(*g);
  auto info = whole_graph_info(*g);
  CHECK(info.permuted.empty());
  CHECK(info.full_row(g->outputs[0]));
  uint32_t seed = 730;
  one_kernel_in_every_planner(*g, seed);
}

TEST_CASE("Reshapes that merge kept axes out of the rows' order are refused in the row kernel",
          "[fusion][emu]") {
  const std::string head = "  input %x: f32[2,5,8]\n" + kNorm;
  // Transposed first, the tokens flattened sequence-major: row index b * 5 + s is not their order.
  const std::string swapped = "graph \"swapped\" opset 18 {\n" + head + R"(  const %tokens: i64[2] = [10, 8]
  %t = Transpose(%y) {perm = ints[1, 0, 2]} @"swap"
  %f = Reshape(%t, %tokens) @"flatten"
  %o = Neg(%f) @"negated"
  output %o
})";
  // Flattened, then split as 5 x 2: neither the batch axis nor the sequence one.
  const std::string resplit = "graph \"resplit\" opset 18 {\n" + head + R"(  const %tokens: i64[2] = [10, 8]
  const %other: i64[3] = [5, 2, 8]
  %f = Reshape(%y, %tokens) @"flatten"
  %p = Reshape(%f, %other) @"resplit"
  %o = Neg(%p) @"negated"
  output %o
})";
  // Three kept axes, the inner two swapped, then all flattened: the first and last pieces are the
  // run's ends and its product is the rows', but the order is not theirs.
  const std::string inner_swapped = R"(graph "inner_swapped" opset 18 {
  input %x: f32[2,3,4,8]
  const %tokens: i64[2] = [24, 8]
)" + kNorm + R"(  %t = Transpose(%y) {perm = ints[0, 2, 1, 3]} @"swap"
  %f = Reshape(%t, %tokens) @"flatten"
  %o = Neg(%f) @"negated"
  output %o
})";
  uint32_t seed = 740;
  for (const std::string& text : {swapped, resplit, inner_swapped}) {
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    const std::string bad = text == resplit ? "node 'resplit' (Reshape)" : "node 'flatten' (Reshape)";
    CHECK_THAT(whole_graph_refusal(*g),
               Catch::Contains(bad + " changes the layout of a value computed from a row op in the group: it "
                                     "merges or splits kept axes other than as the rows run"));
    // Planned, the work after the layout change is a kernel of its own and the result still matches.
    CHECK(fused_matches_reference(*g, seed++) == 2);
  }
}
