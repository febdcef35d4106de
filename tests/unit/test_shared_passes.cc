// Row ops of one pass sharing the pass of an earlier one (StitchInfo::shared_pass): which ones
// may, what the kernel emits (one loop, one grid barrier when the row is split), what the plan
// says, and their results on emu against the reference on every row mapping.
#include <random>

#include "codegen/stitch.h"
#include "fusion_test_util.h"

namespace stitch {
namespace {

using test::lower_whole_graph;
using test::opts;

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The maximum and minimum of x's rows, and values computed from both (DynamicQuantizeLinear's
// range), over rows of `shape`'s last axis.
std::string min_max_graph(const std::string& type, const std::string& shape) {
  return R"(graph "g" opset 18 {
  input %x: )" +
         type + "[" + shape + R"(]
  const %ax: i64[1] = [-1]
  %mx = ReduceMax(%x, %ax) @"max"
  %mn = ReduceMin(%x, %ax) @"min"
  %r = Sub(%mx, %mn) @"range"
  %y = Sub(%x, %mn) @"shift"
  %z = Div(%y, %r) @"unit"
  output %z
  output %r
})";
}

}  // namespace

TEST_CASE("a row's maximum and minimum share one pass on every row mapping, and match the reference",
          "[stitch][emu]") {
  // Warp per row, block per row, and a row split over blocks (one grid barrier for both).
  const char* shapes[] = {"64,300", "128,3000", "2,40000"};
  uint32_t seed = 40;
  for (const char* shape : shapes) {
    auto g = test::parse_or_die(min_max_graph("f32", shape));
    test::run_frontend_or_die(*g);
    INFO(shape);
    const codegen::StitchInfo info = test::whole_graph_info(*g);
    // The two reductions in one pass, then the store pass.
    CHECK(info.passes == 2);
    REQUIRE(info.shared_pass.size() == 1);
    CHECK(info.shared_pass.begin()->first->name == "min");
    CHECK(info.shared_pass.begin()->second->name == "max");
    const codegen::Kernel k = lower_whole_graph(*g);
    INFO(k.source);
    CHECK_THAT(k.mapping, Catch::Contains("2 passes per row"));
    CHECK_THAT(k.mapping,
               Catch::Contains("node 'min' (ReduceMin) reduced in the pass of node 'max' (ReduceMax)"));
    // One loop takes both reductions' elements, then the store pass reads x again.
    CHECK(count_of(k.source, "stitch_dev::Max()(") == 1);
    CHECK(count_of(k.source, "stitch_dev::Min()(") == 1);
    if (k.cooperative) {
      CHECK(count_of(k.source, "grid_sync()") == 1);
      CHECK(count_of(k.source, "grid_row_publish(") == 2);
      CHECK(count_of(k.source, "grid_row_combine(") == 2);
      CHECK_THAT(k.source, !Catch::Contains("grid_row_reduce("));
      // Both reductions' partials still have slots of their own.
      const auto m = codegen::row_mapping(2, 40000);
      REQUIRE(k.workspace != nullptr);
      CHECK(*k.workspace->dims == Dims{2 * 2 * m.segments});
    }
    CHECK(test::one_group_matches_reference(*g, seed++));
  }
  // Without the store pass, x is read by one pass only: nothing to cache in shared memory (two
  // passes over it used to cache it).
  auto range = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[128,3000]
  const %ax: i64[1] = [-1]
  %mx = ReduceMax(%x, %ax) @"max"
  %mn = ReduceMin(%x, %ax) @"min"
  %r = Sub(%mx, %mn) @"range"
  output %r
})");
  test::run_frontend_or_die(*range);
  const codegen::Kernel rk = lower_whole_graph(*range);
  INFO(rk.source);
  CHECK_THAT(rk.mapping, Catch::Contains("1 pass per row"));
  CHECK_THAT(rk.source, !Catch::Contains("cache0"));
  CHECK(test::one_group_matches_reference(*range, 44));
  // Integer rows split over blocks: 64-bit partials, one barrier.
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: i32[2,40000]
  const %ax: i64[1] = [-1]
  %mx = ReduceMax(%x, %ax) @"max"
  %mn = ReduceMin(%x, %ax) @"min"
  %s = ReduceSum(%x, %ax) @"sum"
  %r = Sub(%mx, %mn) @"range"
  %t = Add(%r, %s) @"total"
  output %t
})");
  test::run_frontend_or_die(*g);
  const codegen::Kernel k = lower_whole_graph(*g);
  INFO(k.source);
  REQUIRE(k.cooperative);
  CHECK(count_of(k.source, "grid_sync()") == 1);
  CHECK(count_of(k.source, "grid_row_publish(") == 3);
  REQUIRE(k.workspace != nullptr);
  CHECK(k.workspace->dtype == DType::kI64);
  CHECK(test::one_group_matches_reference(*g, 45));
}

