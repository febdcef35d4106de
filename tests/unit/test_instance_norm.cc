// InstanceNormalization as a row op of stitched kernels: the per-channel statistics over the
// spatial axes, its per-channel scale and bias, and the element-wise work around it in one kernel,
// checked on emu against the reference interpreter in all three planners.
#include <fmt/format.h>

#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// Plans `g` in every search: one generated kernel holding the InstanceNormalization, matching the
// reference on emu.
void one_kernel_in_every_planner(const Graph& g, uint32_t& seed) {
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto plan = fusion::make_plan(g, opts(mode));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    int with_norm = 0;
    for (const auto& grp : plan->groups)
      if (has_op(grp, "InstanceNormalization")) with_norm += grp.nodes.size() > 1 ? 1 : 0;
    CHECK(with_norm == 1);
    CHECK(fused_matches_reference(g, seed++, mode) == 1);
  }
}

}  // namespace

TEST_CASE("InstanceNormalization is a row op: its scale and bias per channel, GELU after it, one kernel",
          "[fusion][emu]") {
  // wav2vec2's feature encoder: GroupNorm with a group per channel over a convolution's output
  // (the InstanceNormalization carries the channel weight and bias), then the erf-form GELU.
  // Rows of 37 (warp per row), 3000 (block per row) and 1 x 1 (channels of one element each).
  uint32_t state = 11, seed = 160;
  for (const char* shape : {"2,4,37", "1,3,3000", "3,5,2,9"}) {
    const std::string d(shape);
    const int64_t c = std::stoll(d.substr(d.find(',') + 1));
    const std::string text = fmt::format(R"(graph "instance_norm" opset 18 {{
  input %x: f32[{0}]
  const %scale: f32[{1}] = {2}
  const %bias: f32[{1}] = {3}
  const %sqrt2: f32[] = [1.4142135]
  const %one: f32[] = [1.0]
  const %half: f32[] = [0.5]
  %e = Exp(%x) @"exp"
  %in = InstanceNormalization(%e, %scale, %bias) {{epsilon = 0.001}} @"instance_norm"
  %d = Div(%in, %sqrt2) @"div"
  %f = Erf(%d) @"erf"
  %f1 = Add(%f, %one) @"add_one"
  %m = Mul(%in, %f1) @"mul"
  %y = Mul(%m, %half) @"gelu"
  output %y
}}
)",
                                         shape, c, lcg_values(state, c, 0.5), lcg_values(state, c));
    auto g = parse_or_die(text);
    run_frontend_or_die(*g);
    INFO(text);
    for (const Node* n : all_nodes(*g))
      if (n->op_type == "InstanceNormalization") CHECK(codegen::stitch_role(*n) == codegen::StitchRole::kRow);
    one_kernel_in_every_planner(*g, seed);
  }
}

TEST_CASE("an InstanceNormalization over spatial axes of one element is not a row op", "[fusion][emu]") {
  // Every instance is one element: its mean is itself, so the output is the bias. The stitcher
  // does not take it (no axis of more than one element to reduce); its own kernel computes it.
  auto g = parse_or_die(R"(graph "instance_norm_1x1" opset 18 {
  input %x: f32[3,4,1,1]
  const %scale: f32[4] = [1.0, 2.0, -1.0, 0.5]
  const %bias: f32[4] = [0.25, -0.5, 1.0, 2.0]
  %e = Exp(%x) @"exp"
  %in = InstanceNormalization(%e, %scale, %bias) @"instance_norm"
  %y = Neg(%in) @"neg"
  output %y
}
)");
  run_frontend_or_die(*g);
  for (const Node* n : all_nodes(*g))
    if (n->op_type == "InstanceNormalization") CHECK(codegen::stitch_role(*n) == codegen::StitchRole::kNone);
  CHECK(fused_matches_reference(*g, 180, "beam") >= 2);
}
