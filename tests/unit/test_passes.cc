// Pass tests: IR text in, IR checked out, and the reference interpreter's
// results before and after the pipeline compared.
#include <fmt/format.h>

#include "ir/verifier.h"
#include "reference/compare.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;

// The chain PyTorch's exporter writes for x.view(x.size(0), x.size(1), 2, -1).
static const char* kShapeChain = R"(graph "chain" opset 17 {
  input %x: f32[batch,seq,8]
  const %zero: i64[] = [0]
  const %one: i64[] = [1]
  const %ax: i64[1] = [0]
  const %two: i64[1] = [2]
  const %neg: i64[1] = [-1]
  %s = Shape(%x) @"shape"
  %b = Gather(%s, %zero) {axis = 0} @"g0"
  %t = Gather(%s, %one) {axis = 0} @"g1"
  %bu = Unsqueeze(%b, %ax) @"u0"
  %tu = Unsqueeze(%t, %ax) @"u1"
  %shape = Concat(%bu, %tu, %two, %neg) {axis = 0} @"cat"
  %y = Reshape(%x, %shape) @"reshape"
  %z = Identity(%y) @"id"
  %w = Cast(%z) {to = 1} @"cast"
  %o = Relu(%w) @"relu"
  output %o
}
)";

TEST_CASE("shape chains fold away once the inputs are bound") {
  auto g = test::parse_or_die(kShapeChain);
  PassContext ctx;
  REQUIRE(parse_shape_binding("batch=2", ctx.bindings).is_ok());
  REQUIRE(parse_shape_binding("seq=3", ctx.bindings).is_ok());
  test::run_frontend_or_die(*g, ctx);
  // Shape/Gather/Unsqueeze/Concat fold; Identity and the same-type Cast go;
  // Reshape stays (it changes the shape) with a constant target.
  CHECK(g->nodes().size() == 2);
  CHECK(count_op(*g, "Reshape") == 1);
  CHECK(count_op(*g, "Relu") == 1);
  CHECK(g->find_value("o")->type_string() == "f32[2x3x2x4]");
  const Value* target = g->nodes()[0]->inputs[1];
  REQUIRE(target->constant);
  CHECK(target->constant->to_i64() == std::vector<int64_t>{2, 3, 2, -1});
  CHECK(ctx.log.size() >= 4);
}

TEST_CASE("the pipeline keeps the reference results") {
  auto before = test::parse_or_die(kShapeChain);
  auto after = test::parse_or_die(kShapeChain);
  PassContext ctx;
  REQUIRE(parse_shape_binding("x=2x3x8", ctx.bindings).is_ok());
  // The unbound graph cannot run; bind the raw copy without folding anything.
  PassContext bind_only;
  bind_only.bindings = ctx.bindings;
  REQUIRE(bind_shapes(*before, bind_only).is_ok());
  REQUIRE(infer_shapes(*before, bind_only).is_ok());
  test::run_frontend_or_die(*after, ctx);
  TensorMap in{{"x", test::random_tensor(DType::kF32, {2, 3, 8}, 7)}};
  auto a = run_reference(*before, in);
  auto b = run_reference(*after, in);
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  CHECK(compare_tensors(b->at("o"), a->at("o"), 0, 0).ok);
}

TEST_CASE("a no-op writing a graph output keeps the output's name") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2,3]
  %a = Relu(%x) @"relu"
  %y = Identity(%a) @"id"
  %z = Neg(%a) @"neg"
  output %y
  output %z
}
)");
  test::run_frontend_or_die(*g);
  CHECK(count_op(*g, "Identity") == 0);
  REQUIRE(g->outputs[0]->name == "y");
  CHECK(g->outputs[0]->producer->op_type == "Relu");
  CHECK(g->nodes().back()->op_type == "Neg");
  CHECK(g->nodes().back()->inputs[0]->name == "y");
}

TEST_CASE("an Identity from input to output stays") {
  auto g = test::parse_or_die(
      "graph \"g\" opset 17 {\n input %x: f32[2]\n %y = Identity(%x) @\"id\"\n output %y\n}\n");
  test::run_frontend_or_die(*g);
  CHECK(count_op(*g, "Identity") == 1);
}

TEST_CASE("dead code and unused constants are removed, inputs kept") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2]
  input %unused: f32[2]
  const %c: f32[2] = [1.0, 2.0]
  %dead = Add(%x, %c) @"dead"
  %y = Neg(%x) @"neg"
  output %y
}
)");
  test::run_frontend_or_die(*g);
  CHECK(g->nodes().size() == 1);
  CHECK(g->find_value("c") == nullptr);
  CHECK(g->inputs.size() == 2);
}

