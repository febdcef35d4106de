// An MoE token's weighted sum over its routed slots as one GEMM over every expert
// (fusion::expert_sums_as_gemms), after the GEMMs of every expert's weights (all_expert_gemms): the
// activation runs on every expert's part of the first projection, times the token's weight for
// the expert, and the second projection of every expert, weighted and summed, is one GEMM. The
// rewritten graph computes what the slot form did on the reference interpreter, its plan runs on
// emu, the router's softmax, its top k and the activation share one kernel, and the forms the
// rewrite does not take stay.
#include <fmt/format.h>

#include "fusion/expert_gemms.h"
#include "fusion/expert_sums.h"
#include "fusion/short_reductions.h"
#include "fusion/topk_rounds.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

struct Moe {
  int64_t tokens = 6, experts = 4, k = 2, hidden = 8, ffn = 5;
  bool left = true;       // weights [E, M, K] by x [S, K, 1] (Mixtral's); else x [S, 1, K] by [E, K, M]
  // How the router picks each token's k experts: a TopK of the softmax; PhiMoE's two ArgMaxes
  // (k = 2), the second over the logits with the first's masked, joined by a Concat (its weights
  // the softmax's values gathered at each); two ArgMaxes of the same logits, which name one expert
  // twice; the second over the logits joined with themselves, so that it may name 2 E - 1; or
  // graph inputs.
  enum class Route { kTopK, kArgMaxes, kArgMaxTwice, kArgMaxesTooWide, kInputs } route = Route::kTopK;
  bool act_read = false;  // the activation also a graph output
  bool biases = false;    // each expert's biases gathered per slot (gpt-oss's), after each projection
  // A shared expert added to the sum (of shared_ffn activations): none, ungated (DeepSeek's), or
  // times a sigmoid gate per token (Qwen2-MoE's); its second weights graph inputs, or its gate one
  // value per hidden element, make it a form the rewrite leaves apart.
  enum class Shared { kNone, kUngated, kGated } shared = Shared::kNone;
  int64_t shared_ffn = 10;
  bool shared_weights_input = false, gate_per_element = false;
};

// The shared expert (Moe::shared): SiLU-gated like the routed ones, from its own GEMMs of the
// tokens' rows, `%moe` the sum plus its output.
std::string shared_expert(const Moe& c, uint32_t& seed) {
  if (c.shared == Moe::Shared::kNone) return "  %moe = Identity(%sum) @\"no_shared\"\n";
  const int64_t h = c.hidden, fs = c.shared_ffn, gw = c.gate_per_element ? h : 1;
  std::string out = fmt::format(
      "  const %ws1: f32[{h},{f2}] = {v1}\n"
      "  %s1 = MatMul(%x, %ws1) @\"shared_up\"\n"
      "  %sgate, %sup = Split(%s1) {{axis = 1, num_outputs = 2}} @\"shared_chunk\"\n"
      "  %ssig = Sigmoid(%sgate) @\"shared_sigmoid\"\n"
      "  %ssilu = Mul(%sgate, %ssig) @\"shared_silu\"\n"
      "  %sact = Mul(%ssilu, %sup) @\"shared_gated\"\n"
      "  %sy = MatMul(%sact, %ws2) @\"shared_down\"\n",
      fmt::arg("h", h), fmt::arg("f2", 2 * fs), fmt::arg("v1", lcg_values(seed, h * 2 * fs)));
  if (!c.shared_weights_input)
    out += fmt::format("  const %ws2: f32[{},{}] = {}\n", fs, h, lcg_values(seed, fs * h));
  if (c.shared == Moe::Shared::kUngated) return out + "  %moe = Add(%sum, %sy) @\"plus_shared\"\n";
  return out + fmt::format(
                   "  const %wg: f32[{h},{gw}] = {v}\n"
                   "  %gl = MatMul(%x, %wg) @\"shared_gate_proj\"\n"
                   "  %gs = Sigmoid(%gl) @\"shared_gate\"\n"
                   "  %sz = Mul(%gs, %sy) @\"shared_weigh\"\n"
                   "  %moe = Add(%sz, %sum) @\"plus_shared\"\n",
                   fmt::arg("h", h), fmt::arg("gw", gw), fmt::arg("v", lcg_values(seed, h * gw)));
}

