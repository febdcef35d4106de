// The fusion search's budget: a count of steps, so a model gets the same plan on any machine and
// under any load, whatever the budget; the wall-clock limit behind it says when it decided a plan.
#include "codegen/memory_plan.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// The plan's groups as node names, one string per group in execution order.
std::vector<std::string> group_names(const fusion::FusionPlan& p) {
  std::vector<std::string> out;
  for (const auto& grp : p.groups) {
    std::string s;
    for (const Node* n : grp.nodes) s += n->name + " ";
    out.push_back(s + "| pack " + std::to_string(grp.pack));
  }
  return out;
}

// Every node in exactly one group, and a schedule and memory plan that build.
void check_valid(const Graph& g, const fusion::FusionPlan& plan) {
  size_t nodes = 0;
  for (const auto& grp : plan.groups) nodes += grp.nodes.size();
  CHECK(nodes == g.nodes().size());
  const auto groups = groups_of(plan);
  const auto packs = packs_of(plan);
  auto s = codegen::build_schedule(g, &groups, &packs, plan.gemm_folds);
  REQUIRE(s.is_ok());
  CHECK(verify_memory_plan(s->requests, s->plan).is_ok());
}

}  // namespace

TEST_CASE("the search's budget is a count: any budget gives one plan, run after run", "[fusion][budget]") {
  // With fine-grained MatMuls offered to the search, make_plan plans several times and the budget
  // can run out between plans; without, there is one plan, and only the search itself can stop.
  for (const char* name : {"bert_tiny", "llama_tiny"}) {
    for (const char* mode : {"greedy", "beam"}) {
      for (bool matmuls : {true, false}) {
        INFO(name << " " << mode << (matmuls ? "" : ", MatMuls library calls"));
        auto g = test::prepared_model(name);
        fusion::FusionOptions o = matmuls ? opts(mode) : opts_lib(mode);
        auto full = fusion::make_plan(*g, o);
        REQUIRE(full.is_ok());
        CHECK(!full->budget_spent);
        CHECK(!full->timed_out);
        REQUIRE(full->work > 0);
        CHECK(fusion::explain(*full).find(fmt::format("{} search steps", full->work)) != std::string::npos);
        // Exactly the steps the whole search took: the same search, not cut.
        o.work_limit = full->work;
        auto exact = fusion::make_plan(*g, o);
        REQUIRE(exact.is_ok());
        CHECK(!exact->budget_spent);
        CHECK(exact->work == full->work);
        CHECK(group_names(*exact) == group_names(*full));
        for (int64_t budget : {int64_t{1}, full->work / 8, full->work / 2, full->work - 1}) {
          INFO("budget " << budget);
          o.work_limit = budget;
          auto a = fusion::make_plan(*g, o);
          auto b = fusion::make_plan(*g, o);
          REQUIRE(a.is_ok());
          REQUIRE(b.is_ok());
          CHECK(!a->timed_out);
          CHECK(a->work == b->work);
          CHECK(group_names(*a) == group_names(*b));
          check_valid(*g, *a);
          if (budget == full->work - 1 && !a->budget_spent) {
            // The last steps came after the search's last look at its budget: it was not cut.
            CHECK(group_names(*a) == group_names(*full));
            continue;
          }
          CHECK(a->budget_spent);
          CHECK(a->work < full->work);
          CHECK(fusion::explain(*a).find("the search's budget ran out") != std::string::npos);
        }
      }
    }
  }
}

TEST_CASE("the wall-clock limit is a safety net that says the plan depends on the machine",
          "[fusion][budget]") {
  auto g = test::prepared_model("bert_tiny");
  fusion::FusionOptions o = opts("beam");
  o.time_limit_s = 1e-9;
  auto plan = fusion::make_plan(*g, o);
  REQUIRE(plan.is_ok());
  CHECK(plan->timed_out);
  CHECK(!plan->budget_spent);
  CHECK(fusion::explain(*plan).find("depends on this machine's speed") != std::string::npos);
  check_valid(*g, *plan);
}

TEST_CASE("a budget under one step or a time limit of zero is refused", "[fusion][budget]") {
  auto g = test::prepared_model("bert_tiny");
  fusion::FusionOptions o = opts("beam");
  o.work_limit = 0;
  auto none = fusion::make_plan(*g, o);
  REQUIRE(!none.is_ok());
  CHECK(none.status().message().find("--plan-budget") != std::string::npos);
  o = opts("beam");
  o.time_limit_s = 0;
  auto never = fusion::make_plan(*g, o);
  REQUIRE(!never.is_ok());
  CHECK(never.status().message().find("--plan-time-limit") != std::string::npos);
}
