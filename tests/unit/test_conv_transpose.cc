// ConvTranspose (expand_conv_transpose) in its three forms: the sub-pixel form (one Conv of its
// output phases, interleaved; the default for constant weights), the transposed-convolution call
// (cuDNN's backward-data convolution, a CPU one on emu; run-time weights, dilations) with its bias
// an Add after it and, where the output ends before the call's (SAME_UPPER at an even stride), a
// crop; and a Conv over its input with zeros between the values. Each form against the op itself
// in the reference interpreter over strides, dilations, groups, pads that crop, output_padding,
// auto_pad and output_shape; the sub-pixel form and the call on emu against the interpreter in f32
// and f16, with weights known only at run time too; such weights in a form the call does not take
// refused by name; each form's layout ops fused with the work around them. ONNX's own
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

// `form`: PassContext::conv_transpose_form ("" the default, "call", "zeros").
PassContext frontend(const std::string& form) {
  PassContext ctx;
  ctx.conv_transpose_form = form;
  return ctx;
}

std::unique_ptr<Graph> expanded(const std::string& text, const std::string& form = "") {
  auto g = test::parse_or_die(text);
  PassContext ctx = frontend(form);
  test::run_frontend_or_die(*g, ctx);
  return g;
}

// The rewrite asked for as `form` computes what the ConvTranspose did, on the same input, with the
// op `op` (a Conv, or the call's ConvTranspose).
void check_same_as_op(const std::string& text, uint32_t seed, const std::string& form,
                      const std::string& op) {
  const test::RewriteRun run = test::run_rewrite(text, seed, frontend(form));
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

TEST_CASE("a strided ConvTranspose of constant weights is one Conv of its output phases, interleaved",
          "[passes][conv]") {
  // Stride 2 x 2, kernel 3 x 3: 2 taps an axis in each of the 4 phases (the fourth of each axis
  // zero), over the input padded by 1; 2 output channels x 4 phases.
  const std::string text =
      convt_graph("[1,3,4,5]", {3, 2, 3, 3}, "strides = ints[2, 2], pads = ints[1, 1, 1, 1]", "f32", true);
  auto g = expanded(text);
  CHECK(count_op(*g, "ConvTranspose") == 0);
  const Value* phases = g->find_value("up/phases_output");
  REQUIRE(phases != nullptr);
  CHECK(phases->type_string() == "f32[1x8x5x6]");
  CHECK(phases->producer->attr_ints("pads") == std::vector<int64_t>{1, 1, 1, 1});
  const Value* w = g->find_value("up/phase_weights");
  REQUIRE(w != nullptr);
  CHECK(w->type_string() == "f32[8x3x2x2]");
  // W'[(m, r), c, 1 - j, 1 - i] = W[c, m, 2 j + r0, 2 i + r1]. Channel 1's phase (1, 0), input
  // channel 2: its tap (0, 1) reads W[2, 1, 3, 0], past the kernel, so zero; its tap (1, 0) reads
  // W[2, 1, 1, 2].
  auto raw = test::parse_or_die(text);
  const std::vector<double> wt = raw->find_value("w")->constant->to_f64(), wp = w->constant->to_f64();
  const int64_t oc = 1 * 4 + 2;
  CHECK(wp[static_cast<size_t>((oc * 3 + 2) * 4 + 0 * 2 + 1)] == 0.0);
  CHECK(wp[static_cast<size_t>((oc * 3 + 2) * 4 + 1 * 2 + 0)] ==
        wt[static_cast<size_t>(((2 * 2 + 1) * 3 + 1) * 3 + 2)]);
  CHECK(g->find_value("up/interleaved_output")->type_string() == "f32[1x2x10x12]");
  CHECK(g->find_value("y")->type_string() == "f32[1x2x7x9]");  // cropped from 1 on
  // One call, and one kernel after it: the interleave, the crop, the bias and the Relu.
  const std::vector<codegen::LibraryCall> calls = calls_of(*g);
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].kind == "conv");
  CHECK(calls[0].flops == 2 * (8 * 5 * 6) * 3 * 4);
  auto plan = fusion::make_plan(*g, test::opts("beam"));
  REQUIRE(plan.is_ok());
  bool interleaved = false;
  for (const auto& grp : plan->groups) {
    std::set<std::string> names;
    for (const Node* n : grp.nodes) names.insert(n->name);
    if (!names.count("up/interleave")) continue;
    interleaved = true;
    CHECK(names.count("up/crop"));
    CHECK(names.count("up/bias"));
    CHECK(names.count("after"));
  }
  CHECK(interleaved);
  check_same_as_op(text, 1, "", "Conv");
  CHECK(test::fused_matches_reference(*g, 5, test::opts("beam")) == 2);  // the Relu before, and the one after
}

