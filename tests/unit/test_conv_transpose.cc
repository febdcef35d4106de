// ConvTranspose (expand_conv_transpose). Where it strides, the transposed-convolution call (cuDNN's
// backward-data convolution; a CPU one on emu), its bias an Add after it and, where the output
// ends before the call's (SAME_UPPER at an even stride), a crop; elsewhere, or with
// conv_transpose_as_conv, a Conv over its input with zeros between the values. Each form against
// the op itself in the reference interpreter over strides, dilations, groups, pads that crop,
// output_padding, auto_pad and output_shape; the call on emu against the interpreter in f32 and
// f16, with weights known only at run time too; such weights in a form the call does not take
// refused by name; the zeros' layout ops of the Conv form fused before its call. ONNX's own
// ConvTranspose node tests run on emu in the node-test suite.
#include <fmt/format.h>

#include "codegen/lower.h"
#include "fusion_test_util.h"
#include "support/tolerances.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;

namespace {

// Relu -> ConvTranspose of X `x` by constant W `w` (seeded values; with `bias`, a constant B too),
// attributes `attrs` -> Relu.
std::string convt_graph(const std::string& x, const Dims& w, const std::string& attrs,
                        const std::string& type = "f32", bool bias = false) {
  uint32_t state = 99;
  std::string wd;
  for (int64_t d : w) wd += (wd.empty() ? "" : ",") + std::to_string(d);
  const int64_t m = w[1] * (attrs.find("group = 2") != std::string::npos ? 2 : 1);
  const std::string b =
      bias ? fmt::format("  const %b: {}[{}] = {}\n", type, m, test::lcg_values(state, m)) : "";
  return fmt::format(R"(graph "t" opset 17 {{
  input %x: {0}{1}
  const %w: {0}[{2}] = {3}
{5}  %r = Relu(%x) @"before"
  %y = ConvTranspose(%r, %w{6}) {{{4}}} @"up"
  %z = Relu(%y) @"after"
  output %z
}}
)",
                     type, x, wd, test::lcg_values(state, num_elements(w)), attrs, b, bias ? ", %b" : "");
}

PassContext frontend(bool as_conv) {
  PassContext ctx;
  ctx.conv_transpose_as_conv = as_conv;
  return ctx;
}

std::unique_ptr<Graph> expanded(const std::string& text, bool as_conv = false) {
  auto g = test::parse_or_die(text);
  PassContext ctx = frontend(as_conv);
  test::run_frontend_or_die(*g, ctx);
  return g;
}

// The rewrite computes what the ConvTranspose did, on the same input, in the form `op` (a Conv, or
// the call's ConvTranspose).
void check_same_as_op(const std::string& text, uint32_t seed, bool as_conv, const std::string& op) {
  const test::RewriteRun run = test::run_rewrite(text, seed, frontend(as_conv));
  CHECK(count_op(*run.graph, "ConvTranspose") == (op == "ConvTranspose" ? 1 : 0));
  CHECK(count_op(*run.graph, "Conv") == (op == "Conv" ? 1 : 0));
  CHECK(run.got.at("z").dims() == run.want.at("z").dims());
  const CompareResult r = compare_tensors(run.got.at("z"), run.want.at("z"), kEmuF32.rtol, kEmuF32.atol);
  INFO(r.mismatches << " mismatches, max abs " << r.max_abs << " " << r.problem);
  CHECK(r.ok);
}

// The library calls of `g` as planned by beam search.
std::vector<codegen::LibraryCall> calls_of(const Graph& g) {
  auto plan = fusion::make_plan(g, test::opts("beam"));
  REQUIRE(plan.is_ok());
  auto s = test::schedule_of(g, *plan);
  REQUIRE(s.is_ok());
  return s->calls;
}

}  // namespace

