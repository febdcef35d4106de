// Integer reductions in row kernels: sums, products, means, L1 norms, maxima and minima of integer
// tensors are row ops (a sequence's length from its attention mask, before the layers of
// onnxruntime-genai's decoders), stitched with what reads them, and element-wise ops after a
// reduction without keepdims stay in its kernel. Results on emu against the reference, with
// inputs where wrapping, signs and uint64's upper half matter.
#include "codegen/stitch.h"
#include "fusion_test_util.h"

namespace stitch {
namespace {

using test::opts;

// `g` planned by beam search and run on emu with `feed`: every output equal to the reference's.
// Returns the kernel count.
size_t fused_exactly(const Graph& g, const TensorMap& feed) {
  auto plan = fusion::make_plan(g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  const auto groups = test::groups_of(*plan);
  const auto packs = test::packs_of(*plan);
  size_t kernels = 0;
  const TensorMap got = test::emu_run(g, &groups, feed, &kernels, &packs, plan->gemm_folds);
  auto want = run_reference(g, feed);
  REQUIRE(want.is_ok());
  for (const Value* v : g.outputs) {
    INFO(v->name);
    CHECK(got.at(v->name).same_as(want->at(v->name)));
  }
  return kernels;
}

Tensor tensor_of(DType t, Dims d, const std::vector<int64_t>& v) {
  return Tensor::from_i64(t, std::move(d), v);
}

}  // namespace

TEST_CASE("integer sums, products, means, L1 norms, maxima and minima are row ops, L2 norms and logs are not",
          "[stitch]") {
  for (const char* op : {"ReduceSum", "ReduceProd", "ReduceMean", "ReduceL1", "ReduceSumSquare", "ReduceMax",
                         "ReduceMin", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"}) {
    INFO(op);
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 18 {{
  input %x: i64[3,37]
  const %axes: i64[1] = [1]
  %y = {}(%x, %axes) @"r"
  output %y
}})",
                                            op));
    test::run_frontend_or_die(*g);
    const Node& r = *g->nodes().front();
    const bool integer_result = std::string(op) != "ReduceL2" && std::string(op) != "ReduceLogSum" &&
                                std::string(op) != "ReduceLogSumExp";
    CHECK((codegen::stitch_role(r) == codegen::StitchRole::kRow) == integer_result);
    auto info = codegen::row_op_info(r);
    CHECK(info.is_ok() == integer_result);
    if (!integer_result) CHECK(info.status().message().find("reduces integers") != std::string::npos);
  }
}

TEST_CASE("an attention mask's lengths (int64 sum, minus one, as int32) are one row kernel",
          "[fusion][emu]") {
  // onnxruntime-genai's attn_mask_reformat: ReduceSum without keepdims, then element-wise ops at
  // the per-sequence shape.
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %mask: i64[3,37]
  const %axes: i64[1] = [1]
  const %one: i64[] = [1]
  %len = ReduceSum(%mask, %axes) {keepdims = 0} @"sum"
  %last = Sub(%len, %one) @"sub"
  %y = Cast(%last) {to = 6} @"cast"
  output %y
})");
  test::run_frontend_or_die(*g);
  uint32_t seed = 71;
  test::one_kernel_in_every_planner(*g, seed, [](const fusion::FusionPlan& p) {
    REQUIRE(p.groups.size() == 1);
    CHECK(p.groups[0].scheme == "regional");
  });
  std::vector<int64_t> mask(3 * 37, 1);
  for (int j = 30; j < 37; ++j) mask[37 + j] = 0;
  for (int j = 5; j < 37; ++j) mask[2 * 37 + j] = 0;
  TensorMap feed{{"mask", tensor_of(DType::kI64, {3, 37}, mask)}};
  CHECK(fused_exactly(*g, feed) == 1);
}

TEST_CASE("integer row statistics in one kernel: wrapping int32 sums, negative maxima, truncated means",
          "[fusion][emu]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: i32[5,70]
  input %z: i64[4,33]
  input %w: i64[4,33]
  const %axes: i64[1] = [1]
  %s = ReduceSum(%x, %axes) @"sum"
  %d = Sub(%x, %s) @"centre"
  %mx = ReduceMax(%z, %axes) @"max"
  %mn = ReduceMin(%z, %axes) @"min"
  %l1 = ReduceL1(%z, %axes) @"l1"
  %sq = ReduceSumSquare(%z, %axes) @"sq"
  %me = ReduceMean(%z, %axes) @"mean"
  %p = ReduceProd(%w, %axes) @"prod"
  %a = Sub(%z, %mx) @"a"
  %b = Add(%a, %mn) @"b"
  %c = Add(%l1, %sq) @"c"
  %e = Sub(%c, %me) @"e"
  %f = Add(%e, %p) @"f"
  %y = Mul(%b, %f) @"y"
  output %d
  output %s
  output %y
})");
  test::run_frontend_or_die(*g);
  std::vector<int64_t> x(5 * 70), z(4 * 33), w(4 * 33);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = (i % 3 == 0 ? 2147483000 : -2147483000) + static_cast<int64_t>(i);
  for (size_t i = 0; i < z.size(); ++i) z[i] = -1000 + static_cast<int64_t>((i * 37) % 990);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = i % 5 == 0 ? 2 : i % 11 == 0 ? -1 : 1;  // products within int64
  TensorMap feed{{"x", tensor_of(DType::kI32, {5, 70}, x)},
                 {"z", tensor_of(DType::kI64, {4, 33}, z)},
                 {"w", tensor_of(DType::kI64, {4, 33}, w)}};
  // The reference wraps the int32 sums (its own arithmetic in 64 bits, stored as int32).
  auto want = run_reference(*g, feed);
  REQUIRE(want.is_ok());
  int64_t row0 = 0;
  for (int j = 0; j < 70; ++j) row0 += x[static_cast<size_t>(j)];
  CHECK(want->at("s").get_i64(0) == static_cast<int32_t>(static_cast<uint32_t>(row0)));
  CHECK(want->at("s").get_i64(0) != row0);
  CHECK(fused_exactly(*g, feed) == 1);  // a row kernel per row shape, packed into one launch
}

