// ops::checked_index: how a rewrite keeps refusing the indices the node it replaces refuses. An
// operand whose bounds prove it inside takes no check, a constant one outside is refused at once,
// and a check with the same bounds and message on the same value is shared (one for the position
// ids of every layer's rotary embedding). IndexBounds' refusals are the reference's messages.
#include <algorithm>
#include <limits>

#include "fusion_test_util.h"
#include "ops/index_check.h"
#include "passes/pass.h"
#include "reference/interpreter.h"

namespace stitch {
namespace {

using test::count_op;
using test::parse_or_die;

Node& node(Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (n->name == name) return *n;
  FAIL("no node " << name);
  return *g.nodes().front();
}

std::unique_ptr<Graph> gathers() {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %d: f32[6,2]
  input %i: i64[3]
  const %lo: i64[] = [0]
  const %hi: i64[] = [5]
  %clipped = Clip(%i, %lo, %hi) @"clip"
  %a = Gather(%d, %i) @"first"
  %b = Gather(%d, %i) @"second"
  %c = Gather(%d, %clipped) @"third"
  output %a
  output %b
  output %c
})");
  test::run_frontend_or_die(*g);
  return g;
}

TEST_CASE("IndexBounds admit their range, 0 aside when nonzero, and refuse naming the node", "[ops]") {
  const ops::IndexBounds b{-2, 3, "index {value} is outside [-2, 3]"};
  CHECK(b.admits(-2));
  CHECK(b.admits(3));
  CHECK_FALSE(b.admits(4));
  CHECK_FALSE(b.admits(-3));
  CHECK(b.first_refused(std::vector<int64_t>{0, 1, 3}) == std::nullopt);
  CHECK(b.first_refused(std::vector<int64_t>{0, 9, -5}) == 9);
  const ops::IndexBounds nonzero{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                                 "{value} divides", true};
  CHECK(nonzero.admits(std::numeric_limits<int64_t>::min()));
  CHECK_FALSE(nonzero.admits(0));
  auto g = gathers();
  const Status s = ops::refuse_outside(node(*g, "first"), b, std::vector<int64_t>{1, -7});
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message() == "node 'first' (Gather): index -7 is outside [-2, 3]");
  CHECK(ops::refuse_outside(node(*g, "first"), b, std::vector<int64_t>{1, -2}).is_ok());
}

TEST_CASE("checked_index checks only what its bounds leave open, once for one value, bounds and message",
          "[ops]") {
  auto g = gathers();
  const ops::IndexBounds axis{-6, 5, "index {value} is outside [-6, 6)"};
  Value* i = g->find_value("i");
  Value* clipped = g->find_value("clipped");
  REQUIRE(i);
  REQUIRE(clipped);

  // Nothing is known of an input: a check, named after the node it stands for.
  auto first = ops::checked_index(*g, node(*g, "first"), i, axis, "index_checked");
  REQUIRE(first.is_ok());
  REQUIRE(*first != i);
  const Node& check = *(*first)->producer;
  CHECK(check.op_type == ops::kIndexCheck);
  CHECK(check.name == "first/index_checked");
  CHECK(ops::checked_node(check) == std::pair<std::string, std::string>{"first", "Gather"});
  CHECK((*first)->dtype == DType::kI64);
  CHECK(*(*first)->dims == Dims{3});

  // Another Gather reading the same value under the same bounds shares that check.
  auto second = ops::checked_index(*g, node(*g, "second"), i, axis, "index_checked");
  REQUIRE(second.is_ok());
  CHECK(*second == *first);
  CHECK(count_op(*g, ops::kIndexCheck) == 1);

  // Other bounds, or another message, take their own.
  auto narrower = ops::checked_index(*g, node(*g, "second"), i, {0, 4, "index {value} is outside [0, 5)"},
                                     "index_checked");
  REQUIRE(narrower.is_ok());
  CHECK(*narrower != *first);
  CHECK(count_op(*g, ops::kIndexCheck) == 2);

  // A Clip into the bounds proves every element inside; a nonzero check still needs one, as 0 is in.
  auto third = ops::checked_index(*g, node(*g, "third"), clipped, axis, "index_checked");
  REQUIRE(third.is_ok());
  CHECK(*third == clipped);
  ops::IndexBounds nonzero = axis;
  nonzero.nonzero = true;
  auto divisor = ops::checked_index(*g, node(*g, "third"), clipped, nonzero, "divisor_checked");
  REQUIRE(divisor.is_ok());
  CHECK(*divisor != clipped);
  CHECK(ops::index_check_bounds(*(*divisor)->producer).nonzero);

  // A constant is checked now: inside, it is read as it is; outside, the node is refused.
  auto constant = [&](const std::string& name, std::vector<int64_t> v) {
    Value* c = g->add_value(name);
    c->constant = Tensor::from_i64(DType::kI64, {3}, std::move(v));
    c->dtype = DType::kI64;
    c->dims = Dims{3};
    return c;
  };
  Value* inside = constant("inside", {0, 5, 2});
  auto ok = ops::checked_index(*g, node(*g, "first"), inside, axis, "index_checked");
  REQUIRE(ok.is_ok());
  CHECK(*ok == inside);
  auto bad = ops::checked_index(*g, node(*g, "first"), constant("outside", {0, 6, 2}),
                                {0, 5, "index {value} is past 5"}, "index_checked");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message() == "node 'first' (Gather): index 6 is past 5");
  CHECK(count_op(*g, ops::kIndexCheck) == 3);
}

