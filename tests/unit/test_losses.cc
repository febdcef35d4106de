// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss written out by expand_losses, planned by
// beam search and run on emu against the reference interpreter running the ops, whose definitions
// ONNX's node tests check (test_nllloss_*, test_sce_*: 104 with their expanded forms).
#include <fmt/format.h>

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
  // the targets not ignored. The targets are 0..6 (the test inputs' integers) against 7 classes,
  // those under 3 made -100.
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
  written_out_matches_op(R"(graph "g" opset 13 {
  input %x: f32[3,5,4,2]
  input %t: i32[3,4,2]
  const %w: f32[5] = [0.5, 1.0, 2.0, 0.25, 1.5]
  %loss = NegativeLogLikelihoodLoss(%x, %t, %w) {reduction = "sum"} @"nll"
  output %loss
})",
                         kLosses, 7);
  written_out_matches_op(R"(graph "g" opset 13 {
  input %x: f32[3,5,4]
  input %t: i64[3,4]
  const %w: f32[5] = [0.5, 1.0, 2.0, 0.25, 1.5]
  %loss = SoftmaxCrossEntropyLoss(%x, %t, %w) {reduction = "none", ignore_index = 2} @"sce"
  output %loss
})",
                         kLosses, 9);
  written_out_matches_op(R"(graph "g" opset 13 {
  input %x: f32[4,6]
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
