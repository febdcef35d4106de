// LRN written out by expand_lrn (squares, a channel window of Slices over a zero Pad, a Pow and a
// Div), planned by beam search and run on emu against the reference running the op, whose
// definition ONNX's node tests check (test_lrn, test_lrn_default).
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("LRN after a ReLU, odd and even windows: one element kernel", "[lrn][emu]") {
  for (int size : {5, 4, 1, 20}) {  // 20: wider than the 7 channels
    INFO("size " << size);
    const fusion::FusionPlan plan = written_out_matches_op(fmt::format(R"(graph "g" opset 13 {{
  input %x: f32[2,7,6,5]
  %r = Relu(%x) @"relu"
  %y = LRN(%r) {{size = {}, alpha = 0.002, beta = 0.75, bias = 2.0}} @"lrn"
  output %y
}})",
                                                                       size),
                                                           {"LRN"}, 13);
    CHECK(plan.cost.kernels == 1);
  }
}

TEST_CASE("LRN without its size, or a size under 1, is refused naming the node", "[lrn]") {
  CHECK(frontend_error(R"(graph "g" opset 13 {
  input %x: f32[1,4,3,3]
  %y = LRN(%x) @"lrn"
  output %y
})") == "node 'lrn' (LRN): needs its size attribute (the channels each sum spans)");
  CHECK(frontend_error(R"(graph "g" opset 13 {
  input %x: f32[1,4,3,3]
  %y = LRN(%x) {size = 0} @"lrn"
  output %y
})") == "node 'lrn' (LRN): size must be positive, got 0");
}