// After projection `which`'s squeeze: each expert's bias gathered per slot and added (gpt-oss's), or
// nothing (an Identity, which the front end removes).
std::string bias(bool on, int which) {
  const char* name = which == 1 ? "up" : "down";
  if (!on) return fmt::format("  %y{0}s = Identity(%y{0}q) @\"{1}_as_is\"\n", which, name);
  return fmt::format(
      "  %gb{0} = GatherND(%b{0}, %slot_idx) @\"gather_{1}_bias\"\n  %y{0}s = Add(%y{0}q, %gb{0}) "
      "@\"{1}_bias\"\n",
      which, name);
}

// "0, 1, ..., n - 1".
std::string positions(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  return fmt::format("{}", fmt::join(p, ", "));
}

// transformers' MoE layer as it exports it: the router's softmax, its top k normalized, each
// token's row repeated over its k slots, each slot times its expert's gathered weights (gate and up
// in one, split), SiLU gating, the second projection per slot, each slot weighted and the token's
// slots summed, plus the residual.
std::string moe(const Moe& c, uint32_t seed) {
  const int64_t t = c.tokens, e = c.experts, k = c.k, h = c.hidden, f = c.ffn, s = t * k;
  const std::string w1 = c.left ? fmt::format("{},{},{}", e, 2 * f, h) : fmt::format("{},{},{}", e, h, 2 * f);
  const std::string w2 = c.left ? fmt::format("{},{},{}", e, h, f) : fmt::format("{},{},{}", e, f, h);
  std::string route, inputs;
  switch (c.route) {
    case Moe::Route::kTopK:
      route = R"(  %top, %idx = TopK(%probs, %k) {axis = -1, largest = 1, sorted = 1} @"topk"
  %top_sum = ReduceSum(%top, %last) {keepdims = 1} @"top_sum"
  %weights = Div(%top, %top_sum) @"normalize"
)";
      break;
    case Moe::Route::kArgMaxes:
    case Moe::Route::kArgMaxTwice:
    case Moe::Route::kArgMaxesTooWide:
      REQUIRE(k == 2);
      route = fmt::format(
          R"(  const %positions: i64[{e}] = [{positions}]
  const %masked_out: f32[] = [-1000000.0]
  %first = ArgMax(%logits) {{axis = -1, keepdims = 1}} @"first_pick"
  %first_w = GatherElements(%probs, %first) {{axis = 1}} @"first_weight"
  %is_first = Equal(%positions, %first) @"is_first"
  %masked = Where(%is_first, %masked_out, %logits) @"mask_first"
{second}  %second_w = GatherElements(%probs, %second_at) {{axis = 1}} @"second_weight"
  %idx = Concat(%first, %second) {{axis = 1}} @"picks"
  %weights = Concat(%first_w, %second_w) {{axis = 1}} @"pick_weights"
)",
          fmt::arg("e", e), fmt::arg("positions", positions(e)),
          fmt::arg("second",
                   c.route != Moe::Route::kArgMaxesTooWide
                       ? fmt::format("  %second = ArgMax({}) {{axis = -1, keepdims = 1}} @\"second_pick\"\n"
                                     "  %second_at = Identity(%second) @\"second_at\"\n",
                                     c.route == Moe::Route::kArgMaxes ? "%masked" : "%logits")
                       : "  %twice = Concat(%masked, %logits) {axis = 1} @\"twice\"\n"
                         "  %second = ArgMax(%twice) {axis = -1, keepdims = 1} @\"second_pick\"\n"
                         "  %second_at = Mod(%second, %experts) @\"second_at\"\n"
                         "  const %experts: i64[] = [" +
                             std::to_string(e) + "]\n"));
      break;
    case Moe::Route::kInputs:
      inputs = fmt::format("  input %idx: i64[{0},{1}]\n  input %weights: f32[{0},{1}]\n", t, k);
      break;
  }
  if (c.shared_weights_input) inputs += fmt::format("  input %ws2: f32[{},{}]\n", c.shared_ffn, h);
  const std::string shared = shared_expert(c, seed);
  return fmt::format(
      R"(graph "moe" opset 18 {{
  input %x: f32[{t},{h}]
  input %logits: f32[{t},{e}]
{inputs}  const %w1: f32[{w1}] = {w1v}
  const %w2: f32[{w2}] = {w2v}
{bias_constants}  const %k: i64[1] = [{k}]
  const %last: i64[1] = [-1]
  const %one: i64[1] = [1]
  const %slots_flat: i64[1] = [{s}]
  const %repeat: i64[3] = [{t}, {k}, {h}]
  const %rows: i64[2] = [{s}, {h}]
  const %per_token: i64[3] = [{t}, {k}, {h}]
  %probs = Softmax(%logits) {{axis = -1}} @"router_softmax"
{route}  %flat_idx = Reshape(%idx, %slots_flat) @"flat_idx"
  %slot_idx = Unsqueeze(%flat_idx, %one) @"slot_idx"
  %flat_w = Reshape(%weights, %slots_flat) @"flat_weights"
  %slot_w = Unsqueeze(%flat_w, %one) @"slot_weights"
  %xu = Unsqueeze(%x, %one) @"token_axis"
  %xe = Expand(%xu, %repeat) @"repeat"
  %xr = Reshape(%xe, %rows) @"repeat_interleave"
  %xs = Unsqueeze(%xr, {x_axis}) @"slot_column"
  %g1 = GatherND(%w1, %slot_idx) @"gather_up"
  %y1 = MatMul({mm1}) @"bmm_up"
  %y1q = Squeeze(%y1, {x_axis}) @"squeeze_up"
{bias1}  %gate, %up = Split(%y1s) {{axis = 1, num_outputs = 2}} @"chunk"
  %sig = Sigmoid(%gate) @"sigmoid"
  %silu = Mul(%gate, %sig) @"silu"
  %act = Mul(%silu, %up) @"gated"
  %acts = Unsqueeze(%act, {x_axis}) @"act_column"
  %g2 = GatherND(%w2, %slot_idx) @"gather_down"
  %y2 = MatMul({mm2}) @"bmm_down"
  %y2q = Squeeze(%y2, {x_axis}) @"squeeze_down"
{bias2}  %weighted = Mul(%y2s, %slot_w) @"weigh"
  %by_token = Reshape(%weighted, %per_token) @"by_token"
  %sum = ReduceSum(%by_token, %one) {{keepdims = 0}} @"slot_sum"
{shared}  %out = Add(%moe, %x) @"residual"
  output %out
{extra}}}
)",
      fmt::arg("t", t), fmt::arg("h", h), fmt::arg("e", e), fmt::arg("k", k), fmt::arg("s", s),
      fmt::arg("w1", w1), fmt::arg("w2", w2), fmt::arg("w1v", lcg_values(seed, e * 2 * f * h)),
      fmt::arg("w2v", lcg_values(seed, e * f * h)), fmt::arg("route", route), fmt::arg("inputs", inputs),
      fmt::arg("x_axis", c.left ? "%last" : "%one"), fmt::arg("mm1", c.left ? "%g1, %xs" : "%xs, %g1"),
      fmt::arg("mm2", c.left ? "%g2, %acts" : "%acts, %g2"),
      fmt::arg("extra", c.act_read ? "  output %act\n" : ""), fmt::arg("bias1", bias(c.biases, 1)),
      fmt::arg("bias2", bias(c.biases, 2)), fmt::arg("shared", shared),
      fmt::arg("bias_constants",
               c.biases ? fmt::format("  const %b1: f32[{},{}] = {}\n  const %b2: f32[{},{}] = {}\n", e,
                                      2 * f, lcg_values(seed, e * 2 * f), e, h, lcg_values(seed, e * h))
                        : ""));
}

