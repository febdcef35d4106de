// Fine-grained GEMMs in row kernels whose A operand is computed in the kernel (an activation, a
// rotary embedding): its row is computed once per row into shared memory before the passes, not
// once per output element and step (StitchInfo::a_row_cached). Which products qualify, the cost
// it saves, the kernel's text for warp and block rows, and results on emu against the reference.
#include <fmt/format.h>

#include "codegen/scalar_ops.h"
#include "codegen/stitch.h"
#include "fusion_test_util.h"

namespace stitch {
namespace {

using test::node_named;

// Softmax over the rows of sigmoid(x) . w, x [rows, k], w [k, n]; `a` replaces the sigmoid's
// input when given (a plain read of x: no arithmetic to cache).
std::unique_ptr<Graph> gated_rows(int rows, int k, int n, bool computed_a = true) {
  auto g = test::parse_or_die(fmt::format(R"(graph "rows" opset 18 {{
  input %x: f32[{0},{1}]
  input %w: f32[{1},{2}]
  %a = Sigmoid(%x) @"gate"
  %m = MatMul({3}, %w) @"proj"
  %y = Softmax(%m) {{axis = -1}} @"softmax"
  output %y
}})",
                                          rows, k, n, computed_a ? "%a" : "%x"));
  test::run_frontend_or_die(*g);
  return g;
}

}  // namespace

TEST_CASE("a row kernel computes a product's computed A operand once per row into shared memory",
          "[stitch][emu]") {
  SECTION("warp per row: rows of 40, a warp's barrier") {
    auto g = gated_rows(6, 20, 40);
    auto info = codegen::analyze_stitch(test::all_nodes(*g), {g->outputs[0]});
    REQUIRE(info.is_ok());
    REQUIRE(info->a_row_cached.size() == 1);
    CHECK(info->a_row_cached[0]->name == "proj");
    // The sigmoid once per row and step (6 x 20), not once per output element and step (240 x 20).
    CHECK(info->contraction_ops == 6.0 * 20 * codegen::op_instructions(*node_named(*g, "gate")));
    const codegen::Kernel k = test::lower_whole_graph(*g);
    INFO(k.source);
    CHECK_THAT(k.source, Catch::Contains("__shared__ float arow0[160];"));  // 8 rows of 20 a block
    CHECK_THAT(k.source, Catch::Contains("// MatMul 'proj': A's row, once per row"));
    CHECK_THAT(k.source, Catch::Contains("__syncwarp();"));
    CHECK_THAT(k.source, Catch::Contains("arow0[(threadIdx.x >> 5) * 20 + kk"));
    CHECK(test::one_group_matches_reference(*g, 3));
  }
  SECTION("block per row: rows of 1100, a block's barrier") {
    auto g = gated_rows(3, 24, 1100);
    const codegen::Kernel k = test::lower_whole_graph(*g);
    INFO(k.source);
    CHECK_THAT(k.source, Catch::Contains("__shared__ float arow0[24];"));
    CHECK_THAT(k.source, Catch::Contains("__syncthreads();"));
    CHECK(test::one_group_matches_reference(*g, 4));
  }
}

TEST_CASE("a product's A row is not cached where nothing is computed or the rows are columns", "[stitch]") {
  // A plain read of x: each step loads it (a warp's lanes share the load), nothing to save.
  auto plain = gated_rows(6, 20, 40, false);
  auto info = codegen::analyze_stitch(test::all_nodes(*plain), {plain->outputs[0]});
  REQUIRE(info.is_ok());
  CHECK(info->a_row_cached.empty());
  CHECK_THAT(test::lower_whole_graph(*plain).source, !Catch::Contains("A's row"));
  // The product transposed before its softmax: A's row would depend on the column j.
  auto moved = test::parse_or_die(R"(graph "t" opset 18 {
  input %x: f32[2,16,8]
  input %w: f32[8,16]
  %a = Sigmoid(%x) @"gate"
  %m = MatMul(%a, %w) @"proj"
  %t = Transpose(%m) {perm = ints[0, 2, 1]} @"t"
  %y = Softmax(%t) {axis = -1} @"softmax"
  output %y
})");
  test::run_frontend_or_die(*moved);
  auto minfo = codegen::analyze_stitch(test::all_nodes(*moved), {moved->outputs[0]});
  REQUIRE(minfo.is_ok());
  CHECK(minfo->a_row_cached.empty());
  CHECK(test::one_group_matches_reference(*moved, 5));
}

}  // namespace stitch
