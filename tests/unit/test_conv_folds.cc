// Convolution calls doing more than the convolution: a residual Add and then ReLU, which cuDNN's
// fused call computes as relu(conv(x) + bias + z) (codegen::find_gemm_folds). Every case that
// folds runs on the emu backend against the reference; the cases that must not fold say why.
#include <fmt/format.h>

#include <map>

#include "codegen/gemm_folds.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// The conv calls' epilogues by node name, after planning `g` with the library folds.
std::map<std::string, std::string> conv_epilogues(const codegen::Schedule& s) {
  std::map<std::string, std::string> out;
  for (const auto& c : s.calls)
    if (c.kind == "conv") out[c.node->name] = c.conv.epilogue;
  return out;
}

std::unique_ptr<Graph> parse(const std::string& text) {
  auto g = test::parse_or_die(text);
  test::run_frontend_or_die(*g);
  return g;
}

}  // namespace

TEST_CASE("a ResNet block's ReLUs and residual Add are cuDNN epilogues of its convolutions",
          "[fusion][emu]") {
  // The basic block: conv, ReLU, conv, the residual Add, ReLU; a Neg after it stays a kernel.
  for (const std::string t : {"f32", "f16"}) {
    INFO(t);
    auto g = parse(fmt::format(R"(graph "g" opset 17 {{
  input %x: {0}[2,4,7,7]
  input %w1: {0}[4,4,3,3]
  input %b1: {0}[4]
  input %w2: {0}[4,4,3,3]
  input %b2: {0}[4]
  %c1 = Conv(%x, %w1, %b1) {{pads = ints[1, 1, 1, 1]}} @"conv1"
  %r1 = Relu(%c1) @"relu1"
  %c2 = Conv(%r1, %w2, %b2) {{pads = ints[1, 1, 1, 1]}} @"conv2"
  %s = Add(%c2, %x) @"residual"
  %r2 = Relu(%s) @"relu2"
  %o = Neg(%r2) @"after"
  output %o
}}
)",
                               t));
    CHECK(folded_names(*g, codegen::FoldOptions(true)) ==
          std::set<std::string>{"relu1", "residual", "relu2"});
    auto plan = fusion::make_plan(*g, opts_lib("beam"));
    REQUIRE(plan.is_ok());
    const std::string text = fusion::explain(*plan);
    INFO(text);
    CHECK(text.find("added by node 'conv2' (Conv) in cuDNN's fused call") != std::string::npos);
    auto s = schedule_of(*g, *plan);
    REQUIRE(s.is_ok());
    CHECK(s->folded == 3);
    CHECK(s->kernels.size() == 1);  // the Neg
    CHECK(conv_epilogues(*s) ==
          std::map<std::string, std::string>{{"conv1", "relu"}, {"conv2", "residual_relu"}});
    for (const auto& c : s->calls) {
      if (c.node->name != "conv2") continue;
      REQUIRE(c.args.size() == 5);  // X, W, Y, the bias, Z
      CHECK(c.args[2]->name == "r2");
      CHECK(c.args[4]->name == "x");
    }
    plan_matches_reference(*g, *plan, 91, t == "f16" ? kEmuF16Chain : kEmuF32);
  }
}

TEST_CASE("of two convolutions added, the later one takes the other's output as its residual",
          "[fusion][emu]") {
  // A downsampling block: the shortcut's 1x1 convolution and the main branch's, added. Without
  // biases (the fused call then adds zeros), and no ReLU after: the "residual" epilogue alone.
  auto g = parse(R"(graph "g" opset 17 {
  input %x: f32[1,3,8,8]
  input %wa: f32[6,3,1,1]
  input %wb: f32[6,3,3,3]
  %a = Conv(%x, %wa) {strides = ints[2, 2]} @"shortcut"
  %b = Conv(%x, %wb) {strides = ints[2, 2], pads = ints[1, 1, 1, 1]} @"main"
  %s = Add(%a, %b) @"sum"
  output %s
}
)");
  auto plan = fusion::make_plan(*g, opts_lib("beam"));
  REQUIRE(plan.is_ok());
  auto s = schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  CHECK(s->kernels.empty());
  CHECK(conv_epilogues(*s) == std::map<std::string, std::string>{{"shortcut", ""}, {"main", "residual"}});
  plan_matches_reference(*g, *plan, 92);
}

