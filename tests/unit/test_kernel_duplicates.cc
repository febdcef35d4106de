// Duplicates that share a kernel (fusion::share_kernel_duplicates): a chain that repeats another
// (a norm's statistic computed again for a second reader, as copy_row_statistics writes it) is
// dropped where the plan puts its readers in the original's kernel, and kept where a reader is
// elsewhere (a library call); the rewritten graph computes what the original did, in every planner
// on emu against the reference.
#include "fusion/hoist_scales.h"
#include "fusion/kernel_duplicates.h"
#include "fusion/merge_gemms.h"
#include "fusion/rewrites.h"
#include "fusion/row_statistics.h"
#include "fusion/topk_rounds.h"
#include "fusion/unflatten_gemms.h"
#include "fusion_test_util.h"
#include "ir/text.h"

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
  SECTION("with a plan of the graph it was cloned from") {
    // The plan's groups are read node for node: the same rewrite from the graph's own plan, and
    // none from a plan that keeps every node alone (so that plan, not a new one, was read).
    auto with_plan = fusion::make_plan(*original, opts("beam"));
    REQUIRE(with_plan.is_ok());
    auto h = clone_graph(*original);
    auto same = fusion::share_kernel_duplicates(*h, opts("beam"), &*with_plan, original.get());
    REQUIRE(same.is_ok());
    CHECK(*same == *lines);
    CHECK(print_graph(*h) == print_graph(*g));
    auto alone = fusion::make_plan(*original, opts("none"));
    REQUIRE(alone.is_ok());
    auto k = clone_graph(*original);
    auto none = fusion::share_kernel_duplicates(*k, opts("beam"), &*alone, original.get());
    REQUIRE(none.is_ok());
    CHECK(none->empty());
    // A plan of another graph (a node renamed) is not taken: the clone is planned itself.
    auto other = clone_graph(*original);
    other->nodes().front()->name += "/renamed";
    auto m = clone_graph(*original);
    auto planned_again = fusion::share_kernel_duplicates(*m, opts("beam"), &*alone, other.get());
    REQUIRE(planned_again.is_ok());
    CHECK(*planned_again == *lines);
    // Judged with the plan of the graph as it stands, as the rewrites pass it.
    auto judged_with_plan = clone_graph(*original);
    auto its_plan = fusion::make_plan(*judged_with_plan, opts("beam"));
    REQUIRE(its_plan.is_ok());
    auto kept2 =
        fusion::share_kernel_duplicates_if_cheaper(judged_with_plan, opts("beam"), its_plan->cost,
                                                   std::make_shared<const fusion::FusionPlan>(*its_plan));
    REQUIRE(kept2.is_ok());
    CHECK(kept2->lines == *lines);
    CHECK(kept2->verdict == kept->verdict);
  }
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

TEST_CASE("a norm's statistics computed again for a router whose top k became row reductions only later",
          "[fusion][emu]") {
  // An RMSNorm feeding a router over 16 experts (of the tokens flattened, as transformers' MoE
  // blocks read them) and another GEMM. Its row scale moves past both while the router's TopK is no
  // row op; once the TopK is rounds of row reductions over the router's rows (16 experts: no short
  // maxima), a row op reduces the scaled router product, and copy_row_statistics gives that reader
  // a copy of the statistics: the router's kernel computes them (an outer reduction) instead of
  // waiting for the kernel that stores the other product, and the two share a launch. The step
  // rewrite_for_planning judges after the short maxima (DeepSeek-style routers over 16 or more
  // experts).
  uint32_t state = 5;
  const std::string g_values = lcg_values(state, 32, 0.5), wr_values = lcg_values(state, 32 * 16),
                    wu_values = lcg_values(state, 32 * 64);
  auto original = parse_or_die(R"(graph "router" opset 18 {
  input %x: f32[2,12,32]
  const %last: i64[1] = [-1]
  const %eps: f32[] = [0.00001]
  const %two: i64[1] = [2]
  const %rows: i64[2] = [24, 32]
  const %g: f32[32] = )" + g_values +
                               R"(
  const %wr: f32[32,16] = )" + wr_values +
                               R"(
  const %wu: f32[32,64] = )" + wu_values +
                               R"(
  %sq = Mul(%x, %x) @"square"
  %ms = ReduceMean(%sq, %last) @"mean"
  %e = Add(%ms, %eps) @"eps"
  %root = Sqrt(%e) @"root"
  %inv = Reciprocal(%root) @"inverse"
  %n = Mul(%x, %inv) @"normalized"
  %nw = Mul(%n, %g) @"weighted"
  %tokens = Reshape(%nw, %rows) @"tokens"
  %logits = MatMul(%tokens, %wr) @"router"
  %up = MatMul(%nw, %wu) @"up"
  %p = Sigmoid(%logits) @"scores"
  %tv, %ti = TopK(%p, %two) {axis = -1} @"top2"
  %a = Sigmoid(%up) @"activation"
  output %tv
  output %ti
  output %a
})");
  run_frontend_or_die(*original);
  auto g = clone_graph(*original);
  REQUIRE(fusion::unflatten_gemms(*g).is_ok());
  auto merged = fusion::merge_sibling_gemms(*g);
  REQUIRE(merged.is_ok());
  REQUIRE(merged->size() == 1);
  auto hoisted = fusion::hoist_row_scales(*g);
  REQUIRE(hoisted.is_ok());
  REQUIRE(hoisted->size() == 1);
  // No row op reduces the scaled router product yet: nothing to copy.
  auto none = fusion::copy_row_statistics(*g);
  REQUIRE(none.is_ok());
  CHECK(none->empty());
  auto rounds = fusion::topk_as_rounds(*g);
  REQUIRE(rounds.is_ok());
  REQUIRE(rounds->size() == 1);
  auto before = fusion::make_plan(*g, opts("beam"));
  REQUIRE(before.is_ok());
  INFO(fusion::explain(*before));
  auto copies = fusion::copy_row_statistics(*g);
  REQUIRE(copies.is_ok());
  REQUIRE(copies->size() == 1);
  CHECK(copies->front().rfind("'inv' (5 nodes from node 'square' (Mul)) computed again for node", 0) == 0);
  uint32_t seed = 1400;
  same_as_original(*original, *g, seed++);
  auto after = fusion::make_plan(*g, opts("beam"));
  REQUIRE(after.is_ok());
  INFO(fusion::explain(*after));
  // A pack counts as one launch.
  CHECK(after->cost.kernels < before->cost.kernels);
  CHECK(after->packs.size() == 1);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    CHECK(fused_matches_reference(*g, seed++, mode) >= 1);
  }
}
