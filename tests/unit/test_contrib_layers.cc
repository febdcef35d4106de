// onnxruntime's contrib ops that make whole layers (importer/contrib_moe.cc, contrib_ops.cc): MoE
// (gpt-oss's experts) and CausalConvWithState (LFM2's convolution layers), written as ONNX ops the
// planner fuses, and refused by name in the forms stitch does not read. Their numbers are checked
// against onnxruntime's kernels by the node tests in tests/onnx_node/contrib.
#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "contrib_test_util.h"
#include "fusion_test_util.h"
#include "onnx_model_util.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("onnxruntime's MoE: the routing, the activation and its weights in the softmax's row kernel",
          "[importer][contrib][fusion]") {
  // gpt-oss's form over x [2, 5, 8]: 4 experts, the top 2 normalized, swiglu interleaved and clamped,
  // fc1 [4, 12, 8] and fc2 [4, 8, 6] with biases.
  onnx::ModelProto m = contrib_model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = tensor_info("r", 1, {"10", "4"});
  *g->add_input() = tensor_info("w1", 1, {"4", "12", "8"});
  *g->add_input() = tensor_info("b1", 1, {"4", "12"});
  *g->add_input() = tensor_info("w2", 1, {"4", "8", "6"});
  *g->add_input() = tensor_info("b2", 1, {"4", "8"});
  auto* n = add_node(g, "MoE", {"x", "r", "w1", "b1", "w2", "b2"}, {"y"}, "moe", "com.microsoft");
  set_string(n, "activation_type", "swiglu");
  set_int(n, "k", 2);
  set_int(n, "swiglu_fusion", 1);
  set_int(n, "normalize_routing_weights", 1);
  set_float(n, "swiglu_limit", 1.0f);
  *g->add_output() = tensor_info("y", 1, {});
  auto imported = import_ok(m);
  Graph& graph = *imported;
  const std::multiset<std::string> ops = ops_of(graph);
  CHECK(ops.count("TopK") == 0);    // the top 2 as row reductions, not a kernel of their own
  CHECK(ops.count("MatMul") == 2);  // fc1 and fc2 over all experts, fc2's biases inside fc2
  run_frontend_or_die(graph);
  CHECK(*graph.find_value("y")->dims == Dims{2, 5, 8});
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    const std::map<std::string, int> group_of = plan_groups(graph, mode);
    // The softmax, every round of the top 2, the activation and its multiplication by the expert's
    // weight in one kernel: the activations are the routing's rows over an axis of their own.
    const int routing = group_of.at("moe/routing_softmax");
    for (const char* part : {"moe/routing_round0_max", "moe/routing_round0_first", "moe/routing_round1_max",
                             "moe/routing_round1_first", "moe/routing_round1_chosen", "moe/activation",
                             "moe/swiglu_gate_clamped", "moe/weighted_activation"})
      CHECK(group_of.at(part) == routing);
    // Each expert's weight joined after its part as the column that takes fc2's bias, in that kernel.
    CHECK(group_of.at("moe/weighted_with_bias_weight") == routing);
    CHECK(fused_matches_reference(graph, 23, mode) >= 1);
  }
}

TEST_CASE("CausalConvWithState: its taps and their weights in one kernel, the state joined apart",
          "[importer][contrib][fusion]") {
  // LFM2's form: x [2, 5, 8] as channels [2, C=5, S=8] with a past state [2, 5, 2], k = 3, a bias.
  onnx::ModelProto m = contrib_model(17);
  auto* g = m.mutable_graph();
  *g->add_input() = tensor_info("past", 1, {"2", "5", "2"});
  *g->add_input() = tensor_info("bias", 1, {"5"});
  add_f32_initializer(g, "weight", {5, 1, 3}, [](int i) { return 0.1f * static_cast<float>(i % 7) - 0.3f; });
  auto* n = add_node(g, "CausalConvWithState", {"x", "weight", "bias", "past"}, {"y", "state"}, "conv",
                     "com.microsoft");
  set_string(n, "activation", "silu");
  *g->add_output() = tensor_info("y", 1, {});
  *g->add_output() = tensor_info("state", 1, {});
  auto imported = import_ok(m);
  Graph& graph = *imported;
  CHECK(ops_of(graph).count("Conv") == 0);  // element-wise taps, not a grouped convolution call
  run_frontend_or_die(graph);
  CHECK(*graph.find_value("y")->dims == Dims{2, 5, 8});
  CHECK(*graph.find_value("state")->dims == Dims{2, 5, 2});
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    const std::map<std::string, int> group_of = plan_groups(graph, mode);
    // The joined sequence, the 3 taps and the SiLU in one kernel: nothing stores the joined sequence.
    for (const char* part : {"conv/with_past", "conv/tap0_weighted", "conv/tap2_sum", "conv/silu_sigmoid"})
      CHECK(group_of.at(part) == group_of.at("conv"));
    CHECK(group_of.at("conv/present_state") != group_of.at("conv"));
    CHECK(fused_matches_reference(graph, 29, mode) >= 1);
  }
}