std::vector<std::string> expert_sums(Graph& g, const std::set<std::string>& keep = {}) {
  auto experts = fusion::all_expert_gemms(g);
  REQUIRE(experts.is_ok());
  REQUIRE(experts->size() == 2);
  auto lines = fusion::expert_sums_as_gemms(g, keep);
  REQUIRE(lines.is_ok());
  return *lines;
}

// The router's form: the sum as one GEMM over every expert, the TopK as rounds and the top k's sum,
// which normalizes them, as Adds (the router's softmax over the experts kept a Softmax, a row op
// over the kernel's rows); the same outputs as the graph before on the reference.
std::unique_ptr<Graph> router_form(const Moe& c, uint32_t& seed) {
  auto g = parse_or_die(moe(c, seed++));
  run_frontend_or_die(*g);
  auto original = clone_graph(*g);
  REQUIRE(expert_sums(*g).size() == 1);
  auto rounds = fusion::topk_as_rounds(*g);
  REQUIRE(rounds.is_ok());
  REQUIRE(rounds->size() == 1);
  auto sums = fusion::short_reductions_as_adds(*g, {"router_softmax"});
  REQUIRE(sums.is_ok());
  REQUIRE(sums->size() == 1);
  same_as_original(*original, *g, seed++);
  return g;
}

}  // namespace

