// Integers at the edges of their types, on emu and the reference: -2^63 by -1, uint64 past
// 2^63 - 1, values past 2^53 that a double cannot hold (the reference computed several ops through
// doubles; a few kernels wrote constants or sums through them), wrapping sums, products and
// powers, and every integer type's element-wise ops at the ends of its range. Most cases are
// checked against values worked out by hand; the last compares the kernels with the reference.
#include <limits>
#include <map>

#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// Each output named in `want`, on emu (planned by beam search; with `alone`, also one kernel a
// node) and on the reference, holds exactly its values.
void check_exact(const Graph& g, const TensorMap& feed, const std::map<std::string, Tensor>& want,
                 bool alone = false) {
  auto ref = run_reference(g, feed);
  REQUIRE(ref.is_ok());
  for (const auto& [name, values] : want) {
    INFO(name);
    CHECK(compare_tensors(ref->at(name), values, kExact.rtol, kExact.atol).ok);
  }
  for (const bool planned : {true, false}) {
    if (!planned && !alone) continue;
    INFO((planned ? "planned" : "one kernel a node"));
    const TensorMap got = planned ? planned_emu_run(g, feed) : emu_run(g, nullptr, feed);
    for (const auto& [name, values] : want) {
      INFO(name);
      CHECK(compare_tensors(got.at(name), values, kExact.rtol, kExact.atol).ok);
    }
  }
}

}  // namespace

// Integer Div and Mod at their edges: -2^63 by -1 (the wrapped -a and 0; the emulator's CPU
// trapped on both, and the reference on the remainder), and uint64 values past 2^63 - 1 (the
// reference divided, compared and clipped them as negative int64s). Against values worked out by
// hand, on emu and on the reference.
TEST_CASE("integer Div, Mod, Min, Less and Clip by -1 and past 2^63 on emu and the reference", "[emu]") {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %a: i64[6]
  input %b: i64[6]
  input %p: u64[4]
  input %q: u64[4]
  input %five: u64[]
  input %top: u64[]
  %div = Div(%a, %b) @"div"
  %mod = Mod(%a, %b) @"mod"
  %fmod = Mod(%a, %b) {fmod = 1} @"fmod"
  %udiv = Div(%p, %q) @"udiv"
  %umod = Mod(%p, %q) @"umod"
  %umin = Min(%p, %q) @"umin"
  %ult = Less(%p, %q) @"ult"
  %uclip = Clip(%p, %five, %top) @"uclip"
  output %div
  output %mod
  output %fmod
  output %udiv
  output %umod
  output %umin
  output %ult
  output %uclip
})");
  run_frontend_or_die(*g);
  const int64_t small = std::numeric_limits<int64_t>::min();
  const uint64_t top = uint64_t{1} << 63;
  auto u = [](std::vector<uint64_t> v) {
    std::vector<int64_t> bits;
    for (uint64_t x : v) bits.push_back(static_cast<int64_t>(x));
    return Tensor::from_i64(DType::kU64, {static_cast<int64_t>(v.size())}, bits);
  };
  TensorMap feed;
  feed["a"] = Tensor::from_i64(DType::kI64, {6}, {7, -7, small, small, 9, -9});
  feed["b"] = Tensor::from_i64(DType::kI64, {6}, {3, 2, -1, 1, -1, 4});
  feed["p"] = u({top + 4, top + 5, 10, top});
  feed["q"] = u({2, top + 1, 7, 3});
  feed["five"] = Tensor::from_i64(DType::kU64, {}, {5});
  feed["top"] = Tensor::from_i64(DType::kU64, {}, {static_cast<int64_t>(top + 1)});
  const std::map<std::string, Tensor> want{
      {"div", Tensor::from_i64(DType::kI64, {6}, {2, -3, small, small, -9, -2})},
      {"mod", Tensor::from_i64(DType::kI64, {6}, {1, 1, 0, 0, 0, 3})},
      {"fmod", Tensor::from_i64(DType::kI64, {6}, {1, -1, 0, 0, 0, -1})},
      {"udiv", u({(top + 4) / 2, 1, 1, top / 3})},
      {"umod", u({0, 4, 3, top % 3})},
      {"umin", u({2, top + 1, 7, 3})},
      {"ult", Tensor::from_i64(DType::kBool, {4}, {0, 0, 0, 0})},
      {"uclip", u({top + 1, top + 1, 10, top})},
  };
  check_exact(*g, feed, want);
}

