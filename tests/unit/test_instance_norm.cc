// InstanceNormalization as a row op of stitched kernels: the per-channel statistics over the
// spatial axes, its per-channel scale and bias, and the element-wise work around it in one kernel.
// PyTorch exports GroupNorm as a Reshape into groups, an InstanceNormalization and a Reshape back
// before the affine weight (UNets, ResNet-GN, wav2vec2's feature encoder): fusion::split_group_norms
// makes the norm and the work after it one kernel. Each is checked on emu against the reference
// interpreter (and rewritten graphs against the original) in all three planners.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "codegen/schedule.h"
#include "fusion/group_norms.h"
#include "fusion/rewrites.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// Plans `g` in every search: one generated kernel, which holds the InstanceNormalization with other
// nodes, matching the reference on emu.
void one_norm_kernel_in_every_planner(const Graph& g, uint32_t& seed) {
  test::one_kernel_in_every_planner(g, seed, [](const fusion::FusionPlan& plan) {
    int with_norm = 0;
    for (const auto& grp : plan.groups)
      if (has_op(grp, "InstanceNormalization")) with_norm += grp.nodes.size() > 1 ? 1 : 0;
    CHECK(with_norm == 1);
  });
}

// GroupNorm + SiLU as torch.export writes it, on x of dims `x_dims` with `c` channels: the groups'
// statistics by an InstanceNormalization of scale 1 and bias 0 over x reshaped to `grouped`
// ([N, groups, rest]), then the channel weight and bias of dims `param_dims` broadcast over the
// spatial axes.
std::string group_norm_silu(const std::string& x_dims, int64_t c, const std::string& grouped, int64_t groups,
                            const std::string& param_dims, uint32_t& state) {
  // x_dims without spaces: a type's dims and the Reshape back's shape constant.
  const std::string ones = fmt::format("[{}]", fmt::join(std::vector<std::string>(groups, "1.0"), ", "));
  const std::string zeros = fmt::format("[{}]", fmt::join(std::vector<std::string>(groups, "0.0"), ", "));
  const int64_t rank = std::count(x_dims.begin(), x_dims.end(), ',') + 1;
  return fmt::format(R"(graph "group_norm" opset 18 {{
  input %x: f32[{0}]
  const %grouped: i64[3] = [{1}]
  const %back: i64[{2}] = [{0}]
  const %ones: f32[{3}] = {4}
  const %zeros: f32[{3}] = {5}
  const %gamma: f32[{6}] = {7}
  const %beta: f32[{6}] = {8}
  %g = Reshape(%x, %grouped) @"to_groups"
  %in = InstanceNormalization(%g, %ones, %zeros) {{epsilon = 0.00001}} @"instance_norm"
  %b = Reshape(%in, %back) @"from_groups"
  %w = Mul(%b, %gamma) @"weight"
  %a = Add(%w, %beta) @"group_norm"
  %s = Sigmoid(%a) @"sigmoid"
  %y = Mul(%a, %s) @"silu"
  output %y
}}
)",
                     x_dims, grouped, rank, groups, ones, zeros, param_dims, lcg_values(state, c, 0.5),
                     lcg_values(state, c));
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
    one_norm_kernel_in_every_planner(*g, seed);
  }
}

