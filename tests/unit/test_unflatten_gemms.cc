// unflatten_gemms: a 2-D GEMM between flattening views (onnxruntime's MatMulAddFusion, Keras-style
// dense layers) reads the activation itself, the element-wise chain after it follows at its shape,
// and the views go. Every rewrite is checked against the reference interpreter on the original
// graph; the LayerNorm the views hid from its GEMM then moves past it, checked on emu.
#include <fmt/format.h>

#include <string>

#include "fusion/gemm_matmul.h"
#include "fusion/hoist_scales.h"
#include "fusion/unflatten_gemms.h"
#include "fusion_test_util.h"
#include "ir/graph.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// %h [2, 5, 16] viewed as [10, 16] (`view`: the shape constant's text), times %w [16, 24], the
// bias `bias` added (a constant of dims `bias_dims`), a Relu, and `tail` (the rest of the graph,
// reading %act [10, 24]).
std::unique_ptr<Graph> dense(const std::string& tail, const std::string& bias_dims = "24",
                             const std::string& view = "Reshape(%h, %rows)") {
  uint32_t state = 77;
  const int64_t bias_n = bias_dims == "24" ? 24 : 10;
  auto g =
      parse_or_die(fmt::format(R"(graph "g" opset 17 {{
  input %h: f32[2,5,16]
  const %rows: i64[2] = [-1, 16]
  const %back: i64[3] = [2, 5, 24]
  const %w: f32[16,24] = {}
  const %b: f32[{}] = {}
  %x = {} @"flatten"
  %p = MatMul(%x, %w) @"gemm"
  %pb = Add(%p, %b) @"bias"
  %act = Relu(%pb) @"relu"
{}}}
)",
                               lcg_values(state, 16 * 24), bias_dims, lcg_values(state, bias_n), view, tail));
  run_frontend_or_die(*g);
  return g;
}

const Node* producer_of(const Graph& g, const std::string& value) {
  const Value* v = g.find_value(value);
  REQUIRE(v != nullptr);
  return v->producer;
}

}  // namespace

TEST_CASE(
    "a GEMM between flattening views reads the activation, its bias and activation follow, the views go",
    "[fusion][unflatten]") {
  auto g = dense(R"(  %y = Reshape(%act, %back) @"back"
  %o = Tanh(%y) @"tanh"
  output %o
)");
  auto original = clone_graph(*g);
  auto lines = fusion::unflatten_gemms(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  INFO(lines->front());
  CHECK(lines->front().find("reads 'h' [2x5x16] in place of its view 'x' [10x16]; 'bias', 'relu' after it at "
                            "[2x5x24] too; the view back 'back' goes") != std::string::npos);
  CHECK(count_op(*g, "Reshape") == 0);
  const Node* mm = producer_of(*g, "o")->input(0)->producer->input(0)->producer->input(0)->producer;
  REQUIRE(mm->op_type == "MatMul");
  CHECK(mm->input(0)->name == "h");
  CHECK(*mm->output(0)->dims == Dims{2, 5, 24});
  same_as_original(*original, *g, 5);
}

TEST_CASE("a flattened value with readers of its own stays, as a view of the unflattened one",
          "[fusion][unflatten]") {
  // %act is a graph output and read by a Softmax over its rows; %pb by nothing else. The chain
  // runs at [2, 5, 24] and a Reshape writes %act for both.
  auto g = dense(R"(  %y = Reshape(%act, %back) @"back"
  %s = Softmax(%act) {axis = -1} @"softmax"
  output %y
  output %s
  output %act
)");
  auto original = clone_graph(*g);
  auto lines = fusion::unflatten_gemms(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  const Node* act = producer_of(*g, "act");
  CHECK(act->op_type == "Reshape");
  CHECK(*act->input(0)->dims == Dims{2, 5, 24});
  CHECK(producer_of(*g, "y")->name == "back");  // a graph output: viewed as before, not replaced
  same_as_original(*original, *g, 7);
}

TEST_CASE(
    "GEMMs whose view does not flatten leading axes, or whose chain is not per column, stay as they were",
    "[fusion][unflatten]") {
  SECTION("the view splits the last axis: [2, 5, 16] as [5, 32] is no GEMM of [.., 16]") {
    uint32_t state = 3;
    auto g = parse_or_die(fmt::format(R"(graph "g" opset 17 {{
  input %h: f32[2,5,16]
  const %rows: i64[2] = [5, 32]
  const %w: f32[32,4] = {}
  %x = Reshape(%h, %rows) @"flatten"
  %p = MatMul(%x, %w) @"gemm"
  output %p
}}
)",
                                      lcg_values(state, 32 * 4)));
    run_frontend_or_die(*g);
    const size_t nodes = g->nodes().size();
    auto lines = fusion::unflatten_gemms(*g);
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    CHECK(g->nodes().size() == nodes);
  }
  SECTION("the GEMM or its view named in --no-fuse") {
    for (const char* kept : {"gemm", "flatten"}) {
      auto g = dense("  output %act\n");
      auto lines = fusion::unflatten_gemms(*g, {kept});
      REQUIRE(lines.is_ok());
      CHECK(lines->empty());
    }
  }
  SECTION("a bias of one value per row: the GEMM unflattens alone, the Add reads a view of its product") {
    auto g = dense("  output %act\n", "10,1");
    auto original = clone_graph(*g);
    auto lines = fusion::unflatten_gemms(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    CHECK(lines->front().find("after it") == std::string::npos);
    const Node* add = producer_of(*g, "pb");
    CHECK(add->input(0)->producer->op_type == "Reshape");
    CHECK(*add->output(0)->dims == Dims{10, 24});
    same_as_original(*original, *g, 9);
  }
}

