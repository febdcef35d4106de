// Global stitching: a few long rows split over blocks that exchange partials through global
// memory and wait at grid-wide barriers (a cooperative launch). The mapping rule, the kernel the
// stitcher emits for it, its cost, and its results on emu against the reference.
#include "codegen/stitch.h"
#include "fusion/cost.h"
#include "fusion_test_util.h"

namespace stitch {
namespace {

using test::lower_whole_graph;
using test::opts;

const codegen::KernelParam* workspace_param(const codegen::Kernel& k) {
  for (const auto& p : k.params)
    if (p.name == "ws") return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("row mappings: a few long rows are split over blocks, many rows or short rows are not",
          "[stitch]") {
  using codegen::row_mapping;
  // One 32000-element row (a vocabulary softmax): 31 segments of 1033 elements, 128 threads each.
  auto one = row_mapping(1, 32000);
  CHECK(one.split());
  CHECK(one.segments == 31);
  CHECK(one.segment == 1033);
  CHECK(one.block == codegen::kSplitBlock);
  CHECK(one.segments * one.segment >= 32000);
  CHECK((one.segments - 1) * one.segment < 32000);  // no empty segment
  // Three rows of 100000: the cooperative grid caps the blocks at 128, 42 per row.
  auto three = row_mapping(3, 100000);
  CHECK(three.segments == 42);
  CHECK(three.segments * 3 <= codegen::kCooperativeBlocks);
  // 2 x 2048: two segments of the minimum length.
  CHECK(row_mapping(2, 2048).segments == 2);
  // Not split: enough rows for a block each, rows too short to give two minimum segments, warp
  // rows, and packed parts (which never split).
  CHECK_FALSE(row_mapping(codegen::kSplitMaxRows, 100000).split());
  CHECK(row_mapping(codegen::kSplitMaxRows - 1, 100000).split());
  CHECK_FALSE(row_mapping(1, 2047).split());
  CHECK(row_mapping(1, 2047).segment == 2047);
  CHECK(row_mapping(1, 500).warp_per_row);
  CHECK_FALSE(row_mapping(1, 32000, false).split());
  CHECK(codegen::row_mapping_text(one) == "row split over 31 blocks of 128 threads (1033 elements each)");
  CHECK(codegen::row_mapping_text(row_mapping(100, 5000)) == "block per row");
  // A split kernel caches its segment, not the row: 100000 floats would not fit the budget.
  CHECK(codegen::row_cache_bytes(row_mapping(1, 100000, false), 100000, 4) == 0);
  CHECK(codegen::row_cache_bytes(row_mapping(1, 100000), 100000, 4) == row_mapping(1, 100000).segment * 4);
}

TEST_CASE("a split row kernel is cooperative, one block per row segment, with a workspace of partials",
          "[stitch]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[2,50000]
  %y = Softmax(%x) {axis = -1} @"softmax"
  output %y
})");
  test::run_frontend_or_die(*g);
  const codegen::Kernel k = lower_whole_graph(*g);
  const auto m = codegen::row_mapping(2, 50000);
  REQUIRE(m.split());
  CHECK(k.scheme == "global");
  CHECK(k.cooperative);
  CHECK(k.grid[0] == 2 * m.segments);
  CHECK(k.block[0] == codegen::kSplitBlock);
  INFO(k.source);
  // Softmax reduces twice (max, then sum of exp): one slot per pass, row and segment.
  const codegen::KernelParam* ws = workspace_param(k);
  REQUIRE(ws != nullptr);
  CHECK(ws->output);
  REQUIRE(k.workspace != nullptr);
  CHECK(ws->value == k.workspace.get());
  CHECK(k.workspace->dtype == DType::kF32);
  CHECK(*k.workspace->dims == Dims{2 * 2 * m.segments});
  size_t barriers = 0;
  for (size_t at = k.source.find("grid_row_reduce("); at != std::string::npos;
       at = k.source.find("grid_row_reduce(", at + 1))
    ++barriers;
  CHECK(barriers == 2);
  CHECK_THAT(k.source, Catch::Contains("cooperative launch"));
  CHECK_THAT(k.mapping, Catch::Contains("row split over"));

  // Short rows keep the regional scheme and need no workspace.
  auto h = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[2,1000]
  %y = Softmax(%x) {axis = -1} @"softmax"
  output %y
})");
  test::run_frontend_or_die(*h);
  const codegen::Kernel r = lower_whole_graph(*h);
  CHECK(r.scheme == "regional");
  CHECK_FALSE(r.cooperative);
  CHECK(workspace_param(r) == nullptr);
}

