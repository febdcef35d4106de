// Einsum and EyeLike: what expand_einsum writes, the plan of an attention written with Einsums
// on emu, and bad equations. (Their numbers against ONNX's reference implementation are node
// tests: libonnx-testdata's test_einsum_* and tests/onnx_node/extra's test_einsum_stitch_*.)
#include <fmt/format.h>

#include "backend_test_util.h"
#include "fusion_test_util.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;

namespace {

std::string einsum_graph(const std::string& eq, const std::vector<std::string>& types) {
  std::string inputs, args;
  for (size_t i = 0; i < types.size(); ++i) {
    inputs += fmt::format("  input %x{}: {}\n", i, types[i]);
    args += fmt::format("{}%x{}", i ? ", " : "", i);
  }
  return fmt::format(R"(graph "e" opset 17 {{
{}  %y = Einsum({}) {{equation = "{}"}} @"es"
  output %y
}}
)",
                     inputs, args, eq);
}

}  // namespace

TEST_CASE("XLNet's attention scores are one batched MatMul between transposes", "[einsum][passes]") {
  auto g = test::parse_or_die(einsum_graph("ibnd,jbnd->bnij", {"f32[5,2,3,4]", "f32[6,2,3,4]"}));
  test::run_frontend_or_die(*g);
  CHECK(count_op(*g, "Einsum") == 0);
  CHECK(count_op(*g, "MatMul") == 1);
  CHECK(count_op(*g, "ReduceSum") == 0);
  CHECK(g->find_value("y")->type_string() == "f32[2x3x5x6]");
  // [b, n, i, d] x [b, n, d, j]: the batch axes lead, the output needs no transpose after
  for (const auto& n : g->nodes())
    if (n->op_type == "MatMul") {
      CHECK(n->input(0)->type_string() == "f32[2x3x5x4]");
      CHECK(n->input(1)->type_string() == "f32[2x3x4x6]");
      CHECK(n->output(0) == g->find_value("y"));
    }
}

TEST_CASE("diagonals are Gathers, lone subscripts are summed first", "[einsum][passes]") {
  auto diag = test::parse_or_die(einsum_graph("ii,j->j", {"f32[4,4]", "f32[3]"}));
  test::run_frontend_or_die(*diag);
  CHECK(count_op(*diag, "Gather") == 1);     // the diagonal of a 4x4, read as a flat 16
  CHECK(count_op(*diag, "ReduceSum") == 1);  // the trace
  CHECK(count_op(*diag, "MatMul") == 1);     // the trace times the vector: a 1x1 by 1x3
  auto sum = test::parse_or_die(einsum_graph("ijk,jl->li", {"f32[2,3,4]", "f32[3,5]"}));
  test::run_frontend_or_die(*sum);
  CHECK(count_op(*sum, "ReduceSum") == 1);  // k, read by nothing else, before the product
  CHECK(count_op(*sum, "MatMul") == 1);
  CHECK(count_op(*sum, "Transpose") == 1);  // [i, l] to [l, i]
}

TEST_CASE(
    "an attention written with Einsums plans its softmax with the scores, equal to the reference on emu",
    "[einsum][fusion][emu]") {
  auto g = test::parse_or_die(R"(graph "att" opset 17 {
  input %q: f32[2,16,4,8]
  input %k: f32[2,16,4,8]
  input %v: f32[2,16,4,8]
  %s = Einsum(%q, %k) {equation = "bind,bjnd->bnij"} @"scores"
  %p = Softmax(%s) {axis = -1} @"softmax"
  %o = Einsum(%p, %v) {equation = "bnij,bjnd->bind"} @"context"
  output %o
}
)");
  test::run_frontend_or_die(*g);
  CHECK(count_op(*g, "Einsum") == 0);
  CHECK(count_op(*g, "MatMul") == 2);
  auto plan = fusion::make_plan(*g, test::opts("beam"));
  REQUIRE(plan.is_ok());
  CHECK(plan->cost.launches < plan->unfused.launches);
  const auto groups = test::groups_of(*plan);
  const auto packs = test::packs_of(*plan);
  test::emu_matches_reference(*g, &groups, 11, kEmuF32, &packs, plan->gemm_folds);
}

TEST_CASE("bad Einsum equations are errors naming the node", "[einsum][errors]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {einsum_graph("ij,jk->ik", {"f32[2,3]"}), "has 2 input terms for 1 inputs"},
      {einsum_graph("ijk->ik", {"f32[2,3]"}), "input 0 has rank 2, but its term in 'ijk->ik' names 3 axes"},
      {einsum_graph("ij,jk->ik", {"f32[2,3]", "f32[4,5]"}),
       "subscript 'j' has size 3 in one place and 4 in another"},
      {einsum_graph("ij->iz", {"f32[2,3]"}), "output subscript 'z' appears in no input term"},
      {einsum_graph("ij->ii", {"f32[2,3]"}), "output subscript 'i' is repeated"},
      {einsum_graph("i1->i", {"f32[2,3]"}), "'1' is not a subscript"},
      {einsum_graph("..i.->i", {"f32[2,3]"}), "an ellipsis is three dots"},
      {einsum_graph("", {"f32[2,3]"}), "needs an equation"},
      {einsum_graph("ij,jk->ik", {"f32[2,3]", "f64[3,4]"}), "input 1 is f64 where input 0 is f32"},
  };
  for (const auto& [text, want] : cases) {
    INFO(text);
    const std::string msg = test::frontend_error(text);
    INFO(msg);
    CHECK(msg.find("node 'es' (Einsum)") != std::string::npos);
    CHECK(msg.find(want) != std::string::npos);
  }
}

TEST_CASE("EyeLike folds to a constant once its input's shape is known", "[eyelike]") {
  auto g = test::parse_or_die(R"(graph "eye" opset 13 {
  input %x: f32[3,5]
  %e = EyeLike(%x) {k = 1} @"eye"
  %y = Add(%x, %e) @"add"
  output %y
}
)");
  test::run_frontend_or_die(*g);
  CHECK(count_op(*g, "EyeLike") == 0);
  REQUIRE(g->nodes().size() == 1);
  const Value* e = g->nodes()[0]->input(1);
  REQUIRE(e->constant);
  CHECK(e->constant->to_f64() == std::vector<double>{0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0});
  const std::string msg = test::frontend_error(R"(graph "eye" opset 13 {
  input %x: f32[3,5,2]
  %e = EyeLike(%x) @"eye"
  output %e
}
)");
  CHECK(msg.find("node 'eye' (EyeLike): needs a 2-D input, got rank 3") != std::string::npos);
}
