// Pools over small windows as strided Slices combined element-wise (fusion::pools_as_taps): every
// MaxPool and AveragePool node test of ONNX's (Debian's libonnx-testdata, expected outputs from
// ONNX's reference implementation) written as taps computes the expected output on the reference
// interpreter and, planned, on emu; a pool between memory-intensive ops is one kernel with them in
// every planner; the pools the taps do not take stay; the judged rewrite keeps the taps where a
// kernel is saved and not for a pool alone.
#include <fmt/format.h>

#include <cmath>

#include "backend_test_util.h"
#include "fusion/pool_taps.h"
#include "fusion/rewrites.h"
#include "fusion_test_util.h"
#include "importer/tensor_io.h"
#include "reference/compare.h"
#include "support/tolerances.h"

using namespace stitch;
using namespace stitch::test;

namespace {

namespace fs = std::filesystem;

// ONNX's MaxPool and AveragePool node tests (not those that read MaxPool's Indices).
std::vector<fs::path> pool_tests() {
  std::vector<fs::path> dirs;
  const fs::path root = fs::path(ONNX_TESTDATA_DIR) / "node";
  if (!fs::exists(root)) return dirs;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if ((name.rfind("test_maxpool_", 0) == 0 || name.rfind("test_averagepool_", 0) == 0) &&
        name.find("with_argmax") == std::string::npos)
      dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

void check_close(const Tensor& got, const Tensor& want, const Tolerance& tol) {
  REQUIRE(got.dims() == want.dims());
  const CompareResult r = compare_tensors(got, want, tol.rtol, tol.atol);
  INFO(fmt::format("{} mismatches, max abs err {} {}", r.mismatches, r.max_abs, r.problem));
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("every pool node test written as taps computes ONNX's expected output", "[fusion][emu]") {
  const auto dirs = pool_tests();
  REQUIRE(dirs.size() >= 26);  // 13 AveragePool and 13 MaxPool tests in Debian's libonnx-testdata
  for (const fs::path& dir : dirs) {
    INFO(dir.filename().string());
    auto [g, feed] = load_node_test(dir, [](size_t) { return false; });
    run_frontend_or_die(*g);
    // Every window the node tests have (up to 5 x 5), not only those the compiler rewrites.
    auto lines = fusion::pools_as_taps(*g, {}, 64);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    INFO(lines->front());
    CHECK(count_op(*g, "MaxPool") + count_op(*g, "AveragePool") == 0);
    auto want = read_tensor_file((dir / "test_data_set_0" / "output_0.pb").string());
    REQUIRE(want.is_ok());
    auto got = run_reference(*g, feed);
    INFO(got.status().message());
    REQUIRE(got.is_ok());
    const std::string y = g->outputs.front()->name;
    check_close(got->at(y), want->tensor, kOnnxNodeTest);
    check_close(planned_emu_run(*g, feed).at(y), want->tensor, kEmuF32);
  }
}

TEST_CASE("a pool between memory-intensive ops is one kernel with them", "[fusion][emu]") {
  const std::vector<OneNodeRewrite> cases = {
      {"a BatchNorm's scale and shift, a 2 x 2 average pool, a ReLU (CoAtNet's downsampling)",
       R"(graph "g" opset 18 {
  input %x: f32[2,3,8,8]
  input %s: f32[1,3,1,1]
  input %b: f32[1,3,1,1]
  %m = Mul(%x, %s)
  %a = Add(%m, %b)
  %p = AveragePool(%a) {kernel_shape = ints[2, 2], strides = ints[2, 2]} @"pool"
  %y = Relu(%p)
  output %y
})",
       "node 'pool' (AveragePool): a 2 x 2 window as 4 strided Slices combined by 3 Adds, then a Div by 4"},
      {"a ReLU and a 3 x 3 max pool of stride 2 padded by 1 (a ResNet stem's), odd extents",
       R"(graph "g" opset 18 {
  input %x: f32[1,4,9,9]
  input %z: f32[1,4,5,5]
  %r = Relu(%x)
  %p = MaxPool(%r) {kernel_shape = ints[3, 3], strides = ints[2, 2], pads = ints[1, 1, 1, 1]} @"pool"
  %y = Add(%p, %z)
  output %y
})",
       "node 'pool' (MaxPool): a 3 x 3 window as 9 strided Slices of a Pad combined by 8 Maxes"},
      {"an average over the input only, windows past its end (ceil_mode), a count per position",
       R"(graph "g" opset 18 {
  input %x: f32[2,2,7,7]
  %e = Exp(%x)
  %p = AveragePool(%e) {kernel_shape = ints[3, 3], strides = ints[2, 2], pads = ints[1, 1, 1, 1], ceil_mode = 1} @"pool"
  %y = Sigmoid(%p)
  output %y
})",
       "node 'pool' (AveragePool): a 3 x 3 window as 9 strided Slices of a Pad combined by 8 Adds, "
       "then a Div by the count of each window (fewer outside the input)"},
      {"an average counting the padding, windows past it (ceil_mode)", R"(graph "g" opset 18 {
  input %x: f32[1,3,6,6]
  %n = Neg(%x)
  %p = AveragePool(%n) {kernel_shape = ints[3, 3], strides = ints[2, 2], pads = ints[1, 1, 1, 1], ceil_mode = 1, count_include_pad = 1} @"pool"
  %y = Abs(%p)
  output %y
})",
       "node 'pool' (AveragePool): a 3 x 3 window as 9 strided Slices of a Pad combined by 8 Adds, "
       "then a Div by the count of each window (fewer past the padding)"},
      {"a float16 average (float32 inside, one rounding)", R"(graph "g" opset 18 {
  input %x: f16[1,2,6,6]
  %t = Neg(%x)
  %p = AveragePool(%t) {kernel_shape = ints[2, 2], strides = ints[2, 2]} @"pool"
  %y = Relu(%p)
  output %y
})",
       "node 'pool' (AveragePool): a 2 x 2 window as 4 strided Slices combined by 3 Adds, "
       "then a Div by 4, in float32"},
      {"a 1-D dilated max pool of stride 1", R"(graph "g" opset 18 {
  input %x: f32[2,3,11]
  %t = Tanh(%x)
  %p = MaxPool(%t) {kernel_shape = ints[3], dilations = ints[2]} @"pool"
  %y = Neg(%p)
  output %y
})",
       "node 'pool' (MaxPool): a 3 window as 3 strided Slices combined by 2 Maxes"},
      {"one position of stride 2 (EfficientFormerV2's downsampling shortcut)", R"(graph "g" opset 18 {
  input %x: f32[2,3,8,8]
  %t = Sigmoid(%x)
  %p = AveragePool(%t) {kernel_shape = ints[1, 1], strides = ints[2, 2]} @"pool"
  %y = Neg(%p)
  output %y
})",
       "node 'pool' (AveragePool): a 1 x 1 window as 1 strided Slice"},
      {"a 2 x 2 x 2 average of a volume", R"(graph "g" opset 18 {
  input %x: f32[1,2,4,6,4]
  %t = Sigmoid(%x)
  %p = AveragePool(%t) {kernel_shape = ints[2, 2, 2], strides = ints[2, 2, 2]} @"pool"
  %y = Neg(%p)
  output %y
})",
       "node 'pool' (AveragePool): a 2 x 2 x 2 window as 8 strided Slices combined by 7 Adds, then a Div by "
       "8"},
  };
  one_node_rewrites(
      cases, [](Graph& x) { return fusion::pools_as_taps(x); }, {"MaxPool", "AveragePool"}, 1200);
}