TEST_CASE("an MoE token's sum over its slots as one GEMM over every expert computes the same outputs",
          "[fusion][emu]") {
  uint32_t seed = 900;
  for (const bool biases : {false, true})
    for (const bool left : {true, false}) {
      INFO(std::string(left ? "weights [E, M, K] by x [S, K, 1]" : "x [S, 1, K] by weights [E, K, M]"));
      INFO((biases ? "with" : "without") << " biases per expert");
      Moe c;
      c.left = left;
      c.biases = biases;
      auto g = parse_or_die(moe(c, seed++));
      run_frontend_or_die(*g);
      auto original = clone_graph(*g);
      const auto lines = expert_sums(*g);
      REQUIRE(lines.size() == 1);
      // With biases, each expert's rows carry its weight as one more column, fc2's its bias as a row.
      const int64_t rows = biases ? 24 : 20;
      CHECK(lines.front() ==
            fmt::format(
                "node 'slot_sum' (ReduceSum): the 2 slots of each of 6 tokens as one GEMM over every "
                "expert, [6, {0}] by 'w2/by_input'{1} as [{0}, 8]; the activation ({2}) on each of the 4 "
                "experts' part of node 'bmm_up/all_experts' (MatMul)'s product, times the token's weight "
                "for the expert (was node 'bmm_down/all_experts' (MatMul) over each slot, node "
                "'bmm_down/all_experts/picked' (GatherND) picking its expert's part)",
                rows, biases ? " with the biases 'b2'" : "",
                biases ? "8 nodes, 1 bias(es) per expert" : "7 nodes"));
      // No per-slot pick or product is left: one GEMM per projection, over every expert.
      CHECK(count_op(*g, "GatherND") == 0);
      CHECK(count_op(*g, "ReduceSum") == 1);  // the router's normalization
      CHECK(count_op(*g, "MatMul") == 2);
      for (const auto& n : g->nodes())
        if (n->op_type == "MatMul") {
          REQUIRE(n->input(1)->is_constant());
          CHECK((*n->input(1)->dims == Dims{8, 40} || *n->input(1)->dims == Dims{rows, 8}));
        }
      same_as_original(*original, *g, seed++);
      for (const char* mode : {"greedy", "beam", "ilp"}) {
        INFO(mode);
        CHECK(fused_matches_reference(*g, seed++, mode) >= 1);
      }
    }
}

TEST_CASE("experts picked by ArgMaxes joined by a Concat route the sum as one GEMM over every expert",
          "[fusion][emu]") {
  // PhiMoE's router: each pick is in range by construction, and a token that picks one expert
  // twice gets the two weights summed, as the per-slot form sums the two slots.
  uint32_t seed = 1120;
  for (const Moe::Route route : {Moe::Route::kArgMaxes, Moe::Route::kArgMaxTwice}) {
    INFO((route == Moe::Route::kArgMaxes ? "the first pick masked for the second" : "one expert twice"));
    Moe c;
    c.route = route;
    auto g = parse_or_die(moe(c, seed++));
    run_frontend_or_die(*g);
    auto original = clone_graph(*g);
    const auto lines = expert_sums(*g);
    REQUIRE(lines.size() == 1);
    CHECK(lines.front().rfind("node 'slot_sum' (ReduceSum): the 2 slots of each of 6 tokens as one GEMM over "
                              "every expert, [6, 20] by 'w2/by_input' as [20, 8]",
                              0) == 0);
    CHECK(count_op(*g, "GatherND") == 0);
    CHECK(count_op(*g, "ArgMax") == 2);
    same_as_original(*original, *g, seed++);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      CHECK(fused_matches_reference(*g, seed++, mode) >= 1);
    }
  }
}

