// ReverseSequence written out by expand_reverse_sequence (a GatherElements along the time axis of
// an Expanded index), planned by beam search and run on emu against the reference running the op,
// whose definition ONNX's node tests check (test_reversesequence_time, test_reversesequence_batch).
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

std::string reverse_graph(const std::string& x, const std::string& lens, const std::string& attrs) {
  return fmt::format(R"(graph "g" opset 13 {{
  input %x: {}
{}  %r = ReverseSequence(%x, %lens) {{{}}} @"rev"
  %y = Mul(%r, %r) @"square"
  output %y
}})",
                     x, lens, attrs);
}

}  // namespace

TEST_CASE("ReverseSequence, time- or batch-major, constant or run-time lengths: one kernel on emu",
          "[reverse_sequence][emu]") {
  // Constant lengths (0 and the full length included): a constant index.
  const fusion::FusionPlan c = written_out_matches_op(
      reverse_graph("f32[5,4,3]", "  const %lens: i64[4] = [5, 0, 3, 1]\n", ""), {"ReverseSequence"}, 3);
  CHECK(c.cost.kernels == 1);
  written_out_matches_op(reverse_graph("f32[4,6,2,3]", "  const %lens: i64[4] = [6, 2, 1, 4]\n",
                                       "time_axis = 1, batch_axis = 0"),
                         {"ReverseSequence"}, 5);
  // Lengths known at run time: the index is computed in the kernel (seeded lengths 0 to 7 over a
  // time axis of 7).
  const IntInputsIn lengths(0, 7);
  const fusion::FusionPlan r = written_out_matches_op(
      reverse_graph("f32[7,3,5]", "  input %lens: i64[3]\n", ""), {"ReverseSequence"}, 7);
  CHECK(r.cost.kernels == 1);
}

TEST_CASE("ReverseSequence's axes, lengths' shape and constant lengths out of range are refused",
          "[reverse_sequence]") {
  CHECK(frontend_error(reverse_graph("f32[5,4]", "  const %lens: i64[4] = [1, 1, 1, 1]\n",
                                     "time_axis = 1, batch_axis = 1")) ==
        "node 'rev' (ReverseSequence): time_axis 1 and batch_axis 1 must be 0 and 1, in either order");
  CHECK(frontend_error(reverse_graph("f32[5,4]", "  const %lens: i64[3] = [1, 1, 1]\n", "")) ==
        "node 'rev' (ReverseSequence): sequence_lens has shape 3; it holds one length per batch entry ([4])");
  CHECK(frontend_error(reverse_graph("f32[5,4]", "  const %lens: i64[4] = [1, 6, 1, 1]\n", "")) ==
        "node 'rev' (ReverseSequence): a sequence length of 6 lies outside [0, 5], the time axis's length");
}