TEST_CASE("shape binding errors name the input and what to do") {
  const char* text = "graph \"g\" opset 17 {\n input %ids: i64[batch,seq]\n %y = Neg(%ids)\n output %y\n}\n";
  SECTION("missing binding lists the symbolic dims") {
    auto g = test::parse_or_die(text);
    PassContext ctx;
    Status st = run_frontend(*g, ctx);
    REQUIRE(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("input 'ids'") && Catch::Contains("'batch'") &&
                                 Catch::Contains("'seq'") && Catch::Contains("--shape"));
  }
  SECTION("partial symbol binding still reports the rest") {
    auto g = test::parse_or_die(text);
    PassContext ctx;
    REQUIRE(parse_shape_binding("batch=2", ctx.bindings).is_ok());
    Status st = run_frontend(*g, ctx);
    REQUIRE(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("'seq'") && !Catch::Contains("'batch'"));
  }
  SECTION("an unknown name lists the inputs and symbols") {
    auto g = test::parse_or_die(text);
    PassContext ctx;
    REQUIRE(parse_shape_binding("idz=2x3", ctx.bindings).is_ok());
    Status st = run_frontend(*g, ctx);
    REQUIRE(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("idz") && Catch::Contains("ids"));
  }
  SECTION("a binding that contradicts a static dim") {
    auto g = test::parse_or_die("graph \"g\" opset 17 {\n input %x: f32[2,3]\n %y = Neg(%x)\n output %y\n}\n");
    PassContext ctx;
    REQUIRE(parse_shape_binding("x=2x4", ctx.bindings).is_ok());
    Status st = run_frontend(*g, ctx);
    REQUIRE(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("does not fit input 'x'"));
  }
  SECTION("malformed --shape values") {
    ShapeBindings b;
    CHECK(parse_shape_binding("x", b).code() == Code::kUser);
    CHECK(parse_shape_binding("x=2xa", b).code() == Code::kUser);
    CHECK(parse_shape_binding("x=-1", b).code() == Code::kUser);
    CHECK(parse_shape_binding("x=2x3", b).is_ok());
    CHECK(parse_shape_binding("x=4", b).code() == Code::kUser);  // bound twice
  }
}

TEST_CASE("shape rule errors name the node") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %a: f32[2,3]
  input %b: f32[4,5]
  %y = MatMul(%a, %b) @"proj"
  output %y
}
)");
  Status st = run_frontend(*g, *std::make_unique<PassContext>());
  REQUIRE(st.code() == Code::kUser);
  CHECK_THAT(st.message(), Catch::Contains("node 'proj' (MatMul)") && Catch::Contains("inner dimensions differ"));
}

TEST_CASE(
    "a reduction given axes as an input before its opset reads them there is refused, not reduced over all "
    "axes") {
  // ReduceMean takes its axes as input 1 from opset 18 (ReduceSum from 13); before that, a second
  // input would be ignored and every axis reduced.
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceSum"}) {
    INFO(op);
    const int opset = std::string(op) == "ReduceSum" ? 12 : 17;
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset {} {{
  input %x: f32[4,5,6]
  const %ax: i64[1] = [1]
  %y = {}(%x, %ax) @"pool"
  output %y
}}
)",
                                            opset, op));
    Status st = run_frontend(*g, *std::make_unique<PassContext>());
    REQUIRE(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains(fmt::format("node 'pool' ({})", op)) &&
                                 Catch::Contains(fmt::format("at opset {} it takes one", opset)) &&
                                 Catch::Contains("'axes' attribute"));
    // The same node one opset later reduces axis 1 only.
    auto h = test::parse_or_die(fmt::format(R"(graph "g" opset {} {{
  input %x: f32[4,5,6]
  const %ax: i64[1] = [1]
  %y = {}(%x, %ax) {{keepdims = 0}} @"pool"
  output %y
}}
)",
                                            opset + 1, op));
    test::run_frontend_or_die(*h);
    CHECK(*h->outputs[0]->dims == Dims{4, 6});
  }
}

TEST_CASE("a Reshape whose target is only known at run time is refused clearly") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[6]
  input %s: i64[2]
  %y = Reshape(%x, %s) @"r"
  output %y
}
)");
  Status st = run_frontend(*g, *std::make_unique<PassContext>());
  REQUIRE(st.code() == Code::kUser);
  CHECK_THAT(st.message(), Catch::Contains("node 'r' (Reshape)") && Catch::Contains("compile time"));
}

TEST_CASE("a shape too large to exist is a user error, not a crash") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[1]
  const %s: i64[4] = [100000, 100000, 100000, 100000]
  %y = Expand(%x, %s) @"huge"
  output %y
}
)");
  Status st = run_frontend(*g, *std::make_unique<PassContext>());
  REQUIRE(st.code() == Code::kUser);
  CHECK_THAT(st.message(), Catch::Contains("node 'huge' (Expand)") && Catch::Contains("too large"));
}