TEST_CASE("MoE and CausalConvWithState forms stitch does not read are refused naming the node",
          "[importer][contrib]") {
  // MoE of x [2, 5, 8] over 4 experts (router r [10, 4], fc1 w1 [4, F1, 8], fc2 w2 [4, 8, 6]), the
  // activation given.
  auto moe = [](onnx::GraphProto* g, const std::string& act, std::vector<std::string> extra = {},
                int64_t k = 2) {
    *g->add_input() = tensor_info("r", 1, {"10", "4"});
    *g->add_input() = tensor_info("w1", 1, {"4", act == "swiglu" ? "12" : "6", "8"});
    *g->add_input() = tensor_info("w2", 1, {"4", "8", "6"});
    std::vector<std::string> in = {"x", "r", "w1", "", "w2"};
    in.insert(in.end(), extra.begin(), extra.end());
    auto* n = add_node(g, "MoE", in, {"y"}, "attn", "com.microsoft");
    set_string(n, "activation_type", act);
    set_int(n, "k", k);
    return n;
  };
  // CausalConvWithState of x with an initializer weight [5, 1, 3].
  auto conv = [](onnx::GraphProto* g) {
    add_f32_initializer(g, "cw", {5, 1, 3}, [](int) { return 0.5f; });
    return add_node(g, "CausalConvWithState", {"x", "cw"}, {"y"}, "attn", "com.microsoft");
  };
  check_refusals({
      {"CausalConvWithState over 2 spatial dims", [&](onnx::GraphProto* g) { set_int(conv(g), "ndim", 2); },
       "ndim other than 1"},
      {"CausalConvWithState with a window of carry states",
       [&](onnx::GraphProto* g) { set_int(conv(g), "state_window", 2); },
       "state_window (a window of carry states)"},
      {"CausalConvWithState's CUDA-only state layout",
       [&](onnx::GraphProto* g) { set_int(conv(g), "state_channels_last", 1); },
       "onnxruntime's CUDA-only forms"},
      {"CausalConvWithState whose weight is not an initializer",
       [&](onnx::GraphProto* g) {
         *g->add_input() = tensor_info("w", 1, {"5", "1", "3"});
         add_node(g, "CausalConvWithState", {"x", "w"}, {"y"}, "attn", "com.microsoft");
       },
       "its weight 'w' must be an initializer [channels, 1, k]"},
      {"MoE with Phi-3.5-MoE's sparse mixer routing",
       [&](onnx::GraphProto* g) { set_int(moe(g, "relu"), "use_sparse_mixer", 1); },
       "use_sparse_mixer=1 (Phi-3.5-MoE's routing) is not read"},
      {"MoE with geglu, which onnxruntime computes on CUDA only",
       [&](onnx::GraphProto* g) { moe(g, "geglu"); }, "activation_type 'geglu' is not read"},
      {"MoE clamping after the activation (CUDA only)",
       [&](onnx::GraphProto* g) { set_int(moe(g, "swiglu"), "swiglu_limit_after_activation", 1); },
       "swiglu_limit_after_activation=1 (onnxruntime's CUDA kernels only) is not read"},
      {"MoE with swiglu_fusion=0 and no fc3", [&](onnx::GraphProto* g) { moe(g, "swiglu"); },
       "swiglu_fusion=0 takes l from fc3"},
      {"MoE with fc3 beside a fused swiglu",
       [&](onnx::GraphProto* g) {
         set_int(moe(g, "swiglu", {"", "w1"}), "swiglu_fusion", 1);
       },
       "fc3 (inputs 6 and 7) is read only as swiglu's l with swiglu_fusion=0"},
      {"MoE choosing no expert", [&](onnx::GraphProto* g) { moe(g, "relu", {}, 0); },
       "k=0 is not a positive count of experts"},
      {"MoE of a 1-D input",
       [&](onnx::GraphProto* g) {
         auto* n = moe(g, "relu");
         n->set_input(0, "g");
       },
       "its input 'g' is 1-D"},
  });
}