// ArgMax, ArgMin and TopK of integers past 2^53, which a double cannot tell apart (the reference
// compared them as doubles and took the first of a "tie"), and of uint64 values past 2^63 - 1,
// which a ScatterElements' max compares as unsigned too; CumSum of int64 wraps; and an int64 or
// uint64 Cast to float32 rounds once (through a double, 2^53 + 2^29 + 1 became a tie, rounded down). Against
// values worked out by hand, on emu and on the reference.
TEST_CASE("integer ArgMax, ArgMin, TopK, CumSum, scatter max and Cast past 2^53 on emu and the reference",
          "[emu]") {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %a: i64[2,3]
  input %p: u64[4]
  input %w: i64[3]
  input %u: u64[4]
  input %c: i64[2]
  input %cu: u64[1]
  const %slots: i64[4] = [0, 1, 2, 3]
  const %two: i64[1] = [2]
  const %axis: i64[] = [0]
  %amax = ArgMax(%a) {axis = 1, keepdims = 0} @"amax"
  %amin = ArgMin(%a) {axis = 1, keepdims = 0} @"amin"
  %top, %at = TopK(%a, %two) {axis = 1} @"top"
  %low, %low_at = TopK(%a, %two) {axis = 1, largest = 0} @"low"
  %umax = ArgMax(%p) {axis = 0, keepdims = 0} @"umax"
  %sum = CumSum(%w, %axis) @"sum"
  %umaxed = ScatterElements(%p, %slots, %u) {axis = 0, reduction = "max"} @"umaxed"
  %cf = Cast(%c) {to = 1} @"cf"
  %cuf = Cast(%cu) {to = 1} @"cuf"
  output %amax
  output %amin
  output %top
  output %at
  output %low
  output %low_at
  output %umax
  output %sum
  output %umaxed
  output %cf
  output %cuf
})");
  run_frontend_or_die(*g);
  const int64_t big = int64_t{1} << 60, most = std::numeric_limits<int64_t>::max(),
                least = std::numeric_limits<int64_t>::min();
  const uint64_t top = uint64_t{1} << 63;
  TensorMap feed;
  feed["a"] = Tensor::from_i64(DType::kI64, {2, 3}, {big, big + 1, big - 1, -big, -big - 1, most});
  feed["p"] = Tensor::from_i64(DType::kU64, {4},
                               {5, static_cast<int64_t>(top + 1), static_cast<int64_t>(top + 2), 7});
  feed["w"] = Tensor::from_i64(DType::kI64, {3}, {most, 1, 2});
  const int64_t tie = (int64_t{1} << 53) + (int64_t{1} << 29) + 1;  // a double rounds it to a float's tie
  feed["c"] = Tensor::from_i64(DType::kI64, {2}, {tie, -tie});
  feed["cu"] = Tensor::from_i64(DType::kU64, {1}, {static_cast<int64_t>(top + (uint64_t{1} << 39) + 1)});
  feed["u"] =
      Tensor::from_i64(DType::kU64, {4}, {static_cast<int64_t>(top), 1, static_cast<int64_t>(top + 3), 6});
  const double up = 9007200328482816.0;  // 2^53 + 2^30: rounded once, up
  const std::map<std::string, Tensor> want{
      {"cf", Tensor::from_f64(DType::kF32, {2}, {up, -up})},
      {"cuf", Tensor::from_f64(DType::kF32, {1}, {9223373136366403584.0})},  // 2^63 + 2^40
      {"amax", Tensor::from_i64(DType::kI64, {2}, {1, 2})},
      {"amin", Tensor::from_i64(DType::kI64, {2}, {2, 1})},
      {"top", Tensor::from_i64(DType::kI64, {2, 2}, {big + 1, big, most, -big})},
      {"at", Tensor::from_i64(DType::kI64, {2, 2}, {1, 0, 2, 0})},
      {"low", Tensor::from_i64(DType::kI64, {2, 2}, {big - 1, big, -big - 1, -big})},
      {"low_at", Tensor::from_i64(DType::kI64, {2, 2}, {2, 0, 1, 0})},
      {"umax", Tensor::from_i64(DType::kI64, {}, {2})},
      {"sum", Tensor::from_i64(DType::kI64, {3}, {most, least, least + 2})},  // wrapped
      {"umaxed", Tensor::from_i64(DType::kU64, {4},
                                  {static_cast<int64_t>(top), static_cast<int64_t>(top + 1),
                                   static_cast<int64_t>(top + 3), 7})},
  };
  check_exact(*g, feed, want);
}

