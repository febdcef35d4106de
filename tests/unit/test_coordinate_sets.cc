// codegen::coordinate_sets and element_evaluations: how many times an element kernel computes
// each node per element, which the cost model charges as recomputation beyond one evaluation per
// element of the node's value (StitchInfo::recompute_elements): once per distinct set of
// coordinates it is read at, a quarter where the vector form's 4 lanes share it, and in the
// exchange form its reads within a tile taken from other lanes. Checked against the copies the
// stitcher's code really computes (Kernel::node_evaluations) on seeded random graphs and a pool's
// taps, and against the planner's choice between computing a producer at every tap and storing it.
#include <fmt/format.h>

#include <random>

#include "codegen/scalar_ops.h"
#include "fusion/planner.h"
#include "fusion/pool_taps.h"
#include "fusion/rewrites.h"
#include "fusion/short_reductions.h"
#include "fusion_test_util.h"
#include "random_matrix_graphs.h"
#include "test_util.h"

using namespace stitch;
using test::MatrixStep;

namespace {

// coordinate_sets of every node of `g` as one group storing its outputs (no vector form, no
// exchange), by node.
std::map<const Node*, int64_t> sets_in(const Graph& g) {
  const std::vector<const Node*> nodes = test::all_nodes(g);
  const codegen::CoordinateSets cs = codegen::coordinate_sets(nodes, {g.outputs.begin(), g.outputs.end()},
                                                              *g.outputs[0]->dims, std::nullopt, false);
  REQUIRE(cs.sets.size() == nodes.size());
  std::map<const Node*, int64_t> by;
  for (size_t k = 0; k < nodes.size(); ++k) by[nodes[k]] = cs.sets[k];
  return by;
}

// What element_evaluations predicts of kernel `k` of every node of `g`, per node: copies per
// thread (its evaluations per element times the elements a thread computes), and whether the
// kernel takes the exchange form.
struct Predicted {
  std::map<const Node*, double> copies;
  bool exchange = false;
};
Predicted predicted(const Graph& g, const codegen::Kernel& k) {
  const std::vector<const Node*> nodes = test::all_nodes(g);
  const codegen::StitchInfo info = test::whole_graph_info(g);
  const codegen::ElementEvaluations ev = codegen::element_evaluations(nodes, info);
  REQUIRE(ev.per_element.size() == nodes.size());
  const double per_thread = k.mapping.find("one thread per 4 elements") != std::string::npos ? 4 : 1;
  Predicted p;
  p.exchange = ev.exchange;
  for (size_t j = 0; j < nodes.size(); ++j) p.copies[nodes[j]] = ev.per_element[j] * per_thread;
  return p;
}
}  // namespace

TEST_CASE("seeded random graphs: the coordinate sets counted are the copies the kernel computes",
          "[evaluations][fusion]") {
  // Values of [batch, 7, 7]: no tile of lanes (49 is no power of two), so each lane computes its
  // elements alone, once per set of coordinates and element of its vector.
  std::mt19937 rng(1207);
  int nodes = 0, multi = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 3);
    INFO(fmt::format("trial {}: batch {}", trial, batch));
    const std::string text = test::random_matrix_graph(
        rng, batch, 7, 7, 10,
        {MatrixStep::kUnary, MatrixStep::kBinary, MatrixStep::kRotation, MatrixStep::kTransposeOrMul,
         MatrixStep::kShiftDown, MatrixStep::kSameSlice},
        "  output %v9\n");
    INFO(text);
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    const codegen::Kernel k = test::lower_whole_graph(*g);
    REQUIRE(k.lane_exchanges == 0);
    const Predicted p = predicted(*g, k);
    CHECK(!p.exchange);
    for (const auto& [n, count] : k.node_evaluations) {
      const codegen::StitchRole role = codegen::stitch_role(*n);
      if (role == codegen::StitchRole::kLayout || role == codegen::StitchRole::kView)
        continue;  // no arithmetic
      INFO(n->describe());
      const double c = static_cast<double>(count);
      CHECK(p.copies.at(n) == c);
      ++nodes;
      multi += c > p.copies.at(g->outputs[0]->producer);
    }
  }
  // Many nodes computed more than once.
  INFO(fmt::format("{} nodes, {} computed more than once", nodes, multi));
  CHECK(multi >= nodes / 5);
}

