// DFT (ops/signal.cc) and its expansion into one MatMul by a constant weight matrix (expand_dft):
// the op's own evaluation and the expansion against ONNX's expected outputs (ONNX's three node
// tests and tests/onnx_node/extra's, whose outputs ONNX's reference implementation computed with
// numpy's FFT), the expansion's shape, the fused plan on emu, and the errors.
#include <fmt/format.h>

#include "backend_test_util.h"
#include "codegen/lower.h"
#include "fusion_test_util.h"
#include "importer/tensor_io.h"
#include "reference/compare.h"
#include "support/tolerances.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;

namespace {

namespace fs = std::filesystem;

const std::vector<fs::path>& dft_tests() {
  static const std::vector<fs::path> dirs = [] {
    std::vector<fs::path> d;
    for (const char* n : {"test_dft", "test_dft_axis", "test_dft_inverse"})
      d.push_back(fs::path(ONNX_TESTDATA_DIR) / "node" / n);
    for (const char* n : {"test_dft_stitch_onesided_padded_17", "test_dft_stitch_irfft_default_length_20",
                          "test_dft_stitch_irfft_odd_length_20", "test_dft_stitch_complex_cut_17",
                          "test_dft_stitch_inverse_real_20", "test_dft_stitch_axis_input_20"})
      d.push_back(fs::path(STITCH_SOURCE_DIR) / "tests" / "onnx_node" / "extra" / n);
    return d;
  }();
  return dirs;
}

Tensor expected(const fs::path& dir) {
  auto want = read_tensor_file((dir / "test_data_set_0" / "output_0.pb").string());
  REQUIRE(want.is_ok());
  return want->tensor;
}

void check_close(const Tensor& got, const Tensor& want, const Tolerance& tol) {
  const CompareResult r = compare_tensors(got, want, tol.rtol, tol.atol);
  INFO(r.mismatches << " mismatches, max abs " << r.max_abs << " " << r.problem);
  CHECK(r.ok);
}

// dft_length and axis (inputs 1 and 2) as constants, as models hold them.
std::pair<std::unique_ptr<Graph>, TensorMap> load(const fs::path& dir) {
  return test::load_node_test(dir, [](size_t i) { return i > 0; });
}

// Relu -> DFT of x (`type`) with `attrs` and the operands `extra` (", %len" ...) -> Relu.
std::string dft_graph(const std::string& type, const std::string& attrs, const std::string& consts = "",
                      const std::string& extra = "", int opset = 17) {
  return fmt::format(R"(graph "d" opset {} {{
  input %x: {}
{}  %r = Relu(%x) @"before"
  %y = DFT(%r{}) {} @"dft"
  %z = Relu(%y) @"after"
  output %z
}}
)",
                     opset, type, consts, extra, attrs.empty() ? "" : "{" + attrs + "}");
}

// A constant's values: n zeros.
std::string zeros(int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += i ? ", 0.0" : "0.0";
  return s + "]";
}

}  // namespace

TEST_CASE("DFT's own evaluation computes ONNX's expected outputs", "[dft][reference]") {
  for (const fs::path& dir : dft_tests()) {
    INFO(dir.filename().string());
    REQUIRE(fs::exists(dir));
    auto [g, feed] = load(dir);
    PassContext ctx;
    REQUIRE(infer_shapes(*g, ctx).is_ok());  // shapes only: the DFT node itself is evaluated
    REQUIRE(count_op(*g, "DFT") == 1);
    auto got = run_reference(*g, feed);
    REQUIRE(got.is_ok());
    check_close(got->at(g->outputs[0]->name), expected(dir), kOnnxNodeTest);
  }
}

TEST_CASE("a DFT is one MatMul by its weights, on emu too, and computes ONNX's expected outputs",
          "[dft][passes][emu]") {
  for (const fs::path& dir : dft_tests()) {
    INFO(dir.filename().string());
    auto [g, feed] = load(dir);
    test::run_frontend_or_die(*g);
    CHECK(count_op(*g, "DFT") == 0);
    CHECK(count_op(*g, "MatMul") == 1);
    CHECK(count_op(*g, "Transpose") <= 2);
    auto ref = run_reference(*g, feed);
    REQUIRE(ref.is_ok());
    const Tensor want = expected(dir);
    check_close(ref->at(g->outputs[0]->name), want, kOnnxNodeTest);
    check_close(test::emu_run(*g, nullptr, feed).at(g->outputs[0]->name), want, kOnnxNodeTest);
  }
}

TEST_CASE("the transformed axis moves beside the parts axis and back, in the kernels around the GEMM",
          "[dft][passes][fusion]") {
  // FNet's transform along the sequence of [batch, sequence, hidden, parts].
  auto g = test::parse_or_die(dft_graph("f32[2,6,5,2]", "axis = 1"));
  test::run_frontend_or_die(*g);
  CHECK(count_op(*g, "Transpose") == 2);
  CHECK(g->find_value("y")->type_string() == "f32[2x6x5x2]");
  // Along the last signal axis: no Transpose; a one-sided transform of real values.
  auto last = test::parse_or_die(dft_graph("f32[3,8,1]", "axis = 1, onesided = 1"));
  test::run_frontend_or_die(*last);
  CHECK(count_op(*last, "Transpose") == 0);
  CHECK(last->find_value("y")->type_string() == "f32[3x5x2]");
  uint32_t seed = 21;
  // With the GEMM a library call, as at a model's sizes, the Relus and Transposes join kernels
  // before and after it: nothing runs alone. Without the Transpose after it, the GEMM's epilogue
  // takes the last Relu. At these sizes the planner may also stitch the product into one kernel.
  CHECK(test::fused_matches_reference(*g, seed++, test::opts_lib("beam")) == 2);
  CHECK(test::fused_matches_reference(*last, seed++, test::opts_lib("beam")) == 1);
  CHECK(test::fused_matches_reference(*g, seed++, test::opts("beam")) <= 2);
  // In float16 along the last signal axis: the weights in float16, the GEMM accumulating in float32.
  auto half = test::parse_or_die(dft_graph("f16[2,6,5,2]", "axis = 2, inverse = 1"));
  test::run_frontend_or_die(*half);
  CHECK(count_op(*half, "DFT") == 0);
  CHECK(test::fused_matches_reference(*half, seed++, test::opts_lib("beam"), kEmuF16Chain) == 1);
}

