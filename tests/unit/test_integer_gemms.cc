// MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv written out by expand_integer_gemms,
// planned by beam search and run on emu against the reference interpreter running the ops
// themselves (exact integer sums; ONNX's node tests check it: test_matmulinteger,
// test_convinteger_*, test_qlinearmatmul_*, test_qlinearconv). The node tests give every operand as
// an input; these give weights, scales and zero points as the constants quantizers write.
#include <fmt/format.h>

#include "codegen/schedule.h"
#include "fusion/rewrites.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

const std::set<std::string> kIntegerOps{"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv",
                                        "DynamicQuantizeLinear"};

// `count` integers in [lo, hi] from an LCG, comma-separated.
std::string ints(uint32_t& state, int64_t count, int lo, int hi) {
  std::string s;
  for (int64_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    s += fmt::format("{}{}", i ? ", " : "", lo + static_cast<int>((state >> 8) % uint32_t(hi - lo + 1)));
  }
  return s;
}

// The element types of the MatMul and Conv nodes `text` has after the front end.
std::vector<DType> product_types(const std::string& text) {
  auto g = parse_or_die(text);
  run_frontend_or_die(*g);
  std::vector<DType> types;
  for (const auto& n : g->nodes())
    if (n->op_type == "MatMul" || n->op_type == "Conv") types.push_back(n->output(0)->dtype);
  return types;
}

}  // namespace

TEST_CASE("a dynamically quantized layer (DynamicQuantizeLinear, MatMulInteger, Cast, Mul) runs on emu",
          "[integer_gemm][emu]") {
  // As ONNX Runtime's quantize_dynamic writes a Linear: the activation quantized at run time, the
  // int8 weights a constant, the int32 product made float and scaled by both scales, then the bias.
  uint32_t state = 5;
  const std::string text = fmt::format(R"(graph "g" opset 17 {{
  input %x: f32[6,32]
  const %w: i8[32,16] = [{}]
  const %w_zp: i8[] = [0]
  const %w_s: f32[] = [0.0125]
  const %bias: f32[16] = [{}]
  %xq, %x_s, %x_zp = DynamicQuantizeLinear(%x) @"quantize"
  %p = MatMulInteger(%xq, %w, %x_zp, %w_zp) @"matmul"
  %pf = Cast(%p) {{to = 1}} @"cast"
  %s = Mul(%x_s, %w_s) @"scales"
  %y = Mul(%pf, %s) @"scaled"
  %z = Add(%y, %bias) @"bias"
  output %z
  output %p
}})",
                                       ints(state, 32 * 16, -127, 127), ints(state, 16, -9, 9));
  const fusion::FusionPlan plan = written_out_matches_op(text, kIntegerOps, 3);
  // 32 x 255 x 127 is under 2^24: the product is a float32 GEMM, exact.
  CHECK(product_types(text) == std::vector<DType>{DType::kF32});
  // The quantization (a reduction over all of x: its statistics, then the quantized values), the
  // product (a library call, or a loop in a stitched kernel at this size) and its epilogue.
  CHECK(plan.cost.kernels + plan.cost.library_calls <= 4);
}

TEST_CASE("Q, K and V quantized once: one centered activation, and their GEMMs merge into one",
          "[integer_gemm][emu]") {
  uint32_t state = 29;
  std::string text = R"(graph "g" opset 17 {
  input %x: f32[8,16]
  const %zp: i8[] = [0]
)";
  for (const char* w : {"wq", "wk", "wv"})
    text += fmt::format("  const %{}: i8[16,16] = [{}]\n", w, ints(state, 256, -127, 127));
  text += R"(  %xq, %s, %z = DynamicQuantizeLinear(%x) @"quantize"
  %q = MatMulInteger(%xq, %wq, %z, %zp) @"q"
  %k = MatMulInteger(%xq, %wk, %z, %zp) @"k"
  %v = MatMulInteger(%xq, %wv, %z, %zp) @"v"
  output %q
  output %k
  output %v
}
)";
  written_out_matches_op(text, kIntegerOps, 37);
  auto g = parse_or_die(text);
  run_frontend_or_die(*g);
  size_t centered = 0;
  for (const auto& n : g->nodes()) centered += n->op_type == "Sub" && *n->output(0)->dims == Dims{8, 16};
  CHECK(centered == 1);
  auto rewrites = fusion::rewrite_for_planning(g, opts("beam"));
  REQUIRE(rewrites.is_ok());
  size_t products = 0;
  for (const auto& n : g->nodes()) products += n->op_type == "MatMul";
  CHECK(products == 1);  // merge_gemms: one product with the three weights side by side
}