TEST_CASE("DynamicQuantizeLinear's whole-tensor maximum and minimum wait at one grid barrier",
          "[stitch][emu][quantize]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[3,20000]
  %q, %s, %zp = DynamicQuantizeLinear(%x) @"quantize"
  output %q
  output %s
  output %zp
})");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  auto s = test::schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  // The statistics' kernel: its one row of 60000 split over blocks, both reductions in one pass.
  const codegen::Kernel* stats = nullptr;
  for (const codegen::Kernel& k : s->kernels)
    if (k.cooperative) stats = &k;
  REQUIRE(stats != nullptr);
  INFO(stats->source);
  CHECK(count_of(stats->source, "grid_sync()") == 1);
  CHECK_THAT(stats->source, !Catch::Contains("grid_row_reduce("));
  CHECK_THAT(stats->mapping, Catch::Contains("at its grid barrier"));
  CHECK(test::plan_matches_reference(*g, *plan, 46) == s->kernels.size());
}

TEST_CASE("a row op whose input needs another's result does not share that one's pass", "[stitch][emu]") {
  SECTION("a layer norm written out: the variance's pass follows the mean's") {
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[16,512]
  const %ax: i64[1] = [-1]
  %m = ReduceMean(%x, %ax) @"mean"
  %d = Sub(%x, %m) @"center"
  %sq = Mul(%d, %d) @"square"
  %v = ReduceMean(%sq, %ax) @"variance"
  %y = Div(%d, %v) @"scale"
  output %y
})");
    test::run_frontend_or_die(*g);
    const codegen::StitchInfo info = test::whole_graph_info(*g);
    CHECK(info.shared_pass.empty());
    CHECK(info.passes == 3);
    CHECK(test::one_group_matches_reference(*g, 47));
  }
  SECTION("E[x] and E[x^2] share one pass; the centred maximum and minimum share the next") {
    // mean and sumsq need nothing; cmax and cmin need the mean, so they cannot join its pass, and
    // cmin joins cmax's.
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,5000]
  const %ax: i64[1] = [-1]
  %m = ReduceMean(%x, %ax) @"mean"
  %d = Sub(%x, %m) @"center"
  %hi = ReduceMax(%d, %ax) @"cmax"
  %ss = ReduceSumSquare(%x, %ax) @"sumsq"
  %lo = ReduceMin(%d, %ax) @"cmin"
  %a = Add(%hi, %lo) @"spread"
  %b = Add(%a, %ss) @"total"
  output %b
})");
    test::run_frontend_or_die(*g);
    const codegen::StitchInfo info = test::whole_graph_info(*g);
    CHECK(info.passes == 2);
    std::map<std::string, std::string> joins;
    for (const auto& [n, leader] : info.shared_pass) joins[n->name] = leader->name;
    CHECK(joins == std::map<std::string, std::string>{{"sumsq", "mean"}, {"cmin", "cmax"}});
    const codegen::Kernel k = lower_whole_graph(*g);
    INFO(k.source);
    CHECK_THAT(k.mapping, Catch::Contains("2 passes per row"));
    CHECK(test::one_group_matches_reference(*g, 48));
  }
  SECTION("a softmax's two passes are its own; a sum beside it takes a pass of its own") {
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[8,1000]
  const %ax: i64[1] = [-1]
  %p = Softmax(%x) {axis = -1} @"softmax"
  %s = ReduceSum(%x, %ax) @"sum"
  %y = Mul(%p, %s) @"weight"
  output %y
})");
    test::run_frontend_or_die(*g);
    const codegen::StitchInfo info = test::whole_graph_info(*g);
    CHECK(info.shared_pass.empty());
    CHECK(test::one_group_matches_reference(*g, 49));
  }
}

TEST_CASE("the plan says which reductions share a pass, and the shared pass is cheaper", "[fusion]") {
  auto g = test::parse_or_die(min_max_graph("f32", "2,40000"));
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  const std::string text = fusion::explain(*plan);
  INFO(text);
  CHECK(plan->cost.kernels == 1);
  CHECK_THAT(text, Catch::Contains("2 passes, node 'min' (ReduceMin) in the pass of node 'max' (ReduceMax)"));
  // The same reductions with the minimum taken of a value that needs the maximum (max(x) - x)
  // cannot share: one more pass over the rows and one more grid barrier in the estimate.
  auto h = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[2,40000]
  const %ax: i64[1] = [-1]
  %mx = ReduceMax(%x, %ax) @"max"
  %gap = Sub(%mx, %x) @"gap"
  %mn = ReduceMin(%gap, %ax) @"min"
  %r = Sub(%mx, %mn) @"range"
  %y = Sub(%x, %mn) @"shift"
  %z = Div(%y, %r) @"unit"
  output %z
  output %r
})");
  test::run_frontend_or_die(*h);
  auto dependent = fusion::make_plan(*h, opts("beam"));
  REQUIRE(dependent.is_ok());
  CHECK(dependent->cost.kernels == 1);
  CHECK(plan->cost.time < dependent->cost.time);
  CHECK(test::fused_matches_reference(*g, 50) == 1);
  CHECK(test::fused_matches_reference(*h, 51) == 1);
}