TEST_CASE("DFT errors name the node and what to change", "[dft][passes]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dft_graph("f32[2,4,3]", ""), "must end in an axis of 1 (real values) or 2"},
      {dft_graph("f32[2,4,2]", "axis = 2"), "axis 2 is not a signal axis of the rank-3 input"},
      {dft_graph("f32[2,4,2]", "axis = -1"), "axis -1 is not a signal axis"},
      {dft_graph("f32[2,4,1]", "axis = 1, inverse = 1, onesided = 1"),
       "an inverse one-sided DFT (IRFFT) takes complex input"},
      {dft_graph("f32[2,1,2]", "axis = 1, inverse = 1, onesided = 1"),
       "dft_length is 0; it must be positive"},
      {dft_graph("f32[2,4,2]", "axis = 1", "  const %len: i64[] = [0]\n", ", %len"),
       "dft_length is 0; it must be positive"},
      {dft_graph("f32[2,4,2]", "", "  const %ax: i64[] = [1]\n", ", _, %ax"),
       "takes its axis as an attribute before opset 20"},
      {dft_graph("f32[2,4,2]", "", "  input %len: i64[]\n", ", %len"),
       "its dft_length (input 1 'len') is computed at run time"},
      {dft_graph("i32[2,4,2]", "axis = 1"), "input 0 is i32; DFT takes floating-point values"},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    const std::string msg = test::frontend_error(text);
    INFO(msg);
    CHECK(msg.find("node 'dft' (DFT)") != std::string::npos);
    CHECK(msg.find(message) != std::string::npos);
  }
  // Opset 20's axis input is taken, and a transform whose weights would pass 2^24 elements stays a
  // DFT, which the back end then refuses by name.
  auto axis20 = test::parse_or_die(dft_graph("f32[2,4,2]", "", "  const %ax: i64[] = [1]\n", ", _, %ax", 20));
  test::run_frontend_or_die(*axis20);
  CHECK(count_op(*axis20, "DFT") == 0);
  auto big = test::parse_or_die(dft_graph("f32[1,5000,2]", "axis = 1"));
  test::run_frontend_or_die(*big);
  REQUIRE(count_op(*big, "DFT") == 1);
  std::string why;
  for (const auto& n : big->nodes())
    if (n->op_type == "DFT") CHECK(codegen::classify_node(*n, &why) == codegen::NodeLowering::kUnsupported);
  CHECK(why.find("would need a weight matrix of more than 16777216 elements") != std::string::npos);
  CHECK(why.find("--backend reference") != std::string::npos);
}

TEST_CASE("a DFT of real values made complex with zeros, read for its real parts, takes half the weights",
          "[dft][passes][emu]") {
  // torch.fft.fftn(x).real as PyTorch exports it (FNet's mixing): the real values concatenated
  // with zeros as imaginary parts, two transforms, and a Gather of the real parts.
  const std::string text = R"(graph "f" opset 18 {
  input %x: f32[2,6,4]
  const %zeros: f32[2,6,4,1] = )" +
                           zeros(48) + R"(
  const %last: i64[1] = [-1]
  const %real: i64[] = [0]
  %u = Unsqueeze(%x, %last) @"unsqueeze"
  %c = Concat(%u, %zeros) {axis = -1} @"complex"
  %f1 = DFT(%c) {axis = 2} @"hidden"
  %f2 = DFT(%f1) {axis = 1} @"sequence"
  %re = Gather(%f2, %real) {axis = 3} @"take_real"
  %z = Add(%re, %x) @"residual"
  output %z
}
)";
  const test::RewriteRun r = test::run_rewrite(text, 3);
  const Graph* g = r.graph.get();
  CHECK(count_op(*g, "DFT") == 0);
  CHECK(count_op(*g, "Concat") == 0);  // the first transform reads %u: [x, 4] by [4, 8] weights
  CHECK(g->find_value("hidden/weights")->type_string() == "f32[4x8]");
  CHECK(g->find_value("sequence/weights")->type_string() == "f32[12x6]");  // real columns only
  CHECK(g->find_value("f2")->type_string() == "f32[2x6x4x1]");
  check_close(r.got.at("z"), r.want.at("z"), kEmuF32);
  check_close(test::emu_run(*g, nullptr, r.feed).at("z"), r.want.at("z"), kEmuF32);
  // Read for more than its real parts (the output itself), the transform keeps both.
  auto both = test::parse_or_die(R"(graph "f" opset 18 {
  input %x: f32[2,6,1]
  const %zeros: f32[2,6,1] = )" + zeros(12) +
                                 R"(
  const %real: i64[] = [0]
  %c = Concat(%x, %zeros) {axis = 2} @"complex"
  %f = DFT(%c) {axis = 1} @"dft"
  %re = Gather(%f, %real) {axis = 2} @"take_real"
  output %re
  output %f
}
)");
  test::run_frontend_or_die(*both);
  CHECK(both->find_value("dft/weights")->type_string() == "f32[6x12]");
}