TEST_CASE("a LayerNorm hidden from its GEMM by onnxruntime's views moves past it once they go",
          "[fusion][emu]") {
  // onnxruntime's level-1 form of BERT's FFN1: the norm, a Reshape to rows, a Gemm with the bias as
  // C, a Reshape back, the erf GELU.
  uint32_t state = 4242;
  const std::string text = fmt::format(R"(graph "g" opset 17 {{
  input %h: f32[2,5,16]
  const %gamma: f32[16] = {}
  const %beta: f32[16] = {}
  const %w: f32[16,24] = {}
  const %b: f32[24] = {}
  const %rows: i64[2] = [-1, 16]
  const %back: i64[3] = [2, 5, 24]
  const %sqrt2: f32[] = [1.4142135]
  const %one: f32[] = [1.0]
  const %half: f32[] = [0.5]
  %y = LayerNormalization(%h, %gamma, %beta) {{axis = -1, epsilon = 0.00001}} @"ln"
  %yf = Reshape(%y, %rows) @"gemm_input_reshape"
  %pf = Gemm(%yf, %w, %b) @"ffn1"
  %pb = Reshape(%pf, %back) @"gemm_output_reshape"
  %e0 = Div(%pb, %sqrt2) @"gelu_div"
  %e1 = Erf(%e0) @"gelu_erf"
  %e2 = Add(%e1, %one) @"gelu_add"
  %e3 = Mul(%pb, %e2) @"gelu_mul"
  %o = Mul(%e3, %half) @"gelu_half"
  output %o
}}
)",
                                       lcg_values(state, 16, 0.5), lcg_values(state, 16),
                                       lcg_values(state, 16 * 24), lcg_values(state, 24));
  for (bool unflatten : {false, true}) {
    INFO((unflatten ? "unflattened" : "left flattened"));
    auto g = parse_or_die(text);
    run_frontend_or_die(*g);
    auto original = clone_graph(*g);
    REQUIRE(fusion::gemms_as_matmuls(*g).is_ok());
    if (unflatten) REQUIRE(fusion::unflatten_gemms(*g).is_ok());
    auto hoisted = fusion::hoist_layer_norms(*g);
    REQUIRE(hoisted.is_ok());
    // Through the views the norm stays in front of the GEMM: a kernel before the call and one
    // after. Unflattened it moves past: one kernel after the call computes the statistics, the
    // correction and the GELU.
    CHECK(hoisted->size() == (unflatten ? 1u : 0u));
    same_as_original(*original, *g, 3);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      auto plan = fusion::make_plan(*g, opts_lib(mode));
      REQUIRE(plan.is_ok());
      CHECK(plan->cost.kernels == (unflatten ? 1 : 2));
      CHECK(fused_matches_reference(*g, 11, opts_lib(mode)) == (unflatten ? 1u : 2u));
    }
  }
}
