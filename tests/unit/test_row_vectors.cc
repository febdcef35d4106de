// Row kernels' instruction count (measured on an H100: the hoisted layer norm + erf GELU kernel
// was issue-bound): a division inside a loop by a value fixed outside it becomes a product with
// the reciprocal where that keeps the special values, and a wide pass moves 4 neighbouring
// elements per thread as 128-bit loads and stores where the shapes allow. Each kernel is checked
// on emu against the reference interpreter.
#include <fmt/format.h>

#include <string>

#include "fusion_test_util.h"
#include "ir/graph.h"

using namespace stitch;
using namespace stitch::test;

namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// Rows of 32: the decomposed layer norm (its std a Sqrt), then the normalized value divided by
// `divisor` (a scalar constant), and the rows divided by their plain sum (no Sqrt: stays a
// division). `mask` zeroes row 0 of x, so its std is 0 with eps 0: 0 / 0 in both forms.
std::unique_ptr<Graph> norm_graph(const std::string& divisor) {
  return parse_or_die(fmt::format(R"(graph "g" opset 17 {{
  input %x: f32[4,32]
  const %mask: f32[4,1] = [0.0, 1.0, 1.0, 1.0]
  const %eps: f32[] = [0.0]
  const %c: f32[] = [{}]
  const %ax: i64[1] = [1]
  %xm = Mul(%x, %mask) @"mask"
  %m = ReduceMean(%xm) {{axes = ints[1], keepdims = 1}} @"mean"
  %d = Sub(%xm, %m) @"centered"
  %sq = Mul(%d, %d) @"squared"
  %v = ReduceMean(%sq) {{axes = ints[1], keepdims = 1}} @"variance"
  %ve = Add(%v, %eps) @"variance_eps"
  %s = Sqrt(%ve) @"std"
  %n = Div(%d, %s) @"normalized"
  %q = Div(%n, %c) @"by_constant"
  %t = ReduceSum(%x, %ax) {{keepdims = 1}} @"row_sum"
  %r = Div(%x, %t) @"by_row_sum"
  output %q
  output %r
}}
)",
                                  divisor));
}

}  // namespace

TEST_CASE("a division in a loop by a square root or a scalar constant is a product with the reciprocal",
          "[fusion][emu]") {
  auto g = norm_graph("1.4142135");
  run_frontend_or_die(*g);
  const codegen::Kernel k = lower_whole_graph(*g);
  INFO(k.source);
  CHECK(count(k.source, "= 1.0f / ") == 2);  // the std's and the constant's, once per row
  CHECK(k.source.find("Div 'normalized', as a product with the reciprocal") != std::string::npos);
  CHECK(k.source.find("Div 'by_constant', as a product with the reciprocal") != std::string::npos);
  CHECK(k.source.find("Div 'by_row_sum', as a product") == std::string::npos);  // not a square root
  // Row 0 has std 0: 0 * (1 / 0) is NaN like 0 / 0; random inputs elsewhere.
  CHECK(one_group_matches_reference(*g, 5));
}

TEST_CASE("a constant whose reciprocal is not a normal float keeps the division", "[fusion][emu]") {
  // 1 / 1e-39 overflows to inf and 1 / 3e38 is subnormal: x * (1 / c) would not be x / c.
  for (const char* c : {"1e-39", "3e38", "0.0"}) {
    auto g = norm_graph(c);
    run_frontend_or_die(*g);
    const codegen::Kernel k = lower_whole_graph(*g);
    INFO(c << "\n" << k.source);
    CHECK(count(k.source, "= 1.0f / ") == 1);  // the std's alone
    CHECK(k.source.find("Div 'by_constant', as a product") == std::string::npos);
    CHECK(one_group_matches_reference(*g, 6));
  }
}

