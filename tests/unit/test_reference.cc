// Reference interpreter checks against hand-computed values for semantics
// the node tests cover thinly (legacy softmax, numpy matmul promotion, errors).
#include <limits>

#include "reference/compare.h"
#include "test_util.h"

using namespace stitch;

namespace {
TensorMap run(const std::string& text, TensorMap in) {
  auto g = test::parse_or_die(text);
  test::run_frontend_or_die(*g);
  auto out = run_reference(*g, in);
  INFO(out.status().message());
  REQUIRE(out.is_ok());
  return *out;
}
}  // namespace

TEST_CASE("Softmax before opset 13 normalises over the flattened tail") {
  Tensor x = Tensor::from_f64(DType::kF32, {1, 2, 2}, {0, 0, 0, 0});
  const char* body = " {\n input %x: f32[1,2,2]\n %y = Softmax(%x) {axis = 1}\n output %y\n}\n";
  auto legacy = run(std::string("graph \"g\" opset 11") + body, {{"x", x}});
  auto modern = run(std::string("graph \"g\" opset 13") + body, {{"x", x}});
  CHECK(legacy.at("y").get_f64(0) == Approx(0.25));  // 4 elements share one softmax
  CHECK(modern.at("y").get_f64(0) == Approx(0.5));   // 2 elements along axis 1
}

TEST_CASE("MatMul promotes 1-D operands and broadcasts batches like numpy") {
  Tensor a = Tensor::from_f64(DType::kF32, {2, 1, 3}, {1, 2, 3, 4, 5, 6});
  Tensor v = Tensor::from_f64(DType::kF32, {3}, {1, 0, -1});
  auto out = run("graph \"g\" opset 17 {\n input %a: f32[2,1,3]\n input %v: f32[3]\n %y = MatMul(%a, %v)\n output %y\n}\n",
                 {{"a", a}, {"v", v}});
  const Tensor& y = out.at("y");
  REQUIRE(y.dims() == Dims{2, 1});
  CHECK(y.get_f64(0) == -2.0);
  CHECK(y.get_f64(1) == -2.0);
}

TEST_CASE("an out-of-range Gather index is an error naming the node, not a wild read") {
  auto g = test::parse_or_die(
      "graph \"g\" opset 17 {\n input %x: f32[3]\n input %i: i64[1]\n %y = Gather(%x, %i) @\"emb\"\n output %y\n}\n");
  test::run_frontend_or_die(*g);
  auto out = run_reference(*g, {{"x", Tensor(DType::kF32, {3})}, {"i", Tensor::vector_i64({3})}});
  REQUIRE_FALSE(out.is_ok());
  CHECK_THAT(out.status().message(), Catch::Contains("node 'emb' (Gather)") && Catch::Contains("index 3"));
}

TEST_CASE("integer division by zero is refused naming the node, and truncates toward zero otherwise") {
  auto g = test::parse_or_die(
      "graph \"g\" opset 17 {\n input %a: i32[2]\n input %b: i32[2]\n %y = Div(%a, %b) @\"div\"\n output "
      "%y\n}\n");
  test::run_frontend_or_die(*g);
  const Tensor a = Tensor::from_i64(DType::kI32, {2}, {7, -7});
  auto zero = run_reference(*g, {{"a", a}, {"b", Tensor::from_i64(DType::kI32, {2}, {0, 2})}});
  REQUIRE_FALSE(zero.is_ok());
  CHECK(zero.status().code() == Code::kUser);
  CHECK(zero.status().message() ==
        "node 'div' (Div): an element of its divisor 'b' is 0 (integer division by zero)");
  auto out = run_reference(*g, {{"a", a}, {"b", Tensor::from_i64(DType::kI32, {2}, {3, 2})}});
  REQUIRE(out.is_ok());
  CHECK(out->at("y").get_i64(0) == 2);
  CHECK(out->at("y").get_i64(1) == -3);  // truncates toward zero
}

TEST_CASE("inputs are checked against the model's types") {
  auto g = test::parse_or_die("graph \"g\" opset 17 {\n input %x: f32[2]\n %y = Neg(%x)\n output %y\n}\n");
  test::run_frontend_or_die(*g);
  auto wrong_type = run_reference(*g, {{"x", Tensor(DType::kF64, {2})}});
  CHECK_THAT(wrong_type.status().message(), Catch::Contains("input 'x' must be f32"));
  auto wrong_shape = run_reference(*g, {{"x", Tensor(DType::kF32, {3})}});
  CHECK_THAT(wrong_shape.status().message(), Catch::Contains("input 'x' must have shape"));
  auto missing = run_reference(*g, {});
  CHECK_THAT(missing.status().message(), Catch::Contains("no data for model input 'x'"));
  auto extra = run_reference(*g, {{"x", Tensor(DType::kF32, {2})}, {"q", Tensor(DType::kF32, {2})}});
  CHECK_THAT(extra.status().message(), Catch::Contains("'q' is not an input"));
}