TEST_CASE("a strided ConvTranspose runs as the transposed-convolution call, its bias an Add after it",
          "[passes][conv]") {
  const std::string text =
      convt_graph("[1,3,4,5]", {3, 2, 3, 3}, "strides = ints[2, 2], pads = ints[1, 1, 1, 1]", "f32", true);
  auto g = expanded(text);
  REQUIRE(count_op(*g, "ConvTranspose") == 1);
  CHECK(count_op(*g, "Conv") == 0);
  const Node* add = g->find_value("y")->producer;
  CHECK(add->op_type == "Add");
  CHECK(add->input(1)->type_string() == "f32[2x1x1]");  // B as a column per output channel
  const Node* up = add->input(0)->producer;
  CHECK(up->op_type == "ConvTranspose");
  CHECK(up->input(2) == nullptr);
  CHECK(codegen::classify_node(*up) == codegen::NodeLowering::kLibrary);
  const std::vector<codegen::LibraryCall> calls = calls_of(*g);
  REQUIRE(calls.size() == 1);
  const codegen::LibraryCall& c = calls[0];
  CHECK(c.kind == "conv_transpose");
  CHECK(c.args.size() == 3);
  CHECK((c.conv.n == 1 && c.conv.c == 3 && c.conv.m == 2 && c.conv.group == 1));
  CHECK(c.conv.in == Dims{4, 5});
  CHECK(c.conv.out == Dims{7, 9});
  CHECK(c.conv.pads == Dims{1, 1});
  CHECK(c.conv.strides == Dims{2, 2});
  CHECK(c.flops == 2 * (3 * 4 * 5) * 2 * 9);  // each input value times its 2 x 9 weights
  check_same_as_op(text, 1, false, "ConvTranspose");
}

TEST_CASE("a SAME_UPPER ConvTranspose at an even stride runs the call over a longer output, cropped",
          "[passes][conv]") {
  // 3 x 3 kernel, stride 2, 3 -> 6: pads 0 before and 1 after, which the call's one pad per axis
  // does not give; it computes 7 and a Slice keeps the first 6.
  const std::string text =
      convt_graph("[1,1,3,3]", {1, 2, 3, 3}, "strides = ints[2, 2], auto_pad = \"SAME_UPPER\"");
  auto g = expanded(text);
  const Value* longer = g->find_value("up/longer_output");
  REQUIRE(longer != nullptr);
  CHECK(longer->type_string() == "f32[1x2x7x7]");
  CHECK(longer->producer->attr_ints("pads") == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(count_op(*g, "Slice") == 1);
  CHECK(g->find_value("y")->type_string() == "f32[1x2x6x6]");
  check_same_as_op(text, 2, false, "ConvTranspose");
}

TEST_CASE(
    "with conv_transpose_as_conv, a strided ConvTranspose is a Conv of its input with zeros between "
    "the values",
    "[passes][conv]") {
  // 2 x 2 upsampling with a 3 x 3 kernel and pads of 1: zeros after each value, the flipped
  // window, and pads of 2 - 1 = 1 before and 2 - 1 - 1 = 0 after (the zero after the last value
  // is there already), which split_conv_padding turns into a Pad of 1 before.
  const std::string text =
      convt_graph("[1,3,4,5]", {3, 2, 3, 3}, "strides = ints[2, 2], pads = ints[1, 1, 1, 1]");
  auto g = expanded(text, true);
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
  check_same_as_op(text, 1, true, "Conv");
}

TEST_CASE("ConvTranspose's strides, dilations, groups, crops and output sizes all rewrite exactly",
          "[passes][conv]") {
  uint32_t seed = 3;
  // X, W, attributes, the form by default (the call, or a Conv where the call does not take it or
  // nothing strides)
  const std::vector<std::tuple<std::string, Dims, std::string, std::string>> cases = {
      {"[2,4,5]",
       {4, 3, 3},
       "strides = ints[3], dilations = ints[2], group = 2",
       "ConvTranspose"},  // 1-D, grouped
      {"[1,2,3,3]",
       {2, 2, 3, 3},
       "strides = ints[2, 2], pads = ints[3, 0, 2, 4]",
       "Conv"},  // pads past the window: crops
      {"[1,2,3,4]",
       {2, 1, 2, 3},
       "strides = ints[2, 3], output_padding = ints[1, 2]",
       "ConvTranspose"},  // output_padding
      {"[1,1,3,3]",
       {1, 2, 4, 4},
       "strides = ints[2, 2], auto_pad = \"SAME_UPPER\"",
       "ConvTranspose"},  // SAME
      {"[1,1,3,3]", {1, 2, 3, 3}, "strides = ints[2, 2], auto_pad = \"SAME_LOWER\"", "ConvTranspose"},
      {"[1,1,3,3]",
       {1, 2, 3, 3},
       "strides = ints[3, 2], output_shape = ints[10, 8]",
       "ConvTranspose"},  // output_shape, past the last value
      {"[1,2,2,3,2]", {2, 2, 2, 2, 2}, "strides = ints[1, 2, 1]", "ConvTranspose"},  // 3-D
      {"[2,3,4,4]", {3, 3, 1, 1}, "", "Conv"},                                       // 1 x 1, stride 1
  };
  for (const auto& [x, w, attrs, form] : cases) {
    INFO(x << " " << attrs);
    check_same_as_op(convt_graph(x, w, attrs), seed++, false, form);
    check_same_as_op(convt_graph(x, w, attrs), seed++, true, "Conv");
    check_same_as_op(convt_graph(x, w, attrs, "f32", true), seed++, false, form);
  }
}

TEST_CASE("the transposed-convolution call on emu matches the op, in f32 and f16 and of run-time weights",
          "[passes][conv][emu]") {
  uint32_t seed = 41;
  const std::vector<std::tuple<std::string, Dims, std::string>> cases = {
      {"[2,4,5]", {4, 3, 3}, "strides = ints[3], dilations = ints[2], group = 2"},
      {"[1,2,3,4]", {2, 1, 2, 3}, "strides = ints[2, 3], output_padding = ints[1, 2]"},
      {"[1,1,3,3]", {1, 2, 3, 3}, "strides = ints[2, 2], auto_pad = \"SAME_UPPER\""},
      {"[1,2,2,3,2]", {2, 2, 2, 2, 2}, "strides = ints[2, 2, 1], pads = ints[1, 0, 0, 1, 0, 0]"},
  };
  for (const auto& [x, w, attrs] : cases)
    for (const char* type : {"f32", "f16"}) {
      INFO(x << " " << attrs << " " << type);
      auto g = expanded(convt_graph(x, w, attrs, type, true));
      bool call = false;
      for (const codegen::LibraryCall& c : calls_of(*g)) call = call || c.kind == "conv_transpose";
      CHECK(call);
      test::fused_matches_reference(*g, seed++, test::opts("beam"),
                                    std::string(type) == "f32" ? kEmuF32 : kEmuF16Chain);
    }
  // W an input: the call takes it as it comes (the Conv form needs it at compile time).
  auto g = expanded(R"(graph "t" opset 17 {
  input %x: f32[2,4,3,3]
  input %w: f32[4,3,3,3]
  %y = ConvTranspose(%x, %w) {strides = ints[2, 2], pads = ints[1, 1, 1, 1], group = 2} @"up"
  output %y
}
)");
  CHECK(codegen::classify_node(*g->nodes().front()) == codegen::NodeLowering::kLibrary);
  test::fused_matches_reference(*g, seed++, test::opts("beam"));
}

