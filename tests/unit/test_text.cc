#include <limits>

#include "ir/op_table.h"
#include "ir/verifier.h"
#include "test_util.h"

using namespace stitch;

static const char* kGraph = R"(graph "g" opset 17 {
  input %x: f32[batch,4]
  input %"odd name": i64[2]
  input %mask: i64[batch,"past + 1"]
  const %w: f32[4] = [1.0, -2.5, inf, nan]
  %y: f32[batch,4] = Add(%x, %w) @"add"
  %a, _ = Dropout(%y) {seed = 3} @"drop"
  %z = Transpose(%a) {perm = ints[1, 0]} @"t"
  %c = ConstantOfShape(%"odd name") {value = tensor<f32[1]>[0.5]} @"cos"
  output %z
  output %c
}
)";

TEST_CASE("IR text prints what it parses") {
  auto g = test::parse_or_die(kGraph);
  std::string once = print_graph(*g);
  auto g2 = test::parse_or_die(once);
  CHECK(print_graph(*g2) == once);
  CHECK(g->nodes().size() == 4);
  CHECK(g->find_value("odd name") != nullptr);
  CHECK(g->find_value("mask")->dim_params == std::vector<std::string>{"batch", "past + 1"});
  CHECK(once.find("i64[batch,\"past + 1\"]") != std::string::npos);
  CHECK(g->nodes()[2]->attr_ints("perm") == std::vector<int64_t>{1, 0});
  CHECK(g->nodes()[1]->attr_int("seed", 0) == 3);
  const Tensor& w = *g->find_value("w")->constant;
  CHECK(std::isinf(w.get_f64(2)));
  CHECK(std::isnan(w.get_f64(3)));
  CHECK(verify_graph(*g).is_ok());
}

TEST_CASE("IR text errors give line and column") {
  auto bad = parse_graph("graph \"g\" opset 17 {\n  input %x: f99[2]\n}\n");
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("2:") && Catch::Contains("unknown element type 'f99'"));

  auto undefined = parse_graph("graph \"g\" opset 17 {\n  %y = Relu(%nope)\n  output %y\n}\n");
  REQUIRE_FALSE(undefined.is_ok());
  CHECK_THAT(undefined.status().message(), Catch::Contains("%nope"));

  auto twice = parse_graph("graph \"g\" opset 17 {\n input %x: f32[1]\n %x = Relu(%x)\n output %x\n}\n");
  REQUIRE_FALSE(twice.is_ok());
  CHECK_THAT(twice.status().message(), Catch::Contains("defined twice"));
}

TEST_CASE("IR text reads integers exactly, uint64 past 2^63 too, and refuses one out of range") {
  // The printer writes uint64 values as unsigned; the parser saturated those past 2^63 - 1.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  const %u: u64[2] = [18446744073709551615, 9223372036854775808]
  const %i: i64[3] = [-9223372036854775808, 9223372036854775807, 9007199254740993]
  %y = Add(%u, %u)
  %z = Add(%i, %i)
  output %y
  output %z
})");
  const Tensor& u = *g->find_value("u")->constant;
  CHECK(static_cast<uint64_t>(u.get_i64(0)) == 18446744073709551615ULL);
  CHECK(static_cast<uint64_t>(u.get_i64(1)) == 9223372036854775808ULL);
  CHECK(g->find_value("i")->constant->to_i64() == std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                                                       std::numeric_limits<int64_t>::max(),
                                                                       9007199254740993});
  auto again = test::parse_or_die(print_graph(*g));
  CHECK(static_cast<uint64_t>(again->find_value("u")->constant->get_i64(0)) == 18446744073709551615ULL);
  auto bad =
      parse_graph("graph \"g\" opset 17 {\n  const %u: u64[1] = [18446744073709551616]\n  output %u\n}\n");
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(),
             Catch::Contains("integer '18446744073709551616' is outside [-2^63, 2^64 - 1]"));
}

TEST_CASE("elided constants are refused on parse") {
  auto g = test::parse_or_die(kGraph);
  PrintOptions opts;
  opts.max_constant_elements = 2;
  std::string text = print_graph(*g, opts);
  CHECK_THAT(text, Catch::Contains("<4 elements>"));
  auto back = parse_graph(text);
  REQUIRE_FALSE(back.is_ok());
  CHECK_THAT(back.status().message(), Catch::Contains("elided"));
}

static std::unique_ptr<Node> make_node(const char* op, Value* in, Value* out) {
  auto n = std::make_unique<Node>();
  n->op_type = n->name = op;
  n->opset = 17;
  n->def = find_op("", op, 17);
  n->inputs = {in};
  n->outputs = {out};
  return n;
}

TEST_CASE("verifier catches a use before definition, topo_sort repairs it") {
  Graph g;
  g.opset = 17;
  Value* x = g.add_value("x");
  x->dtype = DType::kF32;
  x->dims = Dims{2};
  g.inputs.push_back(x);
  Value* a = g.add_value("a");
  Value* b = g.add_value("b");
  g.add_node(make_node("Neg", a, b));  // reads a before Relu defines it
  g.add_node(make_node("Relu", x, a));
  g.outputs.push_back(b);
  Status st = verify_graph(g);
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.code() == Code::kInternal);
  CHECK_THAT(st.message(), Catch::Contains("reads 'a' before it is defined"));
  REQUIRE(g.topo_sort().is_ok());
  CHECK(verify_graph(g).is_ok());
  CHECK(g.nodes()[0]->op_type == "Relu");
}

TEST_CASE("topo_sort names the nodes of a cycle") {
  Graph g;
  g.opset = 17;
  Value* a = g.add_value("a");
  Value* b = g.add_value("b");
  g.add_node(make_node("Neg", a, b));
  g.add_node(make_node("Relu", b, a));
  g.outputs.push_back(b);
  Status st = g.topo_sort();
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.code() == Code::kUser);
  CHECK_THAT(st.message(), Catch::Contains("cycle") && Catch::Contains("'Neg'") && Catch::Contains("'Relu'"));
}

TEST_CASE("verifier catches a node whose output type its op's rule does not give, as a pass might build it",
          "[verifier]") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2,3]
  %r: f32[2,3] = Relu(%x) @"relu"
  output %r
})");
  CHECK(verify_node_types(*g).is_ok());
  g->find_value("r")->dtype = DType::kF16;  // what a pass that typed the output by hand could do
  Status st = verify_node_types(*g);
  CHECK(st.code() == Code::kInternal);
  CHECK(st.message() == "IR verifier: node 'relu' (Relu): output 'r' is f16[2x3] but the op's rule gives f32[2x3]");
  CHECK(g->find_value("r")->dtype == DType::kF16);  // left as it was
  // Attention's product before the fix: probabilities of one type times V of another.
  auto mm = test::parse_or_die(R"(graph "g" opset 17 {
  input %p: f32[2,3]
  input %v: f16[3,4]
  %o: f32[2,4] = MatMul(%p, %v) @"output"
  output %o
})");
  CHECK(verify_node_types(*mm).message() ==
        "IR verifier: node 'output' (MatMul): the op's rule refuses it: node 'output' (MatMul): inputs must share one "
        "element type");
}