TEST_CASE("a pool's taps compute its producer once per window position, and the estimate charges each",
          "[evaluations][fusion]") {
  // A 3 x 3 MaxPool of a Tanh, as taps (fusion::pools_as_taps): the Tanh is evaluated at nine
  // positions for each output element, eight of them recomputation.
  for (const auto& [window, strides, pads, taps] :
       std::vector<std::tuple<std::string, std::string, std::string, int64_t>>{
           {"3, 3", "1, 1", "1, 1, 1, 1", 9},
           {"3, 3", "2, 2", "0, 0, 0, 0", 9},
           {"2, 2", "2, 2", "0, 0, 0, 0", 4},
           {"1, 3", "1, 1", "0, 1, 0, 1", 3}}) {
    INFO(fmt::format("window {} strides {} pads {}", window, strides, pads));
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 18 {{
  input %x: f32[1,2,9,9]
  %t = Tanh(%x) @"tanh"
  %p = MaxPool(%t) {{kernel_shape = ints[{}], strides = ints[{}], pads = ints[{}]}} @"pool"
  %y = Neg(%p) @"neg"
  output %y
}})",
                                            window, strides, pads));
    test::run_frontend_or_die(*g);
    auto lines = fusion::pools_as_taps(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    const Node* tanh = test::node_named(*g, "tanh");
    const std::map<const Node*, int64_t> sets = sets_in(*g);
    CHECK(sets.at(tanh) == taps);
    CHECK(sets.at(test::node_named(*g, "neg")) == 1);
    const codegen::Kernel k = test::lower_whole_graph(*g);
    const int64_t lanes = k.node_evaluations.at(g->outputs[0]->producer);
    CHECK(k.node_evaluations.at(tanh) == taps * lanes);
    // The estimate: the Tanh's evaluations beyond its own elements (none where strides skip as
    // many as the window adds), the Neg's none; the taps' Max nodes are at the output's shape.
    const codegen::StitchInfo info = test::whole_graph_info(*g);
    const int64_t d = num_elements(*g->outputs[0]->dims), e = num_elements(*tanh->output(0)->dims);
    CHECK(info.recompute_elements == std::max<int64_t>(taps * d - e, 0) * codegen::op_instructions(*tanh));
  }
}

TEST_CASE("in the vector form a value broadcast along the inner axis is computed once for 4 elements",
          "[evaluations][fusion]") {
  // A per-row Exp broadcast over rows of 64 (4 elements a thread), and the same over rows of 63 (a
  // lane per element): the first computes it once per thread, a quarter of an evaluation per
  // element; the second once per element.
  for (const int64_t cols : {64, 63}) {
    INFO(cols);
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 18 {{
  input %x: f32[8,{}]
  input %s: f32[8,1]
  %e = Exp(%s) @"exp"
  %y = Mul(%x, %e) @"mul"
  output %y
}})",
                                            cols));
    test::run_frontend_or_die(*g);
    const codegen::Kernel k = test::lower_whole_graph(*g);
    const Node* exp = test::node_named(*g, "exp");
    const Predicted p = predicted(*g, k);
    const bool vec = cols % 4 == 0;
    CHECK((k.mapping.find("one thread per 4 elements") != std::string::npos) == vec);
    CHECK(k.node_evaluations.at(exp) == 1);
    CHECK(k.node_evaluations.at(test::node_named(*g, "mul")) == (vec ? 4 : 1));
    CHECK(p.copies.at(exp) == 1.0);
    // The estimate: a quarter of the domain's evaluations (else all of them), beyond the 8 rows.
    const codegen::StitchInfo info = test::whole_graph_info(*g);
    const int64_t d = 8 * cols;
    CHECK(info.recompute_elements == ((vec ? d / 4 : d) - 8) * codegen::op_instructions(*exp));
  }
}

