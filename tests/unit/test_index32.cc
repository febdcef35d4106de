// 32-bit index arithmetic in stitched kernels (codegen::kIndex32Limit): kernels whose tensors all
// fit index with int offsets, coordinates and loop counters, larger ones with long long. Every
// mapping's kernels are run on emu against the reference in both forms: as planned (32-bit at
// these sizes) and with each stitched kernel replaced by its 64-bit text (the form a tensor past
// the limit gets).
#include <fmt/format.h>

#include "codegen/stitch.h"
#include "fusion_test_util.h"

namespace stitch {
namespace {

using test::opts;

// A Gather's raw index stays 64-bit until it is known in range, as do scalar_ops' integer values.
const std::vector<std::string> kWide = {"long long g", "if (g"};

// Plans `g`, checks that every stitched kernel indexes in 32 bits, then runs it on emu against
// the reference as planned and again with each stitched kernel's text in its 64-bit form.
// Returns the thread mappings of the kernels checked in both forms.
std::string both_forms_match(const Graph& g, uint32_t seed, const Tolerance& tol = kEmuF32) {
  auto plan = fusion::make_plan(g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  // Each group its own launch (packing is not what is checked here: parts index as kernels do).
  const auto groups = test::groups_of(*plan);
  const std::vector<int> packs(groups.size(), -1);
  int narrow = 0;
  std::string wide;
  auto check_narrow = [&](codegen::Schedule& s) {
    for (const codegen::Kernel& k : s.kernels) {
      if (k.scheme == "single node") continue;
      INFO(k.source);
      CHECK(k.source.find("for (long long") == std::string::npos);
      CHECK(test::wide_literals(k.source, kWide) == 0);
      ++narrow;
    }
  };
  auto widen = [&](codegen::Schedule& s) {
    for (codegen::Kernel& k : s.kernels) {
      if (k.scheme == "single node" || k.scheme == "independent") continue;
      std::set<const Value*> stored;
      for (const auto& p : k.params)
        if (p.output && p.value != k.workspace.get()) stored.insert(p.value);
      auto w = codegen::lower_stitched(k.nodes, stored, std::stoi(k.name.substr(1, 3)), true, 0);
      INFO(w.status().message());
      REQUIRE(w.is_ok());
      REQUIRE(w->name == k.name);
      REQUIRE(w->params.size() == k.params.size());
      for (size_t i = 0; i < k.params.size(); ++i) REQUIRE(w->params[i].name == k.params[i].name);
      INFO(w->source);
      CHECK(w->source.find("long long") != std::string::npos);
      CHECK(w->source.find("for (int i") == std::string::npos);
      CHECK(w->source.find("for (int j") == std::string::npos);
      k.source = w->source;
      wide += k.mapping + "\n";
    }
  };
  CHECK(test::emu_matches_reference(g, &groups, seed, tol, &packs, plan->gemm_folds, check_narrow) > 0);
  CHECK(test::emu_matches_reference(g, &groups, seed, tol, &packs, plan->gemm_folds, widen) > 0);
  CHECK(narrow > 0);
  return wide;
}

}  // namespace

TEST_CASE("index arithmetic: 32 bits when every tensor fits, the 64-bit form alike on emu", "[stitch][emu]") {
  SECTION("element kernels: an embedding Gather, head split and merge through a division, Slice, Concat") {
    auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2,6,40]
  input %table: f32[50,40]
  input %y: f32[2,6,24]
  const %ids: i64[2,6] = [3, 49, 0, 7, 7, 12, 1, 2, 48, -1, 5, 6]
  const %heads: i64[4] = [2, 6, 4, 10]
  const %regroup: i64[3] = [2, 10, 24]
  const %st: i64[1] = [8]
  const %en: i64[1] = [32]
  const %ax: i64[1] = [2]
  %e = Gather(%table, %ids) {axis = 0} @"embed"
  %a = Add(%x, %e) @"add"
  %h = Reshape(%a, %heads) @"split_heads"
  %t = Transpose(%h) {perm = ints[0, 2, 1, 3]} @"to_heads"
  %n = Neg(%t) @"neg"
  %r = Reshape(%n, %regroup) @"regroup"
  %s = Slice(%a, %st, %en, %ax) @"slice"
  %c = Concat(%s, %y) {axis = 1} @"cat"
  %m = Mul(%c, %c) @"square"
  output %r
  output %m
}
)");
    test::run_frontend_or_die(*g);
    const std::string m = both_forms_match(*g, 3);
    CHECK_THAT(m, Catch::Contains("one thread per 4 elements of 2x6x40"));
    CHECK_THAT(m, Catch::Contains("one thread per element of 2x4x6x10"));
    CHECK_THAT(m, Catch::Contains("one thread per 4 elements of 2x12x24"));
  }
  SECTION("row kernels: attention scores and softmax (warp per row), a layer norm of 1440 (block per row)") {
    auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %q: f32[2,3,20,8]
  input %k: f32[2,3,20,8]
  input %mask: f32[2,1,1,20]
  input %x: f32[4,1440]
  input %w: f32[1440]
  const %scale: f32[] = [0.35355339]
  %kt = Transpose(%k) {perm = ints[0, 1, 3, 2]} @"k_t"
  %s = MatMul(%q, %kt) @"scores"
  %ss = Mul(%s, %scale) @"scale"
  %sm = Add(%ss, %mask) @"mask"
  %p = Softmax(%sm) {axis = -1} @"softmax"
  %ln = LayerNormalization(%x, %w) {axis = -1, epsilon = 0.00001} @"ln"
  %o = Relu(%ln) @"relu"
  output %p
  output %o
}
)");
    test::run_frontend_or_die(*g);
    const std::string m = both_forms_match(*g, 4);
    CHECK_THAT(m, Catch::Contains("warp per row"));
    CHECK_THAT(m, Catch::Contains("block per row"));
  }
  SECTION("few long rows split over blocks (global stitching) and a tiled column reduction") {
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[3,100000]
  input %c: f32[1000,37]
  const %a0: i64[1] = [0]
  %y = Softmax(%x) {axis = -1} @"sm"
  %z = Exp(%y) @"exp"
  %e = Abs(%c) @"abs"
  %s = ReduceSum(%e, %a0) {keepdims = 0} @"colsum"
  output %z
  output %s
}
)");
    test::run_frontend_or_die(*g);
    const std::string m = both_forms_match(*g, 5);
    CHECK_THAT(m, Catch::Contains("row split over"));
    CHECK_THAT(m, Catch::Contains("tiled columns"));
  }
}

TEST_CASE("index arithmetic: a tensor past 2^30 elements keeps the kernel in 64 bits", "[stitch]") {
  // Text only (nothing of this size is allocated): 2^30 elements is the last size in 32 bits.
  for (const auto& [cols, wide] : {std::pair{int64_t{1} << 29, false}, {(int64_t{1} << 29) + 4, true}}) {
    INFO(cols);
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 17 {{
  input %x: f32[2,{}]
  %a = Abs(%x) @"abs"
  %n = Neg(%a) @"neg"
  output %n
}}
)",
                                            cols));
    test::run_frontend_or_die(*g);
    const codegen::Kernel k = test::lower_whole_graph(*g);
    INFO(k.source);
    CHECK((k.source.find(fmt::format("const long long n = {}LL;", 2 * cols)) != std::string::npos) == wide);
    CHECK((k.source.find(fmt::format("const int n = {};", 2 * cols)) != std::string::npos) == !wide);
    CHECK((k.source.find("for (long long i = ") != std::string::npos) == wide);
  }
}

}  // namespace stitch
