// OneHot as an element-wise comparison (expand_one_hot): the rewrite against the op in the
// reference interpreter (negative and out-of-range indices, every axis, float indices, values
// known at run time) and in one fused kernel on emu. ONNX's four OneHot node tests run on emu in
// the node-test suite.
#include <fmt/format.h>

#include "fusion_test_util.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;

namespace {

// OneHot of %i (`itype`) with depth `depth`, values [off, on] (a constant, or an input when
// `values` is empty), at `axis`, then times %s (the output's shape) so a plan has a neighbour.
std::string one_hot_graph(const std::string& itype, int depth, int axis, const std::string& out,
                          const std::string& values = "[-0.5, 2.0]") {
  return fmt::format(R"(graph "h" opset 17 {{
  input %i: {}
  input %s: f32{}
  const %depth: i64[] = [{}]
  {}
  %h = OneHot(%i, %depth, %v) {{axis = {}}} @"hot"
  %z = Mul(%h, %s) @"scale"
  output %z
}}
)",
                     itype, out, depth, values.empty() ? "input %v: f32[2]" : "const %v: f32[2] = " + values,
                     axis);
}

}  // namespace

TEST_CASE("a OneHot is an Equal against the positions and a Where of its values", "[passes][onehot]") {
  uint32_t seed = 1;
  // random_tensor draws integers in [0, 7): depths of 3 and 5 leave some out of range.
  const std::vector<std::tuple<std::string, int, int, std::string>> cases = {
      {"i32[2,3]", 5, -1, "[2,3,5]"}, {"i32[2,3]", 3, 0, "[3,2,3]"},  {"i64[4]", 5, 0, "[5,4]"},
      {"f32[2,3]", 5, 1, "[2,5,3]"},  {"i64[2,3]", 7, -2, "[2,7,3]"},
  };
  for (const auto& [itype, depth, axis, out] : cases) {
    INFO(itype << " depth " << depth << " axis " << axis);
    const test::RewriteRun r = test::run_rewrite(one_hot_graph(itype, depth, axis, out), seed++);
    CHECK(count_op(*r.graph, "OneHot") == 0);
    CHECK(r.got.at("z").to_f64() == r.want.at("z").to_f64());
  }
  // Negative indices count from the end; below -depth they match nothing: %j in [0, 7) less 3
  // gives -3 .. 3 against a depth of 2.
  const std::string neg = R"(graph "h" opset 17 {
  input %j: i64[12]
  input %s: f32[12,2]
  const %three: i64[] = [3]
  const %depth: i64[] = [2]
  const %v: f32[2] = [0.0, 1.0]
  %i = Sub(%j, %three) @"shift"
  %h = OneHot(%i, %depth, %v) @"hot"
  %z = Mul(%h, %s) @"scale"
  output %z
}
)";
  const test::RewriteRun n = test::run_rewrite(neg, seed++);
  CHECK(count_op(*n.graph, "OneHot") == 0);
  CHECK(n.got.at("z").to_f64() == n.want.at("z").to_f64());
  // int64 values past 2^53 are copied exactly, not through a double.
  const test::RewriteRun big = test::run_rewrite(R"(graph "h" opset 17 {
  input %i: i64[5]
  const %depth: i64[] = [4]
  const %v: i64[2] = [-1, 1152921504606846977]
  %h = OneHot(%i, %depth, %v) @"hot"
  output %h
}
)",
                                                 seed++);
  CHECK(count_op(*big.graph, "OneHot") == 0);
  CHECK(big.got.at("h").to_i64() == big.want.at("h").to_i64());
  // Values known only at run time: Gathers of off and on.
  const test::RewriteRun v = test::run_rewrite(one_hot_graph("i64[3]", 4, -1, "[3,4]", ""), seed++);
  CHECK(count_op(*v.graph, "Gather") == 2);
  CHECK(v.got.at("z").to_f64() == v.want.at("z").to_f64());
}

TEST_CASE("an expanded OneHot is one kernel with its neighbour on emu", "[passes][onehot][fusion][emu]") {
  auto g = test::parse_or_die(one_hot_graph("i32[2,3]", 5, -1, "[2,3,5]"));
  test::run_frontend_or_die(*g);
  uint32_t seed = 9;
  test::one_kernel_in_every_planner(*g, seed);
}