TEST_CASE("compare_tensors applies allclose and reports errors") {
  Tensor e = Tensor::from_f64(DType::kF32, {3}, {1.0, 100.0, 0.0});
  Tensor a = Tensor::from_f64(DType::kF32, {3}, {1.0005, 100.05, 1e-6});
  auto ok = compare_tensors(a, e, 1e-3, 1e-5);
  CHECK(ok.ok);
  CHECK(ok.max_abs == Approx(0.05).epsilon(1e-3));
  auto bad = compare_tensors(a, e, 1e-4, 1e-8);
  CHECK_FALSE(bad.ok);
  CHECK(bad.mismatches == 3);
  CHECK(bad.first_bad == 0);
  auto shape = compare_tensors(Tensor(DType::kF32, {2}), e, 1, 1);
  CHECK_THAT(shape.problem, Catch::Contains("shape"));
}

TEST_CASE("an integer Range counts its elements exactly, past 2^53 and across the whole int64 range") {
  // Through a double, 2^60 + 7 - 2^60 was 0 elements; the Range is folded at compile time, so an
  // artifact would have held the empty tensor.
  auto out = run(R"(graph "g" opset 17 {
  const %s: i64[] = [1152921504606846976]
  const %l: i64[] = [1152921504606846983]
  const %d: i64[] = [3]
  const %down_s: i32[] = [10]
  const %down_l: i32[] = [1]
  const %down_d: i32[] = [-4]
  const %min: i64[] = [-9223372036854775808]
  const %max: i64[] = [9223372036854775807]
  const %quarter: i64[] = [4611686018427387904]
  %big = Range(%s, %l, %d)
  %down = Range(%down_s, %down_l, %down_d)
  %whole = Range(%min, %max, %quarter)
  %empty = Range(%down_l, %down_s, %down_d)
  output %big
  output %down
  output %whole
  output %empty
})",
                 {});
  const int64_t big = int64_t{1} << 60, quarter = int64_t{1} << 62;
  CHECK(out.at("big").to_i64() == std::vector<int64_t>{big, big + 3, big + 6});
  CHECK(out.at("down").to_i64() == std::vector<int64_t>{10, 6, 2});
  CHECK(out.at("whole").to_i64() ==
        std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -quarter, 0, quarter});
  CHECK(out.at("empty").dims() == Dims{0});
}

TEST_CASE("an integer MatMul wraps as 64-bit arithmetic does, exact past 2^53") {
  // Through doubles, 2^40 * 2^30 + 3 * 5 was rounded. (The back end takes float MatMuls only.)
  const int64_t p30 = int64_t{1} << 30, p40 = int64_t{1} << 40, p62 = int64_t{1} << 62;
  auto out = run(R"(graph "g" opset 18 {
  input %a: i64[2,2]
  input %b: i64[2,2]
  input %x: i32[1,2]
  input %y: i32[2,1]
  %c = MatMul(%a, %b)
  %z = MatMul(%x, %y)
  output %c
  output %z
})",
                 {{"a", Tensor::from_i64(DType::kI64, {2, 2}, {p40, 3, 1, -1})},
                  {"b", Tensor::from_i64(DType::kI64, {2, 2}, {p30, 1, 5, p62})},
                  {"x", Tensor::from_i64(DType::kI32, {1, 2}, {65536, 7})},
                  {"y", Tensor::from_i64(DType::kI32, {2, 1}, {65536, 3})}});
  // 2^70 + 15 wraps to 15; 2^40 + 3 * 2^62 to 2^40 - 2^62; int32's 2^32 + 21 to 21.
  CHECK(out.at("c").to_i64() == std::vector<int64_t>{15, p40 - p62, p30 - 5, 1 - p62});
  CHECK(out.at("z").to_i64() == std::vector<int64_t>{21});
}

TEST_CASE("an integer Einsum multiplies exactly and wraps, folded or written out") {
  // The same product as above: folded at compile time (constant operands, the op itself) and
  // written out as a MatMul (operands given at run time).
  const int64_t p30 = int64_t{1} << 30, p40 = int64_t{1} << 40, p62 = int64_t{1} << 62;
  auto out = run(R"(graph "g" opset 18 {
  input %a: i64[2,2]
  input %b: i64[2,2]
  const %ca: i64[2,2] = [1099511627776, 3, 1, -1]
  const %cb: i64[2,2] = [1073741824, 1, 5, 4611686018427387904]
  %folded = Einsum(%ca, %cb) {equation = "ij,jk->ik"}
  %written = Einsum(%a, %b) {equation = "ij,jk->ik"}
  output %folded
  output %written
})",
                 {{"a", Tensor::from_i64(DType::kI64, {2, 2}, {p40, 3, 1, -1})},
                  {"b", Tensor::from_i64(DType::kI64, {2, 2}, {p30, 1, 5, p62})}});
  const std::vector<int64_t> want{15, p40 - p62, p30 - 5, 1 - p62};
  CHECK(out.at("folded").to_i64() == want);
  CHECK(out.at("written").to_i64() == want);
}
