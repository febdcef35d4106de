// Seeded random graphs over matrices [batch, rows, cols] for the tests of what a stitched kernel
// computes (test_evaluations.cc, test_coordinate_sets.cc): element-wise ops mixed with reads at
// other elements of the matrix (short sums as Adds of Slices, rotations, Transposes, shifts), as
// graph text for test::parse_or_die.
#pragma once

#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

namespace stitch::test {

// What each step of a random matrix graph may be; each draws one of the kinds given, in order.
enum class MatrixStep {
  kUnary,           // Tanh, Sigmoid, Neg or Abs of an earlier value
  kBinary,          // Add, Sub, Mul or Max of two earlier values (or of one and %w [rows, cols])
  kShortSum,        // an element-wise op with a sum over the rows (at most 8) or the columns
  kRotation,        // the columns rotated by one (a Concat of two Slices)
  kTransposeOrMul,  // a Transpose of square matrices, else a Mul of two earlier values
  kShiftDown,       // shifted down a row, the first row zero (a Slice, then a Pad)
  kSameSlice,       // the same elements read again through a Slice that moves nothing, then added
};

// The graph's text: inputs %x [batch, rows, cols] and %w [rows, cols], `steps` nodes named n0,
// n1, ... each drawn from `kinds` with `rng`, and `tail` before the closing brace (its output
// lines; the last value is %v{steps - 1}).
inline std::string random_matrix_graph(std::mt19937& rng, int batch, int rows, int cols, int steps,
                                       const std::vector<MatrixStep>& kinds, const std::string& tail) {
  const char* unary[] = {"Tanh", "Sigmoid", "Neg", "Abs"};
  const char* binary[] = {"Add", "Sub", "Mul", "Max"};
  std::string text = fmt::format(R"(graph "m" opset 18 {{
  input %x: f32[{0},{1},{2}]
  input %w: f32[{1},{2}]
  const %rows: i64[1] = [1]
  const %cols: i64[1] = [2]
  const %lastax: i64[1] = [2]
  const %s0: i64[1] = [0]
  const %s1: i64[1] = [1]
  const %send: i64[1] = [{2}]
  const %rlast: i64[1] = [{3}]
  const %pads: i64[6] = [0, 1, 0, 0, 0, 0]
)",
                                 batch, rows, cols, rows - 1);
  std::vector<std::string> made = {"%x"};
  for (int k = 0; k < steps; ++k) {
    const std::string v = fmt::format("%v{}", k), a = made[rng() % made.size()], b = made[rng() % made.size()];
    switch (kinds[rng() % kinds.size()]) {
      case MatrixStep::kUnary:
        text += fmt::format("  {} = {}({}) @\"n{}\"\n", v, unary[rng() % 4], a, k);
        break;
      case MatrixStep::kBinary:
        text += fmt::format("  {} = {}({}, {}) @\"n{}\"\n", v, binary[rng() % 4], a, rng() % 3 ? b : "%w", k);
        break;
      case MatrixStep::kShortSum:
        // Over an axis of at most 8 (short_reductions' limit): a longer sum would stay a row op.
        text += fmt::format("  %sum{0} = ReduceSum({1}, {2}) @\"sum{0}\"\n", k, a,
                            rows <= 8 && (cols > 8 || rng() % 2) ? "%rows" : "%cols");
        text += fmt::format("  {} = {}({}, %sum{}) @\"n{}\"\n", v, binary[rng() % 4], b, k, k);
        break;
      case MatrixStep::kRotation:
        text += fmt::format("  %tail{0} = Slice({1}, %s1, %send, %lastax) @\"tail{0}\"\n", k, a);
        text += fmt::format("  %head{0} = Slice({1}, %s0, %s1, %lastax) @\"head{0}\"\n", k, a);
        text += fmt::format("  {0} = Concat(%tail{1}, %head{1}) {{axis = 2}} @\"n{1}\"\n", v, k);
        break;
      case MatrixStep::kTransposeOrMul:
        if (rows == cols)
          text += fmt::format("  {} = Transpose({}) {{perm = ints[0, 2, 1]}} @\"n{}\"\n", v, a, k);
        else
          text += fmt::format("  {} = Mul({}, {}) @\"n{}\"\n", v, a, b, k);
        break;
      case MatrixStep::kShiftDown:
        text += fmt::format("  %low{0} = Slice({1}, %s0, %rlast, %s1) @\"low{0}\"\n", k, a);
        text += fmt::format("  {0} = Pad(%low{1}, %pads) @\"n{1}\"\n", v, k);
        break;
      case MatrixStep::kSameSlice:
        text += fmt::format("  %same{0} = Slice({1}, %s0, %send, %lastax) @\"same{0}\"\n", k, a);
        text += fmt::format("  {} = Add(%same{}, {}) @\"n{}\"\n", v, k, b, k);
        break;
    }
    made.push_back(v);
  }
  return text + tail + "}\n";
}

}  // namespace stitch::test
