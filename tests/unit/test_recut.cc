// The beam search's last step (Planner::recut): two neighbouring groups cut anew where that is
// cheaper. Started from seeded random partitions of seeded random graphs, it never makes a
// partition dearer, keeps every group legal, connected and the group graph acyclic, keeps its
// running cost equal to the groups' costs, and improves some of them; on the shipped models its
// plans are checked by the plan tests (test_fusion.cc).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fusion/planner.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;
namespace {

// A chain of element-wise ops, row reductions broadcast back and Softmaxes over [r, c], each
// reading the last value or one before it.
std::string random_rows(std::mt19937& rng, const std::string& r, const std::string& c) {
  const char* unary[] = {"Relu", "Neg", "Tanh", "Sigmoid", "Exp"};
  const char* binary[] = {"Add", "Sub", "Mul", "Max"};
  std::string text = fmt::format(
      "graph \"r\" opset 18 {{\n  input %x: f32[{0},{1}]\n  input %col: f32[1,{1}]\n  input %row: "
      "f32[{0},1]\n"
      "  const %ax: i64[1] = [-1]\n",
      r, c);
  std::vector<std::string> full = {"%x"};
  for (int k = 0; k < 9; ++k) {
    const std::string v = fmt::format("%v{}", k);
    const std::string a = full[full.size() - 1 - rng() % std::min<size_t>(2, full.size())];
    switch (rng() % 4) {
      case 0:
        text += fmt::format("  {} = {}({}) @\"n{}\"\n", v, unary[rng() % 5], a, k);
        break;
      case 1:
        text += fmt::format("  {} = {}({}, {}) @\"n{}\"\n", v, binary[rng() % 4], a,
                            rng() % 2 ? "%col" : "%row", k);
        break;
      case 2:
        text += fmt::format(
            "  %red{0} = ReduceMax({1}, %ax) @\"r{0}\"\n  {2} = Sub({1}, %red{0}) @\"n{0}\"\n", k, a, v);
        break;
      default:
        text += fmt::format("  {} = Softmax({}) {{axis = -1}} @\"n{}\"\n", v, a, k);
    }
    full.push_back(v);
  }
  return text + "  output " + full.back() + "\n  output " + full[3] + "\n}\n";
}

}  // namespace

TEST_CASE("recutting neighbouring groups never costs more, keeps groups legal and improves some partitions",
          "[fusion]") {
  std::mt19937 rng(905);
  const char* shapes[][2] = {{"4", "37"}, {"37", "770"}, {"3", "3000"}};
  int improved = 0;
  for (int trial = 0; trial < 24; ++trial) {
    INFO("trial " << trial);
    auto g = test::parse_or_die(random_rows(rng, shapes[trial % 3][0], shapes[trial % 3][1]));
    test::run_frontend_or_die(*g);
    // A small cap, so that the random merges leave pairs of groups with cheaper cuts.
    fusion::FusionOptions o = opts("beam", {}, 4);
    auto device = fusion::device_spec("sm_90");
    REQUIRE(device.is_ok());
    o.device = *device;
    fusion::Planner planner(*g, o);
    for (const std::vector<int>& comp : planner.components()) {
      fusion::Part p = planner.singletons();
      const auto es = planner.edges(comp);
      for (int step = 0; step < 12 && !es.empty(); ++step) {
        const auto [u, v] = es[rng() % es.size()];
        const int a = p.gid[u], b = p.gid[v];
        const fusion::Eval* e = nullptr;
        if (a == b || !planner.merge_check(p, a, b, &e).empty()) continue;
        fusion::Planner::apply(p, a, b, 0);
      }
      p.cost = planner.component_cost(p, comp);
      const double before = p.cost;
      const bool changed = planner.recut(p, comp);
      CHECK(p.cost <= before + 1e-15);
      CHECK(std::abs(p.cost - planner.component_cost(p, comp)) <= 1e-12);
      CHECK(changed == (p.cost < before));
      CHECK(planner.acyclic(p));
      for (int x : comp) {
        const std::vector<int>& m = p.groups.at(p.gid[x]);
        CHECK(m.front() == p.gid[x]);
        CHECK(planner.eval(m).ok);
        CHECK(planner.connected(m));
      }
      improved += changed;
    }
    // The whole search with the recut still plans a graph that matches the reference.
    CHECK(fused_matches_reference(*g, 900 + trial) >= 1);
  }
  CHECK(improved > 0);
}

TEST_CASE("connected follows producer-consumer edges among the members alone, call after call", "[fusion]") {
  auto g = test::parse_or_die(R"(graph "c" opset 18 {
  input %x: f32[4,37]
  %a = Relu(%x) @"a"
  %b = Neg(%a) @"b"
  %c = Tanh(%b) @"c"
  %d = Exp(%x) @"d"
  %e = Add(%c, %d) @"e"
  output %e
}
)");
  test::run_frontend_or_die(*g);
  fusion::Planner planner(*g, opts("beam"));
  // Member indices by node name (the planner's order is the graph's).
  std::map<std::string, int> at;
  for (int i = 0; i < 5; ++i) at[planner.describe({i}).nodes.front()->name] = i;
  REQUIRE(at.size() == 5);
  auto ids = [&](std::initializer_list<const char*> names) {
    std::vector<int> m;
    for (const char* n : names) m.push_back(at.at(n));
    std::sort(m.begin(), m.end());
    return m;
  };
  // Each query twice, in an order where a wrong answer would follow from marks left by the one before.
  for (int pass = 0; pass < 2; ++pass) {
    CHECK(planner.connected(ids({"a", "b", "c"})));
    CHECK_FALSE(planner.connected(ids({"a", "c"})));       // b, between them, is not a member
    CHECK_FALSE(planner.connected(ids({"a", "b", "d"})));  // d reaches them through x, an input
    CHECK(planner.connected(ids({"a", "b", "c", "d", "e"})));
    CHECK_FALSE(planner.connected(ids({"c", "d"})));
    CHECK(planner.connected(ids({"c", "d", "e"})));  // e joins them, as a consumer of both
    CHECK(planner.connected(ids({"d"})));
  }
}

