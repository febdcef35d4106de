// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss written out by expand_losses, planned by
// beam search and run on emu against the reference interpreter running the ops, whose definitions
// ONNX's node tests check (test_nllloss_*, test_sce_*: 104 with their expanded forms); a target
// outside the classes fails the run naming the loss, on the reference and in the kernels.
#include <fmt/format.h>

#include "fault_test_util.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

const std::set<std::string> kLosses = {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"};

}  // namespace

TEST_CASE(
    "a token classifier's cross-entropy: the class softmax one kernel, the picked terms and their mean one "
    "more",
    "[losses][emu]") {
  // PyTorch's cross_entropy as exporters write it: ignore_index -100 for padding, the mean over
  // the targets not ignored. The targets are 0..6 against 7 classes, those under 3 made -100.
  const IntInputsIn targets(0, 6);
  const fusion::FusionPlan plan = written_out_matches_op(R"(graph "g" opset 18 {
  input %scores: f32[24,7]
  input %t: i64[24]
  const %three: i64[] = [3]
  const %pad: i64[] = [-100]
  %k = Less(%t, %three) @"low"
  %labels = Where(%k, %pad, %t) @"padded"
  %loss, %lp = SoftmaxCrossEntropyLoss(%scores, %labels) {ignore_index = -100} @"ce"
  output %loss
  output %lp
})",
                                                         kLosses, 3);
  CHECK(plan.cost.kernels <= 2);
}

TEST_CASE("losses over extra axes, with weights, summed or kept, match the ops' reference", "[losses][emu]") {
  // 7 classes: the targets are 0..6.
  const IntInputsIn targets(0, 6);
  written_out_matches_op(R"(graph "g" opset 13 {
  input %x: f32[3,7,4,2]
  input %t: i32[3,4,2]
  const %w: f32[7] = [0.5, 1.0, 2.0, 0.25, 1.5, 3.0, 0.75]
  %loss = NegativeLogLikelihoodLoss(%x, %t, %w) {reduction = "sum"} @"nll"
  output %loss
})",
                         kLosses, 7);
  written_out_matches_op(R"(graph "g" opset 13 {
  input %x: f32[3,7,4]
  input %t: i64[3,4]
  const %w: f32[7] = [0.5, 1.0, 2.0, 0.25, 1.5, 3.0, 0.75]
  %loss = SoftmaxCrossEntropyLoss(%x, %t, %w) {reduction = "none", ignore_index = 2} @"sce"
  output %loss
})",
                         kLosses, 9);
  written_out_matches_op(R"(graph "g" opset 13 {
  input %x: f32[4,7]
  input %t: i64[4]
  %loss = NegativeLogLikelihoodLoss(%x, %t) @"nll"
  output %loss
})",
                         kLosses, 11);
}

TEST_CASE("losses that do not fit are refused, naming the node", "[losses]") {
  CHECK(frontend_error(R"(graph "g" opset 13 {
  input %x: f32[4,6]
  input %t: i64[4]
  %loss = NegativeLogLikelihoodLoss(%x, %t) {reduction = "avg"} @"nll"
  output %loss
})") == "node 'nll' (NegativeLogLikelihoodLoss): reduction 'avg' is not none, sum or mean");
  CHECK(
      frontend_error(R"(graph "g" opset 13 {
  input %x: f32[4,6,3]
  input %t: i64[4,6]
  %loss = SoftmaxCrossEntropyLoss(%x, %t) @"sce"
  output %loss
})") ==
      "node 'sce' (SoftmaxCrossEntropyLoss): its input has shape 4x6x3 and its target 4x6; for an input N x "
      "C x d1... the target is N x d1...");
  CHECK(frontend_error(R"(graph "g" opset 13 {
  input %x: f32[4,6]
  input %t: i64[4]
  const %w: f32[4] = [1.0, 1.0, 1.0, 1.0]
  %loss = SoftmaxCrossEntropyLoss(%x, %t, %w) @"sce"
  output %loss
})") == "node 'sce' (SoftmaxCrossEntropyLoss): its weights have shape 4; they are one per class, [6]");
  CHECK(frontend_error(R"(graph "g" opset 13 {
  input %x: f32[4,6]
  input %t: f32[4]
  %loss = NegativeLogLikelihoodLoss(%x, %t) @"nll"
  output %loss
})") == "node 'nll' (NegativeLogLikelihoodLoss): expects an integer target");
}

