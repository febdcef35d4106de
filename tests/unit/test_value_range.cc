// ops::int_range: the bounds of integer values known at compile time, which let a gather skip the
// run-time check of an index that cannot leave its axis (codegen's known_in_range). A bound is
// only claimed where no input data can break it: each case below also runs the graph on the
// reference with inputs at their extremes and checks every element against the claimed bounds.
#include <limits>

#include "ops/op_util.h"
#include "ops/value_range.h"
#include "reference/interpreter.h"
#include "test_util.h"

namespace stitch {
namespace {

using test::parse_or_die;

constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min(), kMax64 = std::numeric_limits<int64_t>::max();

TEST_CASE("int_range follows clamps, selects, arithmetic and moves, and claims nothing it cannot keep",
          "[ops]") {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %x: i64[4]
  input %c: bool[4]
  input %n: i32[4]
  input %k: i64[4]
  input %s: f32[4,6]
  const %pos: i64[4] = [0, 1, 2, 3]
  const %zero: i64[] = [0]
  const %five: i64[] = [5]
  const %seven: i64[] = [7]
  const %shape: i64[2] = [2, 2]
  const %two: i64[1] = [2]
  %clip = Clip(%x, %zero, %five)
  %low = Clip(%x, %zero)
  %sub = Sub(%pos, %clip)
  %sel = Where(%c, %clip, %seven)
  %mod = Mod(%x, %seven)
  %max = Max(%clip, %seven)
  %view = Reshape(%sub, %shape)
  %wide = Cast(%clip) {to = 6}
  %narrow = Cast(%x) {to = 6}
  %plus = Add(%n, %n)
  %check = StitchIndexCheck(%k) {min = -3, max = 2, node = "g", op = "Gather", message = "{value}"}
  %open = Add(%x, %pos)
  %top, %picked = TopK(%s, %two) {axis = 1}
  %arg = ArgMax(%s) {axis = 0}
  %least = ReduceMin(%picked)
  const %mask: i64[] = [255]
  const %unit: i64[] = [256]
  const %lows: i64[4] = [250, 251, 255, 252]
  %high = Mul(%clip, %unit)
  %keys = Add(%lows, %high)
  %best = ReduceMax(%keys)
  %bits = BitwiseAnd(%best, %mask)
  %place = Sub(%mask, %bits)
  %pairs = Max(%keys, %best)
  %pair_bits = BitwiseAnd(%pairs, %mask)
  %pair_place = Sub(%mask, %pair_bits)
  %twice = Add(%keys, %keys)
  %carried = BitwiseAnd(%twice, %mask)
  %under = BitwiseAnd(%x, %clip)
  %both = BitwiseAnd(%x, %k)
  output %sub
  output %sel
  output %mod
  output %max
  output %view
  output %wide
  output %narrow
  output %plus
  output %check
  output %open
  output %low
  output %picked
  output %arg
  output %least
  output %place
  output %pair_place
  output %carried
  output %under
  output %both
})");
  test::run_frontend_or_die(*g);
  auto range = [&](const char* name) { return ops::int_range(g->find_value(name)); };
  auto is = [&](const char* name, int64_t lo, int64_t hi) {
    INFO(name);
    const auto r = range(name);
    REQUIRE(r);
    CHECK(r->min == lo);
    CHECK(r->max == hi);
  };
  is("pos", 0, 3);
  is("clip", 0, 5);
  is("sub", -5, 3);
  is("sel", 0, 7);
  is("mod", 0, 6);
  is("max", 7, 7);
  is("view", -5, 3);
  is("wide", 0, 5);
  // An int64 narrowed to int32 wraps into the type's bounds; an int32 sum that may overflow has
  // none (a kernel computes it in 64 bits).
  is("narrow", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  CHECK_FALSE(range("plus"));
  is("check", -3, 2);  // a kernel goes on with the nearest bound
  is("low", 0, kMax64);
  is("picked", 0, 5);  // positions along the axis picked from
  is("arg", 0, 3);
  is("least", 0, 5);
  // A key's low bits (fusion/order_keys.h): a multiple of 2^8 plus [250, 255], the largest of them
  // masked; with a carry out of the low bits, only the mask bounds them.
  is("place", 0, 5);
  is("pair_place", 0, 5);  // a Max of keys is one of them (short rows' maxima)
  is("carried", 0, 255);
  is("under", 0, 5);  // a non-negative operand bounds it
  CHECK_FALSE(range("both"));
  CHECK_FALSE(range("x"));     // an int64 input: anything
  CHECK_FALSE(range("open"));  // x + [0, 3] may overflow
  SECTION("every claimed bound holds on the reference at the inputs' extremes") {
    for (int64_t big : {kMin64, int64_t{-8}, int64_t{0}, int64_t{6}, kMax64 - 3}) {
      const TensorMap feed{{"x", Tensor::from_i64(DType::kI64, {4}, {big, -1, 3, 100})},
                           {"c", Tensor::from_i64(DType::kBool, {4}, {1, 0, 1, 0})},
                           {"n", Tensor::from_i64(DType::kI32, {4}, {2147483647, -2147483647 - 1, 7, -1})},
                           {"k", Tensor::from_i64(DType::kI64, {4}, {-3, 2, 0, 1})},
                           {"s", test::random_tensor(DType::kF32, {4, 6}, 7)}};
      auto out = run_reference(*g, feed);
      REQUIRE(out.is_ok());
      for (const Value* v : g->outputs) {
        const auto r = ops::int_range(v);
        if (!r) continue;
        for (int64_t e : out->at(v->name).to_i64()) {
          INFO(v->name << " holds " << e);
          CHECK(e >= r->min);
          CHECK(e <= r->max);
        }
      }
    }
  }
}

TEST_CASE("int_range bounds a value many paths reach once, not once a path", "[ops]") {
  // 30 doublings, each Add reading its input twice: 2^30 paths to the Clip, one bound each value.
  std::string text = R"(graph "g" opset 18 {
  input %x: i32[4]
  const %zero: i32[] = [0]
  const %one: i32[] = [1]
  %a0 = Clip(%x, %zero, %one)
)";
  for (int i = 1; i <= 30; ++i) text += fmt::format("  %a{} = Add(%a{}, %a{})\n", i, i - 1, i - 1);
  text += "  output %a30\n}";
  auto g = parse_or_die(text);
  test::run_frontend_or_die(*g);
  const auto r = ops::int_range(g->find_value("a30"));
  REQUIRE(r);
  CHECK(r->min == 0);
  CHECK(r->max == int64_t{1} << 30);
}

}  // namespace
}  // namespace stitch
