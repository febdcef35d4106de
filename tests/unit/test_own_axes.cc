// Row kernels that store a row's values broadcast over axes the rows lack (RowPiece::kOwn): each
// expert's routing weight times that expert's activations, as onnxruntime's MoE is written
// (importer/contrib_moe.cc). The value is stored by a wide loop that evaluates the row's values
// again at each of its elements; every case runs on the emu backend against the reference
// interpreter.
#include <fmt/format.h>

#include "codegen/lower.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;
namespace {

// A routing over rows of E experts (a softmax, the largest kept, the rest 0) as a column
// [R, E, 1], times activations [R, E, F] from outside, with the column joined after them as one
// more element of each expert's part: [R, E, F + 1].
std::string routed(int64_t rows, int64_t experts, int64_t f) {
  return fmt::format(R"(graph "routed" opset 18 {{
  input %x: f32[{0},{1}]
  input %a: f32[{0},{1},{2}]
  const %last: i64[1] = [-1]
  const %zero: f32[] = [0.0]
  %p = Softmax(%x) {{axis = -1}} @"softmax"
  %top = ReduceMax(%p, %last) @"top"
  %pick = Equal(%p, %top) @"pick"
  %w = Where(%pick, %p, %zero) @"weight"
  %col = Unsqueeze(%w, %last) @"column"
  %y = Mul(%a, %col) @"weighted"
  %o = Concat(%y, %col) {{axis = -1}} @"joined"
  output %o
}}
)",
                     rows, experts, f);
}

}  // namespace

TEST_CASE("a row's values broadcast over an axis of their own are stored by the row kernel's wide loop",
          "[fusion][emu]") {
  uint32_t seed = 610;
  for (const auto& [rows, experts, f] :
       std::vector<std::array<int64_t, 3>>{{6, 4, 5}, {37, 3, 7}, {1, 8, 64}}) {
    INFO(fmt::format("rows {} experts {} f {}", rows, experts, f));
    auto g = test::parse_or_die(routed(rows, experts, f));
    test::run_frontend_or_die(*g);
    auto info = whole_graph_info(*g);
    const Value* out = g->outputs[0];
    CHECK(info.row);
    CHECK(info.domain == Dims{rows, experts});
    REQUIRE(info.permuted.count(out) == 1);
    const std::vector<codegen::RowPiece>& pieces = info.permuted.at(out);
    REQUIRE(pieces.size() == 3);
    if (rows > 1) CHECK(pieces[0] == codegen::RowPiece{0, 1});
    CHECK(pieces[1] == codegen::RowPiece{1, 1});
    CHECK(pieces[2] == codegen::RowPiece{codegen::RowPiece::kOwn, 1});
    CHECK(info.has_own_axes(out));
    CHECK(!info.full_row(out));
    CHECK(info.wide_widths == std::vector<int64_t>{experts * (f + 1)});
    // The softmax's element and the weight's Equal and Where again for each activation.
    CHECK(info.recompute_elements > 0);
    auto k = codegen::lower_stitched(all_nodes(*g), {out}, 0);
    REQUIRE(k.is_ok());
    INFO(k->source);
    CHECK(k->mapping.find("the row's values over axes of its own") != std::string::npos);
    one_kernel_in_every_planner(*g, seed);
  }
}

TEST_CASE("an axis of its own sliced after the broadcast stays in the row kernel", "[fusion][emu]") {
  // The weights [6, 4] broadcast over a trailing axis of 5 ([6, 4, 5]), then every other element of
  // that axis kept by a Slice: [6, 4, 3], 12 per row.
  auto g = test::parse_or_die(R"(graph "sliced" opset 18 {
  input %x: f32[6,4]
  input %b: f32[6,4,5]
  const %last: i64[1] = [-1]
  const %s0: i64[1] = [0]
  const %s5: i64[1] = [5]
  const %step: i64[1] = [2]
  %p = Softmax(%x) {axis = -1} @"softmax"
  %u = Unsqueeze(%p, %last) @"column"
  %y = Add(%b, %u) @"spread"
  %o = Slice(%y, %s0, %s5, %last, %step) @"every_other"
  output %o
})");
  test::run_frontend_or_die(*g);
  auto info = whole_graph_info(*g);
  const Value* out = g->outputs[0];
  REQUIRE(info.permuted.count(out) == 1);
  CHECK(info.permuted.at(out)[2].axis == codegen::RowPiece::kOwn);
  CHECK(info.wide_widths == std::vector<int64_t>{4 * 3});
  uint32_t seed = 620;
  one_kernel_in_every_planner(*g, seed);
}

TEST_CASE("an axis of its own outside the row's kept axes is not stored by the row kernel", "[fusion][emu]") {
  // The weights [6, 4] broadcast over a leading axis of 3: each row's 12 elements 24 apart. Stored
  // that way the wide loop would scatter them, so the broadcast is a kernel of its own.
  auto g = test::parse_or_die(R"(graph "lead" opset 18 {
  input %x: f32[6,4]
  input %b: f32[3,6,4]
  const %first: i64[1] = [0]
  %p = Softmax(%x) {axis = -1} @"softmax"
  %u = Unsqueeze(%p, %first) @"lead"
  %o = Add(%b, %u) @"spread"
  output %o
})");
  test::run_frontend_or_die(*g);
  CHECK_THAT(whole_graph_refusal(*g), Catch::Contains("each row's elements would not be one contiguous run"));
  CHECK(fused_matches_reference(*g, 625) >= 1);
}

TEST_CASE("a row op over a value with an axis of its own is refused in the row kernel", "[fusion]") {
  // The weighted activations summed over the expert's own axis: rows of another shape than the
  // softmax's, which the kernel does not hold.
  auto g = test::parse_or_die(R"(graph "sum_own" opset 18 {
  input %x: f32[6,4]
  input %a: f32[6,4,5]
  const %last: i64[1] = [-1]
  %p = Softmax(%x) {axis = -1} @"softmax"
  %col = Unsqueeze(%p, %last) @"column"
  %y = Mul(%a, %col) @"weighted"
  %s = ReduceSum(%y, %last) @"sum"
  output %s
})");
  test::run_frontend_or_die(*g);
  CHECK_THAT(whole_graph_refusal(*g),
             Catch::Contains("node 'sum' (ReduceSum) reduces 6x4x5 over axes [2], the group's rows are 6x4"));
  // Planned, the sum is a kernel of its own after the softmax's, and the result still matches.
  CHECK(fused_matches_reference(*g, 630) >= 1);
}
