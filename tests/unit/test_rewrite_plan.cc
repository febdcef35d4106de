// The plan the rewrites before planning leave (Rewrites::plan): the last judged rewrite planned
// the graph as it stands, and `stitchc compile` uses that plan instead of planning again. It must
// be the plan make_plan makes of the final graph: the same groups of the same nodes, packs and
// estimate. These tests fail when a rewrite changes the graph after the plan it hands on was made.
#include <fmt/format.h>

#include <regex>

#include "fusion/relayout_copies.h"
#include "fusion/rewrites.h"
#include "fusion_test_util.h"
#include "wide_layer_graphs.h"

using namespace stitch;
using namespace stitch::test;
using namespace stitch::test::wide;

namespace {

// Each group as its node names and scheme, in plan order, with its pack.
std::vector<std::string> described_groups(const fusion::FusionPlan& p) {
  std::vector<std::string> out;
  for (const fusion::FusionGroup& grp : p.groups) {
    std::string s = fmt::format("{} pack {}:", grp.scheme, grp.pack);
    for (const Node* n : grp.nodes) s += " " + n->name;
    out.push_back(s);
  }
  return out;
}

// Rewrites `g` as compile does; when they hand on a plan, it is make_plan's of the final graph.
// Returns whether they did.
bool check_handed_plan(std::unique_ptr<Graph>& g, const fusion::RewriteSwitches& sw = {}) {
  auto r = fusion::rewrite_for_planning(g, opts("beam"), sw);
  REQUIRE(r.is_ok());
  auto fresh = fusion::make_plan(*g, opts("beam"));
  REQUIRE(fresh.is_ok());
  if (!r->plan) return false;
  INFO(r->text());
  const fusion::FusionPlan& handed = *r->plan;
  CHECK(handed.cost.time == fresh->cost.time);
  CHECK(handed.cost.kernels == fresh->cost.kernels);
  CHECK(handed.cost.library_calls == fresh->cost.library_calls);
  CHECK(handed.cost.bytes == fresh->cost.bytes);
  CHECK(described_groups(handed) == described_groups(*fresh));
  CHECK(handed.contraction_note == fresh->contraction_note);
  // Every node of the final graph is in exactly one group of the handed plan.
  std::set<const Node*> planned;
  size_t count = 0;
  for (const fusion::FusionGroup& grp : handed.groups)
    for (const Node* n : grp.nodes) planned.insert(n), ++count;
  std::set<const Node*> nodes;
  for (const auto& n : g->nodes()) nodes.insert(n.get());
  CHECK(count == planned.size());
  CHECK(planned == nodes);
  return true;
}

}  // namespace

TEST_CASE("the rewrites hand on the plan of the graph they leave", "[fusion][plan]") {
  SECTION("LLaMA with LayerNorms: both LayerNorm decisions kept, the last rewrite judged") {
    auto m = llama(2, 1024, 16, 4, 2816, QkNorm::kNone, "f32", true);
    CHECK(check_handed_plan(m.graph));
  }
  SECTION("ViT with the layer scale folded (an unjudged rewrite first)") {
    auto m = vit(2, true);
    CHECK(check_handed_plan(m.graph));
  }
  SECTION("Falcon: the Slices judged with the relayout copies") {
    auto m = falcon(2);
    CHECK(check_handed_plan(m.graph));
  }
  SECTION("BLOOM") {
    auto m = bloom(2);
    CHECK(check_handed_plan(m.graph));
  }
  SECTION("a rewrite switched off changes nothing: the plan is the same") {
    auto m = llama(2, 1024, 16, 4, 2816, QkNorm::kPerHead);
    fusion::RewriteSwitches sw;
    sw.hoist_row_scales = false;
    check_handed_plan(m.graph, sw);
  }
}

TEST_CASE("with no judged rewrite planning the graph, no plan is handed on", "[fusion][plan]") {
  // Every judged rewrite off: only the unjudged ones run, and nothing planned the graph.
  auto m = vit(2, true);
  fusion::RewriteSwitches sw;
  sw.gemms_as_matmuls = sw.split_slices = sw.relayout_copies = sw.hoist_row_scales = sw.hoist_layer_norms =
      sw.output_copies = sw.all_expert_gemms = sw.expert_sums = sw.short_reductions = sw.short_maxima =
          sw.topk_rounds = sw.arg_reductions = sw.shared_duplicates = false;
  auto r = fusion::rewrite_for_planning(m.graph, opts("beam"), sw);
  REQUIRE(r.is_ok());
  CHECK(r->scale_folds.size() > 0);
  CHECK(r->plan == nullptr);
}

