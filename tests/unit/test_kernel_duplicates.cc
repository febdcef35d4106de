// Duplicates that share a kernel (fusion::share_kernel_duplicates): a chain that repeats another
// (a norm's statistic computed again for a second reader, as copy_row_statistics writes it) is
// dropped where the plan puts its readers in the original's kernel, and kept where a reader is
// elsewhere (a library call); the rewritten graph computes what the original did, in every planner
// on emu against the reference.
#include "fusion/kernel_duplicates.h"
#include "fusion/rewrites.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// x's RMS statistic computed twice, the second chain a copy of the first, each scaling x for one
// reader; `second_reader` reads the second chain's result.
std::string two_chains(const std::string& second_reader) {
  return R"(graph "g" opset 18 {
  input %x: f32[12,24]
  const %last: i64[1] = [-1]
  const %eps: f32[] = [0.00001]
  const %w: f32[1,4] = [0.5, -1.0, 2.0, 0.25]
  %sq = Mul(%x, %x) @"square"
  %ms = ReduceMean(%sq, %last) @"mean"
  %e = Add(%ms, %eps) @"eps"
  %root = Sqrt(%e) @"root"
  %inv = Reciprocal(%root) @"inverse"
  %sq2 = Mul(%x, %x) @"square/copy"
  %ms2 = ReduceMean(%sq2, %last) @"mean/copy"
  %e2 = Add(%ms2, %eps) @"eps/copy"
  %root2 = Sqrt(%e2) @"root/copy"
  %inv2 = Reciprocal(%root2) @"inverse/copy"
  %a = Mul(%x, %inv) @"scaled"
)" + second_reader +
         R"(
}
)";
}

}  // namespace

TEST_CASE("a chain repeating another in the same kernel is read as the original", "[fusion][emu]") {
  auto original = parse_or_die(two_chains(R"(  %b = Mul(%x, %inv2) @"scaled/copy"
  %y = Sub(%a, %b) @"difference"
  %z = Add(%a, %b) @"sum"
  output %y
  output %z)"));
  run_frontend_or_die(*original);
  auto g = clone_graph(*original);
  {
    auto before = fusion::make_plan(*g, opts("beam"));
    REQUIRE(before.is_ok());
    CHECK(before->cost.kernels == 1);
  }
  auto lines = fusion::share_kernel_duplicates(*g, opts("beam"));
  REQUIRE(lines.is_ok());
  INFO(fmt::format("{}", fmt::join(*lines, "\n")));
  // Each node of the copy, and then the second scaling (a repeat of the first once its input is).
  REQUIRE(lines->size() == 6);
  CHECK(lines->front() ==
        "node 'square/copy' (Mul) repeats node 'square' (Mul): node 'mean/copy' (ReduceMean) reads 'sq' in "
        "that "
        "kernel");
  CHECK(lines->back() ==
        "node 'scaled/copy' (Mul) repeats node 'scaled' (Mul): node 'difference' (Sub), node 'sum' (Add) "
        "read 'a' "
        "in that kernel");
  CHECK(count_op(*g, "ReduceMean") == 1);
  CHECK(count_op(*g, "Reciprocal") == 1);
  uint32_t seed = 1300;
  same_as_original(*original, *g, seed++);
  one_kernel_in_every_planner(*g, seed);
  // Judged: one kernel either way, the copy's work gone.
  auto judged = clone_graph(*original);
  auto kept = fusion::share_kernel_duplicates_if_cheaper(judged, opts("beam"));
  REQUIRE(kept.is_ok());
  INFO(kept->verdict);
  CHECK(kept->lines == *lines);
  CHECK(kept->verdict.find("1 kernels against 1") != std::string::npos);
}

TEST_CASE("a repeat read outside the original's kernel stays", "[fusion][emu]") {
  // The copy's result is an operand of a GEMM call: the copy is a kernel of its own that stores it
  // for the call, apart from the original's kernel, so nothing is rewired and nothing goes.
  auto original = parse_or_die(two_chains(R"(  %p = MatMul(%inv2, %w) @"projection"
  %y = Mul(%a, %a) @"square_scaled"
  output %y
  output %p)"));
  run_frontend_or_die(*original);
  auto g = clone_graph(*original);
  auto o = opts_lib("beam");
  auto lines = fusion::share_kernel_duplicates(*g, o);
  REQUIRE(lines.is_ok());
  INFO(fmt::format("{}", fmt::join(*lines, "\n")));
  CHECK(lines->empty());
  CHECK(g->nodes().size() == original->nodes().size());
  const Node* call = nullptr;
  for (const auto& n : g->nodes())
    if (n->name == "projection") call = n.get();
  REQUIRE(call != nullptr);
  CHECK(call->input(0)->producer->name == "inverse/copy");
  uint32_t seed = 1320;
  same_as_original(*original, *g, seed++);
  CHECK(fused_matches_reference(*g, seed++, o) >= 1);
  SECTION("--no-fuse on the copy") {
    auto h = clone_graph(*original);
    auto o2 = opts_lib("beam");
    o2.no_fuse = {"square/copy", "mean/copy", "eps/copy", "root/copy", "inverse/copy"};
    auto none = fusion::share_kernel_duplicates(*h, o2);
    REQUIRE(none.is_ok());
    CHECK(none->empty());
  }
}

TEST_CASE("the rewrites read a second copy of a norm statistic as the first", "[fusion]") {
  // rewrite_for_planning with the switch on keeps the rewrite (the estimate is no higher) and says
  // so in its section; off, the copy stays and there is no section.
  auto original = parse_or_die(two_chains(R"(  %b = Mul(%x, %inv2) @"scaled/copy"
  %y = Sub(%a, %b) @"difference"
  output %y)"));
  run_frontend_or_die(*original);
  for (const bool on : {true, false}) {
    INFO(on);
    auto g = clone_graph(*original);
    fusion::RewriteSwitches sw;
    sw.shared_duplicates = on;
    auto r = fusion::rewrite_for_planning(g, opts("beam"), sw);
    REQUIRE(r.is_ok());
    INFO(r->text());
    CHECK((r->text().find("duplicates sharing a kernel read as their originals (estimated") !=
           std::string::npos) == on);
    CHECK(count_op(*g, "ReduceMean") == (on ? 1 : 2));
  }
}