TEST_CASE("a max pool keeps NaN as the Max of its taps and its own kernel do", "[fusion][emu]") {
  const char* text = R"(graph "g" opset 18 {
  input %x: f32[1,1,4,4]
  %y = MaxPool(%x) {kernel_shape = ints[2, 2], strides = ints[2, 2]} @"pool"
  output %y
})";
  TensorMap feed;
  feed["x"] =
      Tensor::from_f64(DType::kF32, {1, 1, 4, 4},
                       {1, NAN, 2, 3, 4, 5, 6, NAN, -INFINITY, -INFINITY, 7, 8, -INFINITY, -INFINITY, 9, 1});
  auto original = parse_or_die(text);
  run_frontend_or_die(*original);
  auto want = run_reference(*original, feed);
  REQUIRE(want.is_ok());
  const std::vector<double> w = want->at("y").to_f64();
  REQUIRE(w.size() == 4);
  CHECK(std::isnan(w[0]));  // the reference's pool: a NaN in the window wins, as in Max
  CHECK(std::isnan(w[1]));
  CHECK(w[2] == -INFINITY);
  CHECK(w[3] == 9);
  auto [g, before, lines] = rewritten(text, [](Graph& x) { return fusion::pools_as_taps(x); });
  REQUIRE(lines.size() == 1);
  auto got = run_reference(*g, feed);
  REQUIRE(got.is_ok());
  const CompareResult r = compare_tensors(got->at("y"), want->at("y"), 0, 0);
  INFO(r.problem);
  CHECK(r.ok);
  // The pool's own kernel (no plan) and the taps planned, on emu.
  const CompareResult own = compare_tensors(emu_run(*original, nullptr, feed).at("y"), want->at("y"), 0, 0);
  INFO(own.problem);
  CHECK(own.ok);
  const CompareResult taps = compare_tensors(planned_emu_run(*g, feed).at("y"), want->at("y"), 0, 0);
  INFO(taps.problem);
  CHECK(taps.ok);
}