TEST_CASE("a wide pass moves 4 neighbouring elements per thread as 128-bit loads and stores", "[fusion][emu]") {
  // The row's mean over 24 applied to a product 384 wide per row (a column vector and a scalar
  // too), with 3 replicas of the block's rows: the share of each is 128 elements, a float4 a lane.
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[6,24]
  input %p: f32[6,384]
  input %col: f32[384]
  const %two: f32[] = [2.0]
  %m = ReduceMean(%x) {axes = ints[1], keepdims = 1} @"mean"
  %a = Sub(%p, %m) @"centered"
  %b = Mul(%a, %col) @"by_column"
  %y = Div(%b, %two) @"halved"
  output %y
}
)");
  run_frontend_or_die(*g);
  const codegen::Kernel k = lower_whole_graph(*g);
  INFO(k.mapping << "\n" << k.source);
  CHECK(k.mapping.find("wide values 4 per thread a step, as 128-bit loads and stores") != std::string::npos);
  CHECK(k.source.find("j = rep * 128 + 4 * lane; j < (rep + 1) * 128 && j < 384") != std::string::npos);
  CHECK(k.source.find("j += 4 * step") != std::string::npos);
  CHECK(count(k.source, "const float4 ") == 2);  // p's row and the column vector
  CHECK(count(k.source, "reinterpret_cast<float4*>(y0)") == 1);
  CHECK(one_group_matches_reference(*g, 9));
}

TEST_CASE("a wide pass stays one element per thread where 4 neighbours do not fit", "[fusion][emu]") {
  // 98 per row (not a multiple of 4), a half value, and a last axis that is kept: scalar passes,
  // still matching the reference.
  struct Case {
    const char* what;
    const char* text;
  };
  for (const Case& c : {
           Case{"98 per row", R"(graph "g" opset 17 {
  input %x: f32[6,24]
  input %p: f32[6,98]
  %m = ReduceMean(%x) {axes = ints[1], keepdims = 1} @"mean"
  %y = Sub(%p, %m) @"centered"
  output %y
}
)"},
           Case{"float16", R"(graph "g" opset 17 {
  input %x: f16[6,24]
  input %p: f16[6,96]
  %m = ReduceMean(%x) {axes = ints[1], keepdims = 1} @"mean"
  %y = Sub(%p, %m) @"centered"
  output %y
}
)"},
       }) {
    auto g = parse_or_die(c.text);
    run_frontend_or_die(*g);
    const codegen::Kernel k = lower_whole_graph(*g);
    INFO(c.what << "\n" << k.source);
    CHECK(k.source.find("4 * lane") == std::string::npos);
    CHECK(k.source.find("float4") == std::string::npos);
    CHECK(one_group_matches_reference(*g, 10, c.what == std::string("float16") ? kEmuF16Chain : kEmuF32));
  }
}

TEST_CASE("a kernel that rounds to integers (a quantization) keeps its divisions exact", "[fusion][emu]") {
  // A quantization after a layer norm (DynamicQuantizeLinear's, QuantizeLinear's): a quotient an ulp
  // away from the division's can cross a rounding boundary and move the value a whole step (seen on
  // a dynamically quantized BERT-base against onnxruntime).
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[4,32]
  const %eps: f32[] = [0.00001]
  const %step: f32[] = [0.01]
  %m = ReduceMean(%x) {axes = ints[1], keepdims = 1} @"mean"
  %d = Sub(%x, %m) @"centered"
  %sq = Mul(%d, %d) @"squared"
  %v = ReduceMean(%sq) {axes = ints[1], keepdims = 1} @"variance"
  %ve = Add(%v, %eps) @"variance_eps"
  %s = Sqrt(%ve) @"std"
  %n = Div(%d, %s) @"normalized"
  %q = Div(%n, %step) @"by_step"
  %r = Round(%q) @"round"
  output %r
}
)");
  run_frontend_or_die(*g);
  const codegen::Kernel k = lower_whole_graph(*g);
  INFO(k.source);
  CHECK(count(k.source, "= 1.0f / ") == 0);
  CHECK(k.source.find("as a product with the reciprocal") == std::string::npos);
  CHECK(one_group_matches_reference(*g, 7));
}