TEST_CASE("a Conv-form ConvTranspose on emu: the zeros' layout ops join the kernel before the call",
          "[passes][conv][emu]") {
  uint32_t seed = 17;
  for (const char* type : {"f32", "f16"}) {
    INFO(type);
    auto g = expanded(
        convt_graph("[2,3,5,5]", {3, 4, 4, 4}, "strides = ints[2, 2], pads = ints[1, 1, 1, 1]", type), true);
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

TEST_CASE("a ConvTranspose of run-time weights in a form the call does not take is refused naming them",
          "[passes][conv]") {
  // A begin pad of 3 past the window's 2: the call's pad does not reach, and only the Conv form,
  // which needs W at compile time, crops that far.
  auto g = expanded(R"(graph "t" opset 17 {
  input %x: f32[1,2,3,3]
  input %w: f32[2,2,3,3]
  %y = ConvTranspose(%x, %w) {strides = ints[2, 2], pads = ints[3, 0, 2, 4]} @"up"
  output %y
}
)");
  REQUIRE(count_op(*g, "ConvTranspose") == 1);
  std::string why;
  CHECK(codegen::classify_node(*g->nodes().front(), &why) == codegen::NodeLowering::kUnsupported);
  INFO(why);
  CHECK(why.find("on spatial axis 0 its pads (3 before, 2 after)") != std::string::npos);
  CHECK(why.find("its weights (input 1 'w') are computed at run time") != std::string::npos);
  CHECK(why.find("make them an initializer") != std::string::npos);
}