TEST_CASE(
    "split rows on emu equal the reference: softmax, log-softmax over an odd length, layer norm, RMSNorm",
    "[stitch][emu]") {
  // Each graph is one group; every row op's rows are split (fewer than 64 rows of 2048 or more).
  const char* graphs[] = {
      R"(graph "vocab_softmax" opset 18 {
  input %x: f32[1,32000]
  const %t: f32[] = [0.7]
  %s = Div(%x, %t) @"temperature"
  %y = Softmax(%s) {axis = -1} @"softmax"
  output %y
})",
      // 50257 = 49 segments of 1026 elements, the last one shorter.
      R"(graph "logits" opset 18 {
  input %x: f32[2,50257]
  %y = LogSoftmax(%x) {axis = -1} @"log_softmax"
  output %y
})",
      R"(graph "wide_ln" opset 18 {
  input %x: f32[2,8192]
  input %r: f32[2,8192]
  input %s: f32[8192]
  input %b: f32[8192]
  %h = Add(%x, %r) @"residual"
  %y = LayerNormalization(%h, %s, %b) {axis = -1} @"ln"
  output %y
})",
      // 128 segments of 1094 elements (all four warps of a block hold partials in the combine), and
      // 68 segments (two warps and 4 lanes of a third).
      R"(graph "wide_sum" opset 18 {
  input %x: f32[1,140000]
  const %ax: i64[1] = [-1]
  %s = ReduceSum(%x, %ax) @"sum"
  output %s
})",
      R"(graph "wide_max" opset 18 {
  input %x: f32[1,70000]
  const %ax: i64[1] = [-1]
  %m = ReduceMax(%x, %ax) @"max"
  output %m
})",
      // %rs is a per-row output: one block of each row stores it.
      R"(graph "rmsnorm" opset 18 {
  input %x: f32[3,4096]
  input %w: f32[4096]
  const %ax: i64[1] = [-1]
  const %eps: f32[] = [0.000001]
  %sq = Mul(%x, %x) @"square"
  %ms = ReduceMean(%sq, %ax) @"mean"
  %me = Add(%ms, %eps) @"add_eps"
  %rs = Sqrt(%me) @"sqrt"
  %n = Div(%x, %rs) @"normalize"
  %y = Mul(%n, %w) @"weight"
  output %y
  output %rs
})",
  };
  uint32_t seed = 300;
  for (const char* text : graphs) {
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    INFO(g->name);
    const codegen::Kernel k = lower_whole_graph(*g);
    CHECK(k.scheme == "global");
    CHECK(k.cooperative);
    const codegen::NodeGroups groups{test::all_nodes(*g)};
    CHECK(test::emu_matches_reference(*g, &groups, seed++) == 1);
  }
}

TEST_CASE("split rows keep double precision: f64 partials for an f64 softmax", "[stitch][emu]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f64[2,6000]
  %y = Softmax(%x) {axis = -1} @"softmax"
  output %y
})");
  test::run_frontend_or_die(*g);
  const codegen::Kernel k = lower_whole_graph(*g);
  REQUIRE(k.workspace != nullptr);
  CHECK(k.workspace->dtype == DType::kF64);
  const codegen::NodeGroups groups{{g->nodes()[0].get()}};
  // f64 kernels against the double reference: far inside the f32 tolerance, so tighten it.
  const Tolerance f64_tol{1e-12, 1e-15, "double kernel vs double reference, reordered sums"};
  CHECK(test::emu_matches_reference(*g, &groups, 7, f64_tol) == 1);
}

TEST_CASE("a row op alone with few long rows is split also without fusion", "[stitch][emu]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[1,20000]
  %y = Softmax(%x) {axis = -1} @"softmax"
  output %y
})");
  test::run_frontend_or_die(*g);
  auto s = codegen::build_schedule(*g, nullptr);  // --fusion none: every node alone
  REQUIRE(s.is_ok());
  REQUIRE(s->kernels.size() == 1);
  CHECK(s->kernels[0].cooperative);
  CHECK(s->kernels[0].scheme == "global");
  CHECK(test::emu_matches_reference(*g, nullptr, 11) == 1);
}