TEST_CASE("seeded random graphs within small matrices: the count follows the lanes' exchange",
          "[evaluations][fusion]") {
  // Values of [batch, rows, cols] with matrices of 4 to 32 elements, an exchange tile: sums over
  // either axis as Adds of Slices, rotations of the columns, Transposes of square matrices. Where
  // the stitcher's kernel reads the tile's values from other lanes, the count with the exchange
  // domain is its copies; where it does not, the count without.
  const std::pair<int, int> mats[] = {{4, 4}, {8, 2}, {2, 8}, {2, 2}, {16, 2}, {4, 2}};
  std::mt19937 rng(1208);
  int exchanged = 0, agreed = 0, nodes = 0;
  const int trials = 40;
  for (int trial = 0; trial < trials; ++trial) {
    const auto [r, c] = mats[trial % 6];
    const int batch = 1 + static_cast<int>(rng() % 5);
    INFO(fmt::format("trial {}: {} x {} x {}", trial, batch, r, c));
    const std::string text =
        test::random_matrix_graph(rng, batch, r, c, 10,
                                  {MatrixStep::kUnary, MatrixStep::kBinary, MatrixStep::kShortSum,
                                   MatrixStep::kRotation, MatrixStep::kTransposeOrMul},
                                  "  output %v9\n");
    INFO(text);
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    REQUIRE(fusion::short_reductions_as_adds(*g).is_ok());
    const codegen::Kernel k = test::lower_whole_graph(*g);
    const bool x = k.lane_exchanges > 0;
    exchanged += x;
    // The analysis' choice: the exchange form where it computes less.
    const Predicted p = predicted(*g, k);
    agreed += p.exchange == x;
    if (p.exchange != x) continue;
    for (const auto& [n, count] : k.node_evaluations) {
      const codegen::StitchRole role = codegen::stitch_role(*n);
      if (role == codegen::StitchRole::kLayout || role == codegen::StitchRole::kView) continue;
      INFO(n->describe());
      CHECK(p.copies.at(n) == static_cast<double>(count));
      ++nodes;
    }
    if (x)
      CHECK(codegen::coordinate_sets(test::all_nodes(*g), {g->outputs.begin(), g->outputs.end()},
                                     *g->outputs[0]->dims, std::nullopt, true)
                .exchanges == k.lane_exchanges);
  }
  // The choice of form as the kernel's but for a close call or so (the kernel counts both forms'
  // copies per thread, the analysis its estimate of them).
  INFO(fmt::format("{} of {} kernels exchanged, the analysis chose as the kernel in {}; {} nodes compared",
                   exchanged, trials, agreed, nodes));
  CHECK(exchanged >= trials / 5);
  CHECK(agreed >= trials * 9 / 10);
}

TEST_CASE("the planner computes a costly producer once and stores it rather than at every tap of a pool",
          "[fusion]") {
  // A 3 x 3 MaxPool (as taps) between element-wise chains: a Mul before it is cheap to compute at
  // nine positions, so it joins the taps' kernel; a long chain of transcendental functions costs
  // more computed nine times than its round trip through memory, so its own kernel stores it once.
  auto plan_of = [](const std::string& chain) {
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 18 {{
  input %x: f32[8,32,32,32]
  input %s: f32[1,32,1,1]
{}
  %p = MaxPool(%c) {{kernel_shape = ints[3, 3], pads = ints[1, 1, 1, 1]}} @"pool"
  %y = Relu(%p) @"relu"
  output %y
}})",
                                            chain));
    test::run_frontend_or_die(*g);
    auto r = fusion::rewrite_for_planning(g, test::opts("beam"));
    REQUIRE(r.is_ok());
    INFO(r->text());
    REQUIRE(r->pools.lines.size() == 1);
    auto plan = fusion::make_plan(*g, test::opts("beam"));
    REQUIRE(plan.is_ok());
    std::pair<std::unique_ptr<Graph>, fusion::FusionPlan> out{std::move(g), std::move(plan).value()};
    return out;
  };
  auto group_of = [](const fusion::FusionPlan& plan, const std::string& name) {
    for (size_t i = 0; i < plan.groups.size(); ++i)
      for (const Node* n : plan.groups[i].nodes)
        if (n->name == name) return static_cast<int>(i);
    return -1;
  };
  SECTION("a scale: one kernel") {
    auto [g, plan] = plan_of(R"(  %c = Mul(%x, %s) @"last")");
    CHECK(plan.cost.kernels == 1);
  }
  SECTION("eight transcendental functions: stored once, then the taps") {
    auto [g, plan] = plan_of(R"(  %a1 = Sin(%x)
  %a2 = Exp(%a1)
  %a3 = Log(%a2)
  %a4 = Cos(%a3)
  %a5 = Erf(%a4)
  %a6 = Tanh(%a5)
  %a7 = Sin(%a6)
  %c = Erf(%a7) @"last")");
    CHECK(plan.cost.kernels == 2);
    CHECK(group_of(plan, "last") != group_of(plan, "relu"));
  }
}