TEST_CASE("the router's top k and the weighted activation of every expert share one kernel",
          "[fusion][emu]") {
  // With the TopK as rounds of row reductions and the sum of its k values as Adds, the softmax,
  // the picks, the token's weight for each expert and the activation it multiplies are one row
  // kernel over the tokens' rows of experts: one memory-intensive kernel between the two GEMMs (the
  // residual in the second's epilogue).
  uint32_t seed = 930;
  auto g = router_form(Moe{}, seed);
  auto plan = fusion::make_plan(*g, opts("beam", {}, 128));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(plan->cost.kernels == 1);
  const auto with = groups_with(*plan, {"Softmax", "Sigmoid", "ReduceMax"});
  CHECK(with.size() == 1);
  CHECK(plan_matches_reference(*g, *plan, seed++) == 1);
}

TEST_CASE("a shared expert added to the MoE sum joins its GEMM", "[fusion][emu]") {
  // Its rows (times its gate) are more rows of the GEMM over every expert and its second weights
  // more rows of that GEMM's weights: the Add and its own GEMM go. Its activations join the routed
  // ones along the experts' axis when they are a whole number of experts' (shared_ffn 10 = 2 x 5),
  // else along the rows.
  struct Case {
    const char* what;
    Moe::Shared shared;
    int64_t shared_ffn;
    const char* line_part;
  };
  const Case cases[] = {
      {"ungated, 2 experts' worth", Moe::Shared::kUngated, 10, " and the shared expert's 'ws2' [10, 8]"},
      {"gated, 2 experts' worth", Moe::Shared::kGated, 10,
       " and the shared expert's 'ws2' [10, 8] times 'gs'"},
      {"gated, not a whole number of experts'", Moe::Shared::kGated, 7,
       " and the shared expert's 'ws2' [7, 8] times 'gs'"},
  };
  uint32_t seed = 1020;
  for (const Case& k : cases) {
    INFO(k.what);
    Moe c;
    c.shared = k.shared;
    c.shared_ffn = k.shared_ffn;
    auto g = parse_or_die(moe(c, seed++));
    run_frontend_or_die(*g);
    auto original = clone_graph(*g);
    const auto lines = expert_sums(*g);
    REQUIRE(lines.size() == 1);
    CHECK(lines.front() ==
          fmt::format("node 'slot_sum' (ReduceSum): the 2 slots of each of 6 tokens as one GEMM over every "
                      "expert, [6, {}] by 'w2/by_input' as [20, 8]{}, node 'plus_shared' (Add) gone; the "
                      "activation (7 nodes) on each of the 4 experts' part of node 'bmm_up/all_experts' "
                      "(MatMul)'s product, times the token's weight for the expert (was node "
                      "'bmm_down/all_experts' (MatMul) over each slot, node 'bmm_down/all_experts/picked' "
                      "(GatherND) picking its expert's part)",
                      20 + k.shared_ffn, k.line_part));
    CHECK(!has_node(*g, "plus_shared"));
    CHECK(!has_node(*g, "shared_down"));
    // The experts' two GEMMs, the shared expert's first and its gate's.
    CHECK(count_op(*g, "MatMul") == (k.shared == Moe::Shared::kGated ? 4 : 3));
    bool stacked = false;
    for (const auto& n : g->nodes())
      stacked |= n->op_type == "MatMul" && n->input(1)->is_constant() &&
                 *n->input(1)->dims == Dims{20 + k.shared_ffn, 8};
    CHECK(stacked);
    same_as_original(*original, *g, seed++);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      CHECK(fused_matches_reference(*g, seed++, mode) >= 1);
    }
  }
}

