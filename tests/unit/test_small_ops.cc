// Small ops ONNX's node tests cover: MeanVarianceNormalization written out by expand_mvn, Compress
// by expand_compress, Shrink (of floats and integers) and BitShift as element ops; planned by beam search and
// run on emu against the reference running the op, whose definitions ONNX's node tests check (test_mvn,
// test_compress_*, test_shrink_*, test_bitshift_*). Then what those tests leave open, found by the
// model mutation fuzzer (tests/fuzz/model_fuzz.cc): Cast of NaN and of values past an integer
// type's range, and integer reductions through exp, log and sqrt. Last, the reference's pooling
// under a window far larger than its input (the mutation tests' kernel_shape of 1000).
#include <cmath>

#include "fault_test_util.h"
#include "fusion_test_util.h"
#include "ops/index_check.h"
#include "ops/op_util.h"

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

TEST_CASE(
    "Shrink of integers: x +- bias in floating point, truncated toward zero, on the reference and on emu",
    "[shrink][emu]") {
  // The expected values are what onnx 1.23.2's reference evaluator gives for these inputs.
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %a: i8[7]
  input %b: u8[6]
  input %c: i64[6]
  %x = Shrink(%a) {lambd = 1.5, bias = 0.5} @"shrink_i8"
  %y = Shrink(%b) {lambd = 1.0, bias = 2.0} @"shrink_u8"
  %z = Shrink(%c) {lambd = 0.5, bias = 1.25} @"shrink_i64"
  output %x
  output %y
  output %z
})");
  run_frontend_or_die(*g);
  const TensorMap feed{{"a", Tensor::from_i64(DType::kI8, {7}, {-100, -3, -1, 0, 1, 2, 100})},
                       {"b", Tensor::from_i64(DType::kU8, {6}, {0, 1, 2, 3, 200, 255})},
                       {"c", Tensor::from_i64(DType::kI64, {6}, {-7, -2, 0, 2, 7, 1000000})}};
  auto ref = run_reference(*g, feed);
  REQUIRE(ref.is_ok());
  const TensorMap got = planned_emu_run(*g, feed);
  for (const TensorMap* out : {static_cast<const TensorMap*>(&*ref), &got}) {
    CHECK(out->at("x").to_i64() == std::vector<int64_t>{-99, -2, 0, 0, 0, 1, 99});
    CHECK(out->at("y").to_i64() == std::vector<int64_t>{0, 0, 0, 1, 198, 253});
    CHECK(out->at("z").to_i64() == std::vector<int64_t>{-5, 0, 0, 0, 5, 999998});
  }
  // The kernels' text compiles with nvcc too (no node test holds an integer Shrink).
  auto s = codegen::build_schedule(*g, nullptr);
  REQUIRE(s.is_ok());
  std::filesystem::remove_all(compile_without_spills(*g, *s, "shrink_int"));
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
    // Signed types from opset 28: a right shift is arithmetic; a negative amount, or one of the
    // width or more, gives the sign's fill (-1 for a negative value shifted right), else 0. The
    // expected values are what onnx 1.23.2's reference evaluator gives for these inputs.
    auto g = parse_or_die(fmt::format(R"(graph "g" opset 28 {{
  input %a: i8[6]
  input %b: i64[6]
  const %sa: i8[6] = [0, 1, 7, 8, -1, 100]
  const %sb: i64[6] = [0, 1, 63, 64, -3, 2]
  %x = BitShift(%a, %sa) {{direction = "{0}"}} @"shift_i8"
  %y = BitShift(%b, %sb) {{direction = "{0}"}} @"shift_i64"
  output %x
  output %y
}})",
                                      dir));
    run_frontend_or_die(*g);
    const TensorMap feed{{"a", Tensor::from_i64(DType::kI8, {6}, {-128, -3, 100, -1, -5, 7})},
                         {"b", Tensor::from_i64(DType::kI64, {6}, {-9, -3, -1, 5, -8, INT64_MIN})}};
    const bool left = dir == "LEFT";
    // Left: -128, -6, 100 << 7 = 0 (bits past the sign dropped), 0, 0, 0; right: -128, -2, 0, -1, -1, 0.
    const std::vector<int64_t> want_x =
        left ? std::vector<int64_t>{-128, -6, 0, 0, 0, 0} : std::vector<int64_t>{-128, -2, 0, -1, -1, 0};
    // Left: -9, -6, INT64_MIN (-1 << 63), 0, 0, 0; right: -9, -2, -1, 0, -1, INT64_MIN >> 2.
    const std::vector<int64_t> want_y = left ? std::vector<int64_t>{-9, -6, INT64_MIN, 0, 0, 0}
                                             : std::vector<int64_t>{-9, -2, -1, 0, -1, INT64_MIN / 4};
    auto ref = run_reference(*g, feed);
    REQUIRE(ref.is_ok());
    CHECK(ref->at("x").to_i64() == want_x);
    CHECK(ref->at("y").to_i64() == want_y);
    const TensorMap got = planned_emu_run(*g, feed);
    CHECK(got.at("x").to_i64() == want_x);
    CHECK(got.at("y").to_i64() == want_y);
    if (!left) {  // the arithmetic shift's text compiles with nvcc too (no node test shifts a signed type)
      auto s = codegen::build_schedule(*g, nullptr);
      REQUIRE(s.is_ok());
      std::filesystem::remove_all(compile_without_spills(*g, *s, "shift_signed"));
    }
  }
  CHECK(frontend_error(R"(graph "g" opset 11 {
  input %a: i32[4]
  %x = BitShift(%a, %a) {direction = "LEFT"} @"shift"
  output %x
})") == "node 'shift' (BitShift): expects unsigned integer inputs before opset 28 (the model's is 11), got "
        "i32; signed ones need opset 28");
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