TEST_CASE(
    "GroupNorm as exports spell it (Reshape, InstanceNormalization, Reshape, weight, bias) and SiLU are one "
    "kernel once the groups' channels are an axis",
    "[fusion][emu]") {
  // A ResNet's or a UNet's GroupNorm(3 groups, 6 channels) + SiLU over 5 x 7 feature maps: the
  // Reshape back to channels merges a kept axis (the group) with the row's first piece (the
  // group's 2 channels), which no row kernel stores. split_group_norms reshapes the groups to
  // [2, 3, 2, 5, 7] and moves the Reshape back after the SiLU; and 2 groups of 4 channels over
  // 1-D sequences of 9.
  struct Case {
    std::string text, grouped;
  };
  uint32_t state = 12, seed = 170;
  for (const Case& c : {Case{group_norm_silu("2,6,5,7", 6, "2, 3, 70", 3, "6, 1, 1", state), "2x3x2x5x7"},
                        Case{group_norm_silu("3,8,9", 8, "3, 2, 36", 2, "8, 1", state), "3x2x4x9"}}) {
    auto original = parse_or_die(c.text);
    run_frontend_or_die(*original);
    auto g = clone_graph(*original);
    INFO(c.text);
    // Before: the weight, bias and SiLU are a kernel of their own.
    CHECK(fused_matches_reference(*g, seed++, "beam") == 2);
    auto lines = fusion::split_group_norms(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    INFO(lines->front());
    CHECK(lines->front().find("as " + c.grouped) != std::string::npos);
    CHECK(lines->front().find("node 'from_groups' (Reshape) after 4 element-wise node(s)") !=
          std::string::npos);
    same_as_original(*original, *g, seed++);
    for (const Node* n : all_nodes(*g))
      if (n->op_type == "InstanceNormalization") CHECK(dims_to_string(*n->output(0)->dims) == c.grouped);
    one_norm_kernel_in_every_planner(*g, seed);
  }
}

TEST_CASE("split_group_norms views other operands in the groups' shape and keeps what others read",
          "[fusion][emu]") {
  // A ResNet-GN block's end: GroupNorm, its weight and bias, a residual (an input of the
  // channels' shape, viewed in the groups'), ReLU. The GroupNorm's output is also a graph output,
  // so the Reshape back stays for it; a MaxPool reads the sum (not element-wise: it keeps reading
  // channels, through a Reshape back added for it). Same results as before; the norm, weight,
  // bias, residual and ReLU are one kernel.
  auto original = parse_or_die(R"(graph "resnet_gn" opset 18 {
  input %x: f32[2,8,4,6]
  input %res: f32[2,8,4,6]
  const %grouped: i64[3] = [2, 4, 48]
  const %back: i64[4] = [2, 8, 4, 6]
  const %scale: f32[4] = [1.0, 0.5, 2.0, -1.0]
  const %bias: f32[4] = [0.0, 0.25, -0.5, 1.0]
  const %gamma: f32[8,1,1] = [1.5, 0.5, 1.25, 0.75, 1.0, 2.0, 0.25, 1.75]
  const %beta: f32[8,1,1] = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8]
  const %half: f32[] = [0.5]
  %g = Reshape(%x, %grouped) @"to_groups"
  %in = InstanceNormalization(%g, %scale, %bias) {epsilon = 0.00001} @"instance_norm"
  %b = Reshape(%in, %back) @"from_groups"
  %w = Mul(%b, %gamma) @"weight"
  %a = Add(%w, %beta) @"group_norm"
  %h = Mul(%a, %half) @"half"
  %r = Add(%h, %res) @"residual"
  %y = Relu(%r) @"relu"
  %p = MaxPool(%r) {kernel_shape = ints[2, 2], strides = ints[2, 2]} @"pool"
  output %y
  output %b
  output %p
}
)");
  run_frontend_or_die(*original);
  auto g = clone_graph(*original);
  auto lines = fusion::split_group_norms(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  INFO(lines->front());
  CHECK(
      lines->front().find("after 5 element-wise node(s) (1 other operand(s) viewed in the groups' shape)") !=
      std::string::npos);
  same_as_original(*original, *g, 190);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  for (const auto& grp : plan->groups)
    if (has_op(grp, "InstanceNormalization")) {
      CHECK(has_op(grp, "Relu"));
      CHECK(has_op(grp, "Mul"));
    }
  CHECK(fused_matches_reference(*g, 191, "beam") >= 1);
  // --no-fuse on the norm leaves the graph as it was.
  auto kept = clone_graph(*original);
  auto none = fusion::split_group_norms(*kept, {"instance_norm"});
  REQUIRE(none.is_ok());
  CHECK(none->empty());
  CHECK(kept->nodes().size() == original->nodes().size());
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

TEST_CASE("two GroupNorms in a residual block: the second's residual Add and ReLU join its kernel",
          "[fusion][emu]") {
  // GroupNorm, ReLU, a 1x1 convolution, GroupNorm, the residual Add of the first ReLU, ReLU. The
  // first move reaches the residual Add (it reads the first ReLU) and views the second norm's
  // result in the groups' shape; the second move computes that result in the groups' shape, so the
  // view of its Reshape back is dropped and the Add reads it directly: two row kernels.
  uint32_t state = 21;
  auto original =
      parse_or_die(fmt::format(R"(graph "resnet_block" opset 18 {{
  input %x: f32[2,8,3,5]
  const %grouped: i64[3] = [2, 4, 30]
  const %back: i64[4] = [2, 8, 3, 5]
  const %ones: f32[4] = [1.0, 1.0, 1.0, 1.0]
  const %zeros: f32[4] = [0.0, 0.0, 0.0, 0.0]
  const %g1: f32[8,1,1] = {}
  const %b1: f32[8,1,1] = {}
  const %g2: f32[8,1,1] = {}
  const %b2: f32[8,1,1] = {}
  const %w: f32[8,8,1,1] = {}
  %ga = Reshape(%x, %grouped) @"to_groups_1"
  %na = InstanceNormalization(%ga, %ones, %zeros) @"instance_norm_1"
  %ba = Reshape(%na, %back) @"from_groups_1"
  %wa = Mul(%ba, %g1) @"weight_1"
  %aa = Add(%wa, %b1) @"bias_1"
  %ra = Relu(%aa) @"relu_1"
  %c = Conv(%ra, %w) @"conv"
  %gb = Reshape(%c, %grouped) @"to_groups_2"
  %nb = InstanceNormalization(%gb, %ones, %zeros) @"instance_norm_2"
  %bb = Reshape(%nb, %back) @"from_groups_2"
  %wb = Mul(%bb, %g2) @"weight_2"
  %ab = Add(%wb, %b2) @"bias_2"
  %s = Add(%ab, %ra) @"residual"
  %y = Relu(%s) @"relu_2"
  output %y
}}
)",
                               lcg_values(state, 8, 0.5), lcg_values(state, 8), lcg_values(state, 8, 0.5),
                               lcg_values(state, 8), lcg_values(state, 64, -0.5)));
  run_frontend_or_die(*original);
  auto g = clone_graph(*original);
  auto lines = fusion::split_group_norms(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 2);
  same_as_original(*original, *g, 200);
  for (const Node* n : all_nodes(*g))
    if (n->op_type == "Reshape" && n->input(0)->producer) CHECK(n->input(0)->producer->op_type != "Reshape");
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  for (const auto& grp : plan->groups)
    for (const Node* n : grp.nodes)
      if (n->name == "instance_norm_2") {
        CHECK(has_op(grp, "Relu"));
        CHECK(grp.nodes.size() == 5);  // the norm, weight, bias, residual Add, ReLU
      }
  CHECK(fused_matches_reference(*g, 201, "beam") == 2);
}

