// ConvTranspose as a Conv over its input with zeros between the values (expand_conv_transpose):
// the rewrite against the op itself in the reference interpreter, over strides, dilations, groups,
// pads that crop, output_padding, auto_pad and output_shape; the plan on emu, the zeros' layout
// ops fused before the call; and weights known only at run time refused by name. ONNX's own
// ConvTranspose node tests run on emu in the node-test suite.
#include <fmt/format.h>

#include "codegen/lower.h"
#include "fusion_test_util.h"
#include "support/tolerances.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;

namespace {

// Relu -> ConvTranspose of X `x` by constant W `w` (seeded values), attributes `attrs` -> Relu.
std::string convt_graph(const std::string& x, const Dims& w, const std::string& attrs,
                        const std::string& type = "f32") {
  uint32_t state = 99;
  std::string wd;
  for (int64_t d : w) wd += (wd.empty() ? "" : ",") + std::to_string(d);
  return fmt::format(R"(graph "t" opset 17 {{
  input %x: {0}{1}
  const %w: {0}[{2}] = {3}
  %r = Relu(%x) @"before"
  %y = ConvTranspose(%r, %w) {{{4}}} @"up"
  %z = Relu(%y) @"after"
  output %z
}}
)",
                     type, x, wd, test::lcg_values(state, num_elements(w)), attrs);
}

std::unique_ptr<Graph> expanded(const std::string& text) {
  auto g = test::parse_or_die(text);
  test::run_frontend_or_die(*g);
  return g;
}

// The rewrite computes what the ConvTranspose did, on the same input.
void check_same_as_op(const std::string& text, uint32_t seed) {
  const test::RewriteRun run = test::run_rewrite(text, seed);
  CHECK(count_op(*run.graph, "ConvTranspose") == 0);
  CHECK(count_op(*run.graph, "Conv") == 1);
  CHECK(run.got.at("z").dims() == run.want.at("z").dims());
  const CompareResult r = compare_tensors(run.got.at("z"), run.want.at("z"), kEmuF32.rtol, kEmuF32.atol);
  INFO(r.mismatches << " mismatches, max abs " << r.max_abs << " " << r.problem);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("a strided ConvTranspose is a Conv of its input with zeros between the values", "[passes][conv]") {
  // 2 x 2 upsampling with a 3 x 3 kernel and pads of 1: zeros after each value, the flipped
  // window, and pads of 2 - 1 = 1 before and 2 - 1 - 1 = 0 after (the zero after the last value
  // is there already), which split_conv_padding turns into a Pad of 1 before.
  const std::string text =
      convt_graph("[1,3,4,5]", {3, 2, 3, 3}, "strides = ints[2, 2], pads = ints[1, 1, 1, 1]");
  auto g = expanded(text);
  CHECK(count_op(*g, "Pad") == 2);
  CHECK(g->find_value("y")->producer->attr_ints("pads") == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(g->find_value("up/zeros_between_output")->type_string() == "f32[1x3x4x2x5x2]");
  const Value* w = g->find_value("up/weights");
  REQUIRE(w != nullptr);
  CHECK(w->type_string() == "f32[2x3x3x3]");
  // W'[m, c, i, j] = W[c, m, 2 - i, 2 - j].
  auto raw = test::parse_or_die(text);
  const std::vector<double> wt = raw->find_value("w")->constant->to_f64(), wc = w->constant->to_f64();
  CHECK(wc[((1 * 3 + 2) * 3 + 0) * 3 + 1] == wt[((2 * 2 + 1) * 3 + 2) * 3 + 1]);
  CHECK(g->find_value("y")->type_string() == "f32[1x2x7x9]");
  check_same_as_op(text, 1);
}

TEST_CASE("ConvTranspose's strides, dilations, groups, crops and output sizes all rewrite exactly",
          "[passes][conv]") {
  uint32_t seed = 3;
  const std::vector<std::tuple<std::string, Dims, std::string>> cases = {
      {"[2,4,5]", {4, 3, 3}, "strides = ints[3], dilations = ints[2], group = 2"},  // 1-D, grouped
      {"[1,2,3,3]",
       {2, 2, 3, 3},
       "strides = ints[2, 2], pads = ints[3, 0, 2, 4]"},  // pads past the window: crops
      {"[1,2,3,4]", {2, 1, 2, 3}, "strides = ints[2, 3], output_padding = ints[1, 2]"},  // output_padding
      {"[1,1,3,3]", {1, 2, 4, 4}, "strides = ints[2, 2], auto_pad = \"SAME_UPPER\""},    // SAME
      {"[1,1,3,3]", {1, 2, 3, 3}, "strides = ints[3, 2], output_shape = ints[10, 8]"},   // output_shape
      {"[1,2,2,3,2]", {2, 2, 2, 2, 2}, "strides = ints[1, 2, 1]"},                       // 3-D
      {"[2,3,4,4]", {3, 3, 1, 1}, ""},                                                   // 1 x 1, stride 1
  };
  for (const auto& [x, w, attrs] : cases) {
    INFO(x << " " << attrs);
    check_same_as_op(convt_graph(x, w, attrs), seed++);
  }
}

TEST_CASE("a ConvTranspose on emu: the zeros' layout ops join the kernel before the call",
          "[passes][conv][emu]") {
  uint32_t seed = 17;
  for (const char* type : {"f32", "f16"}) {
    INFO(type);
    auto g = expanded(
        convt_graph("[2,3,5,5]", {3, 4, 4, 4}, "strides = ints[2, 2], pads = ints[1, 1, 1, 1]", type));
    auto plan = fusion::make_plan(*g, test::opts("beam"));
    REQUIRE(plan.is_ok());
    for (const auto& grp : plan->groups) {
      bool relu = false, layout = false;
      for (const Node* n : grp.nodes) {
        relu = relu || n->name == "before";
        layout = layout || n->name == "up/zeros_between";
      }
      CHECK(relu == layout);  // the Pad of zeros never runs alone
    }
    const Tolerance& tol = std::string(type) == "f32" ? kEmuF32 : kEmuF16Chain;
    CHECK(test::fused_matches_reference(*g, seed++, test::opts("beam"), tol) <= 2);
  }
}

TEST_CASE("a ConvTranspose whose weights are computed at run time is refused naming them", "[passes][conv]") {
  auto g = expanded(R"(graph "t" opset 17 {
  input %x: f32[1,2,3,3]
  input %w: f32[2,2,3,3]
  %y = ConvTranspose(%x, %w) {strides = ints[2, 2]} @"up"
  output %y
}
)");
  REQUIRE(count_op(*g, "ConvTranspose") == 1);
  std::string why;
  CHECK(codegen::classify_node(*g->nodes().front(), &why) == codegen::NodeLowering::kUnsupported);
  CHECK(why.find("its weights (input 1 'w') are computed at run time") != std::string::npos);
  CHECK(why.find("make them an initializer") != std::string::npos);
}