TEST_CASE("pools the taps do not take stay as they are", "[fusion]") {
  struct Case {
    const char* what;
    const char* text;
  };
  const Case cases[] = {
      {"a 4 x 4 window (16 positions)", R"(graph "g" opset 18 {
  input %x: f32[1,2,8,8]
  %y = AveragePool(%x) {kernel_shape = ints[4, 4], strides = ints[4, 4]} @"pool"
  output %y
})"},
      {"a max pool whose Indices are read", R"(graph "g" opset 18 {
  input %x: f32[1,2,8,8]
  %y, %i = MaxPool(%x) {kernel_shape = ints[2, 2], strides = ints[2, 2]} @"pool"
  output %y
  output %i
})"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    rewrite_leaves_alone(c.text, [](Graph& x) { return fusion::pools_as_taps(x); });
  }
  SECTION("--no-fuse on the pool") {
    auto g = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[1,2,8,8]
  %y = MaxPool(%x) {kernel_shape = ints[2, 2], strides = ints[2, 2]} @"pool"
  output %y
})");
    run_frontend_or_die(*g);
    auto lines = fusion::pools_as_taps(*g, {"pool"});
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    CHECK(count_op(*g, "MaxPool") == 1);
  }
}

TEST_CASE("the planner keeps the taps where they save a kernel, and a lone pool's own kernel", "[fusion]") {
  auto planned = [](const char* text) {
    auto g = parse_or_die(text);
    run_frontend_or_die(*g);
    auto r = fusion::rewrite_for_planning(g, opts("beam"));
    REQUIRE(r.is_ok());
    auto plan = fusion::make_plan(*g, opts("beam"));
    REQUIRE(plan.is_ok());
    return std::make_pair(std::move(r).value(), std::move(plan).value());
  };
  SECTION("between a scale and a ReLU: one kernel") {
    auto [r, plan] = planned(R"(graph "g" opset 18 {
  input %x: f32[2,8,16,16]
  input %s: f32[1,8,1,1]
  %m = Mul(%x, %s)
  %p = AveragePool(%m) {kernel_shape = ints[2, 2], strides = ints[2, 2]} @"pool"
  %y = Relu(%p)
  output %y
})");
    INFO(r.text());
    CHECK(r.pools.lines.size() == 1);
    CHECK(plan.cost.kernels == 1);
  }
  SECTION("alone: its own kernel") {
    auto [r, plan] = planned(R"(graph "g" opset 18 {
  input %x: f32[2,8,16,16]
  %y = MaxPool(%x) {kernel_shape = ints[3, 3], strides = ints[2, 2], pads = ints[1, 1, 1, 1]} @"pool"
  output %y
})");
    INFO(r.text());
    CHECK(r.pools.lines.empty());
    CHECK(r.pools.verdict.rfind("not applied", 0) == 0);
    CHECK(plan.cost.kernels == 1);
  }
}