TEST_CASE("the second LayerNorm decision is judged against the graph the first one kept", "[fusion][plan]") {
  // The two decisions are planned at once (the first's copy on a second thread, the second's copy
  // made from it); the verdict must read as if one came after the other: the second compares with
  // the estimate the first kept.
  auto m = llama(2, 1024, 16, 4, 2816, QkNorm::kNone, "f32", true);
  auto r = fusion::rewrite_for_planning(m.graph, opts("beam"));
  REQUIRE(r.is_ok());
  const std::string& v = r->norm_hoists.verdict;
  INFO(v);
  const std::regex both(
      R"(feeding other work: estimated ([0-9.]+) us against [0-9.]+ us without.*; feeding attention: (not applied: )?estimated [0-9.]+ us against ([0-9.]+) us without)");
  std::smatch match;
  REQUIRE(std::regex_search(v, match, both));
  CHECK(match[1].str() == match[3].str());
  // And the handed-on plan is the final graph's.
  auto fresh = fusion::make_plan(*m.graph, opts("beam"));
  REQUIRE(fresh.is_ok());
  REQUIRE(r->plan);
  CHECK(r->plan->cost.time == fresh->cost.time);
  CHECK(described_groups(*r->plan) == described_groups(*fresh));
}

TEST_CASE("the weights the rewrites build are computed when read, not when planned", "[fusion][plan]") {
  // LayerNorms moved past their GEMMs fold the norms' scales into new weights (of merged sibling
  // weights, themselves new): each judged try builds them on a copy of the graph, which planning
  // reads by shape. They stay to be computed through the rewrites and the plan, and the rewritten
  // graph, run, computes what the original did.
  auto m = llama(1, 128, 2, 1, 256, QkNorm::kNone, "f32", true, 1, 8);
  const auto original = clone_graph(*m.graph);
  auto r = fusion::rewrite_for_planning(m.graph, opts("beam"));
  REQUIRE(r.is_ok());
  INFO(r->text());
  REQUIRE(fusion::make_plan(*m.graph, opts("beam")).is_ok());
  std::vector<const Value*> built;
  for (const auto& v : m.graph->values())
    if (v->constant && (v->name.find("/scaled_weight") != std::string::npos ||
                        v->name.find("/merged/weight") != std::string::npos))
      built.push_back(v.get());
  REQUIRE(built.size() >= 2);
  for (const Value* v : built) {
    INFO(v->name);
    CHECK(v->constant->pending());
  }
  same_as_original(*original, *m.graph, 11);
  for (const Value* v : built) CHECK_FALSE(v->constant->pending());
}

TEST_CASE("the relayout copies judged beside the Slices stand for their judgement on the graph itself",
          "[fusion][plan]") {
  // A Split the Slices do not beat (its readers kept apart by --no-fuse) and a Transpose read by a
  // MatMul and by a node kept apart, whose copy for that node is not cheaper either. The copies
  // were judged on a copy of the graph before the Slices were judged with them; neither pays, so
  // that judgement is the copies' own: the same verdict as judging them on the graph alone, and
  // the graph and the plan handed on are the graph's.
  const char* text = R"(graph "g" opset 18 {
  input %x: f32[4,96]
  input %y: f32[64,32]
  input %w: f32[64,16]
  const %sizes: i64[3] = [32, 32, 32]
  %a, %b, %c = Split(%x, %sizes) {axis = 1} @"split"
  %ea = Exp(%a) @"r0"
  %eb = Exp(%b) @"r1"
  %ec = Exp(%c) @"r2"
  %t = Transpose(%y) {perm = ints[1, 0]} @"t"
  %m = MatMul(%t, %w) @"mm"
  %n = Neg(%t) @"neg"
  output %ea
  output %eb
  output %ec
  output %m
  output %n
})";
  const fusion::FusionOptions o = opts("beam", {"r0", "r1", "r2", "neg"});
  auto g = parse_or_die(text);
  run_frontend_or_die(*g);
  auto alone = clone_graph(*g);
  const size_t nodes = g->nodes().size();
  auto r = fusion::rewrite_for_planning(g, o);
  REQUIRE(r.is_ok());
  INFO(r->text());
  CHECK(r->slices.verdict.rfind("not applied: estimated", 0) == 0);
  CHECK(r->copies.lines.empty());
  auto copies = fusion::copy_shared_relayouts_if_cheaper(alone, o);
  REQUIRE(copies.is_ok());
  CHECK(copies->lines.empty());
  CHECK(copies->verdict.rfind("not applied: estimated", 0) == 0);
  CHECK(r->copies.verdict == copies->verdict);
  CHECK(g->nodes().size() == nodes);
  REQUIRE(r->plan);
  auto fresh = fusion::make_plan(*g, o);
  REQUIRE(fresh.is_ok());
  CHECK(r->plan->cost.time == fresh->cost.time);
  CHECK(described_groups(*r->plan) == described_groups(*fresh));
}