TEST_CASE("unet_small as stitchc compiles it: a kernel per GroupNorm with its weight, bias and SiLU",
          "[fusion][models]") {
  // The shipped UNet (7 GroupNorms of 4 groups, SiLU, 3x3 convolutions, a skip concatenation)
  // through the rewrites stitchc runs: 9 kernels + 11 convolution calls (17 + 11 without the
  // GroupNorm rewrite: each norm's weight, bias and SiLU a kernel of their own). Its emu run against
  // PyTorch's outputs is in tests/e2e/backend_tests.sh.
  auto g = test::prepared_model("unet_small");
  auto rewrites = fusion::rewrite_for_planning(g, opts("beam"));
  REQUIRE(rewrites.is_ok());
  CHECK(rewrites->group_norms.size() == 7);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  int norms = 0;
  for (const auto& grp : plan->groups)
    if (has_op(grp, "InstanceNormalization")) {
      ++norms;
      CHECK(has_op(grp, "Sigmoid"));
    }
  CHECK(norms == 7);
  const auto groups = groups_of(*plan);
  const auto packs = packs_of(*plan);
  auto s = codegen::build_schedule(*g, &groups, &packs, plan->gemm_folds);
  REQUIRE(s.is_ok());
  CHECK(s->kernels.size() <= 9);
  CHECK(s->calls.size() <= 11);
}

