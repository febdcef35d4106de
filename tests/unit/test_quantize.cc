// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear written out by expand_quantize, planned
// by beam search and run on emu against the reference interpreter running the ops themselves,
// whose definitions ONNX's node tests check (test_quantizelinear_*, test_dequantizelinear_*,
// test_dynamicquantizelinear_*). The node tests give scales as inputs; these give them as the
// constants quantizers write, which the pass folds at compile time.
#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <tuple>

#include "codegen/schedule.h"
#include "fusion/rewrites.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// `text` written out (no QuantizeLinear, DequantizeLinear or DynamicQuantizeLinear left), planned
// and run on emu against the reference running the ops; returns the plan.
fusion::FusionPlan check_written_out(const std::string& text, const Tolerance& tol = kEmuF32) {
  return written_out_matches_op(text, {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}, 5,
                                tol);
}

}  // namespace

TEST_CASE("a QDQ layer: each quantize-dequantize pair fuses into the kernel beside the GEMM",
          "[quantize][emu]") {
  // As ONNX Runtime's static quantizer writes a layer: the activation quantized and dequantized
  // before the GEMM, the int8 weights dequantized per output column, the result after the Relu
  // quantized and dequantized again. Scales are powers of two, so every product and sum is exact
  // in float32 and the integers cannot round differently on emu and in the reference.
  uint32_t state = 3;
  std::string weights;
  for (int i = 0; i < 16 * 8; ++i) {
    state = state * 1664525u + 1013904223u;
    weights += fmt::format("{}{}", i ? ", " : "", static_cast<int>(state >> 24) - 128);
  }
  const std::string text = fmt::format(R"(graph "g" opset 21 {{
  input %x: f32[4,16]
  const %a_s: f32[] = [0.0625]
  const %a_z: u8[] = [128]
  const %w_q: i8[16,8] = [{}]
  const %w_s: f32[8] = [0.0078125, 0.015625, 0.0078125, 0.03125, 0.0078125, 0.015625, 0.00390625, 0.0078125]
  const %r_s: f32[] = [0.125]
  const %r_z: u8[] = [0]
  %xq = QuantizeLinear(%x, %a_s, %a_z) @"x_q"
  %xd = DequantizeLinear(%xq, %a_s, %a_z) @"x_dq"
  %wd = DequantizeLinear(%w_q, %w_s) {{axis = 1}} @"w_dq"
  %m = MatMul(%xd, %wd) @"gemm"
  %r = Relu(%m) @"relu"
  %rq = QuantizeLinear(%r, %r_s, %r_z) @"r_q"
  %rd = DequantizeLinear(%rq, %r_s, %r_z) @"r_dq"
  output %rd
}})",
                                       weights);
  const fusion::FusionPlan plan = check_written_out(text);
  // The weights are a float constant; the activation's pair is one kernel (or the GEMM's
  // prologue), the Relu and its pair one more.
  CHECK(plan.cost.kernels <= 2);
  CHECK(plan.cost.kernels + plan.cost.library_calls <= 3);
  CHECK(plan.cost.kernels < plan.unfused.kernels);
}