TEST_CASE("kernels with shared passes compile with nvcc, warnings as errors", "[stitch][nvcc]") {
  // A split float row (publish, one grid_sync, combine), a split integer row (64-bit partials)
  // and tiled columns (two column trees after one loop).
  const std::string graphs[] = {min_max_graph("f32", "2,40000"), R"(graph "g" opset 18 {
  input %x: i32[2,40000]
  const %ax: i64[1] = [-1]
  %mx = ReduceMax(%x, %ax) @"max"
  %mn = ReduceMin(%x, %ax) @"min"
  %r = Sub(%mx, %mn) @"range"
  output %r
})",
                                R"(graph "g" opset 18 {
  input %x: f32[300,50]
  const %a0: i64[1] = [0]
  %t = Tanh(%x) @"tanh"
  %lo = ReduceMin(%t, %a0) @"colmin"
  %sq = ReduceSumSquare(%t, %a0) @"colsq"
  %y = Add(%lo, %sq) @"both"
  output %y
})"};
  const auto dir =
      std::filesystem::temp_directory_path() / ("stitch_unit_shared_" + std::to_string(getpid()));
  for (const std::string& text : graphs) {
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    codegen::Kernel k = lower_whole_graph(*g);
    REQUIRE(!test::whole_graph_info(*g).shared_pass.empty());
    k.name = fmt::format("shared_{}", &text - graphs);
    test::nvcc_compiles_cleanly(k, dir);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("seeded random graphs of reductions of one pass: fused equals the reference, and passes are shared",
          "[stitch][fusion][emu]") {
  // Rows of 37 (warp), 1500 (block), 5000 in 2 rows (split over blocks) and columns of 300
  // (tiled): reductions of x, of values computed from x, and of values computed from earlier
  // reductions' results, so that some can share a pass and some cannot.
  const char* shapes[] = {"6,37", "70,1500", "2,5000", "300,40"};
  const char* ops[] = {"ReduceSum", "ReduceMean",      "ReduceMax", "ReduceMin",
                       "ReduceL1",  "ReduceSumSquare", "ReduceL2"};
  const char* unary[] = {"Tanh", "Neg", "Sigmoid", "Abs"};
  std::mt19937 rng(2026);
  size_t shared = 0;
  for (int trial = 0; trial < 12; ++trial) {
    INFO("trial " << trial);
    const std::string shape = shapes[trial % 4];
    const bool columns = trial % 4 == 3;
    std::string text = fmt::format("graph \"r\" opset 18 {{\n  input %x: f32[{}]\n", shape);
    text += fmt::format("  const %ax: i64[1] = [{}]\n", columns ? 0 : -1);
    std::vector<std::string> full = {"%x"}, stats;
    for (int k = 0; k < 6; ++k) {
      const std::string a = full[rng() % full.size()];
      if (rng() % 3 == 0 && !stats.empty()) {  // a value of the rows' shape that needs a statistic
        text += fmt::format("  %f{0} = Sub({1}, {2}) @\"f{0}\"\n", k, a, stats[rng() % stats.size()]);
        full.push_back(fmt::format("%f{}", k));
      } else if (rng() % 3 == 0) {
        text += fmt::format("  %f{0} = {1}({2}) @\"f{0}\"\n", k, unary[rng() % 4], a);
        full.push_back(fmt::format("%f{}", k));
      }
      text +=
          fmt::format("  %s{0} = {1}({2}, %ax) @\"s{0}\"\n", k, ops[rng() % 7], full[rng() % full.size()]);
      stats.push_back(fmt::format("%s{}", k));
    }
    // Every statistic reaches one output, a value of the rows' shape another (apart, so that a
    // difference near 0 is not scaled up by the sums).
    std::string sum = stats[0];
    for (size_t i = 1; i < stats.size(); ++i) {
      text += fmt::format("  %t{0} = Add({1}, {2}) @\"t{0}\"\n", i, sum, stats[i]);
      sum = fmt::format("%t{}", i);
    }
    text += fmt::format("  %rows = Tanh({}) @\"rows\"\n  output {}\n  output %rows\n}}\n", full.back(), sum);
    INFO(text);
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    auto info = test::whole_graph_analysis(*g);
    if (info.is_ok()) {
      shared += info->shared_pass.size();
      CHECK(test::one_group_matches_reference(*g, 300 + trial));
    }
    CHECK(test::fused_matches_reference(*g, 400 + trial) >= 1);
  }
  CHECK(shared > 0);  // some trials shared passes
}

}  // namespace stitch