// Integer reductions past 2^53, alone (a reduction kernel) and between element-wise ops (one
// stitched row kernel where the planner takes them): sums of elements, magnitudes and squares wrap,
// a mean divides the exact sum, a log or square root is taken of the exact sum. The reference
// summed them through doubles: row 2's sum, 2^60 + 1 + 1 - 2^60 - 1, was 0 there, its log -inf.
TEST_CASE("integer reductions past 2^53 wrap and divide exactly on emu and the reference", "[reduce][emu]") {
  const int64_t big = (int64_t{1} << 60) + 1, twice = (int64_t{1} << 61) + 3,
                squares = (int64_t{1} << 62) + 3;
  const std::map<std::string, std::vector<int64_t>> want{
      {"ReduceSum", {twice, 12, 1}},
      {"ReduceL1", {twice, 12, twice}},
      {"ReduceSumSquare", {squares, 50, squares}},
      {"ReduceMean", {768614336404564651, 4, 0}},
      {"ReduceL2", {2147483648, 7, 2147483648}},
      {"ReduceLogSum", {42, 2, 0}},
  };
  for (const auto& [op, values] : want)
    for (const bool stitched : {false, true}) {
      INFO(op << (stitched ? " stitched" : " alone"));
      auto g = parse_or_die(fmt::format(R"(graph "g" opset 18 {{
  input %x: i64[3,3]
  input %zero: i64[3,3]
  const %axes: i64[1] = [1]
  %s = Add(%x, %zero) @"before"
  %y = {0}({1}, %axes) {{keepdims = 1}} @"reduce"
  %z = Add(%y, %zero) @"after"
  output {2}
}})",
                                        op, stitched ? "%s" : "%x", stitched ? "%z" : "%y"));
      run_frontend_or_die(*g);
      const TensorMap feed{{"x", Tensor::from_i64(DType::kI64, {3, 3}, {big, 1, big, 3, 4, 5, big, 1, -big})},
                           {"zero", Tensor(DType::kI64, {3, 3})}};
      const Tensor expected = stitched
                                  ? Tensor::from_i64(DType::kI64, {3, 3},
                                                     {values[0], values[0], values[0], values[1], values[1],
                                                      values[1], values[2], values[2], values[2]})
                                  : Tensor::from_i64(DType::kI64, {3, 1}, values);
      check_exact(*g, feed, {{stitched ? "z" : "y", expected}});
    }
}

// int64 and uint64 constants past 2^53 in kernels, alone and fused: a Pad's fill was written as a
// literal through a double (2^60 + 1 became 2^60); the others read it exactly. Against values
// worked out by hand, on emu and the reference.
TEST_CASE("integer constants past 2^53 reach kernels exactly, a Pad's fill too", "[emu]") {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %x: i64[2,3]
  input %c: bool[2,3]
  input %u: u64[3]
  const %big: i64[] = [1152921504606846977]
  const %lo: i64[] = [-1152921504606846977]
  const %pads: i64[4] = [0, 1, 0, 0]
  const %umax: u64[] = [18446744073709551615]
  %a = Add(%x, %big) @"add"
  %w = Where(%c, %big, %x) @"where"
  %k = Clip(%x, %lo, %big) @"clip"
  %p = Pad(%x, %pads, %big) @"pad"
  %m = Mul(%x, %big) @"mul"
  %ua = Add(%u, %umax) @"uadd"
  output %a
  output %w
  output %k
  output %p
  output %m
  output %ua
})");
  run_frontend_or_die(*g);
  const int64_t big = (int64_t{1} << 60) + 1;
  const TensorMap feed{{"x", Tensor::from_i64(DType::kI64, {2, 3}, {big, 1, -big, 3, big + 2, 5})},
                       {"c", Tensor::from_i64(DType::kBool, {2, 3}, {1, 0, 1, 0, 1, 0})},
                       {"u", Tensor::from_i64(DType::kU64, {3}, {1, 2, -5})}};
  const std::map<std::string, Tensor> want{
      {"a", Tensor::from_i64(DType::kI64, {2, 3}, {2 * big, big + 1, 0, big + 3, 2 * big + 2, big + 5})},
      {"w", Tensor::from_i64(DType::kI64, {2, 3}, {big, 1, big, 3, big, 5})},
      {"k", Tensor::from_i64(DType::kI64, {2, 3}, {big, 1, -big, 3, big, 5})},
      {"p", Tensor::from_i64(DType::kI64, {2, 4}, {big, big, 1, -big, big, 3, big + 2, 5})},
      {"m", Tensor::from_i64(DType::kI64, {2, 3},
                             {2305843009213693953, big, -2305843009213693953, 3458764513820540931,
                              4611686018427387907, 5764607523034234885})},  // wrapped
      {"ua", Tensor::from_i64(DType::kU64, {3}, {0, 1, -6})},               // wrapped: 2^64 - 6
  };
  check_exact(*g, feed, want, /*alone=*/true);
}