TEST_CASE("the cost model prefers a split row for few long rows and charges its grid barriers",
          "[fusion][cost]") {
  auto d = fusion::device_spec("sm_90");
  REQUIRE(d.is_ok());
  // One row of 32000, softmax-like: 3 passes, 2 of them reductions.
  const auto split = codegen::row_mapping(1, 32000);
  const auto whole = codegen::row_mapping(1, 32000, false);
  const fusion::RowShape s = fusion::row_shape(split, 1, 3, 2, *d);
  const fusion::RowShape w = fusion::row_shape(whole, 1, 3, 2, *d);
  CHECK(s.threads == split.segments * codegen::kSplitBlock);
  CHECK(w.threads == whole.block);
  // Per pass: ceil(ceil(1033 / 128) / 4) + 1 = 4 round trips against ceil(ceil(32000 / 512) / 4) + 1 = 17.
  CHECK(s.trips == 3 * 4);
  CHECK(w.trips == 3 * 17);
  CHECK(s.barrier_time == 2 * (2 * d->barrier + d->grid_barrier));
  CHECK(s.trips * d->latency + s.barrier_time < w.trips * d->latency + w.barrier_time);
  // The planner's estimate for the lone softmax uses the split shape: well under the block-per-row
  // latency chain alone.
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[1,32000]
  %y = Softmax(%x) {axis = -1} @"softmax"
  output %y
})");
  test::run_frontend_or_die(*g);
  const fusion::Cost c = fusion::single_cost(*g->nodes()[0], *d);
  CHECK(c.time < w.trips * d->latency);
  // A larger grid barrier (a calibrated device) raises the estimate by exactly the barriers' share.
  fusion::DeviceSpec slow = *d;
  slow.grid_barrier = d->grid_barrier + 1e-5;
  const fusion::Cost cs = fusion::single_cost(*g->nodes()[0], slow);
  // Softmax alone: 2 reductions; its write pass follows them.
  CHECK(cs.time - c.time == Approx(2e-5).epsilon(1e-9));
}

TEST_CASE("plans show the global scheme and its mapping, and split groups are not packed", "[fusion]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[2,40000]
  input %y: f32[2,40000]
  %a = Exp(%x) @"exp"
  %p = Softmax(%a) {axis = -1} @"softmax"
  %b = Neg(%y) @"neg"
  %q = Softmax(%b) {axis = -1} @"softmax2"
  output %p
  output %q
})");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  const std::string text = fusion::explain(*plan);
  INFO(text);
  REQUIRE(plan->groups.size() == 2);
  for (const auto& grp : plan->groups) {
    CHECK(grp.scheme == "global");
    CHECK(grp.pack < 0);
  }
  CHECK_THAT(text, Catch::Contains("row split over"));
  CHECK(plan->cost.kernels == 2);
  CHECK(test::fused_matches_reference(*g, 21) == 2);
}

TEST_CASE(
    "a split row kernel, a tiled column reduction and a tiled transpose compile with nvcc for sm_80 and "
    "sm_90, "
    "and the artifact launches the first cooperatively",
    "[stitch][nvcc][emu]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[2,30000]
  input %c: f32[1000,37]
  input %m: f32[64,48]
  const %t: f32[] = [0.5]
  const %a0: i64[1] = [0]
  %s = Mul(%x, %t) @"scale"
  %y = Softmax(%s) {axis = -1} @"softmax"
  %z = ReduceMean(%c, %a0) @"colmean"
  %u = Transpose(%m) {perm = ints[1, 0]} @"transpose"
  output %y
  output %z
  output %u
})");
  test::run_frontend_or_die(*g);
  const codegen::NodeGroups groups{
      {g->nodes()[0].get(), g->nodes()[1].get()}, {g->nodes()[2].get()}, {g->nodes()[3].get()}};
  auto s = codegen::build_schedule(*g, &groups);
  REQUIRE(s.is_ok());
  REQUIRE(s->kernels.size() == 3);
  REQUIRE(s->kernels[0].cooperative);
  REQUIRE(s->kernels[1].mapping.rfind("tiled", 0) == 0);
  REQUIRE(s->kernels[2].mapping.rfind("tiled transpose", 0) == 0);
  // ptxas runs for all three kernels and both archs, without spills. (At 128 threads a block any
  // register count lets two blocks share an SM, so the cooperative grid of 2 x 29 blocks is one wave.)
  const auto dir = test::compile_without_spills(*g, *s, "coop");
  const std::string sched = test::read_text_file(dir / "schedule.json");
  CHECK_THAT(sched, Catch::Contains("\"cooperative\": true"));
  CHECK_THAT(sched, Catch::Contains("\"cooperative\": false"));
  // The runtime loads it and runs all three on emu.
  auto m = rt::Model::load(dir.string());
  TensorMap feed;
  feed["x"] = test::random_tensor(DType::kF32, Dims{2, 30000}, 5);
  feed["c"] = test::random_tensor(DType::kF32, Dims{1000, 37}, 6);
  feed["m"] = test::random_tensor(DType::kF32, Dims{64, 48}, 7);
  auto want = run_reference(*g, feed);
  REQUIRE(want.is_ok());
  rt::Session session(m, rt::Backend::kEmu);
  for (const auto& [name, t] : feed) session.set_input(name, "f32", t.dims(), t.data(), t.byte_size());
  session.run();
  for (const Value* v : g->outputs) {
    Tensor got(DType::kF32, *v->dims);
    session.get_output(v->name, got.data(), got.byte_size());
    const CompareResult r = compare_tensors(got, want->at(v->name), kEmuF32.rtol, kEmuF32.atol);
    INFO(v->name << ": max abs " << r.max_abs << ", max rel " << r.max_rel << " " << r.problem);
    CHECK(r.ok);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace stitch