// ONNX leaves a float past an integer type's range undefined. stitch saturates, NaN giving 0,
// in the reference and in the kernels alike (stitch_dev::float_to_int; PTX's cvt does the same on
// the GPU, where the emulation layer's C++ conversion of NaN gave x86's integer indefinite value).
// An integer narrowed inside a kernel wraps, as its stored value does. Four chains in one element
// kernel, against values worked out by hand and against the reference.
TEST_CASE(
    "Cast from float saturates to the integer type, NaN giving 0, and narrowed integers wrap, in a kernel too",
    "[cast][emu]") {
  auto g = parse_or_die(R"(graph "g" opset 19 {
  input %x: f32[16]
  %u8 = Cast(%x) {to = 2} @"to_u8"
  %u = Cast(%u8) {to = 1} @"u8_back"
  %i8 = Cast(%x) {to = 3} @"to_i8"
  %i = Cast(%i8) {to = 1} @"i8_back"
  %l = Cast(%x) {to = 7} @"to_i64"
  %w8 = Cast(%l) {to = 3} @"narrow"
  %w = Cast(%w8) {to = 7} @"widen"
  output %u
  output %i
  output %l
  output %w
})");
  run_frontend_or_die(*g);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x{nan,    inf,    -inf, 300.7f, -300.7f, 255.9f, -128.9f, 1e20f,
                             -1e20f, 127.5f, 0.5f, -0.5f,  3e9f,    -3e9f,  9.3e18f, 42.0f};
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  const std::map<std::string, std::vector<int64_t>> want{
      {"u", {0, 255, 0, 255, 0, 255, 0, 255, 0, 127, 0, 0, 255, 0, 255, 42}},
      {"i", {0, 127, -128, 127, -128, 127, -128, 127, -128, 127, 0, 0, 127, -128, 127, 42}},
      {"l", {0, big, small, 300, -300, 255, -128, big, small, 127, 0, 0, 3000000000, -3000000000, big, 42}},
      // the int64 values' low bytes as int8: 300 is 0x12C, 3e9 is 0xB2D05E00
      {"w", {0, -1, 0, 44, -44, -1, -128, -1, 0, 127, 0, 0, 0, 0, -1, 42}},
  };
  TensorMap feed;
  feed["x"] = Tensor::from_f64(DType::kF32, {16}, std::vector<double>(x.begin(), x.end()));
  int kernels = 0;
  const TensorMap got = planned_emu_run(*g, feed, &kernels);
  CHECK(kernels == 1);
  auto ref = run_reference(*g, feed);
  REQUIRE(ref.is_ok());
  for (const auto& [name, values] : want) {
    for (size_t i = 0; i < values.size(); ++i) {
      INFO(name << "[" << i << "] from " << x[i]);
      CHECK(got.at(name).get_i64(static_cast<int64_t>(i)) == values[i]);
      CHECK(ref->at(name).get_i64(static_cast<int64_t>(i)) == values[i]);
    }
  }
}