TEST_CASE("an integer product whose sums pass 2^24 is a float64 GEMM, exact where float32 would round",
          "[integer_gemm][emu]") {
  // A's values are 0 to 6 less a zero point of 255 per row, B's 100 to 127: 1024 products of about
  // -255 x 113 sum to about -3e7, past the integers float32 holds; the int32 outputs are compared
  // exactly, so a float32 GEMM fails this.
  uint32_t state = 11;
  const std::string text = fmt::format(R"(graph "g" opset 17 {{
  input %a: u8[2,1024]
  const %b: i8[1024,3] = [{}]
  const %a_zp: u8[2] = [255, 250]
  const %b_zp: i8[3] = [0, -1, 2]
  %p = MatMulInteger(%a, %b, %a_zp, %b_zp) @"matmul"
  output %p
}})",
                                       ints(state, 1024 * 3, 100, 127));
  const IntInputsIn small_a(0, 6);
  written_out_matches_op(text, kIntegerOps, 7);
  CHECK(product_types(text) == std::vector<DType>{DType::kF64});
}

TEST_CASE("QLinearMatMul with per-row and per-column scales and zero points, batched, on emu",
          "[integer_gemm][emu]") {
  uint32_t state = 17;
  const std::string text = fmt::format(R"(graph "g" opset 21 {{
  input %a: u8[2,4,24]
  input %a_s: f32[4]
  const %a_zp: u8[4] = [3, 0, 1, 2]
  const %b: i8[24,5] = [{}]
  const %b_s: f32[5] = [0.02, 0.03, 0.015, 0.05, 0.04]
  const %b_zp: i8[5] = [0, 1, -1, 2, 0]
  const %y_s: f32[4] = [0.5, 0.25, 0.75, 1.0]
  const %y_zp: i8[4] = [-3, 0, 5, 1]
  %y = QLinearMatMul(%a, %a_s, %a_zp, %b, %b_s, %b_zp, %y_s, %y_zp) @"qmatmul"
  output %y
}})",
                                       ints(state, 24 * 5, -127, 127));
  written_out_matches_op(text, kIntegerOps, 13);
  CHECK(product_types(text) == std::vector<DType>{DType::kF32});
}

TEST_CASE("QLinearConv and ConvInteger with per-channel weights, a bias, strides and pads, on emu",
          "[integer_gemm][emu]") {
  uint32_t state = 23;
  const std::string weights = ints(state, 4 * 3 * 3 * 3, -127, 127);
  const fusion::FusionPlan plan = written_out_matches_op(fmt::format(R"(graph "g" opset 13 {{
  input %x: u8[2,3,9,9]
  const %x_s: f32[] = [0.05]
  const %x_zp: u8[] = [2]
  const %w: i8[4,3,3,3] = [{0}]
  const %w_s: f32[4] = [0.01, 0.02, 0.005, 0.04]
  const %w_zp: i8[4] = [0, 1, -2, 0]
  const %y_s: f32[] = [0.3]
  const %y_zp: u8[] = [128]
  const %bias: i32[4] = [100, -250, 7, 0]
  %y = QLinearConv(%x, %x_s, %x_zp, %w, %w_s, %w_zp, %y_s, %y_zp, %bias) {{pads = ints[1, 1, 1, 1], strides = ints[2, 2]}} @"qconv"
  %c = ConvInteger(%x, %w, %x_zp, %w_zp) {{group = 1}} @"iconv"
  output %y
  output %c
}})",
                                                                     weights),
                                                         kIntegerOps, 19);
  CHECK(plan.cost.library_calls == 2);
  // Convolutions sum in float64 whatever their size: cuDNN's Winograd and FFT algorithms round.
  CHECK(product_types(fmt::format(R"(graph "g" opset 13 {{
  input %x: u8[1,3,5,5]
  const %w: i8[4,3,3,3] = [{}]
  %c = ConvInteger(%x, %w) @"iconv"
  output %c
}})",
                                  weights)) == std::vector<DType>{DType::kF64});
}