TEST_CASE("uint64 maxima and minima compare as unsigned, in a row kernel and on their own", "[fusion][emu]") {
  const std::string text = R"(graph "g" opset 18 {
  input %u: u64[3,3]
  const %axes: i64[1] = [1]
  %mx = ReduceMax(%u, %axes) @"max"
  %mn = ReduceMin(%u, %axes) @"min"
  %y = Sub(%mx, %mn) @"range"
  output %mx
  output %y
})";
  auto g = test::parse_or_die(text);
  test::run_frontend_or_die(*g);
  const int64_t top = std::numeric_limits<int64_t>::min();  // 2^63 as uint64
  TensorMap feed{{"u", tensor_of(DType::kU64, {3, 3}, {1, top + 5, 3, 4, 5, 6, -1, top, 7})}};
  auto want = run_reference(*g, feed);
  REQUIRE(want.is_ok());
  CHECK(want->at("mx").get_i64(0) == top + 5);
  CHECK(want->at("mx").get_i64(1) == 6);
  CHECK(want->at("mx").get_i64(2) == -1);  // 2^64 - 1
  CHECK(fused_exactly(*g, feed) == 1);
  // The reductions alone, each its own kernel (the one-op lowering).
  const codegen::NodeGroups singles{{g->nodes()[0].get()}, {g->nodes()[1].get()}, {g->nodes()[2].get()}};
  const TensorMap got = test::emu_run(*g, &singles, feed);
  CHECK(got.at("mx").same_as(want->at("mx")));
  CHECK(got.at("y").same_as(want->at("y")));
}

TEST_CASE("long integer rows split over blocks keep 64-bit partials, and are not split beside float rows",
          "[fusion][emu][stitch]") {
  auto ints = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: i64[2,100000]
  const %axes: i64[1] = [1]
  %s = ReduceSum(%x, %axes) @"sum"
  %y = Sub(%x, %s) @"centre"
  output %y
})");
  test::run_frontend_or_die(*ints);
  const codegen::Kernel k = test::lower_whole_graph(*ints);
  CHECK(k.scheme == "global");
  REQUIRE(k.workspace != nullptr);
  CHECK(k.workspace->dtype == DType::kI64);
  std::vector<int64_t> x(200000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 7 == 0 ? 4000000000000LL : -3) * (i < 100000 ? 1 : -1);
  TensorMap feed{{"x", tensor_of(DType::kI64, {2, 100000}, x)}};
  CHECK(fused_exactly(*ints, feed) == 1);

  // A masked mean: the float sum and the mask's integer count over the same long rows.
  auto mixed = test::parse_or_die(R"(graph "g" opset 18 {
  input %f: f32[2,50000]
  input %m: i64[2,50000]
  const %axes: i64[1] = [1]
  %mf = Cast(%m) {to = 1} @"mask_f"
  %fm = Mul(%f, %mf) @"masked"
  %fs = ReduceSum(%fm, %axes) @"float_sum"
  %c = ReduceSum(%m, %axes) @"count"
  %cf = Cast(%c) {to = 1} @"count_f"
  %mean = Div(%fs, %cf) @"mean"
  %y = Sub(%f, %mean) @"y"
  output %y
})");
  test::run_frontend_or_die(*mixed);
  const codegen::Kernel mk = test::lower_whole_graph(*mixed);
  CHECK(mk.scheme != "global");
  CHECK(mk.workspace == nullptr);
  CHECK(test::one_group_matches_reference(*mixed, 5));
}

TEST_CASE(
    "element-wise ops after a reduction without keepdims join its kernel, ops of the rows' shape do not",
    "[fusion][emu]") {
  // Float statistics without keepdims, then ops at the kept shape with an operand from outside.
  auto chain = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[2,3,40]
  input %b: f32[3]
  const %axes: i64[1] = [2]
  %m = ReduceMean(%x, %axes) {keepdims = 0} @"mean"
  %a = Add(%m, %b) @"bias"
  %y = Mul(%a, %a) @"square"
  output %y
})");
  test::run_frontend_or_die(*chain);
  CHECK(test::fused_matches_reference(*chain, 9) == 1);
  // A sum without keepdims read by an op of the rows' shape broadcasts along the last axis (its
  // element j), not per row: not stitched, and the result still matches.
  auto trailing = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: i64[4,4]
  const %axes: i64[1] = [1]
  %s = ReduceSum(%x, %axes) {keepdims = 0} @"sum"
  %y = Add(%x, %s) @"add"
  output %y
})");
  test::run_frontend_or_die(*trailing);
  auto plan = fusion::make_plan(*trailing, opts("beam"));
  REQUIRE(plan.is_ok());
  CHECK(plan->groups.size() == 2);
  CHECK(fusion::explain(*plan).find("a reduction without keepdims, inside the group") != std::string::npos);
  CHECK(test::fused_matches_reference(*trailing, 3) == 2);
}

}  // namespace stitch
