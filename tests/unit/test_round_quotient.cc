// Round of a float32 quotient by a value fixed outside the loop (QuantizeLinear's x / scale) as
// stitch_dev::round_quotient: a product with the reciprocal where it decides the integer, the
// division elsewhere. Inputs at and around every half-integer boundary, ties, and the special
// values, on emu against the reference, which divides: the integers must be the same, bit for bit.
#include <cfloat>
#include <cmath>
#include <limits>

#include "codegen/scalar_ops.h"
#include "codegen/stitch.h"
#include "fusion_test_util.h"

namespace stitch {
namespace {

using test::lower_whole_graph;

// x at every half-integer boundary (n + 1/2) s for |n| <= 300, 4 floats either side of it, ties
// where the boundary is a float, then values far apart in magnitude and the special values.
Tensor boundary_inputs(float s) {
  std::vector<float> xs;
  for (int n = -300; n <= 300; ++n) {
    const float b = static_cast<float>((n + 0.5) * static_cast<double>(s));
    float lo = b, hi = b;
    xs.push_back(b);
    for (int k = 0; k < 4; ++k) {
      lo = std::nextafter(lo, -INFINITY);
      hi = std::nextafter(hi, INFINITY);
      xs.push_back(lo);
      xs.push_back(hi);
    }
  }
  for (double e = -149; e <= 127; e += 0.37)
    xs.push_back(static_cast<float>(std::exp2(e)) * (e < 0 ? -1 : 1));
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(), FLT_MAX,
                  -FLT_MAX, FLT_MIN, -FLT_MIN, 1e-45f, 4194304.5f, 8388607.0f, 8388609.0f, -12582912.0f})
    xs.push_back(v);
  Tensor t(DType::kF32, Dims{static_cast<int64_t>(xs.size())});
  std::copy(xs.begin(), xs.end(), t.data_as<float>());
  return t;
}

// The emu run's output against the reference's: the same float bits, NaN for NaN.
void same_integers(const Graph& g, const TensorMap& feed) {
  auto want = run_reference(g, feed);
  REQUIRE(want.is_ok());
  const TensorMap got = test::planned_emu_run(g, feed);
  const Tensor& w = want->at("r");
  const Tensor& o = got.at("r");
  REQUIRE(o.size() == w.size());
  const float* wv = w.data_as<float>();
  const float* ov = o.data_as<float>();
  const float* x = feed.at("x").data_as<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < w.size(); ++i) {
    const bool same = std::isnan(wv[i]) ? std::isnan(ov[i]) : std::memcmp(&wv[i], &ov[i], sizeof(float)) == 0;
    if (!same && wrong++ < 5)
      FAIL_CHECK(fmt::format("x = {:a}: {} where the division gives {}", x[i], ov[i], wv[i]));
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("Round of x divided by a constant scale: the reciprocal's product decides, the same integers",
          "[stitch][emu][quantize]") {
  // 0.375 and 0.25 put exact ties on the boundaries; 1e-20 makes |q| >= 2^22 (the division
  // decides); the others are an 8-bit activation's scales and awkward reciprocals.
  for (const float s :
       {0.375f, 0.25f, 0.0173f, 1.0f / 3.0f, 0.1f, 7.0f, 2.5e-3f, 0.0049523171f, 1e-20f, 3e20f}) {
    INFO("scale " << s);
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 18 {{
  input %x: f32[{}]
  const %s: f32[] = [{:.9g}]
  %q = Div(%x, %s) @"ratio"
  %r = Round(%q) @"round"
  output %r
}})",
                                            boundary_inputs(s).size(), s));
    test::run_frontend_or_die(*g);
    const codegen::Kernel k = lower_whole_graph(*g);
    INFO(k.source);
    CHECK_THAT(k.source, Catch::Contains("stitch_dev::round_quotient("));
    CHECK_THAT(k.source, Catch::Contains(codegen::literal(1.0f / s, "float")));
    TensorMap feed;
    feed["x"] = boundary_inputs(s);
    same_integers(*g, feed);
  }
}

TEST_CASE("Round of x divided by a scale computed at run time: its reciprocal once, NaN when not normal",
          "[stitch][emu][quantize]") {
  const int64_t n = boundary_inputs(1.0f).size();  // the same count for every scale
  auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 18 {{
  input %x: f32[{}]
  input %s: f32[]
  %q = Div(%x, %s) @"ratio"
  %r = Round(%q) @"round"
  output %r
}})",
                                          n));
  test::run_frontend_or_die(*g);
  const codegen::Kernel k = lower_whole_graph(*g);
  INFO(k.source);
  CHECK_THAT(k.source, Catch::Contains("stitch_dev::quotient_reciprocal("));
  // nvcc takes both device functions, warnings as errors.
  const auto dir = std::filesystem::temp_directory_path() / ("stitch_unit_rq_" + std::to_string(getpid()));
  test::nvcc_compiles_cleanly(k, dir);
  std::filesystem::remove_all(dir);
  // Subnormal and huge scales have no normal reciprocal: every element goes to the division.
  for (const float s : {0.0173f, 0.375f, 3e-39f, 3e38f, -0.02f}) {
    INFO("scale " << s);
    TensorMap feed;
    feed["x"] = boundary_inputs(s);
    REQUIRE(feed["x"].size() == n);
    Tensor st(DType::kF32, Dims{});
    *st.data_as<float>() = s;
    feed["s"] = st;
    same_integers(*g, feed);
  }
}

TEST_CASE("a Round of a quotient by a value per element keeps the division", "[stitch]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[64]
  input %s: f32[64]
  %q = Div(%x, %s) @"ratio"
  %r = Round(%q) @"round"
  output %r
})");
  test::run_frontend_or_die(*g);
  const codegen::Kernel k = lower_whole_graph(*g);
  INFO(k.source);
  CHECK_THAT(k.source, !Catch::Contains("round_quotient"));
  CHECK(test::one_group_matches_reference(*g, 61));
}

TEST_CASE("a blocked scale computed at run time: the division, its Gather's index variables used once",
          "[stitch][emu][nvcc][quantize]") {
  // The scale per element is a Gather of its blocks, whose index map names a fresh variable each
  // time it is pulled: the Round's kernel pulls the Div's operands once and uses them (a second
  // pull through the general path left the first unused, which nvcc's warnings-as-errors build of
  // the ONNX node tests refused).
  auto g = test::parse_or_die(R"(graph "g" opset 21 {
  input %x: f32[3,7]
  input %s0: f32[3,3]
  const %half: f32[] = [0.5]
  %m = Abs(%s0) @"magnitude"
  %s = Add(%m, %half) @"away_from_zero"
  %y = QuantizeLinear(%x, %s) {axis = 1, block_size = 3} @"q"
  output %y
})");
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, test::opts("beam"));
  REQUIRE(plan.is_ok());
  auto s = test::schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  const auto dir = std::filesystem::temp_directory_path() / ("stitch_unit_rqb_" + std::to_string(getpid()));
  bool divides = false;
  for (const codegen::Kernel& k : s->kernels) {
    divides |=
        k.source.find("rintf(") != std::string::npos && k.source.find(" of Div '") != std::string::npos;
    test::nvcc_compiles_cleanly(k, dir);
  }
  std::filesystem::remove_all(dir);
  CHECK(divides);
  CHECK(test::plan_matches_reference(*g, *plan, 62) == s->kernels.size());
}

}  // namespace stitch
