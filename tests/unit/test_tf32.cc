// float32 GEMMs and convolutions: float32 math by default, TF32 tensor cores with --tf32. The emu
// backend rounds the operands as the GPU's tensor cores take them; the cost model prices the calls
// at the rate of the math the runtime asks for.
#include <fmt/format.h>

#include <cmath>

#include "backend_test_util.h"
#include "fusion/plan.h"
#include "test_util.h"

using namespace stitch;

namespace {

// A MatMul [1,2] x [2,1] of ones and a 1x1 Conv of two channels into one, weights of ones: each
// output is the sum of its two inputs as the call's operands hold them.
const char* kCalls = R"(graph "calls" opset 17 {
  input %x: f32[1,2]
  input %c: f32[1,2,1,1]
  const %w: f32[2,1] = [1.0, 1.0]
  const %k: f32[1,2,1,1] = [1.0, 1.0]
  %y = MatMul(%x, %w) @"mm"
  %z = Conv(%c, %k) @"conv"
  output %y
  output %z
}
)";

struct Sums {
  float gemm, conv;
  bool tf32;
};

// Compiles `kCalls` (each node alone, emu only) with or without --tf32 and runs it on emu with
// both inputs holding `a` and `b`.
Sums run_calls(float a, float b, bool tf32) {
  auto g = test::parse_or_die(kCalls);
  test::run_frontend_or_die(*g);
  auto s = codegen::build_schedule(*g);
  REQUIRE(s.is_ok());
  codegen::CompileOptions o;
  o.run_nvcc = false;
  o.model_path = "/dev/null";
  o.tf32 = tf32;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("stitch_unit_tf32_{}", getpid());
  codegen::ArtifactSummary summary;
  const Status st = codegen::write_artifact(*g, *s, o, dir.string(), &summary);
  INFO(st.message());
  REQUIRE(st.is_ok());
  Sums out{};
  {
    auto model = rt::Model::load(dir.string());
    out.tf32 = model->tf32();
    rt::Session session(model, rt::Backend::kEmu);
    const float x[2] = {a, b};
    session.set_input("x", "f32", {1, 2}, x, sizeof x);
    session.set_input("c", "f32", {1, 2, 1, 1}, x, sizeof x);
    session.run();
    session.get_output("y", &out.gemm, sizeof out.gemm);
    session.get_output("z", &out.conv, sizeof out.conv);
  }
  std::filesystem::remove_all(dir);
  return out;
}

}  // namespace

TEST_CASE(
    "float32 GEMMs and convolutions keep float32 operands by default and round them to TF32 with --tf32",
    "[tf32][runtime]") {
  const float u = std::ldexp(1.0f, -12);  // float32 keeps it beside 1; TF32's last bit is 2^-10
  // 1 + 3u: the dropped bits are more than half of TF32's last bit, so it rounds up to 1 + 4u.
  Sums f32 = run_calls(1 + 3 * u, 1 + 3 * u, false);
  CHECK_FALSE(f32.tf32);
  CHECK(f32.gemm == 2 + 6 * u);
  CHECK(f32.conv == 2 + 6 * u);
  Sums t = run_calls(1 + 3 * u, 1 + 3 * u, true);
  CHECK(t.tf32);
  CHECK(t.gemm == 2 + 8 * u);
  CHECK(t.conv == 2 + 8 * u);
  // 1 + 2u is exactly half of TF32's last bit: away from zero, on both sides of zero; 1 + u rounds down.
  t = run_calls(1 + 2 * u, -(1 + 2 * u), true);
  CHECK(t.gemm == 0);
  CHECK(t.conv == 0);
  t = run_calls(1 + 2 * u, 1 + u, true);
  CHECK(t.gemm == 2 + 4 * u);
  CHECK(t.conv == 2 + 4 * u);
  f32 = run_calls(1 + 2 * u, 1 + u, false);
  CHECK(f32.gemm == 2 + 3 * u);
}

TEST_CASE("float32 library calls are priced at the float32 rate, and at the TF32 tensor rate with --tf32",
          "[tf32][cost]") {
  auto g = test::parse_or_die(R"(graph "big" opset 17 {
  input %x: f32[8,64,56,56]
  input %w: f32[64,64,3,3]
  input %a: f32[512,1024]
  input %b: f32[1024,768]
  %y = Conv(%x, %w) {pads = ints[1, 1, 1, 1]} @"conv"
  %m = MatMul(%a, %b) @"mm"
  output %y
  output %m
}
)");
  test::run_frontend_or_die(*g);
  fusion::FusionOptions o;
  o.device = *fusion::device_spec("sm_90");
  const double f32 = fusion::plan_none(*g, o).cost.time;
  o.device.tf32 = true;
  const double tf32 = fusion::plan_none(*g, o).cost.time;
  // conv: 2 * 8*64*56*56 outputs * 64*3*3 taps; MatMul: 2 * 512*768 * 1024
  const double flops = 2.0 * 8 * 64 * 56 * 56 * 64 * 9 + 2.0 * 512 * 768 * 1024;
  const double want = flops / o.device.fp32 - flops / o.device.tensor;
  CHECK(std::abs((f32 - tf32) - want) < 1e-3 * want);
  CHECK(o.device.tensor > 7 * o.device.fp32);  // H100 SXM: 495 against 67 TFLOPS
}