TEST_CASE("a target outside the classes fails the run naming the loss, alone and stitched",
          "[losses][runtime][emu][faults]") {
  // PyTorch refuses such a target; ONNX leaves it undefined. The written-out loss checks its
  // targets (a StitchIndexCheck naming the loss), which the reference refuses and a kernel reports.
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %scores: f32[6,5]
  input %t: i64[6]
  input %u: i32[6]
  const %w: f32[5] = [0.5, 1.0, 2.0, 0.25, 1.5]
  %loss, %lp = SoftmaxCrossEntropyLoss(%scores, %t) {ignore_index = -100} @"ce"
  %nll = NegativeLogLikelihoodLoss(%lp, %u, %w) {reduction = "sum"} @"nll"
  output %loss
  output %nll
})");
  run_frontend_or_die(*g);
  CHECK(count_op(*g, "SoftmaxCrossEntropyLoss") + count_op(*g, "NegativeLogLikelihoodLoss") == 0);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  const auto groups = groups_of(*plan);
  const TensorMap base{{"scores", random_tensor(DType::kF32, {6, 5}, 3)}};
  auto feed = [&](std::vector<int64_t> t, std::vector<int64_t> u) {
    TensorMap f = base;
    f["t"] = Tensor::from_i64(DType::kI64, {6}, t);
    f["u"] = Tensor::from_i64(DType::kI32, {6}, u);
    return f;
  };
  const std::vector<int64_t> fine{0, 4, 1, 3, 2, 0};
  SECTION("the reference names the loss, the target and the classes") {
    auto ref = run_reference(*g, feed({0, 4, -100, 5, 2, 1}, fine));
    REQUIRE_FALSE(ref.is_ok());
    CHECK(ref.status().code() == Code::kUser);
    CHECK(
        ref.status().message() ==
        "node 'ce' (SoftmaxCrossEntropyLoss): target 5 of 't' is outside the 5 classes [0, 5) and is not the "
        "ignore_index -100");
  }
  for (const bool stitched : {false, true}) {
    INFO((stitched ? "stitched" : "alone"));
    codegen::Schedule s;
    const auto dir =
        compile_for_faults(*g, stitched ? "ls" : "la", stitched ? &groups : nullptr, nullptr, &s);
    std::vector<std::string> nodes = checked_nodes(s);
    std::sort(nodes.begin(), nodes.end());
    CHECK(nodes == std::vector<std::string>{"ce", "nll"});
    rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
    CHECK(run_error(session, *g, feed({0, 4, -100, 1, 2, 3}, fine)) == "");  // ignored, not refused
    CHECK_THAT(
        run_error(session, *g, feed({0, 4, -1, 1, 2, 3}, fine)),
        Catch::Contains("node 'ce' (SoftmaxCrossEntropyLoss): target -1 of 't' is outside the 5 classes "
                        "[0, 5) and is not the ignore_index -100"));
    CHECK_THAT(
        run_error(session, *g, feed({0, 4, 1, 1, 2, 3}, {0, 1, 2, 3, 4, 5})),
        Catch::Contains("node 'nll' (NegativeLogLikelihoodLoss): target 5 of 'u' is outside the 5 classes "
                        "[0, 5)"));
    CHECK(run_error(session, *g, feed({1, 1, 1, 1, 1, 1}, fine)) == "");  // valid again after a fault
    std::filesystem::remove_all(dir);
  }
}
