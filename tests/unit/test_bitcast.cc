// BitCast (opset 26): the reference reads the same bytes as the other type (known bit patterns of
// float32, float16 and bfloat16 values); a kernel computes what the reference does for every pair
// of types of one width the IR carries, 16-bit floats included, each way and back, and nvcc
// compiles it; a BitCast between widths is refused with the node named. ONNX's own BitCast node
// tests are in tests/onnx_node/upstream.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "fusion_test_util.h"
#include "reference/interpreter.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("BitCast reads the same bytes as the other type", "[reference]") {
  auto g = parse_or_die(R"(graph "bits" opset 26 {
  input %x: f32[4]
  const %f: f32[4] = [1.0, -2.0, 0.0, -0.0]
  const %h: f16[2] = [1.0, -2.0]
  const %b: bf16[2] = [1.0, -2.0]
  %xz = Mul(%x, %f) @"zeroed"
  %fz = Add(%xz, %f) @"values"
  %fi = BitCast(%fz) {to = 6} @"f32_bits"
  %hi = BitCast(%h) {to = 4} @"f16_bits"
  %bi = BitCast(%b) {to = 5} @"bf16_bits"
  output %fi
  output %hi
  output %bi
})");
  run_frontend_or_die(*g);
  TensorMap feed;
  feed["x"] = Tensor::from_f64(DType::kF32, {4}, {0, 0, 0, 0});
  auto out = run_reference(*g, feed);
  REQUIRE(out.is_ok());
  // 1.0f = 0x3f800000, -2.0f = 0xc0000000; 0 * -0 + -0 keeps -0 = 0x80000000.
  CHECK(out->at("fi").to_i64() == std::vector<int64_t>{0x3f800000, -0x40000000, 0, INT32_MIN});
  CHECK(out->at("hi").to_i64() == std::vector<int64_t>{0x3c00, 0xc000});   // uint16
  CHECK(out->at("bi").to_i64() == std::vector<int64_t>{0x3f80, -0x4000});  // int16
}

TEST_CASE("BitCast in a kernel computes what the reference does, each way and back", "[emu]") {
  const std::vector<std::pair<DType, DType>> pairs = {
      {DType::kF32, DType::kI32},  {DType::kF32, DType::kU32},  {DType::kI32, DType::kU32},
      {DType::kF64, DType::kI64},  {DType::kF64, DType::kU64},  {DType::kI64, DType::kU64},
      {DType::kF16, DType::kI16},  {DType::kF16, DType::kU16},  {DType::kBF16, DType::kI16},
      {DType::kBF16, DType::kU16}, {DType::kF16, DType::kBF16}, {DType::kI16, DType::kU16},
      {DType::kI8, DType::kU8},    {DType::kU8, DType::kBool}};
  uint32_t seed = 4100;
  for (const auto& [a, b] : pairs)
    for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      INFO(fmt::format("{} -> {}", dtype_name(from), dtype_name(to)));
      // The input through a node of its own type first, so that the BitCast reads a computed value.
      const bool boolean = from == DType::kBool;
      auto g = parse_or_die(fmt::format(R"(graph "bits" opset 26 {{
  input %x: {0}[3,37]
  input %y: {0}[3,37]
  %s = {2}(%x, %y) @"computed"
  %c = BitCast(%s) {{to = {1}}} @"cast"
  %back = BitCast(%c) {{to = {3}}} @"back"
  output %c
  output %back
}})",
                                        dtype_name(from), dtype_to_onnx(to), boolean ? "Or" : "Max",
                                        dtype_to_onnx(from)));
      run_frontend_or_die(*g);
      for (const char* mode : {"none", "beam"}) {
        INFO(mode);
        CHECK(fused_matches_reference(*g, seed++, mode) >= 1);
      }
      // The same CUDA text through nvcc (sm_90, warnings as errors).
      const auto dir =
          std::filesystem::temp_directory_path() / fmt::format("stitch_unit_bitcast_{}_{}", getpid(), seed);
      nvcc_compiles_cleanly(lower_whole_graph(*g), dir);
      std::filesystem::remove_all(dir);
    }
}

TEST_CASE("a BitCast between types of different widths is refused with the node named", "[frontend]") {
  const std::string err = frontend_error(R"(graph "bits" opset 26 {
  input %x: f32[4]
  %y = BitCast(%x) {to = 7} @"widen"
  output %y
})");
  CHECK(err.find("'widen'") != std::string::npos);
  CHECK(err.find("f32 (4 bytes) to i64 (8 bytes)") != std::string::npos);
}