TEST_CASE("a strided ConvTranspose runs as the transposed-convolution call, its bias an Add after it",
          "[passes][conv]") {
  const std::string text =
      convt_graph("[1,3,4,5]", {3, 2, 3, 3}, "strides = ints[2, 2], pads = ints[1, 1, 1, 1]", "f32", true);
  auto g = expanded(text, "call");

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
  check_same_as_op(text, 1, "call", "ConvTranspose");
}

TEST_CASE("a SAME_UPPER ConvTranspose at an even stride runs the call over a longer output, cropped",
          "[passes][conv]") {
  // 3 x 3 kernel, stride 2, 3 -> 6: pads 0 before and 1 after, which the call's one pad per axis
  // does not give; it computes 7 and a Slice keeps the first 6.
  const std::string text =
      convt_graph("[1,1,3,3]", {1, 2, 3, 3}, "strides = ints[2, 2], auto_pad = \"SAME_UPPER\"");
  auto g = expanded(text, "call");
  const Value* longer = g->find_value("up/longer_output");
  REQUIRE(longer != nullptr);
  CHECK(longer->type_string() == "f32[1x2x7x7]");
  CHECK(longer->producer->attr_ints("pads") == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(count_op(*g, "Slice") == 1);
  CHECK(g->find_value("y")->type_string() == "f32[1x2x6x6]");
  check_same_as_op(text, 2, "call", "ConvTranspose");
}

TEST_CASE("in the zeros form, a strided ConvTranspose is a Conv of its input with zeros between the values",
          "[passes][conv]") {
  // 2 x 2 upsampling with a 3 x 3 kernel and pads of 1: zeros after each value, the flipped
  // window, and pads of 2 - 1 = 1 before and 2 - 1 - 1 = 0 after (the zero after the last value
  // is there already), which split_conv_padding turns into a Pad of 1 before.
  const std::string text =
      convt_graph("[1,3,4,5]", {3, 2, 3, 3}, "strides = ints[2, 2], pads = ints[1, 1, 1, 1]");
  auto g = expanded(text, "zeros");
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
  check_same_as_op(text, 1, "zeros", "Conv");
}

TEST_CASE("ConvTranspose's strides, dilations, groups, crops and output sizes all rewrite exactly",
          "[passes][conv]") {
  uint32_t seed = 3;
  // X, W, attributes, the op of the call form (a Conv where the call does not take it or nothing
  // strides); the sub-pixel form (the default) is a Conv wherever it strides without dilations,
  // and the zeros form always.
  const std::vector<std::tuple<std::string, Dims, std::string, std::string>> cases = {
      {"[2,4,5]",
       {4, 3, 3},
       "strides = ints[3], dilations = ints[2], group = 2",
       "ConvTranspose"},  // 1-D, grouped
      {"[2,4,5]", {4, 3, 4}, "strides = ints[3], group = 2", "ConvTranspose"},
      {"[1,2,3,3]",
       {2, 2, 3, 3},
       "strides = ints[2, 2], pads = ints[3, 0, 2, 4]",
       "Conv"},  // pads past the window
      {"[1,2,3,4]", {2, 1, 2, 3}, "strides = ints[2, 3], output_padding = ints[1, 2]", "ConvTranspose"},
      {"[1,1,3,3]",
       {1, 2, 4, 4},
       "strides = ints[2, 2], auto_pad = \"SAME_UPPER\"",
       "ConvTranspose"},  // SAME
      {"[1,1,3,3]", {1, 2, 3, 3}, "strides = ints[2, 2], auto_pad = \"SAME_LOWER\"", "ConvTranspose"},
      // a kernel under the stride: a negative begin pad, zeros in front
      {"[1,1,3,3]", {1, 2, 1, 1}, "strides = ints[2, 2], auto_pad = \"SAME_UPPER\"", "Conv"},
      {"[1,1,3,3]",
       {1, 2, 3, 3},
       "strides = ints[3, 2], output_shape = ints[10, 8]",
       "ConvTranspose"},                                                             // past the end
      {"[1,2,2,3,2]", {2, 2, 2, 2, 2}, "strides = ints[1, 2, 1]", "ConvTranspose"},  // 3-D
      {"[2,3,4,4]", {3, 3, 1, 1}, "", "Conv"},                                       // 1 x 1, stride 1
  };
  for (const auto& [x, w, attrs, call_op] : cases) {
    INFO(x << " " << attrs);
    const bool sub_pixel =
        attrs.find("strides") != std::string::npos && attrs.find("dilations") == std::string::npos;
    check_same_as_op(convt_graph(x, w, attrs), seed++, "", sub_pixel ? "Conv" : call_op);
    check_same_as_op(convt_graph(x, w, attrs, "f32", true), seed++, "", sub_pixel ? "Conv" : call_op);
    check_same_as_op(convt_graph(x, w, attrs), seed++, "call", call_op);
    check_same_as_op(convt_graph(x, w, attrs, "f32", true), seed++, "call", call_op);
    check_same_as_op(convt_graph(x, w, attrs), seed++, "zeros", "Conv");
  }
}

TEST_CASE("the sub-pixel form on emu matches the op, in f32 and f16", "[passes][conv][emu]") {
  uint32_t seed = 61;
  const std::vector<std::tuple<std::string, Dims, std::string>> cases = {
      {"[2,4,5]", {4, 3, 4}, "strides = ints[3], pads = ints[1, 2], group = 2"},
      {"[1,2,3,4]", {2, 1, 2, 3}, "strides = ints[2, 3], output_padding = ints[1, 2]"},
      {"[1,1,3,3]", {1, 2, 1, 1}, "strides = ints[2, 2], auto_pad = \"SAME_UPPER\""},
      {"[1,2,2,3,2]", {2, 2, 2, 2, 2}, "strides = ints[2, 2, 1], pads = ints[1, 0, 0, 1, 0, 0]"},
  };
  for (const auto& [x, w, attrs] : cases)
    for (const char* type : {"f32", "f16"}) {
      INFO(x << " " << attrs << " " << type);
      auto g = expanded(convt_graph(x, w, attrs, type, true));
      CHECK(count_op(*g, "ConvTranspose") == 0);
      test::fused_matches_reference(*g, seed++, test::opts("beam"),
                                    std::string(type) == "f32" ? kEmuF32 : kEmuF16Chain);
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
      auto g = expanded(convt_graph(x, w, attrs, type, true), "call");
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

TEST_CASE("a zeros-form ConvTranspose on emu: the zeros' layout ops join the kernel before the call",
          "[passes][conv][emu]") {
  uint32_t seed = 17;
  for (const char* type : {"f32", "f16"}) {
    INFO(type);
    auto g = expanded(
        convt_graph("[2,3,5,5]", {3, 4, 4, 4}, "strides = ints[2, 2], pads = ints[1, 1, 1, 1]", type),
        "zeros");
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
