// Convolutions padded more on one side than the other (split_conv_padding): explicit pads and
// auto_pad SAME_UPPER / SAME_LOWER become a Pad of the difference and a Conv padded alike on both
// sides, which the library call takes. Each rewrite against the Conv itself in the reference
// interpreter; each plan on emu, the Pad fused with what produces the Conv's input.
#include <fmt/format.h>

#include "fusion_test_util.h"
#include "support/tolerances.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;
using stitch::test::node_named;

namespace {

// Relu -> Conv (attributes `attrs`) -> Relu over X of `x` and W of `w`, in `type`.
std::string conv_graph(const std::string& x, const std::string& w, const std::string& attrs,
                       const std::string& type = "f32") {
  return fmt::format(R"(graph "c" opset 17 {{
  input %x: {0}{1}
  input %w: {0}{2}
  %r = Relu(%x) @"before"
  %y = Conv(%r, %w) {{{3}}} @"conv"
  %z = Relu(%y) @"after"
  output %z
}}
)",
                     type, x, w, attrs);
}

// `text` through the front end.
std::unique_ptr<Graph> split(const std::string& text) {
  auto g = test::parse_or_die(text);
  test::run_frontend_or_die(*g);
  return g;
}

// The rewritten graph computes what the Conv did, on the same inputs (the padded zeros add
// nothing, so the reference's sums are the same to the bit).
void check_same_as_conv(const std::string& text, uint32_t seed) {
  const test::RewriteRun r = test::run_rewrite(text, seed);
  CHECK(r.got.at("z").dims() == r.want.at("z").dims());
  CHECK(r.got.at("z").to_f64() == r.want.at("z").to_f64());
}

}  // namespace

TEST_CASE("a Conv padded more at one end gets a Pad of the difference and pads alike at both ends",
          "[passes][conv]") {
  // TensorFlow's SAME over 6x6 at stride 2 with a 3x3 kernel: one row and column after, none before.
  const std::string text =
      conv_graph("[1,2,6,6]", "[4,2,3,3]", "pads = ints[0, 0, 1, 1], strides = ints[2, 2]");
  auto g = split(text);
  REQUIRE(count_op(*g, "Pad") == 1);
  const Node& conv = *node_named(*g, "conv");
  CHECK(conv.attr_ints("pads") == std::vector<int64_t>{0, 0, 0, 0});
  const Node& pad = *node_named(*g, "conv/pad");
  CHECK(conv.input(0) == pad.output(0));
  CHECK(pad.input(1)->constant->to_i64() == std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1});
  CHECK(pad.output(0)->type_string() == "f32[1x2x7x7]");
  CHECK(g->find_value("y")->type_string() == "f32[1x4x3x3]");  // the Conv keeps its output
  check_same_as_conv(text, 1);

  // Padded on both ends, more at one: the Conv keeps the smaller amount (here 1 before and 2 after
  // on the first axis, 2 and 1 on the second).
  const std::string both = conv_graph("[2,3,7,5]", "[2,3,3,2]", "pads = ints[1, 2, 2, 1]");
  auto bg = split(both);
  CHECK(node_named(*bg, "conv")->attr_ints("pads") == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(node_named(*bg, "conv/pad")->input(1)->constant->to_i64() ==
        std::vector<int64_t>{0, 0, 0, 1, 0, 0, 1, 0});
  check_same_as_conv(both, 3);
}

TEST_CASE("auto_pad SAME_UPPER and SAME_LOWER over an even kernel are split too, and even pads stay",
          "[passes][conv]") {
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    INFO(mode);
    const std::string text = conv_graph("[1,2,5,6]", "[3,2,2,4]", fmt::format("auto_pad = \"{}\"", mode));
    auto g = split(text);
    REQUIRE(count_op(*g, "Pad") == 1);
    const Node& conv = *node_named(*g, "conv");
    CHECK_FALSE(conv.has_attr("auto_pad"));
    // Kernel 2 pads 1 in all, kernel 4 pads 3: the odd one goes after (UPPER) or before (LOWER).
    CHECK(conv.attr_ints("pads") == std::vector<int64_t>{0, 1, 0, 1});
    const std::vector<int64_t> extra = std::string(mode) == "SAME_UPPER"
                                           ? std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1}
                                           : std::vector<int64_t>{0, 0, 1, 1, 0, 0, 0, 0};
    CHECK(node_named(*g, "conv/pad")->input(1)->constant->to_i64() == extra);
    CHECK(g->find_value("y")->type_string() == "f32[1x3x5x6]");
    check_same_as_conv(text, 5);
  }
  // A 1-D Conv with dilation and groups, padded 1 before and 2 after.
  check_same_as_conv(conv_graph("[2,4,9]", "[6,2,3]", "pads = ints[1, 2], dilations = ints[2], group = 2"),
                     7);
  // Even padding, explicit or SAME over an odd kernel at stride 1, is left to the library call.
  CHECK(count_op(*split(conv_graph("[1,2,6,6]", "[4,2,3,3]", "pads = ints[1, 1, 1, 1]")), "Pad") == 0);
  CHECK(count_op(*split(conv_graph("[1,2,6,6]", "[4,2,3,3]", "auto_pad = \"SAME_UPPER\"")), "Pad") == 0);
}

TEST_CASE("a split Conv runs on emu, its Pad in the kernel of the Relu before it", "[passes][conv][emu]") {
  uint32_t seed = 11;
  for (const char* type : {"f32", "f16"}) {
    INFO(type);
    auto g =
        split(conv_graph("[2,3,8,8]", "[4,3,3,3]", "auto_pad = \"SAME_UPPER\", strides = ints[2, 2]", type));
    REQUIRE(count_op(*g, "Pad") == 1);
    auto plan = fusion::make_plan(*g, test::opts("beam"));
    REQUIRE(plan.is_ok());
    // The Relu and the Pad in one kernel before the call, the Relu after it in its epilogue or a
    // kernel of its own: never a kernel for the Pad alone.
    bool together = false;
    for (const auto& grp : plan->groups) {
      bool relu = false, pad = false;
      for (const Node* n : grp.nodes) {
        relu = relu || n->name == "before";
        pad = pad || n->name == "conv/pad";
      }
      CHECK(relu == pad);
      together = together || (relu && pad);
    }
    CHECK(together);
    const Tolerance& tol = std::string(type) == "f32" ? kEmuF32 : kEmuF16Chain;
    CHECK(test::fused_matches_reference(*g, seed++, test::opts("beam"), tol) <= 2);
  }
}
