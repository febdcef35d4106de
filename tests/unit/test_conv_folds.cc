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
