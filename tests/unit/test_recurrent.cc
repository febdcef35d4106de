// LSTM, GRU and RNN with constant weights (as exporters write them): written out step by step by
// expand_recurrent, planned by beam search and run on emu against the reference interpreter, whose
// recurrence ONNX's node tests check (test_lstm_*, test_gru_*, test_rnn_*, and the extra ones
// against PyTorch). The node tests give their weights as inputs, so this is the constant path.
#include <fmt/format.h>

#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// One `op` of hidden size h over X [seq, batch, input] (layout 0), constant W, R, B (and P for
// LSTM), attributes `attrs`, then a Relu on each output; `lens` an optional constant
// sequence_lens.
std::string recurrent_graph(const std::string& op, int64_t seq, int64_t batch, int64_t input, int64_t h,
                            int64_t dirs, const std::string& attrs, const std::string& lens = "") {
  uint32_t state = 7;
  const int64_t g = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  const bool lstm = op == "LSTM";
  std::string consts = fmt::format("  const %w: f32[{},{},{}] = {}\n", dirs, g * h, input,
                                   lcg_values(state, dirs * g * h * input));
  consts +=
      fmt::format("  const %r: f32[{},{},{}] = {}\n", dirs, g * h, h, lcg_values(state, dirs * g * h * h));
  consts +=
      fmt::format("  const %b: f32[{},{}] = {}\n", dirs, 2 * g * h, lcg_values(state, dirs * 2 * g * h));
  if (!lens.empty()) consts += fmt::format("  const %lens: i32[{}] = {}\n", batch, lens);
  if (lstm)
    consts += fmt::format("  const %p: f32[{},{}] = {}\n", dirs, 3 * h, lcg_values(state, dirs * 3 * h));
  const std::string outs = lstm ? "%y, %yh, %yc" : "%y, %yh";
  const std::string ins =
      fmt::format("%x, %w, %r, %b{}{}", lens.empty() ? ", _" : ", %lens", lstm ? ", _, _, %p" : "");
  std::string relus = "  %ya = Relu(%y) @\"y_after\"\n  %yha = Relu(%yh) @\"yh_after\"\n";
  if (lstm) relus += "  %yca = Relu(%yc) @\"yc_after\"\n";
  return fmt::format(R"(graph "t" opset 14 {{
  input %x: f32[{},{},{}]
{}  {} = {}(%x{}) {{hidden_size = {}{}}} @"rec"
{}  output %ya
  output %yha
{}}}
)",
                     seq, batch, input, consts, outs, op, ins.substr(2), h, attrs, relus,
                     lstm ? "  output %yca\n" : "");
}

// The graph written out and planned by beam search, on emu, against the reference interpreter
// running the recurrence op itself (the graph before the front end).
void check_planned(const std::string& text) {
  INFO(text);
  auto original = parse_or_die(text);
  auto g = parse_or_die(text);
  run_frontend_or_die(*g);
  for (const auto& n : g->nodes()) CHECK(n->op_type != "LSTM");  // written out
  for (const auto& n : g->nodes()) CHECK(n->op_type != "GRU");
  for (const auto& n : g->nodes()) CHECK(n->op_type != "RNN");
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  const auto groups = groups_of(*plan);
  const auto packs = packs_of(*plan);
  TensorMap feed;
  for (const Value* v : g->inputs) feed[v->name] = random_tensor(v->dtype, *v->dims, 3);
  const TensorMap got = emu_run(*g, &groups, feed, nullptr, &packs, plan->gemm_folds);
  auto want = run_reference(*original, feed);
  REQUIRE(want.is_ok());
  for (const Value* v : g->outputs) {
    CompareResult r = compare_tensors(got.at(v->name), want->at(v->name), kEmuF32.rtol, kEmuF32.atol);
    INFO(v->name << ": max abs " << r.max_abs << ", " << r.mismatches << " outside the tolerance "
                 << r.problem);
    CHECK(r.ok);
  }
  // Fewer kernels than nodes: the steps' element-wise work fuses.
  CHECK(plan->cost.kernels < plan->unfused.kernels);
}

}  // namespace

TEST_CASE("an LSTM of constant weights, both directions, peepholes and a clip, runs as its steps",
          "[recurrent][emu]") {
  check_planned(recurrent_graph("LSTM", 5, 2, 3, 4, 2, R"(, direction = "bidirectional", clip = 0.7)"));
  check_planned(recurrent_graph("LSTM", 4, 3, 2, 3, 1, R"(, input_forget = 1)", "[4, 2, 1]"));
}

TEST_CASE("a GRU of constant weights, each reset form, runs as its steps", "[recurrent][emu]") {
  check_planned(recurrent_graph("GRU", 4, 2, 3, 5, 1, R"(, direction = "reverse")", "[2, 4]"));
  check_planned(
      recurrent_graph("GRU", 3, 2, 3, 4, 2, R"(, direction = "bidirectional", linear_before_reset = 1)"));
}

TEST_CASE("an RNN of constant weights runs as its steps", "[recurrent][emu]") {
  check_planned(recurrent_graph("RNN", 6, 2, 3, 4, 1, ""));
}