TEST_CASE("scales per tensor, per axis and in blocks, constant or computed, match the ops' reference",
          "[quantize][emu]") {
  // Blocked constant scales are repeated at compile time; a blocked scale computed at run time
  // is a Gather of its blocks. q is a uint8 input over the whole type (the test inputs' integers).
  check_written_out(R"(graph "g" opset 21 {
  input %q: u8[2,5]
  const %s: f32[2,3] = [0.5, 0.25, 2.0, 1.5, 0.75, 0.125]
  const %z: u8[2,3] = [1, 0, 3, 2, 6, 4]
  %y = DequantizeLinear(%q, %s, %z) {axis = 1, block_size = 2} @"dq"
  output %y
})");
  check_written_out(R"(graph "g" opset 21 {
  input %x: f32[2,5]
  input %s0: f32[2,3]
  const %two: f32[] = [2.0]
  %s = Add(%s0, %two) @"positive"
  %y = QuantizeLinear(%x, %s) {axis = 1, block_size = 2, output_dtype = 3} @"q"
  output %y
})");
  // Per axis on the first axis of a 3-D x, to int16 with its zero point; then back.
  check_written_out(R"(graph "g" opset 21 {
  input %x: f32[3,2,4]
  const %s: f32[3] = [0.01, 0.02, 0.005]
  const %z: i16[3] = [-100, 0, 250]
  %q = QuantizeLinear(%x, %s, %z) {axis = 0} @"q"
  %y = DequantizeLinear(%q, %s, %z) {axis = 0} @"dq"
  output %q
  output %y
})");
  // A float16 output (opset 23's output_dtype) and a float16 division (precision).
  check_written_out(R"(graph "g" opset 23 {
  input %q: i8[4,6]
  input %x: f16[4,6]
  const %s: f32[] = [0.3]
  const %h: f16[6] = [0.5, 0.25, 0.75, 0.1, 0.2, 1.0]
  %y = DequantizeLinear(%q, %s) {output_dtype = 10} @"dq"
  %xq = QuantizeLinear(%x, %h) {axis = 1, precision = 10, output_dtype = 3} @"q"
  output %y
  output %xq
})",
                    kEmuF16Output);
}

TEST_CASE("DynamicQuantizeLinear: the range, scale and zero point of x, then x quantized",
          "[quantize][emu]") {
  const fusion::FusionPlan plan = check_written_out(R"(graph "g" opset 13 {
  input %x: f32[6,40]
  %y, %s, %z = DynamicQuantizeLinear(%x) @"dq"
  output %y
  output %s
  output %z
})");
  CHECK(plan.cost.kernels < plan.unfused.kernels);
  // All positive or all negative, where the range widened to 0 fixes the zero point at an end.
  check_written_out(R"(graph "g" opset 13 {
  input %x: f32[3,7]
  const %four: f32[] = [4.0]
  %p = Add(%x, %four) @"positive"
  %n = Sub(%x, %four) @"negative"
  %yp, %sp, %zp = DynamicQuantizeLinear(%p) @"dq_p"
  %yn, %sn, %zn = DynamicQuantizeLinear(%n) @"dq_n"
  output %yp
  output %zp
  output %yn
  output %zn
})");
}