namespace {

// GroupNormalization(num_groups 2) of x [2, 6, 5, 7] in `t` at `opset`, its scale and bias
// constants of `params` values each, then SiLU.
std::string group_normalization_silu(const char* t, int opset, int64_t params, uint32_t& state) {
  return fmt::format(R"(graph "group_normalization" opset {0} {{
  input %x: {1}[2,6,5,7]
  const %scale: {1}[{2}] = {3}
  const %bias: {1}[{2}] = {4}
  %n = GroupNormalization(%x, %scale, %bias) {{num_groups = 2, epsilon = 0.0001}} @"gn"
  %s = Sigmoid(%n) @"sigmoid"
  %y = Mul(%n, %s) @"silu"
  output %y
}}
)",
                     opset, t, params, lcg_values(state, params, 0.5), lcg_values(state, params));
}

}  // namespace

TEST_CASE(
    "GroupNormalization becomes the exported Reshapes around an InstanceNormalization, one kernel with SiLU",
    "[fusion][emu]") {
  // Opset 21 (scale and bias per channel: a Mul and an Add after the Reshape back), in float32 and
  // float16 (the kernel rounds to half once, the reference after each op: the normalized value's
  // rounding, times the scale, then cancelled by the bias, is what kModelF16 allows), and opset 18 (per
  // group: the InstanceNormalization applies them). The expansion computes what the op does (reference
  // interpreter, both graphs); then one kernel in every planner.
  struct Case {
    const char* type;
    int opset;
    int64_t params;
    Tolerance tol;
  };
  uint32_t state = 31, seed = 210;
  for (const Case& c :
       {Case{"f32", 21, 6, kEmuF32}, Case{"f16", 21, 6, kModelF16}, Case{"f32", 18, 2, kEmuF32}}) {
    const std::string text = group_normalization_silu(c.type, c.opset, c.params, state);
    INFO(text);
    auto original = parse_or_die(text);
    auto g = parse_or_die(text);
    run_frontend_or_die(*g);
    int norms = 0;
    for (const Node* n : all_nodes(*g)) {
      CHECK(n->op_type != "GroupNormalization");
      norms += n->op_type == "InstanceNormalization";
    }
    CHECK(norms == 1);
    same_as_original(*original, *g, seed++, std::string(c.type) == "f16" ? kRewriteF16 : kRewriteReference);
    auto lines = fusion::split_group_norms(*g);
    REQUIRE(lines.is_ok());
    CHECK(lines->size() == 1);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      CHECK(fused_matches_reference(*g, seed++, opts(mode), c.tol) == 1);
    }
  }
}

TEST_CASE("bad GroupNormalization input is an error naming the node", "[errors]") {
  struct Case {
    std::string text, message;
  };
  auto graph = [](const std::string& x, int opset, int64_t params, const std::string& attrs) {
    return fmt::format(R"(graph "g" opset {0} {{
  input %x: {1}
  input %scale: f32[{2}]
  input %bias: f32[{2}]
  %y = GroupNormalization(%x, %scale, %bias) {{{3}}} @"gn"
  output %y
}}
)",
                       opset, x, params, attrs);
  };
  const std::vector<Case> cases = {
      {graph("f32[2,6,5]", 21, 6, "num_groups = 4"), "the channel count 6 is not a multiple of num_groups 4"},
      {graph("f32[2,6,5]", 21, 3, "num_groups = 3"),
       "input 1 must have shape [6] (the channel count at opset 21)"},
      {graph("f32[2,6,5]", 18, 6, "num_groups = 3"), "input 1 must have shape [3] (num_groups at opset 18)"},
      {graph("f32[2,6,5]", 21, 6, "epsilon = 0.001"), "needs the num_groups attribute"},
      {graph("f32[2,6,5]", 21, 6, "num_groups = 0"), "num_groups must be positive, got 0"},
      {graph("i64[2,6,5]", 21, 6, "num_groups = 2"), "expects a floating-point input"},
      {graph("f32[6]", 21, 6, "num_groups = 2"), "expects an input of shape N x C x ..."},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const std::string msg = frontend_error(c.text);
    INFO(msg);
    CHECK(msg.find("node 'gn' (GroupNormalization)") != std::string::npos);
    CHECK(msg.find(c.message) != std::string::npos);
  }
}
