// MatMul and Gemm of integers written out by expand_integer_matmuls (the products along a new K
// axis and their ReduceSum), planned by beam search and run on emu against the reference
// interpreter running the MatMul or Gemm itself (its exact, wrapping integer sums). The node tests
// test_matmul_stitch_*, test_gemm_stitch_* and test_einsum_stitch_int8_* check the same against
// ONNX's reference and numpy.
#include <fmt/format.h>

#include "fusion_test_util.h"
#include "ops/op_params.h"
#include "passes/pass.h"

using namespace stitch;
using namespace stitch::test;

namespace {

const std::set<std::string> kGemmOps{"MatMul", "Gemm"};

}  // namespace

TEST_CASE("an integer MatMul is its products and their sum in one kernel, wrapping as numpy's does",
          "[integer_matmul][emu]") {
  // Operands up to 2^40 in magnitude: their products pass 2^64 and wrap, and no float type holds
  // the sums; the outputs are compared exactly.
  const IntInputsIn wide(-(int64_t{1} << 40), int64_t{1} << 40);
  for (const char* t : {"i64", "u64", "i32", "u32"}) {
    INFO(t);
    // A batch of 2 x 3 broadcast against B's 3, K = 50: long enough for a column reduction.
    const std::string text = fmt::format(R"(graph "g" opset 17 {{
  input %a: {0}[2,1,37,50]
  input %b: {0}[3,50,33]
  %y = MatMul(%a, %b) @"mm"
  output %y
}})",
                                         t);
    CHECK(written_out_matches_op(text, kGemmOps, 3).cost.kernels == 1);
  }
}

TEST_CASE("integer MatMuls of 1-D operands and Gemms transposed, with C, on emu", "[integer_matmul][emu]") {
  const IntInputsIn wide(-(int64_t{1} << 31), (int64_t{1} << 31) - 1);
  written_out_matches_op(R"(graph "g" opset 17 {
  input %v: i64[6]
  input %m: i64[2,6,3]
  input %w: i32[4,6]
  input %u: i32[6]
  input %p: i64[9]
  input %q: i64[9]
  %vm = MatMul(%v, %m) @"vector_matrix"
  %wu = MatMul(%w, %u) @"matrix_vector"
  %pq = MatMul(%p, %q) @"dot"
  output %vm
  output %wu
  output %pq
})",
                         kGemmOps, 5);
  for (const char* t : {"i32", "u64"})
    written_out_matches_op(fmt::format(R"(graph "g" opset 13 {{
  input %a: {0}[6,4]
  input %b: {0}[5,6]
  input %c: {0}[4,1]
  %y = Gemm(%a, %b, %c) {{transA = 1, transB = 1}} @"gemm"
  %z = Gemm(%b, %a) @"plain"
  output %y
  output %z
}})",
                                       t),
                           kGemmOps, 9);
}

TEST_CASE("a constant integer Gemm folds exactly, past the integers a double holds", "[integer_matmul]") {
  // 2^40 + 1 times 2^20 + 1 plus 3: 2^60 + 2^40 + 2^20 + 4, which a double would round.
  auto g = parse_or_die(R"(graph "g" opset 13 {
  input %x: i64[1,1]
  const %a: i64[1,1] = [1099511627777]
  const %b: i64[1,1] = [1048577]
  const %c: i64[1] = [3]
  %p = Gemm(%a, %b, %c) @"gemm"
  %y = Add(%x, %p) @"add"
  output %y
})");
  run_frontend_or_die(*g);
  const Value* p = nullptr;
  for (const auto& n : g->nodes())
    if (n->op_type == "Add") p = n->input(1);
  REQUIRE(p);
  REQUIRE(p->constant);
  CHECK(p->constant->to_i64() ==
        std::vector<int64_t>{(int64_t{1} << 60) + (int64_t{1} << 40) + (1 << 20) + 4});
}

TEST_CASE("integer Gemms the exact sums do not cover, and products past the limit, are refused",
          "[integer_matmul]") {
  const auto gemm = [](const std::string& c, const std::string& attrs) {
    return fmt::format(R"(graph "g" opset 13 {{
  input %a: i32[4,6]
  input %b: i32[6,5]
  input %c: {}
  %y = Gemm(%a, %b, %c) {{{}}} @"gemm"
  output %y
}})",
                       c, attrs);
  };
  CHECK(frontend_error(gemm("i32[5]", "alpha = 2.0")) ==
        "node 'gemm' (Gemm): alpha is 2 on i32 inputs; stitch computes an integer Gemm exactly, which takes "
        "alpha and beta of 1: scale the inputs, or Cast them to a float type");
  CHECK(frontend_error(gemm("i32[5]", "beta = 0.5")) ==
        "node 'gemm' (Gemm): beta is 0.5 on i32 inputs; stitch computes an integer Gemm exactly, which takes "
        "alpha and beta of 1: scale the inputs, or Cast them to a float type");
  CHECK(frontend_error(gemm("i64[5]", "")) ==
        "node 'gemm' (Gemm): input 2 is i64, but A is i32: Gemm's inputs share one type");
  CHECK(frontend_error(gemm("i32[5]", "transA = 0")).empty());
  // 2048 x 1024 outputs of K = 64: 2^27 products, twice the limit.
  CHECK(ops::kMaxIntegerProducts == int64_t{1} << 26);
  CHECK(
      frontend_error(R"(graph "g" opset 17 {
  input %a: i32[2048,64]
  input %b: i32[64,1024]
  %y = MatMul(%a, %b) @"mm"
  output %y
})") ==
      "node 'mm' (MatMul): an integer MatMul runs as the products of its operands and their sum over K, and "
      "here those are 134217728 products (2097152 outputs x K = 64), more than the 67108864 stitch computes "
      "for one node; split it into smaller ones, or Cast its operands to double where every sum stays "
      "below 2^53 in magnitude (exact there, and a GEMM of the library)");
}