TEST_CASE("a dequantized value quantized again with the same parameters: the integers, exactly",
          "[quantize][emu]") {
  // The arithmetic skip_requantize relies on, for 8- and 16-bit types: an integer d (|d| < 2^16)
  // times a normal float32 scale s, then divided by s, rounds back to d, for scales across the
  // exponent range the pass takes (from FLT_MIN to FLT_MAX / 2^16) and at both ends of it.
  std::vector<float> scales{FLT_MIN, std::nextafter(FLT_MIN, 1.0f), FLT_MAX / 65536.0f, 0.0123f, 1.0f / 3.0f,
                            0.1f,    1.0f - FLT_EPSILON / 2,        1.0f + FLT_EPSILON, 6.0e-5f};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-125.0f, 110.0f), mantissa(1.0f, 2.0f);
  for (int i = 0; i < 200; ++i) scales.push_back(std::ldexp(mantissa(rng), static_cast<int>(exponent(rng))));
  int64_t wrong = 0;
  for (const float s : scales) {
    REQUIRE(std::isnormal(s));
    REQUIRE(s <= FLT_MAX / 65536.0f);
    for (int d = -65535; d <= 65535; ++d) {
      volatile float product = static_cast<float>(d) * s;  // rounded to float32 before the division
      volatile float ratio = product / s;
      wrong += std::rint(ratio) != static_cast<float>(d);
    }
  }
  CHECK(wrong == 0);

  // ONNX Runtime's quantizer's form: a pair of one scale around each op that only moves values.
  // After the front end, one division (the first QuantizeLinear); the second reads the integers
  // through a Reshape and a Transpose of them. On emu against the reference running every op.
  const std::string moved = R"(graph "g" opset 21 {
  input %x: f32[4,6,8]
  const %s: f32[] = [0.0123]
  const %z: u8[] = [131]
  const %shape: i64[2] = [4, 48]
  %q1 = QuantizeLinear(%x, %s, %z) @"q1"
  %d1 = DequantizeLinear(%q1, %s, %z) @"d1"
  %r = Reshape(%d1, %shape) @"r"
  %t = Transpose(%r) {perm = ints[1, 0]} @"t"
  %q2 = QuantizeLinear(%t, %s, %z) @"q2"
  %d2 = DequantizeLinear(%q2, %s, %z) @"d2"
  output %q2
  output %d2
  output %d1
})";
  const auto divisions = [](const std::string& text) {
    auto g = parse_or_die(text);
    run_frontend_or_die(*g);
    return count_op(*g, "Div");
  };
  CHECK(divisions(moved) == 1);
  check_written_out(moved);
  // int16 with a zero point, through Unsqueeze, Flatten and Squeeze, and a pair with nothing between.
  const std::string int16 = R"(graph "g" opset 21 {
  input %x: f32[3,10]
  const %s: f32[] = [0.00037]
  const %z: i16[] = [-300]
  const %ax: i64[1] = [0]
  %q1 = QuantizeLinear(%x, %s, %z) @"q1"
  %d1 = DequantizeLinear(%q1, %s, %z) @"d1"
  %u = Unsqueeze(%d1, %ax) @"u"
  %f = Flatten(%u) {axis = 1} @"f"
  %sq = Squeeze(%f, %ax) @"sq"
  %q2 = QuantizeLinear(%sq, %s, %z) @"q2"
  %d2 = DequantizeLinear(%q2, %s, %z) @"d2"
  %q3 = QuantizeLinear(%d2, %s, %z) @"q3"
  output %q3
})";
  CHECK(divisions(int16) == 1);
  check_written_out(int16);
  // Not the same quantization, or not only moved: each QuantizeLinear divides.
  for (const auto& [why, second, between] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"another scale", "%q2 = QuantizeLinear(%t, %s2, %z)", "%t = Transpose(%d1) {perm = ints[1, 0]}"},
           {"another zero point", "%q2 = QuantizeLinear(%t, %s, %z2)",
            "%t = Transpose(%d1) {perm = ints[1, 0]}"},
           {"arithmetic between", "%q2 = QuantizeLinear(%t, %s, %z)", "%t = Relu(%d1)"},
           {"a float16 result between", "%q2 = QuantizeLinear(%t, %s, %z)",
            "%t = DequantizeLinear(%q1, %s, %z) {output_dtype = 10}"}}) {
    INFO(why);
    const std::string text = fmt::format(R"(graph "g" opset 23 {{
  input %x: f32[5,7]
  const %s: f32[] = [0.0123]
  const %s2: f32[] = [0.0124]
  const %z: u8[] = [131]
  const %z2: u8[] = [130]
  %q1 = QuantizeLinear(%x, %s, %z) @"q1"
  %d1 = DequantizeLinear(%q1, %s, %z) @"d1"
  {} @"between"
  {} @"q2"
  output %q2
  output %d1
}})",
                                         between, second);
    CHECK(divisions(text) == 2);
    check_written_out(text, why == "a float16 result between" ? kEmuF16Output : kEmuF32);
  }
  // A scale per axis, or one that is not a normal number (a subnormal), is not taken either.
  for (const std::string scale : {"const %s: f32[2] = [0.0123, 0.05]", "const %s: f32[] = [1e-39]"}) {
    INFO(scale);
    const std::string axis = scale.find("[2]") != std::string::npos ? " {axis = 0}" : "";
    const std::string text = fmt::format(R"(graph "g" opset 21 {{
  input %x: f32[2,9]
  {}
  const %z: u8[] = [7]
  %q1 = QuantizeLinear(%x, %s{}){} @"q1"
  %d1 = DequantizeLinear(%q1, %s{}){} @"d1"
  %q2 = QuantizeLinear(%d1, %s{}){} @"q2"
  output %q2
}})",
                                         scale, axis.empty() ? ", %z" : "", axis, axis.empty() ? ", %z" : "",
                                         axis, axis.empty() ? ", %z" : "", axis);
    CHECK(divisions(text) == 2);
    check_written_out(text);
  }
}

