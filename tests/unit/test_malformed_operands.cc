// Malformed operands a corrupted, hand-edited or badly exported model carries, each found by the
// model mutation fuzzer (tests/fuzz/model_fuzz.cc): each is refused with a user error naming its
// node, where it had crashed the compiler, left a value with a negative axis, let a kernel read
// past its input, exhausted memory, or written an artifact the runtime could not load.
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

// Shape operands: Range's, OneHot's, Expand's, GatherND's.
TEST_CASE("malformed shape operands are refused naming the node", "[frontend]") {
  // Range's start, limit and delta are one value each (an empty Slice of a Shape had crashed it).
  CHECK(frontend_error(R"(graph "g" opset 13 {
  const %start: i64[0] = []
  const %limit: i64[] = [5]
  const %delta: i64[] = [1]
  %r = Range(%start, %limit, %delta) @"range"
  output %r
})") == "node 'range' (Range): input 0 (start) must be one value, not shape 0");
  // OneHot's depth likewise, and a count of at least 1.
  const auto onehot = [](const std::string& depth) {
    return fmt::format(R"(graph "g" opset 11 {{
  input %i: i64[4]
  const %depth: {}
  const %values: f32[2] = [0, 1]
  %y = OneHot(%i, %depth, %values) @"onehot"
  output %y
}})",
                       depth);
  };
  CHECK(frontend_error(onehot("i64[2] = [3, 4]")) ==
        "node 'onehot' (OneHot): depth must be one value, not shape 2");
  CHECK(frontend_error(onehot("i64[] = [-3]")) ==
        "node 'onehot' (OneHot): depth must be a positive count, not -3");
  // Expand to a negative size had left its output with a negative axis (an internal error).
  CHECK(frontend_error(R"(graph "g" opset 13 {
  input %x: f32[3,1]
  const %shape: i64[2] = [3, -1]
  %y = Expand(%x, %shape) @"expand"
  output %y
})") == "node 'expand' (Expand): the target shape [3, -1] has a negative entry");
  // GatherND's batch axes must be the same in the data and the indices: a kernel had read past
  // the data for the indices' extra batches.
  CHECK(frontend_error(R"(graph "g" opset 13 {
  input %x: f32[4,5,6]
  input %i: i64[8,1]
  %y = GatherND(%x, %i) {batch_dims = 1} @"gather"
  output %y
})") == "node 'gather' (GatherND): with batch_dims 1 the data's leading axes 4 and the indices' 8 must be "
        "equal");
}

TEST_CASE("a Resize to an axis too long for its tables is refused naming the node", "[frontend]") {
  CHECK(
      frontend_error(R"(graph "g" opset 19 {
  input %x: f32[1,1,4,4]
  const %sizes: i64[4] = [1, 1, 4, 2147483648]
  %y = Resize(%x, _, _, %sizes) {mode = "nearest"} @"resize"
  output %y
})") ==
      "node 'resize' (Resize): axis 3 of length 4 would be resized to 2147483648, past the 16777216 elements "
      "an axis may have here; check the model's scales or sizes");
}

// A scale that is not finite is not folded into a GEMM call's alpha, which the schedule holds as a
// number (a JSON null had made the artifact unloadable); a Gemm whose own alpha or beta is not
// finite is refused.
TEST_CASE("GEMM calls carry only finite alphas", "[gemm][emu]") {
  written_out_matches_op(R"(graph "g" opset 18 {
  input %a: f32[4,8]
  input %b: f32[8,5]
  const %s: f32[] = [-inf]
  %as = Mul(%a, %s) @"scale"
  %y = MatMul(%as, %b) @"mm"
  output %y
})",
                         {}, 23);
  CHECK(frontend_error(R"(graph "g" opset 13 {
  input %a: f32[4,8]
  input %b: f32[8,5]
  %y = Gemm(%a, %b) {alpha = inf} @"gemm"
  output %y
})") == "node 'gemm' (Gemm): alpha is inf; stitch takes only finite values");
}