TEST_CASE("a gated shared expert's activation joins the router's kernel", "[fusion][emu]") {
  // Qwen2-MoE's form: with the shared expert's rows as two more experts' and the top k as rounds,
  // the router's softmax and top k, the routed and the shared activations and the shared gate's
  // sigmoid are one row kernel; the GEMMs (the shared expert's first, its gate's, every expert's
  // two) read or write it.
  uint32_t seed = 1060;
  Moe c;
  c.shared = Moe::Shared::kGated;
  auto g = router_form(c, seed);
  // GEMMs as library calls, as a real layer's (these small ones could be stitched contractions).
  fusion::FusionOptions o = opts_lib("beam");
  o.max_group_size = 128;
  auto plan = fusion::make_plan(*g, o);
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(plan->cost.kernels == 1);
  CHECK(plan->cost.library_calls == 4);
  CHECK(groups_with(*plan, {"Softmax", "ReduceMax", "Concat"}).size() == 1);
  CHECK(plan_matches_reference(*g, *plan, seed++) == 1);
}

TEST_CASE("MoE sums the rewrite does not take stay as they are", "[fusion]") {
  uint32_t seed = 960;
  Moe from_inputs, read_elsewhere;
  from_inputs.route = Moe::Route::kInputs;
  Moe too_wide;
  too_wide.route = Moe::Route::kArgMaxesTooWide;
  read_elsewhere.act_read = true;
  struct Case {
    const char* what;
    Moe c;
    std::set<std::string> keep;
  };
  const Case cases[] = {
      {"experts a graph input, which may name one out of range", from_inputs, {}},
      {"an ArgMax over more logits than experts", too_wide, {}},
      {"an activation read elsewhere too", read_elsewhere, {}},
      {"--no-fuse on the sum", Moe{}, {"slot_sum"}},
      {"--no-fuse on the second projection", Moe{}, {"bmm_down/all_experts"}},
      {"--no-fuse on the activation", Moe{}, {"sigmoid"}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto g = parse_or_die(moe(c.c, seed++));
    run_frontend_or_die(*g);
    CHECK(expert_sums(*g, c.keep).empty());
    CHECK(count_op(*g, "GatherND") == 2);  // both picks stay
  }
}

TEST_CASE("shared experts the rewrite does not take stay apart from the sum's GEMM", "[fusion]") {
  // The sum is still one GEMM over every expert; the shared expert's GEMM and the Add stay.
  uint32_t seed = 1090;
  Moe input_weights, per_element;
  input_weights.shared = per_element.shared = Moe::Shared::kGated;
  input_weights.shared_weights_input = true;
  per_element.gate_per_element = true;
  struct Case {
    const char* what;
    Moe c;
    std::set<std::string> keep;
  };
  Moe gated;
  gated.shared = Moe::Shared::kGated;
  const Case cases[] = {
      {"its second weights a graph input", input_weights, {}},
      {"a gate of one value per hidden element, not per token", per_element, {}},
      {"--no-fuse on the Add", gated, {"plus_shared"}},
      {"--no-fuse on its second GEMM", gated, {"shared_down"}},
  };
  for (const Case& k : cases) {
    INFO(k.what);
    auto g = parse_or_die(moe(k.c, seed++));
    run_frontend_or_die(*g);
    const auto lines = expert_sums(*g, k.keep);
    REQUIRE(lines.size() == 1);
    CHECK(lines.front().find("shared") == std::string::npos);
    CHECK(has_node(*g, "shared_down"));
    CHECK(has_node(*g, "plus_shared"));
  }
}

TEST_CASE("the sum as one GEMM over every expert is kept when the plan's estimate is lower", "[fusion]") {
  uint32_t seed = 990;
  std::unique_ptr<Graph> g = parse_or_die(moe(Moe{}, seed++));
  run_frontend_or_die(*g);
  auto experts = fusion::all_expert_gemms(*g);
  REQUIRE(experts.is_ok());
  auto r = fusion::expert_sums_as_gemms_if_cheaper(g, opts("beam"));
  REQUIRE(r.is_ok());
  INFO(r->verdict);
  CHECK(r->lines.size() == 1);
  CHECK(r->verdict.rfind("estimated ", 0) == 0);
  CHECK(count_op(*g, "GatherND") == 0);
}