TEST_CASE("seeded random graphs before a softmax: each pass computes a node once per set of coordinates",
          "[evaluations][fusion]") {
  // Element-wise chains with rotations, shifts and Transposes over [batch, 8, 8], then a Softmax
  // over the last axis: a row kernel whose passes (the maximum, the sum, the store) each evaluate
  // the chain in front of it, once per set of coordinates a node is read at (row mode of
  // coordinate_sets). Lowered without the shared-memory cache, so every pass computes again.
  std::mt19937 rng(1209);
  int nodes = 0, multi = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 3);
    INFO(fmt::format("trial {}: batch {}", trial, batch));
    const std::string text = test::random_matrix_graph(
        rng, batch, 8, 8, 8,
        {MatrixStep::kUnary, MatrixStep::kBinary, MatrixStep::kRotation, MatrixStep::kTransposeOrMul},
        "  %y = Softmax(%v7) {axis = -1} @\"softmax\"\n  output %y\n");
    INFO(text);
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    const std::vector<const Node*> all = test::all_nodes(*g);
    const std::set<const Value*> out(g->outputs.begin(), g->outputs.end());
    auto k = codegen::lower_stitched(all, out, 0, /*cache=*/false);
    REQUIRE(k.is_ok());
    const codegen::StitchInfo info = test::whole_graph_info(*g);
    REQUIRE(info.row);
    const codegen::CoordinateSets cs =
        codegen::coordinate_sets(all, info.stored, info.domain, std::nullopt, false, /*rows=*/true);
    // The softmax's input: read by every pass at the row's own coordinates, one set.
    const Node* last = test::node_named(*g, "softmax")->input(0)->producer;
    const auto at = [&](const Node* n) {
      for (size_t j = 0; j < all.size(); ++j)
        if (all[j] == n) return cs.sets[j];
      return int64_t{0};
    };
    REQUIRE(at(last) == 1);
    const int64_t per_set = k->node_evaluations.at(last);
    for (const auto& [n, count] : k->node_evaluations) {
      const codegen::StitchRole role = codegen::stitch_role(*n);
      if (role == codegen::StitchRole::kLayout || role == codegen::StitchRole::kView ||
          role == codegen::StitchRole::kRow)
        continue;
      INFO(n->describe());
      CHECK(at(n) * per_set == count);
      ++nodes;
      multi += count > per_set;
    }
  }
  INFO(fmt::format("{} nodes, {} computed more than once per pass", nodes, multi));
  CHECK(multi >= nodes / 5);
}

TEST_CASE("a row kernel's value wider than its rows is spread over the sets its Split reads",
          "[evaluations][fusion]") {
  // A Tanh over [4, 192] split into three [4, 64] parts summed before a Softmax over 64: each pass
  // computes the Tanh at three offsets per element of the rows, each of its elements once. No
  // recomputation is charged; each of the summing Adds is computed once per element.
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,192]
  %t = Tanh(%x) @"tanh"
  %a, %b, %c = Split(%t) {axis = 1, num_outputs = 3} @"split"
  %ab = Add(%a, %b) @"ab"
  %y = Add(%ab, %c) @"abc"
  %s = Softmax(%y) {axis = -1} @"softmax"
  output %s
})");
  test::run_frontend_or_die(*g);
  const codegen::StitchInfo info = test::whole_graph_info(*g);
  REQUIRE(info.row);
  CHECK(info.recompute_elements == 0);
  const std::vector<const Node*> all = test::all_nodes(*g);
  auto k = codegen::lower_stitched(all, {g->outputs.begin(), g->outputs.end()}, 0, /*cache=*/false);
  REQUIRE(k.is_ok());
  CHECK(k->node_evaluations.at(test::node_named(*g, "tanh")) ==
        3 * k->node_evaluations.at(test::node_named(*g, "abc")));
}