TEST_CASE("integer GEMM operands, zero points, scales and biases of the wrong type or shape are refused",
          "[integer_gemm]") {
  const auto matmul = [](const std::string& a, const std::string& zp) {
    return fmt::format(R"(graph "g" opset 17 {{
  input %a: {}
  input %b: i8[8,3]
  input %zp: {}
  %p = MatMulInteger(%a, %b, %zp) @"mm"
  output %p
}})",
                       a, zp);
  };
  CHECK(frontend_error(matmul("u8[4,8]", "i8[]")) ==
        "node 'mm' (MatMulInteger): a_zero_point is i8 but A is u8; a zero point has its tensor's type");
  CHECK(frontend_error(matmul("u8[4,8]", "u8[5]")) ==
        "node 'mm' (MatMulInteger): a_zero_point has shape 5; it must be one value, or one per row of "
        "the product (4 values)");
  CHECK(frontend_error(matmul("u8[2,4,8]", "u8[2,1,1]")) ==
        "node 'mm' (MatMulInteger): a_zero_point has shape 2x1x1; it must be one value, or one per row "
        "of the product (4 values)");
  CHECK(frontend_error(matmul("u8[2,4,8]", "u8[2,4,1]")).empty());
  const auto qconv = [](const std::string& x_zp, const std::string& bias) {
    return fmt::format(R"(graph "g" opset 13 {{
  input %x: u8[1,3,5,5]
  input %x_zp: {}
  input %w: i8[4,3,3,3]
  input %bias: {}
  const %s: f32[] = [0.5]
  const %w_zp: i8[] = [0]
  const %y_zp: u8[] = [0]
  %y = QLinearConv(%x, %s, %x_zp, %w, %s, %w_zp, %s, %y_zp, %bias) @"qconv"
  output %y
}})",
                       x_zp, bias);
  };
  CHECK(frontend_error(qconv("u8[3]", "i32[4]")) ==
        "node 'qconv' (QLinearConv): x_zero_point has shape 3; it must be one value (per tensor)");
  CHECK(frontend_error(qconv("u8[]", "i32[3]")) ==
        "node 'qconv' (QLinearConv): B has shape 3; it must be one value, or one per output channel (4 "
        "values)");
  CHECK(frontend_error(qconv("u8[]", "i32[4]")).empty());
  // QLinearConv has one version, of float32 scales; QLinearMatMul's opset 21 takes float16 too.
  CHECK(frontend_error(R"(graph "g" opset 21 {
  input %x: u8[1,3,5,5]
  input %w: i8[4,3,3,3]
  const %s: f16[] = [0.5]
  const %z: u8[] = [0]
  const %wz: i8[] = [0]
  %y = QLinearConv(%x, %s, %z, %w, %s, %wz, %s, %z) @"qconv"
  output %y
})") == "node 'qconv' (QLinearConv): x_scale is f16; scales are float32");
}

TEST_CASE("the shipped integer-GEMM models as stitchc compiles them: kernel counts that must not grow",
          "[integer_gemm][fusion][models]") {
  // bert_tiny_dyn (ONNX Runtime's dynamic quantizer on bert_tiny) and cnn_small_qop (its operator
  // format on cnn_small) through the rewrites stitchc runs. Each MatMulInteger's activation is
  // quantized at run time from its whole tensor's range: a reduction of all of it before the
  // quantization, both in one kernel with a grid-wide barrier. Their emu runs against
  // onnxruntime's outputs are in tests/e2e/backend_tests.sh. 2026-11-27: bert_tiny_dyn 15 kernels
  // + 9 calls (bert_tiny_qdq 14 + 6; 37 + 10 when DynamicQuantizeLinear's statistics dropped their
  // axes: its ReduceMin, ReduceMax and scalar arithmetic were kernels of their own; 18 + 7 before
  // Q, K and V shared one centered activation, so that their GEMMs merge), cnn_small_qop 13 + 9
  // (cnn_small_qdq's). 2026-12-06: cnn_small_qop 11 + 9, its stem's MaxPool as taps
  // (fusion/pool_taps.h) in the kernel of the quantize-dequantize pair before it.
  const std::map<std::string, std::pair<size_t, size_t>> most = {{"bert_tiny_dyn", {15, 9}},
                                                                 {"cnn_small_qop", {11, 9}}};
  for (const auto& [name, limit] : most) {
    INFO(name);
    auto g = prepared_model(name);
    for (const auto& n : g->nodes()) CHECK(!kIntegerOps.count(n->op_type));
    auto rewrites = fusion::rewrite_for_planning(g, opts("beam"));
    REQUIRE(rewrites.is_ok());
    auto plan = fusion::make_plan(*g, opts("beam"));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    auto s = schedule_of(*g, *plan);
    REQUIRE(s.is_ok());
    CHECK(s->kernels.size() <= limit.first);
    CHECK(s->calls.size() <= limit.second);
  }
}