// Integer Pow to an integer power is exact and wraps (pow through doubles made 3^39 11 short, and a
// power past int64 undefined); to a negative power, 1 / a^b truncated. To a float power it goes
// through double, stored as a float is. Against values worked out by hand, on emu (one kernel a
// node, and planned) and the reference.
TEST_CASE("integer Pow is exact, wraps, and truncates negative powers on emu and the reference", "[emu]") {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %x: i64[8]
  input %e: i64[8]
  input %f: f32[8]
  input %n: i32[8]
  %p = Pow(%x, %e) @"pow"
  %q = Pow(%x, %f) @"pow_float"
  %r = Pow(%n, %e) @"pow_narrow"
  output %p
  output %q
  output %r
})");
  run_frontend_or_die(*g);
  const int64_t p39 = 4052555153018976267;  // 3^39
  const TensorMap feed{{"x", Tensor::from_i64(DType::kI64, {8}, {3, -3, 7, 2, 3, 1, -1, 2})},
                       {"e", Tensor::from_i64(DType::kI64, {8}, {39, 39, 22, 62, 41, -3, -3, -1})},
                       {"f", Tensor::from_f64(DType::kF32, {8}, {2, 0.5, 3, 10, 1, 2, 3, 40})},
                       {"n", Tensor::from_i64(DType::kI32, {8}, {3, -3, 7, 2, 3, 1, -1, 2})}};
  const std::map<std::string, Tensor> want{
      {"p",
       Tensor::from_i64(DType::kI64, {8},
                        {p39, -p39, 3909821048582988049, int64_t{1} << 62, -420491770248316829, 1, -1, 0})},
      {"q", Tensor::from_i64(DType::kI64, {8}, {9, 0, 343, 1024, 3, 1, -1, int64_t{1} << 40})},  // NaN as 0
      // The low 32 bits of the same powers.
      {"r", Tensor::from_i64(DType::kI32, {8},
                             {static_cast<int32_t>(p39), static_cast<int32_t>(-p39),
                              static_cast<int32_t>(3909821048582988049), 0,
                              static_cast<int32_t>(-420491770248316829), 1, -1, 0})},
  };
  check_exact(*g, feed, want, /*alone=*/true);
}

// Every integer type's element-wise ops at the ends of its range (the type's minimum and maximum,
// 0, 1, -1...) give the same bits on emu, one kernel a node and planned, as
// the reference, whose integer arithmetic the exact cases above and ONNX's node tests pin down.
// Abs and Sign take unsigned types too (ONNX's types for them are every numeric type), and
// BitwiseNot every integer type.
TEST_CASE("integer element-wise ops at the ends of every integer type agree on emu and the reference",
          "[emu]") {
  const std::vector<std::string> binary{"Add",        "Sub",        "Mul",   "Div",  "Mod",
                                        "Min",        "Max",        "Equal", "Less", "GreaterOrEqual",
                                        "BitwiseAnd", "BitwiseXor", "Pow"};
  for (const std::string t : {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}) {
    INFO(t);
    const DType dt = *dtype_from_name(t);
    const bool u = is_unsigned_int(dt);
    const int bits = dtype_size(dt) * 8;
    // The type's largest and smallest values, as int64 bits.
    const int64_t most = u ? (bits == 64 ? -1 : (int64_t{1} << bits) - 1)
                           : static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
    const int64_t least = u ? 0 : static_cast<int64_t>(~((uint64_t{1} << (bits - 1)) - 1));
    const std::vector<int64_t> a{most, least, 1, u ? 2 : -1, 7, most, least, least, 3, most - 1, 5, 100};
    const std::vector<int64_t> b{1, u ? 3 : -1, most, u ? 2 : least, 2, 2, 1, u ? 5 : -1, 3, most, 62, 7};
    std::string text = fmt::format("graph \"g\" opset 18 {{\n  input %a: {0}[12]\n  input %b: {0}[12]\n", t);
    std::vector<std::string> outs;
    for (const std::string& op : binary) {
      text += fmt::format("  %{0} = {0}(%a, %b)\n", op);
      outs.push_back(op);
    }
    text += "  %Fmod = Mod(%a, %b) {fmod = 1}\n  %Abs = Abs(%a)\n  %Sign = Sign(%a)\n  %Not = BitwiseNot(%a)\n";
    outs.insert(outs.end(), {"Fmod", "Abs", "Sign", "Not"});
    if (!u) {
      text += "  %Neg = Neg(%a)\n";
      outs.push_back("Neg");
    }
    for (const std::string& o : outs) text += fmt::format("  output %{}\n", o);
    auto g = parse_or_die(text + "}\n");
    run_frontend_or_die(*g);
    const TensorMap feed{{"a", Tensor::from_i64(dt, {12}, a)}, {"b", Tensor::from_i64(dt, {12}, b)}};
    auto ref = run_reference(*g, feed);
    REQUIRE(ref.is_ok());
    for (const bool planned : {false, true}) {
      INFO((planned ? "planned" : "one kernel a node"));
      const TensorMap got = planned ? planned_emu_run(*g, feed) : emu_run(*g, nullptr, feed);
      for (const std::string& o : outs) {
        INFO(o);
        CHECK(got.at(o).to_i64() == ref->at(o).to_i64());
      }
    }
  }
}