// Integers reduced through exp, log or sqrt compute in double, as the reference does, the result
// converted back as a Cast would (the kernel of an int64 ReduceLogSumExp did not compile).
TEST_CASE("integer ReduceLogSumExp, ReduceLogSum and ReduceL2 on emu", "[reduce][emu]") {
  for (const std::string op : {"ReduceLogSumExp", "ReduceLogSum", "ReduceL2"}) {
    for (const std::string t : {"i64", "i32", "u8"}) {
      INFO(op << " " << t);
      written_out_matches_op(fmt::format(R"(graph "g" opset 18 {{
  input %x: {1}[3,37]
  const %axes: i64[1] = [1]
  %y = {0}(%x, %axes) {{keepdims = 0}} @"reduce"
  output %y
}})",
                                         op, t),
                             {}, 17);
    }
  }
}

// A divisor that may hold 0 is checked (passes/check_divisors.cc): the reference refuses a 0 naming
// the Div or Mod, and a kernel reports it after the run, alone and stitched. A constant divisor and
// one clipped to at least 1 take no check.
TEST_CASE("integer division by zero fails the run naming the node, alone and stitched",
          "[runtime][emu][faults]") {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %a: i64[2,3]
  input %b: i64[2,3]
  input %c: i32[3]
  const %two: i64[] = [2]
  const %one: i64[] = [1]
  %div = Div(%a, %b) @"div"
  %mod = Mod(%c, %c) @"mod"
  %half = Div(%a, %two) @"half"
  %low = Clip(%b, %one) @"at_least_one"
  %safe = Div(%a, %low) @"safe"
  %s = Add(%div, %half) @"sum"
  %t = Add(%s, %safe) @"sum2"
  output %t
  output %mod
})");
  run_frontend_or_die(*g);
  CHECK(count_op(*g, ops::kIndexCheck) == 2);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  const auto groups = groups_of(*plan);
  auto feed = [](std::vector<int64_t> b, std::vector<int64_t> c) {
    return TensorMap{{"a", Tensor::from_i64(DType::kI64, {2, 3}, {7, -7, 9, 100, -1, 5})},
                     {"b", Tensor::from_i64(DType::kI64, {2, 3}, b)},
                     {"c", Tensor::from_i64(DType::kI32, {3}, c)}};
  };
  for (const bool stitched : {false, true}) {
    INFO((stitched ? "stitched" : "alone"));
    codegen::Schedule s;
    const auto dir =
        compile_for_faults(*g, stitched ? "ds" : "da", stitched ? &groups : nullptr, nullptr, &s);
    std::vector<std::string> nodes = checked_nodes(s);
    std::sort(nodes.begin(), nodes.end());
    CHECK(nodes == std::vector<std::string>{"div", "mod"});
    rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
    CHECK(run_error(session, *g, feed({1, 2, -3, 4, -5, 6}, {1, -2, 3})) == "");
    CHECK_THAT(
        run_error(session, *g, feed({1, 2, 0, 4, -5, 6}, {1, -2, 3})),
        Catch::Contains("node 'div' (Div): an element of its divisor 'b' is 0 (integer division by zero)"));
    CHECK_THAT(run_error(session, *g, feed({1, 2, 3, 4, -5, 6}, {1, 0, 3})),
               Catch::Contains("node 'mod' (Mod): an element of its divisor 'c' is 0"));
    CHECK(run_error(session, *g, feed({1, 1, 1, 1, 1, 1}, {1, 1, 1})) == "");  // valid again after a fault
    std::filesystem::remove_all(dir);
  }
}