TEST_CASE("escaping by node index names the same values as codegen::group_outputs", "[fusion]") {
  std::mt19937 rng(77);
  for (int trial = 0; trial < 6; ++trial) {
    INFO("trial " << trial);
    auto g = test::parse_or_die(random_rows(rng, "4", "37"));
    test::run_frontend_or_die(*g);
    fusion::Planner planner(*g, opts("beam"));
    const size_t n = g->nodes().size();
    for (int k = 0; k < 40; ++k) {
      // A random set of nodes, connected or not: the answer depends only on who reads what.
      std::vector<int> m;
      std::vector<const Node*> ns;
      for (size_t i = 0; i < n; ++i)
        if (rng() % 3 == 0) {
          m.push_back(static_cast<int>(i));
          ns.push_back(g->nodes()[i].get());
        }
      if (m.empty()) continue;
      CHECK(planner.escaping(m) == planner.escaping(ns));
    }
  }
}

TEST_CASE("a pair of groups past kRecutWhole nodes is cut at most kRecutMove nodes from where it was",
          "[fusion]") {
  // A chain of 240 element-wise ops and row reductions over [4, 37], cut into two groups at a
  // seeded point: the recut keeps the pair legal and no dearer, and moves few nodes.
  std::mt19937 rng(4242);
  const char* unary[] = {"Relu", "Neg", "Tanh", "Sigmoid"};
  std::string text =
      "graph \"long\" opset 18 {\n  input %x: f32[4,37]\n  input %row: f32[4,1]\n  const %ax: i64[1] = "
      "[-1]\n";
  std::string last = "%x";
  for (int k = 0; k < 240; ++k) {
    const std::string v = fmt::format("%v{}", k);
    if (k % 40 == 39)
      text += fmt::format("  %red{0} = ReduceMax({1}, %ax) @\"r{0}\"\n  {2} = Sub({1}, %red{0}) @\"n{0}\"\n",
                          k, last, v);
    else if (k % 5 == 4)
      text += fmt::format("  {} = Add({}, %row) @\"n{}\"\n", v, last, k);
    else
      text += fmt::format("  {} = {}({}) @\"n{}\"\n", v, unary[rng() % 4], last, k);
    last = v;
  }
  auto g = test::parse_or_die(text + "  output " + last + "\n}\n");
  test::run_frontend_or_die(*g);
  fusion::FusionOptions o = opts("beam", {}, 1000);
  auto device = fusion::device_spec("sm_90");
  REQUIRE(device.is_ok());
  o.device = *device;
  fusion::Planner planner(*g, o);
  const auto comps = planner.components();
  REQUIRE(comps.size() == 1);
  const std::vector<int>& comp = comps.front();
  REQUIRE(comp.size() > fusion::Planner::kRecutWhole);
  int tried = 0;
  for (size_t split : {3, 17, 90, 150, 230}) {
    INFO("split " << split);
    // The first `split` nodes in one group and the rest in the other, both legal.
    std::vector<int> first(comp.begin(), comp.begin() + static_cast<std::ptrdiff_t>(split));
    std::vector<int> second(comp.begin() + static_cast<std::ptrdiff_t>(split), comp.end());
    if (!planner.eval(first).ok || !planner.eval(second).ok) continue;
    ++tried;
    fusion::Part p = planner.singletons();
    for (size_t i = 1; i < first.size(); ++i) fusion::Planner::apply(p, p.gid[first[0]], p.gid[first[i]], 0);
    for (size_t i = 1; i < second.size(); ++i)
      fusion::Planner::apply(p, p.gid[second[0]], p.gid[second[i]], 0);
    p.cost = planner.component_cost(p, comp);
    const double before = p.cost;
    const bool changed = planner.recut(p, comp);
    CHECK(p.cost <= before + 1e-15);
    CHECK(changed == (p.cost < before));
    CHECK(planner.acyclic(p));
    // The group holding the first node: the nodes that changed sides are the difference from
    // `first` or from `second`, whichever is smaller.
    const std::vector<int>& now = p.groups.at(p.gid[comp.front()]);
    std::vector<int> moved;
    std::set_symmetric_difference(now.begin(), now.end(), first.begin(), first.end(),
                                  std::back_inserter(moved));
    const size_t changed_sides = std::min(moved.size(), comp.size() - moved.size());
    CHECK(changed_sides <= fusion::Planner::kRecutMove * fusion::Planner::kRecutRounds);
    for (int x : comp) {
      const std::vector<int>& m = p.groups.at(p.gid[x]);
      CHECK(planner.eval(m).ok);
      CHECK(planner.connected(m));
    }
  }
  CHECK(tried >= 2);
}
