// Kernel::evaluations: how many times a stitched kernel's code computes its nodes. A value read at
// other positions than its readers' own (a resampling's taps) is computed again at each, and
// chains of such reads multiply the copies: stitchc compile plans such a kernel again within
// --max-evaluations (tests/e2e/backend_tests.sh checks seg_small's).
#include <fmt/format.h>

#include "fusion/short_reductions.h"
#include "fusion_test_util.h"
#include "random_matrix_graphs.h"
#include "test_util.h"

using namespace stitch;

namespace {

// Copies of node `name` in kernel `k`'s code.
int64_t copies(const codegen::Kernel& k, const std::string& name) {
  for (const auto& [n, count] : k.node_evaluations)
    if (n->name == name) return count;
  return 0;
}

}  // namespace

TEST_CASE("an element-wise chain computes each node once per element", "[evaluations]") {
  // 37 columns: no 128-bit vector access, so one lane per thread.
  auto g = test::parse_or_die(R"(graph "chain" opset 18 {
  input %x: f32[3,37]
  input %b: f32[37]
  const %shape: i64[1] = [111]
  %a = Add(%x, %b) @"add"
  %t = Tanh(%a) @"tanh"
  %m = Mul(%t, %a) @"mul"
  %r = Reshape(%m, %shape) @"view"
  %y = Neg(%r) @"neg"
  output %y
})");
  test::run_frontend_or_die(*g);
  const codegen::Kernel k = test::lower_whole_graph(*g);
  // The add is read by the tanh and the mul at the same element: computed once. The view computes
  // nothing and is not counted.
  CHECK(copies(k, "add") == 1);
  CHECK(copies(k, "tanh") == 1);
  CHECK(copies(k, "mul") == 1);
  CHECK(copies(k, "view") == 0);
  CHECK(copies(k, "neg") == 1);
  CHECK(k.evaluations == 4);
}

TEST_CASE("resamplings in one kernel multiply the copies of the values before them", "[evaluations]") {
  // Two bilinear 2x upsamples, each two taps on each of two axes (expand_resize): the second reads
  // the first's result at 2 x 2 positions per element, and the first its input at as many.
  auto g = test::parse_or_die(R"(graph "up2" opset 18 {
  input %x: f32[1,1,3,5]
  const %s: f32[4] = [1.0, 1.0, 2.0, 2.0]
  %e = Exp(%x) @"exp"
  %u = Resize(%e, _, %s) {mode = "linear"} @"up1"
  %v = Resize(%u, _, %s) {mode = "linear"} @"up2"
  %y = Relu(%v) @"relu"
  output %y
})");
  test::run_frontend_or_die(*g);
  const codegen::Kernel k = test::lower_whole_graph(*g);
  INFO(k.source);
  const int64_t last = copies(k, "relu");
  REQUIRE(last >= 1);
  // Each resampling's axes are two steps of two taps: the first upsample's result is computed at
  // 4 positions per element of the second's, and the Exp before both at 16.
  CHECK(copies(k, "up2/axis3_tap1_sum") == last);
  CHECK(copies(k, "up1/axis3_tap1_sum") == 4 * last);
  CHECK(copies(k, "exp") == 16 * last);
  // Every node counted, views aside.
  int64_t sum = 0;
  for (const auto& [n, count] : k.node_evaluations) sum += count;
  CHECK(sum == k.evaluations);
}

namespace {

// `steps` Sinkhorn steps over the last two axes of `dims` (each divides by the row sums, then by
// the column sums), the sums written as Adds of Slices (fusion::short_reductions_as_adds), after
// an Exp of the input.
std::unique_ptr<Graph> sinkhorn(const std::string& dims, int steps) {
  std::string text = fmt::format(R"(graph "sinkhorn" opset 18 {{
  input %x: f32[{}]
  const %rows: i64[1] = [-1]
  const %cols: i64[1] = [-2]
  %m0 = Exp(%x) @"exp"
)",
                                 dims);
  for (int s = 0; s < steps; ++s)
    text += fmt::format(R"(  %rs{0} = ReduceSum(%m{0}, %rows) @"row_sum{0}"
  %r{0} = Div(%m{0}, %rs{0}) @"by_rows{0}"
  %cs{0} = ReduceSum(%r{0}, %cols) @"col_sum{0}"
  %m{1} = Div(%r{0}, %cs{0}) @"by_cols{0}"
)",
                        s, s + 1);
  text += fmt::format("  output %m{}\n}}\n", steps);
  auto g = test::parse_or_die(text);
  test::run_frontend_or_die(*g);
  auto sums = fusion::short_reductions_as_adds(*g);
  REQUIRE(sums.is_ok());
  REQUIRE(sums->size() == static_cast<size_t>(2 * steps));
  return g;
}

}  // namespace