// A half-precision Sum of three adds in float32 and rounds once, in the reference as in a kernel:
// 1 + 2^-11 + 2^-11 is 1 + 2^-10 in float16. Rounding the partial sum first (a tie, to even) gave 1.
TEST_CASE("a float16 Sum of three rounds once on the reference and on emu", "[emu]") {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %a: f16[2]
  input %b: f16[2]
  input %c: f16[2]
  %s = Sum(%a, %b, %c) @"sum"
  %m = Mean(%a, %b, %c) @"mean"
  output %s
  output %m
})");
  run_frontend_or_die(*g);
  const double tiny = std::ldexp(1.0, -11);
  const TensorMap feed{{"a", Tensor::from_f64(DType::kF16, {2}, {1.0, 3.0})},
                       {"b", Tensor::from_f64(DType::kF16, {2}, {tiny, 0.0})},
                       {"c", Tensor::from_f64(DType::kF16, {2}, {tiny, 0.0})}};
  const Tensor sum = Tensor::from_f64(DType::kF16, {2}, {1.0 + std::ldexp(1.0, -10), 3.0});
  const Tensor mean = Tensor::from_f64(DType::kF16, {2}, {(1.0 + std::ldexp(1.0, -10)) / 3, 1.0});
  auto ref = run_reference(*g, feed);
  REQUIRE(ref.is_ok());
  const TensorMap got = planned_emu_run(*g, feed);
  for (const TensorMap* run : {static_cast<const TensorMap*>(&*ref), &got}) {
    CHECK(compare_tensors(run->at("s"), sum, kExact.rtol, kExact.atol).ok);
    CHECK(compare_tensors(run->at("m"), mean, kExact.rtol, kExact.atol).ok);
  }
}

TEST_CASE("a pooling window far larger than its input: the reference visits only what lies inside",
          "[pool]") {
  // SAME_UPPER pads a 1000 x 1000 window so that every one of the 4 x 5 outputs covers the whole
  // input: MaxPool gives each plane's maximum and its first position, AveragePool its mean, and
  // with count_include_pad the sum over the window's 1000 x 1000 positions (999 padded on each
  // axis). The reference takes each window's inside alone rather than its million positions.
  auto g = parse_or_die(R"(graph "g" opset 19 {
  input %x: f32[2,3,4,5]
  %mx, %ix = MaxPool(%x) {kernel_shape = ints[1000, 1000], auto_pad = "SAME_UPPER"} @"max"
  %avg = AveragePool(%x) {kernel_shape = ints[1000, 1000], auto_pad = "SAME_UPPER"} @"avg"
  %pad = AveragePool(%x) {kernel_shape = ints[1000, 1000], auto_pad = "SAME_UPPER", count_include_pad = 1} @"pad"
  %gmax = GlobalMaxPool(%x) @"gmax"
  %gavg = GlobalAveragePool(%x) @"gavg"
  output %mx
  output %ix
  output %avg
  output %pad
  output %gmax
  output %gavg
})");
  run_frontend_or_die(*g);
  const Tensor x = random_tensor(DType::kF32, {2, 3, 4, 5}, 11);
  auto ref = run_reference(*g, {{"x", x}});
  REQUIRE(ref.is_ok());
  const TensorMap& r = *ref;
  REQUIRE(r.at("mx").dims() == Dims{2, 3, 4, 5});
  for (int64_t plane = 0; plane < 6; ++plane) {
    int64_t first_max = plane * 20;
    double sum = 0;
    for (int64_t i = plane * 20; i < plane * 20 + 20; ++i) {
      sum += x.get_f64(i);
      if (x.get_f64(i) > x.get_f64(first_max)) first_max = i;
    }
    for (int64_t o = plane * 20; o < plane * 20 + 20; ++o) {
      INFO("plane " << plane << ", output " << o);
      CHECK(r.at("mx").get_f64(o) == r.at("gmax").get_f64(plane));
      CHECK(r.at("ix").get_i64(o) == first_max);
      CHECK(r.at("avg").get_f64(o) == Approx(r.at("gavg").get_f64(plane)).epsilon(1e-6));
      CHECK(r.at("pad").get_f64(o) == Approx(sum / 1e6).epsilon(1e-6));
    }
  }
}