TEST_CASE("seeded random pools written as taps compute what the pools did", "[fusion][emu]") {
  // Windows of 1 to 3 positions an axis over 1 to 3 spatial axes (at most 9 positions, as the
  // compiler takes them), strides 1 to 3, dilations 1 or 2, pads 0 to 2 on each side (below the
  // dilated window, as ONNX asks), ceil_mode and count_include_pad either way, odd extents; after a
  // Tanh so that the taps are inside a kernel. Each against the reference pool on the reference
  // interpreter; every fourth planned on emu too. Windows the op refuses (no output) are skipped.
  uint32_t state = 1300;
  auto next = [&](int n) {
    state = state * 1664525u + 1013904223u;
    return static_cast<int>((state >> 16) % static_cast<uint32_t>(n));
  };
  int tried = 0, rewritten_pools = 0;
  uint32_t seed = 1400;
  for (int trial = 0; trial < 48; ++trial) {
    const int spatial = 1 + next(3);
    std::vector<int64_t> kernel, strides, dil, pads_begin, pads_end, in;
    int64_t taps = 1;
    for (int d = 0; d < spatial; ++d) {
      int64_t k = 1 + next(3);
      while (taps * k > fusion::kMaxPoolTaps) --k;
      taps *= k;
      kernel.push_back(k);
      strides.push_back(1 + next(3));
      dil.push_back(1 + next(2));
      const int64_t width = (k - 1) * dil.back() + 1;
      pads_begin.push_back(std::min<int64_t>(next(3), width - 1));
      pads_end.push_back(std::min<int64_t>(next(3), width - 1));
      in.push_back(spatial == 3 ? 3 + next(4) : 4 + next(7));
    }
    const bool max = next(2) == 0;
    const int ceil = next(2), include = next(2);
    auto ints = [](const std::vector<int64_t>& v) {
      std::string s;
      for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", v[i]);
      return s;
    };
    std::vector<int64_t> pads = pads_begin;
    pads.insert(pads.end(), pads_end.begin(), pads_end.end());
    std::string dims;
    for (size_t i = 0; i < in.size(); ++i) dims += fmt::format(",{}", in[i]);
    const std::string text =
        fmt::format(R"(graph "g" opset 19 {{
  input %x: f32[2,3{}]
  %t = Tanh(%x)
  %p = {}(%t) {{kernel_shape = ints[{}], strides = ints[{}], dilations = ints[{}], pads = ints[{}], ceil_mode = {}{}}} @"pool"
  %y = Neg(%p)
  output %y
}})",
                    dims, max ? "MaxPool" : "AveragePool", ints(kernel), ints(strides), ints(dil), ints(pads),
                    ceil, max ? "" : fmt::format(", count_include_pad = {}", include));
    INFO(text);
    auto g = parse_or_die(text);
    PassContext ctx;
    if (!run_frontend(*g, ctx).is_ok()) continue;  // no output position: the op refuses the window
    ++tried;
    auto original = clone_graph(*g);
    auto lines = fusion::pools_as_taps(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    ++rewritten_pools;
    same_as_original(*original, *g, seed++);
    if (trial % 4 == 0) CHECK(fused_matches_reference(*g, seed++, "beam") == 1);
  }
  INFO(tried);
  CHECK(tried >= 36);
  CHECK(rewritten_pools == tried);
}