TEST_CASE("an element kernel reads the other elements of its tile from the lanes that computed them",
          "[evaluations][emu]") {
  // 3 matrices of 4 x 4: a tile of 16 elements, two to a warp, the second warp half empty. Each
  // element's sums read its whole row and column, and the step before those its whole matrix: the
  // lanes of a matrix each compute their own element once and exchange them by shuffles.
  auto g = sinkhorn("3,1,4,4", 3);
  const codegen::Kernel k = test::lower_whole_graph(*g);
  INFO(k.source);
  for (const auto& [n, count] : k.node_evaluations) {
    INFO(n->describe());
    CHECK(count == 1);
  }
  // Each of the 6 sums reads 4 elements of the value before it from their lanes.
  CHECK(k.source.find("__shfl_sync(live, ") != std::string::npos);
  CHECK(k.mapping.find("24 values of other elements of each tile of 16 (axes 2 on)") != std::string::npos);
  CHECK(k.lane_exchanges == 24);
  uint32_t seed = 11;
  CHECK(test::one_group_matches_reference(*g, seed));
}

TEST_CASE("a tile that does not divide a warp leaves its values computed again", "[evaluations][emu]") {
  // Rows of 3 and matrices of 9: no tile of 2 to 32 elements that is a power of two, so each
  // element computes the values of its row and column itself.
  auto g = sinkhorn("2,5,3,3", 2);
  const codegen::Kernel k = test::lower_whole_graph(*g);
  CHECK(k.source.find("__shfl_sync") == std::string::npos);
  CHECK(k.lane_exchanges == 0);
  CHECK(copies(k, "by_rows0") > 1);
  uint32_t seed = 12;
  CHECK(test::one_group_matches_reference(*g, seed));
}

TEST_CASE("an exchange that saves less than the vector lanes share is not kept", "[evaluations][emu]") {
  // Matrices of 8 x 8: the tile is a row of 8 (64 elements do not fit a warp). With exchange the row
  // sums would read their row from its lanes, but the column sums read the other rows, outside the
  // tile, and each lane would compute them alone; 4 elements a thread share those (128-bit access).
  auto g = sinkhorn("2,8,8", 1);
  const codegen::Kernel k = test::lower_whole_graph(*g);
  INFO(k.source);
  CHECK(k.source.find("__shfl_sync") == std::string::npos);
  CHECK(k.mapping.find("one thread per 4 elements") != std::string::npos);
  uint32_t seed = 13;
  CHECK(test::one_group_matches_reference(*g, seed));
}

TEST_CASE("seeded random graphs within small matrices: exchanged between lanes, equal to the reference",
          "[evaluations][emu]") {
  // Values of [batch, rows, cols] with a matrix of 4 to 32 elements: sums over either axis as Adds
  // of Slices, a rotation of the columns (Concat of two Slices), a Transpose of square matrices,
  // element-wise ops between them. Batches of 1 to 7 leave warps partly empty. Lowered as one
  // kernel, run on emu against the reference interpreter, whichever form lower_stitched keeps.
  const std::pair<int, int> mats[] = {{4, 4}, {8, 2}, {2, 8}, {2, 2}, {16, 2}, {4, 2}};
  std::mt19937 rng(1206);
  int exchanged = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const auto [r, c] = mats[trial % 6];
    const int batch = 1 + static_cast<int>(rng() % 7);
    INFO(fmt::format("trial {}: {} x {} x {}", trial, batch, r, c));
    using test::MatrixStep;
    const std::string text =
        test::random_matrix_graph(rng, batch, r, c, 12,
                                  {MatrixStep::kUnary, MatrixStep::kBinary, MatrixStep::kShortSum,
                                   MatrixStep::kRotation, MatrixStep::kTransposeOrMul},
                                  "  output %v11\n");
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    REQUIRE(fusion::short_reductions_as_adds(*g).is_ok());
    const codegen::Kernel k = test::lower_whole_graph(*g);
    exchanged += k.mapping.find("warp shuffles") != std::string::npos;
    CHECK(test::one_group_matches_reference(*g, 40 + trial));
  }
  // 5 of these 24 kernels read their matrices across lanes; in the others the vector form's 4
  // elements a thread share as much (lower_stitched keeps the form that evaluates less).
  CHECK(exchanged >= 5);
}