TEST_CASE("a constant that a rewritten node would refuse is refused at compile time, naming it",
          "[passes][faults]") {
  // A run-time dividend by a constant divisor holding 0, and constant position ids past the caches:
  // every run would fail, so the front end says so, naming the node.
  auto refusal = [](const std::string& text) {
    auto g = parse_or_die(text);
    PassContext ctx;
    const Status s = run_frontend(*g, ctx);
    return s.is_ok() ? std::string() : s.message();
  };
  CHECK_THAT(refusal(R"(graph "g" opset 18 {
  input %a: i32[3]
  const %b: i32[3] = [2, 0, 5]
  %q = Div(%a, %b) @"div"
  output %q
})"),
             Catch::Contains("node 'div' (Div): an element of its divisor 'b' is 0 (integer division by zero)"));
  CHECK_THAT(refusal(R"(graph "g" opset 23 {
  input %x: f32[1,2,4]
  input %c: f32[3,2]
  input %s: f32[3,2]
  const %p: i64[1,2] = [0, 3]
  %y = RotaryEmbedding(%x, %c, %s, %p) {num_heads = 1} @"rope"
  output %y
})"),
             Catch::Contains("node 'rope' (RotaryEmbedding): position id 3 is outside the caches' 3 positions"));
  // Inside, they take no check at all.
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %a: i32[3]
  const %b: i32[3] = [2, -1, 5]
  %q = Div(%a, %b) @"div"
  output %q
})");
  test::run_frontend_or_die(*g);
  CHECK(count_op(*g, ops::kIndexCheck) == 0);
}

TEST_CASE("the rotary embeddings of every layer share one check of their position ids", "[passes][faults]") {
  // Two layers' RotaryEmbeddings (Q and K of each) read one position_ids input into caches of 7
  // positions: one check refuses an id outside for all four, naming the first; the one of 9
  // positions has its own.
  auto g = parse_or_die(R"(graph "rope" opset 23 {
  input %q: f32[1,4,12]
  input %k: f32[1,4,12]
  input %c: f32[7,2]
  input %s: f32[7,2]
  input %c2: f32[9,2]
  input %s2: f32[9,2]
  input %p: i64[1,4]
  %q0 = RotaryEmbedding(%q, %c, %s, %p) {num_heads = 3} @"layer0_q"
  %k0 = RotaryEmbedding(%k, %c, %s, %p) {num_heads = 3} @"layer0_k"
  %q1 = RotaryEmbedding(%q0, %c, %s, %p) {num_heads = 3} @"layer1_q"
  %k1 = RotaryEmbedding(%k0, %c, %s, %p) {num_heads = 3} @"layer1_k"
  %long = RotaryEmbedding(%k1, %c2, %s2, %p) {num_heads = 3} @"long"
  %y = Add(%q1, %long)
  output %y
})");
  test::run_frontend_or_die(*g);
  REQUIRE(count_op(*g, "RotaryEmbedding") == 0);
  std::vector<std::string> checked;
  for (const auto& n : g->nodes())
    if (n->op_type == ops::kIndexCheck) checked.push_back(ops::checked_node(*n).first);
  std::sort(checked.begin(), checked.end());
  CHECK(checked == std::vector<std::string>{"layer0_q", "long"});
  TensorMap feed{{"q", test::random_tensor(DType::kF32, {1, 4, 12}, 1)},
                 {"k", test::random_tensor(DType::kF32, {1, 4, 12}, 2)},
                 {"c", test::random_tensor(DType::kF32, {7, 2}, 3)},
                 {"s", test::random_tensor(DType::kF32, {7, 2}, 4)},
                 {"c2", test::random_tensor(DType::kF32, {9, 2}, 5)},
                 {"s2", test::random_tensor(DType::kF32, {9, 2}, 6)},
                 {"p", Tensor::from_i64(DType::kI64, {1, 4}, {0, 3, 6, 2})}};
  REQUIRE(run_reference(*g, feed).is_ok());
  feed["p"] = Tensor::from_i64(DType::kI64, {1, 4}, {0, 3, 7, 2});
  const auto refused = run_reference(*g, feed);
  REQUIRE_FALSE(refused.is_ok());
  CHECK_THAT(
      refused.status().message(),
      Catch::Contains("node 'layer0_q' (RotaryEmbedding): position id 7 is outside the caches' 7 positions"));
}

}  // namespace
}  // namespace stitch
