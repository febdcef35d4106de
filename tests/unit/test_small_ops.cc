// Small ops ONNX's node tests cover: MeanVarianceNormalization written out by expand_mvn, Compress
// by expand_compress, Shrink and BitShift as element ops; planned by beam search and run on emu
// against the reference running the op, whose definitions ONNX's node tests check (test_mvn,
// test_compress_*, test_shrink_*, test_bitshift_*).
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

TEST_CASE("BitShift both ways, past the type's width and past 63 bits, in one element kernel on emu",
          "[bitshift][emu]") {
  for (const std::string dir : {"LEFT", "RIGHT"}) {
    INFO(dir);
    const fusion::FusionPlan plan = written_out_matches_op(fmt::format(R"(graph "g" opset 11 {{
  input %a: u8[3,6]
  input %b: u64[3,5]
  const %sa: u8[6] = [0, 1, 7, 8, 9, 200]
  const %sb: u64[5] = [0, 1, 63, 64, 65]
  %x = BitShift(%a, %sa) {{direction = "{0}"}} @"shift_u8"
  %y = BitShift(%b, %sb) {{direction = "{0}"}} @"shift_u64"
  output %x
  output %y
}})",
                                                                       dir),
                                                           {}, 13);
    CHECK(plan.cost.kernels <= 2);
  }
  CHECK(frontend_error(R"(graph "g" opset 11 {
  input %a: i32[4]
  %x = BitShift(%a, %a) {direction = "LEFT"} @"shift"
  output %x
})") == "node 'shift' (BitShift): expects unsigned integer inputs, got i32");
  CHECK(frontend_error(R"(graph "g" opset 11 {
  input %a: u32[4]
  %x = BitShift(%a, %a) {direction = "UP"} @"shift"
  output %x
})") == "node 'shift' (BitShift): direction is 'UP'; it must be LEFT or RIGHT");
}

TEST_CASE("Compress of a constant condition: a Gather of the kept positions, in one kernel on emu",
          "[compress][emu]") {
  // Along an axis (a condition shorter than it drops the rest; a negative axis), and of x flattened.
  for (const std::string attrs : {"{axis = 1} ", "{axis = -1} ", ""}) {
    const fusion::FusionPlan plan = written_out_matches_op(fmt::format(R"(graph "g" opset 11 {{
  input %x: f32[3,5]
  const %c: bool[4] = [1, 0, 1, 1]
  %y = Compress(%x, %c) {}@"compress"
  %z = Relu(%y) @"relu"
  output %z
}})",
                                                                       attrs),
                                                           {"Compress"}, 17);
    CHECK(plan.cost.kernels == 1);
  }
  // The kept values themselves, on a constant x (the front end folds it through the op's evaluation).
  for (const auto& [attrs, want] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"{axis = 1} ", {0, 2, 3, 5, 7, 8, 10, 12, 13}}, {"", {0, 2, 3}}}) {
    auto g = parse_or_die(fmt::format(R"(graph "g" opset 11 {{
  const %x: f32[3,5] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
  const %c: bool[4] = [1, 0, 1, 1]
  %y = Compress(%x, %c) {}@"compress"
  output %y
}})",
                                      attrs));
    run_frontend_or_die(*g);
    REQUIRE(g->outputs[0]->constant);
    CHECK(g->outputs[0]->constant->to_f64() == want);
  }
  CHECK(frontend_error(R"(graph "g" opset 11 {
  input %x: f32[3,5]
  input %c: bool[5]
  %y = Compress(%x, %c) {axis = 1} @"compress"
  output %y
})") == "node 'compress' (Compress): its condition (it decides the output's shape) (input 1 'c') is computed "
        "at "
        "run time; stitch needs it known at compile time (it is a graph input: make it an initializer, a "
        "constant in the model)");
  CHECK(frontend_error(R"(graph "g" opset 11 {
  input %x: f32[3,5]
  const %c: bool[4] = [1, 0, 1, 1]
  %y = Compress(%x, %c) {axis = 0} @"compress"
  output %y
})") == "node 'compress' (Compress): its condition has 4 values, more than the 3 slices along its axis it "
        "selects from");
}