TEST_CASE("quantization ops that do not fit are refused, naming the node", "[quantize]") {
  CHECK(frontend_error(R"(graph "g" opset 11 {
  input %x: f32[2,3]
  const %s: f32[3] = [1.0, 2.0, 3.0]
  %y = QuantizeLinear(%x, %s) @"q"
  output %y
})") == "node 'q' (QuantizeLinear): its scale has shape 3; before opset 13 it is one value for all of x");
  CHECK(frontend_error(R"(graph "g" opset 21 {
  input %x: f32[2,3]
  const %s: f32[] = [1.0]
  const %z: i8[] = [0]
  %y = QuantizeLinear(%x, %s, %z) {output_dtype = 2} @"q"
  output %y
})") == "node 'q' (QuantizeLinear): output_dtype 2 (UINT8) differs from the zero point's type i8");
  CHECK(frontend_error(R"(graph "g" opset 21 {
  input %x: f32[2,3]
  const %s: f32[] = [1.0]
  %y = QuantizeLinear(%x, %s) {output_dtype = 6} @"q"
  output %y
})") == "node 'q' (QuantizeLinear): quantizing to i32 is not supported: int8, uint8, int16 or uint16");
  CHECK(frontend_error(R"(graph "g" opset 21 {
  input %x: f32[2,3]
  const %s: f32[] = [1.0]
  %y = QuantizeLinear(%x, %s) {output_dtype = 17} @"q"
  output %y
})") == "node 'q' (QuantizeLinear): output_dtype 17 (FLOAT8E4M3FN) is not supported: int8, uint8, int16 or "
        "uint16");
  CHECK(frontend_error(R"(graph "g" opset 21 {
  input %x: u8[2,3]
  const %s: f32[2] = [1.0, 2.0]
  const %z: u8[3] = [1, 2, 3]
  %y = DequantizeLinear(%x, %s, %z) @"dq"
  output %y
})") == "node 'dq' (DequantizeLinear): its zero point's shape 3 differs from its scale's 2");
  CHECK(frontend_error(R"(graph "g" opset 23 {
  input %x: u8[2,3]
  const %s: f32[] = [1.0]
  %y = DequantizeLinear(%x, %s) {output_dtype = 6} @"dq"
  output %y
})") == "node 'dq' (DequantizeLinear): output_dtype 6 (INT32) is not float, float16 or bfloat16");
  CHECK(frontend_error(R"(graph "g" opset 21 {
  input %x: f32[2,4]
  const %s: f32[2,2] = [1.0, 1.0, 1.0, 1.0]
  %y = QuantizeLinear(%x, %s) {axis = 1, block_size = -2} @"q"
  output %y
})") == "node 'q' (QuantizeLinear): block_size must be positive, got -2");
  CHECK(frontend_error(R"(graph "g" opset 23 {
  input %x: f32[2,3]
  const %s: f64[] = [1.0]
  %y = QuantizeLinear(%x, %s) @"q"
  output %y
})") == "node 'q' (QuantizeLinear): expects a float, float16 or bfloat16 scale (or int32), got f64");
  CHECK(frontend_error(R"(graph "g" opset 23 {
  input %x: i8[2,3]
  const %s: i32[] = [2]
  %y = DequantizeLinear(%x, %s) @"dq"
  output %y
})") == "node 'dq' (DequantizeLinear): expects a float, float16 or bfloat16 scale, got i32");
}

