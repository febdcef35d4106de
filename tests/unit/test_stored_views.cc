// Views whose result a kernel stores: a Reshape of a value the kernel computes, read by the kernel
// itself and by a node outside it (GLM-4-MoE's and DeepSeek-V3's router: the sigmoid scores
// flattened to [tokens, experts], whose top k the router's kernel picks and which the next kernel
// gathers the chosen scores from). The kernel writes the view's result as a tensor of its own; the
// beam search joins such a view with its producer's group and one reader's group at once, since
// with either alone it would be stored without a reason. Each plan runs on the emu backend against
// the reference interpreter.
#include <fmt/format.h>

#include "codegen/stitch.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;
namespace {

// Scores [2, 8, 4], flattened to [16, 4] by a Reshape, the flattened scores plus a bias reduced
// per row, and a MatMul of the flattened scores (a library call) reading them outside the kernel.
// `row` false: the bias-added scores are stored, no reduction (an element kernel).
std::string router(bool row) {
  return fmt::format(
      R"(graph "router" opset 18 {{
  input %x: f32[2,8,4]
  input %w: f32[4,6]
  const %flat: i64[2] = [16, 4]
  const %bias: f32[4] = [0.25, -0.5, 0.125, 0.0]
  const %last: i64[1] = [-1]
  %s = Sigmoid(%x) @"scores"
  %f = Reshape(%s, %flat) @"flattened"
  %c = Add(%f, %bias) @"for_choice"
{}  %p = MatMul(%f, %w) @"reader"
  output %p
}}
)",
      row ? "  %m = ReduceMax(%c, %last) {keepdims = 1} @\"best\"\n  output %m\n" : "  output %c\n");
}

bool one_group_holds(const fusion::FusionPlan& p, const std::vector<std::string>& names) {
  for (const auto& grp : p.groups) {
    size_t found = 0;
    for (const Node* n : grp.nodes) found += std::find(names.begin(), names.end(), n->name) != names.end();
    if (found == names.size()) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a kernel stores a view of a value it computes for a reader outside, reading the view itself",
          "[fusion][emu]") {
  uint32_t seed = 650;
  for (bool row : {true, false}) {
    INFO((row ? "row kernel" : "element kernel"));
    auto g = parse_or_die(router(row));
    run_frontend_or_die(*g);
    for (const std::string mode : {"beam", "ilp"}) {
      INFO(mode);
      auto plan = fusion::make_plan(*g, opts_lib(mode));
      REQUIRE(plan.is_ok());
      INFO(fusion::explain(*plan));
      // The scores, their view and the view's reader in the kernel: one kernel, which stores the
      // view's result for the MatMul (before, the view was a group of its own between two kernels).
      CHECK(plan->cost.kernels == 1);
      CHECK(one_group_holds(*plan, {"scores", "flattened", "for_choice"}));
      CHECK(plan_matches_reference(*g, *plan, seed++) == 1);
    }
  }
}

TEST_CASE("a kernel stores no view of a value from outside it, nor one it does not read itself", "[fusion]") {
  auto g = parse_or_die(router(true));
  run_frontend_or_die(*g);
  const Node* scores = node_named(*g, "scores");
  const Node* flattened = node_named(*g, "flattened");
  const Node* add = node_named(*g, "for_choice");
  const Node* best = node_named(*g, "best");
  const Value* view = flattened->output(0);
  // Its producer, the view and its reader: the view's result and the row's maximum are stored.
  auto info = codegen::analyze_stitch({scores, flattened, add, best}, {view, best->output(0)});
  REQUIRE(info.is_ok());
  CHECK(info->row);
  // The view of a value from outside the kernel: storing it would copy the scores.
  auto copy = codegen::analyze_stitch({flattened, add, best}, {view, best->output(0)});
  REQUIRE_FALSE(copy.is_ok());
  CHECK_THAT(copy.status().message(),
             Catch::Contains("'flattened' (Reshape) is a view whose result is read outside"));
  // The view read outside alone: the kernel stores the scores, and the view stays a view of them.
  auto tail = codegen::analyze_stitch({scores, flattened}, {view});
  REQUIRE_FALSE(tail.is_ok());
  CHECK_THAT(tail.status().message(), Catch::Contains("reads in the view's shape itself"));
}