TEST_CASE("work cuDNN's fused call cannot do stays a kernel", "[fusion]") {
  struct Case {
    std::string name, body;
    std::string type = "f32";
  };
  // Each body reads %c (the convolution of %x) and writes %o.
  const std::vector<Case> cases = {
      {"a residual written after the convolution", "  %n = Neg(%x) @\"late\"\n  %o = Add(%c, %n) @\"add\""},
      {"a broadcast Add (a bias, not a residual)", "  %o = Add(%c, %cb) @\"add\""},
      {"ReLU6 (no fused-call activation)", "  %o = Clip(%c, %zero, %six) @\"clip\""},
      {"LeakyRelu", "  %o = LeakyRelu(%c) {alpha = 0.1} @\"leaky\""},
      {"a ReLU of a convolution read twice", "  %r = Relu(%c) @\"relu\"\n  %o = Add(%r, %c) @\"add\""},
      {"a ReLU in float64", "  %o = Relu(%c) @\"relu\"", "f64"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    auto g = parse(fmt::format(R"(graph "g" opset 17 {{
  input %x: {0}[1,4,5,5]
  input %w: {0}[4,4,1,1]
  const %cb: {0}[1,4,1,1] = [1.0, 2.0, 3.0, 4.0]
  const %zero: {0}[] = [0.0]
  const %six: {0}[] = [6.0]
  %c = Conv(%x, %w) @"conv"
{1}
  output %o
}}
)",
                               c.type, c.body));
    CHECK(folded_names(*g, codegen::FoldOptions(true)).empty());
  }
}

// ReLU folded into a call keeps NaN, as the Relu it replaces does (and as cuDNN does when asked
// for CUDNN_PROPAGATE_NAN, as the runtime asks); -inf becomes 0. The emu backend's convolutions
// and GEMMs had turned NaN into 0. Against the reference, and against the values themselves.
TEST_CASE("a call's folded ReLU keeps NaN and makes -inf 0, on emu as in the reference", "[fusion][emu]") {
  auto g = parse(R"(graph "g" opset 17 {
  input %x: f32[1,2,2,2]
  input %w: f32[2,2,1,1]
  input %a: f32[3,2]
  input %b: f32[2,4]
  %c = Conv(%x, %w) @"conv"
  %rc = Relu(%c) @"relu_conv"
  %m = MatMul(%a, %b) @"gemm"
  %rm = Relu(%m) @"relu_gemm"
  output %rc
  output %rm
})");
  CHECK(folded_names(*g, codegen::FoldOptions(true)) == std::set<std::string>{"relu_conv", "relu_gemm"});
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  TensorMap feed;
  // pixel 0 reads NaN, pixel 1 -inf (weights positive: the sum stays -inf), the others finite
  feed["x"] = Tensor::from_f64(DType::kF32, {1, 2, 2, 2}, {nan, -inf, 1, -2, 3, 1, 1, 1});
  feed["w"] = Tensor::from_f64(DType::kF32, {2, 2, 1, 1}, {0.5, 0.25, 1, 2});
  feed["a"] = Tensor::from_f64(DType::kF32, {3, 2}, {nan, 1, -inf, 1, 1, -1});
  feed["b"] = Tensor::from_f64(DType::kF32, {2, 4}, {1, 2, 3, 4, 0.5, 0.5, 0.5, 0.5});
  auto plan = fusion::make_plan(*g, opts_lib("beam"));
  REQUIRE(plan.is_ok());
  const auto groups = groups_of(*plan);
  const auto packs = packs_of(*plan);
  size_t kernels = 99;
  const TensorMap got = emu_run(*g, &groups, feed, &kernels, &packs, plan->gemm_folds);
  CHECK(kernels == 0);  // both ReLUs inside their calls
  auto want = run_reference(*g, feed);
  REQUIRE(want.is_ok());
  for (const std::string out : {"rc", "rm"}) {
    const CompareResult r = compare_tensors(got.at(out), want->at(out), kEmuF32.rtol, kEmuF32.atol);
    INFO(out << ": " << r.mismatches << " outside the tolerance " << r.problem);
    CHECK(r.ok);
  }
  const TensorMap& ref = *want;
  for (const TensorMap* t : {&got, &ref}) {
    const Tensor &rc = t->at("rc"), &rm = t->at("rm");
    CHECK((std::isnan(rc.get_f64(0)) && std::isnan(rc.get_f64(4))));  // both channels at pixel 0
    CHECK((rc.get_f64(1) == 0 && rc.get_f64(5) == 0));                // -inf at pixel 1
    for (int64_t j = 0; j < 4; ++j) {
      CHECK(std::isnan(rm.get_f64(j)));  // row 0 reads NaN
      CHECK(rm.get_f64(4 + j) == 0);     // row 1 is -inf
    }
  }
}