TEST_CASE("QuantizeLinear by an int32 scale divides in float64, as ONNX's reference does",
          "[quantize][emu]") {
  // Ties at the halves go to even. In float32 the first two would be ties too (65568769 is 1000.5
  // times 65536, plus 1, which float32 cannot hold) and round to 997 and -1003. The expected values
  // are what onnx 1.23.2's reference evaluator gives for these inputs.
  auto g = parse_or_die(R"(graph "g" opset 21 {
  input %x: i32[8]
  const %s: i32[] = [65536]
  const %z: i16[] = [-3]
  %y = QuantizeLinear(%x, %s, %z) @"q"
  output %y
})");
  const TensorMap feed{{"x", Tensor::from_i64(DType::kI32, {8},
                                              {65568769, -65568769, 65568768, 98304, 163840, -98304,
                                               2147483647, -2147483648LL})}};
  const std::vector<int64_t> want{998, -1004, 997, -1, -1, -5, 32765, -32768};
  auto ref = run_reference(*g, feed);
  REQUIRE(ref.is_ok());
  CHECK(ref->at("y").dtype() == DType::kI16);
  CHECK(ref->at("y").to_i64() == want);
  run_frontend_or_die(*g);
  CHECK(planned_emu_run(*g, feed).at("y").to_i64() == want);
}

TEST_CASE("the shipped QDQ models as stitchc compiles them: every quantize-dequantize pair inside a kernel",
          "[quantize][fusion][models]") {
  // bert_tiny_qdq and cnn_small_qdq (ONNX Runtime's quantizer on bert_tiny and cnn_small) through
  // the rewrites stitchc runs: the weights' DequantizeLinears are float constants, each activation's
  // pair (Div, Round, Clip, the Casts) shares a kernel with the element-wise work around it.
  // 2026-11-27: bert_tiny_qdq 14 kernels + 6 calls (bert_tiny 10 + 11: the fake-quantized Q.K^T and
  // P.V are loops in the attention kernels), cnn_small_qdq 13 + 9 (cnn_small 11 + 9: a pair after a
  // convolution whose ReLU is cuDNN's epilogue is a kernel of its own). Their emu runs against
  // onnxruntime's outputs are in tests/e2e/backend_tests.sh. 2026-11-30: with the pairs around
  // Reshapes and Transposes skipped (skip_requantize), bert_tiny_qdq is 12 kernels + 7 calls, the
  // second layer's attention output projection a call rather than a loop: estimated 96.4 us,
  // against 100.6 us for 12 + 6 with the pairs. 2026-12-06: cnn_small_qdq 11 + 9, its stem's
  // MaxPool as taps (fusion/pool_taps.h) in the kernel of the pair before it.
  const std::map<std::string, std::pair<size_t, size_t>> most = {{"bert_tiny_qdq", {14, 7}},
                                                                 {"cnn_small_qdq", {11, 9}}};
  for (const auto& [name, limit] : most) {
    INFO(name);
    auto g = prepared_model(name);
    auto rewrites = fusion::rewrite_for_planning(g, opts("beam"));
    REQUIRE(rewrites.is_ok());
    auto plan = fusion::make_plan(*g, opts("beam"));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    int rounds = 0;
    for (const auto& grp : plan->groups)
      if (has_op(grp, "Round")) {
        ++rounds;
        CHECK(grp.nodes.size() >= 5);  // at least the quantization itself: Div, Round, Add, Clip, Cast
      }
    CHECK(rounds > 0);
    auto s = schedule_of(*g, *plan);
    REQUIRE(s.is_ok());
    CHECK(s->kernels.size() <= limit.first);
    CHECK(s->calls.size() <= limit.second);
  }
}
