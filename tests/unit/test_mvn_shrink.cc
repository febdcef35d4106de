// MeanVarianceNormalization written out by expand_mvn and Shrink as an element op: planned by beam
// search and run on emu against the reference running the op, whose definitions ONNX's node tests
// check (test_mvn, test_mvn_expanded, test_shrink_hard, test_shrink_soft).
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("MeanVarianceNormalization over channels, spatial axes and rows matches the op on emu",
          "[mvn][emu]") {
  const auto mvn = [](const std::string& attrs, int opset) {
    return fmt::format(R"(graph "g" opset {} {{
  input %x: f32[3,5,4,6]
  %y = MeanVarianceNormalization(%x) {{{}}} @"mvn"
  %z = Relu(%y) @"relu"
  output %z
}})",
                       opset, attrs);
  };
  written_out_matches_op(mvn("", 13), {"MeanVarianceNormalization"}, 3);  // axes 0, 2, 3: per channel
  written_out_matches_op(mvn("axes = ints[2, 3]", 18), {"MeanVarianceNormalization"}, 5);
  // Over the last axis it is a layer norm's arithmetic without the scale: one row kernel.
  const fusion::FusionPlan rows =
      written_out_matches_op(mvn("axes = ints[-1]", 17), {"MeanVarianceNormalization"}, 7);
  CHECK(rows.cost.kernels == 1);
}

TEST_CASE("MeanVarianceNormalization axes outside X or named twice are refused naming the node", "[mvn]") {
  const auto mvn = [](const std::string& axes) {
    return fmt::format(R"(graph "g" opset 13 {{
  input %x: f32[2,3,4]
  %y = MeanVarianceNormalization(%x) {{axes = ints[{}]}} @"mvn"
  output %y
}})",
                       axes);
  };
  CHECK(frontend_error(mvn("0, 3")) ==
        "node 'mvn' (MeanVarianceNormalization): axis 3 is outside X's shape 2x3x4");
  CHECK(frontend_error(mvn("1, -2")) ==
        "node 'mvn' (MeanVarianceNormalization): its axes name one axis twice");
}

TEST_CASE("Shrink, soft and hard, with a negative lambd too, in one element kernel on emu", "[shrink][emu]") {
  for (const std::string attrs : {"lambd = 0.5, bias = 0.5", "lambd = 1.0", "lambd = -0.25, bias = -1.0"}) {
    const fusion::FusionPlan plan = written_out_matches_op(fmt::format(R"(graph "g" opset 13 {{
  input %x: f32[4,33]
  %s = Shrink(%x) {{{}}} @"shrink"
  %y = Mul(%s, %x) @"mul"
  output %y
}})",
                                                                       attrs),
                                                           {}, 11);
    CHECK(plan.cost.kernels == 1);
  }
}
