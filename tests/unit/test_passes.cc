// Pass tests: IR text in, IR checked out, and the reference interpreter's
// results before and after the pipeline compared.
#include <fmt/format.h>

#include "ir/dim_expr.h"
#include "ir/text.h"
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

TEST_CASE(
    "remove_dead_nodes takes whole unread chains, keeps shared and exported values, and honours its limit") {
  const char* text = R"(graph "g" opset 17 {
  input %x: f32[2]
  %a = Neg(%x) @"a"
  %b = Abs(%a) @"b"
  %c = Exp(%b) @"c"
  %s = Neg(%x) @"shared"
  %d = Add(%s, %s) @"d"
  %y = Relu(%s) @"y"
  %e = Exp(%x) @"exported"
  output %y
  output %e
}
)";
  const auto names = [](const Graph& g) {
    std::vector<std::string> out;
    for (const auto& n : g.nodes()) out.push_back(n->name);
    return out;
  };
  SECTION("everything unread goes, a chain whole") {
    auto g = test::parse_or_die(text);
    REQUIRE(g->remove_dead_nodes() == 4);
    CHECK(names(*g) == std::vector<std::string>{"shared", "y", "exported"});
    CHECK(g->find_value("c")->producer == nullptr);
    REQUIRE(g->topo_sort().is_ok());
  }
  SECTION("with a limit, a dead node outside it stays and keeps its inputs alive") {
    auto g = test::parse_or_die(text);
    std::unordered_set<const Node*> only;
    for (const auto& n : g->nodes())
      if (n->name == "a" || n->name == "b" || n->name == "d") only.insert(n.get());
    REQUIRE(g->remove_dead_nodes(&only) == 1);  // "d"; "c" is outside and still reads "b"
    CHECK(names(*g) == std::vector<std::string>{"a", "b", "c", "shared", "y", "exported"});
  }
  SECTION("nothing to do") {
    auto g = test::parse_or_die(text);
    std::unordered_set<const Node*> only;
    for (const auto& n : g->nodes())
      if (n->name == "shared" || n->name == "exported") only.insert(n.get());
    CHECK(g->remove_dead_nodes(&only) == 0);
    CHECK(g->nodes().size() == 7);
  }
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

TEST_CASE("window attributes and axes out of range are errors naming the node, not crashes or hangs") {
  struct Case {
    std::string op, inputs, call, message;
    int opset = 17;
  };
  const std::vector<Case> cases = {
      // A negative kernel made the reference loop over a window of 10^9 steps.
      {"MaxPool", "input %x: f32[1,1,5,5]", "MaxPool(%x) {kernel_shape = ints[-3, 2]}",
       "the kernel's extent on spatial axis 0 is -3; it must be positive"},
      {"AveragePool", "input %x: f32[1,1,5]", "AveragePool(%x) {kernel_shape = ints[0]}",
       "the kernel's extent on spatial axis 0 is 0"},
      {"MaxPool", "input %x: f32[1,1,5,5]",
       "MaxPool(%x) {kernel_shape = ints[2, 2], pads = ints[0, -1, 0, 0]}", "pads must not be negative"},
      // ConvTranspose read strides and dilations without checking their count.
      {"ConvTranspose", "input %x: f32[1,2,4,4]\n  input %w: f32[2,3,3,3]",
       "ConvTranspose(%x, %w) {strides = ints[]}",
       "strides, dilations and pads must match the 2 spatial dimensions"},
      {"ConvTranspose", "input %x: f32[1,2,4,4]\n  input %w: f32[2,3,3,3]",
       "ConvTranspose(%x, %w) {dilations = ints[1, 0]}", "strides and dilations must be positive"},
      {"ConvTranspose", "input %x: f32[1,2,4,4]\n  input %w: f32[2,3,3,3]",
       "ConvTranspose(%x, %w) {auto_pad = \"SAME\"}", "unknown auto_pad 'SAME'"},
      {"ConvTranspose", "input %x: f32[1,2,4,4]\n  input %w: f32[2,3,3,3]",
       "ConvTranspose(%x, %w) {output_shape = ints[8]}",
       "output_shape has 1 values; it must give the 2 spatial extents"},
      {"ConvTranspose", "input %x: f32[1,2,4,4]\n  input %w: f32[2,3,3,3]",
       "ConvTranspose(%x, %w) {output_padding = ints[0, -1]}",
       "output_padding -1 on spatial axis 1 must not be negative"},
      // A scalar has no axis 0: Split read past its dims.
      {"Split", "input %x: f32[]", "Split(%x) {axis = 0}", "axis 0 is given for a scalar, which has no axes"},
      {"CumSum", "input %x: f32[]\n  const %a: i64[] = [0]", "CumSum(%x, %a)",
       "axis 0 is given for a scalar"},
      {"TopK", "input %x: f32[3,4]\n  const %k: i64[1] = [5]", "TopK(%x, %k)",
       "K is 5, but axis 1 has 4 elements"},
      {"TopK", "input %x: f32[3,4]\n  const %k: i64[1] = [-1]", "TopK(%x, %k) {axis = 0}",
       "K is -1, but axis 0 has 3 elements"},
      {"TopK", "input %x: f32[3,4]\n  const %k: i64[2] = [1, 2]", "TopK(%x, %k)", "K must hold one value"},
      {"TopK", "input %x: f32[3,4]\n  input %k: i64[1]", "TopK(%x, %k)",
       "its K (input 1 'k') is computed at run time"},
      {"TopK", "input %x: f32[3,4]\n  const %k: i64[1] = [1]", "TopK(%x, %k) {axis = 2}", "axis 2"},
      // Sizes that follow a graph input's values (a mixture of experts' tokens per expert) name
      // that input.
      {"Split", "input %x: f32[6]\n  input %k: i64[2]\n  %s = Abs(%k) @\"abs\"", "Split(%x, %s)",
       "its split (input 1 's') is computed at run time; stitch needs it known at compile time (it follows "
       "the "
       "values of input 'k' (read by node 'abs' (Abs)), so the shapes after it depend on the data"},
      {"Col2Im", "input %x: f32[1,4,8]\n  const %im: i64[2] = [4, 4]\n  const %bl: i64[2] = [2, 2]",
       "Col2Im(%x, %im, %bl)", "its input has 8 block positions, but image 4x4 in blocks 2x2 has 9", 18},
      {"Col2Im", "input %x: f32[1,6,9]\n  const %im: i64[2] = [4, 4]\n  const %bl: i64[2] = [2, 2]",
       "Col2Im(%x, %im, %bl)", "its input has 6 rows, not a multiple of the block's 4 elements", 18},
      {"Col2Im", "input %x: f32[1,4,9]\n  const %im: i64[2] = [4, 4]\n  const %bl: i64[1] = [2]",
       "Col2Im(%x, %im, %bl)", "image_shape has 2 values and block_shape 1", 18},
      {"Col2Im", "input %x: f32[1,4,9]\n  const %im: i64[2] = [4, 4]\n  const %bl: i64[2] = [2, 0]",
       "Col2Im(%x, %im, %bl)", "must be positive", 18},
      {"Col2Im", "input %x: f32[4,9]\n  const %im: i64[2] = [4, 4]\n  const %bl: i64[2] = [2, 2]",
       "Col2Im(%x, %im, %bl)", "its input has rank 2", 18},
  };
  for (const Case& c : cases) {
    const std::string text = fmt::format("graph \"g\" opset {} {{\n  {}\n  %y = {} @\"n\"\n  output %y\n}}\n",
                                         c.opset, c.inputs, c.call);
    INFO(text);
    const std::string msg = test::frontend_error(text);
    INFO(msg);
    CHECK(msg.find(fmt::format("node 'n' ({})", c.op)) != std::string::npos);
    CHECK(msg.find(c.message) != std::string::npos);
  }
}

TEST_CASE("a reduction's axes where its opset does not read them are refused, not reduced over all axes") {
  // ReduceMean takes its axes as input 1 from opset 18 (ReduceSum from 13). Before that, a second
  // input would be ignored; from then on, an 'axes' attribute would: every axis reduced either way.
  auto reduction = [](int opset, const char* op, const std::string& call) {
    return test::parse_or_die(fmt::format(R"(graph "g" opset {} {{
  input %x: f32[4,5,6]
  const %ax: i64[1] = [1]
  %y = {}{} @"pool"
  output %y
}}
)",
                                          opset, op, call));
  };
  auto refused = [](Graph& g, const char* op, const std::string& says, const std::string& what_to_do) {
    Status st = run_frontend(g, *std::make_unique<PassContext>());
    REQUIRE(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains(fmt::format("node 'pool' ({})", op)) && Catch::Contains(says) &&
                                 Catch::Contains(what_to_do));
  };
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceSum"}) {
    INFO(op);
    const int since = std::string(op) == "ReduceSum" ? 13 : 18;
    auto before = reduction(since - 1, op, "(%x, %ax)");
    refused(*before, op, fmt::format("at opset {} it takes one", since - 1), "'axes' attribute");
    auto after = reduction(since, op, "(%x) {axes = ints[-1], keepdims = 1}");
    refused(*after, op, fmt::format("from opset {} its axes are input 1", since), "constant second input");
    // The input one opset later reduces axis 1 only.
    auto h = reduction(since, op, "(%x, %ax) {keepdims = 0}");
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

TEST_CASE("symbolic dimension expressions evaluate as exporters write them") {
  const std::map<std::string, int64_t> s = {{"past", 16}, {"s0", 7}, {"s1", 3}, {"batch.size", 2}};
  auto eval = [&](const char* text) {
    auto v = eval_dim_expr(text, s);
    INFO(text << ": " << (v.is_ok() ? "" : v.status().message()));
    REQUIRE(v.is_ok());
    return *v;
  };
  CHECK(eval("past + 1") == 17);
  CHECK(eval("2*s0") == 14);
  CHECK(eval("s0 + s1") == 10);
  CHECK(eval("-1 + past") == 15);
  CHECK(eval("(s0//2)") == 3);
  CHECK(eval("floor(s0/2)") == 3);
  CHECK(eval("ceiling(s0/2)") == 4);
  CHECK(eval("s0/7*3") == 3);  // exact division
  CHECK(eval("s0 % 3") == 1);
  CHECK(eval("Max(1, s1 - 4)") == 1);
  CHECK(eval("Min(s0, s1, past)") == 3);
  CHECK(eval("batch.size*(past+1)") == 34);
  CHECK(eval("12") == 12);
  // What is a symbol, an expression, or neither (an opaque name, bound only by name).
  CHECK(is_dim_symbol("batch"));
  CHECK(is_dim_symbol("unk__12"));
  CHECK_FALSE(is_dim_symbol("past + 1"));
  CHECK_FALSE(dim_expr_symbols("batch").has_value());
  CHECK_FALSE(dim_expr_symbols("sequence length").has_value());
  CHECK_FALSE(dim_expr_symbols("past +").has_value());
  CHECK(dim_expr_symbols("past + 1") == std::set<std::string>{"past"});
  CHECK(dim_expr_symbols("s0*s1 - s0/0") == std::set<std::string>{"s0", "s1"});  // names, not values
  CHECK(dim_expr_symbols("4") == std::set<std::string>{});
  // Errors name the dimension and what is wrong.
  auto bad = [&](const char* text, const char* says) {
    auto v = eval_dim_expr(text, s);
    REQUIRE_FALSE(v.is_ok());
    CHECK(v.status().code() == Code::kUser);
    CHECK_THAT(v.status().message(), Catch::Contains(text) && Catch::Contains(says));
  };
  bad("s0/2", "7/2");
  bad("past/(s0 - 7)", "division by zero");
  bad("nosuch + 1", "'nosuch' is not bound");
  bad("sqrt(past)", "unknown function 'sqrt'");
  bad("99999999999*99999999999", "too large");
}

TEST_CASE("a dimension written as an expression binds through its symbols, and inputs sharing a name agree") {
  // A decoding step as torch.export writes it: the mask one longer than the cache.
  const char* text =
      "graph \"g\" opset 18 {\n input %mask: i64[batch,\"past + 1\"]\n input %k: f32[batch,2,past,4]\n"
      " %y = Neg(%k)\n %m = Neg(%mask)\n output %y\n output %m\n}\n";
  auto bound = [&](std::vector<std::string> flags) {
    auto g = test::parse_or_die(text);
    PassContext ctx;
    for (const auto& f : flags) REQUIRE(parse_shape_binding(f, ctx.bindings).is_ok());
    Status st = run_frontend(*g, ctx);
    return std::make_pair(std::move(g), st);
  };
  SECTION("symbols bind the expression") {
    auto [g, st] = bound({"batch=2", "past=16"});
    REQUIRE(st.is_ok());
    CHECK(*g->inputs[0]->dims == Dims{2, 17});
    CHECK(*g->inputs[1]->dims == Dims{2, 2, 16, 4});
  }
  SECTION("an input bound whole binds the symbols of its dims for the others") {
    auto [g, st] = bound({"k=3x2x5x4"});
    REQUIRE(st.is_ok());
    CHECK(*g->inputs[0]->dims == Dims{3, 6});
  }
  SECTION("an unbound expression asks for its symbol") {
    auto [g, st] = bound({"batch=2"});
    REQUIRE(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("input 'mask'") && Catch::Contains("'past + 1'") &&
                                 Catch::Contains("--shape past=N"));
  }
  SECTION("an input bound whole that contradicts the expression") {
    auto [g, st] = bound({"k=2x2x16x4", "mask=2x18"});
    REQUIRE(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("input 'mask' is bound to 2x18") &&
                                 Catch::Contains("'past + 1'") &&
                                 Catch::Contains("which is 17 with past=16 (by input 'k'"));
  }
  SECTION("two bindings of one symbol that disagree") {
    auto [g, st] = bound({"k=2x2x16x4", "batch=3"});
    REQUIRE(st.code() == Code::kUser);
    CHECK_THAT(st.message(),
               Catch::Contains("symbolic dimension 'batch' is 3 by --shape batch=3 but 2 by input 'k'"));
  }
  SECTION("an expression that comes out negative") {
    auto g = test::parse_or_die(
        "graph \"g\" opset 18 {\n input %x: f32[\"n - 4\"]\n %y = Neg(%x)\n output %y\n}\n");
    PassContext ctx;
    REQUIRE(parse_shape_binding("n=2", ctx.bindings).is_ok());
    Status st = run_frontend(*g, ctx);
    REQUIRE(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("dimension 'n - 4' is -2 with n=2"));
  }
}

TEST_CASE("a Transpose that moves only size-1 axes becomes a Reshape, keeping its name and results") {
  // One token's heads put first, one key/value head put first, two size-1 axes swapped (a no-op
  // once a Reshape), and a Transpose that moves data, which stays.
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %q: f32[2,1,3,4]
  input %k: f32[2,5,1,4]
  input %u: f32[2,1,1,4]
  input %x: f32[2,5,4]
  %qt = Transpose(%q) {perm = ints[0, 2, 1, 3]} @"q_heads"
  %kt = Transpose(%k) {perm = ints[0, 2, 1, 3]} @"k_heads"
  %ut = Transpose(%u) {perm = ints[0, 2, 1, 3]} @"unit_swap"
  %xt = Transpose(%x) {perm = ints[0, 2, 1]} @"x_t"
  %a = Relu(%qt) @"a"
  %b = Relu(%kt) @"b"
  %c = Relu(%ut) @"c"
  %d = Relu(%xt) @"d"
  output %a
  output %b
  output %c
  output %d
}
)");
  auto original = test::parse_or_die(print_graph(*g));
  PassContext infer_only;
  REQUIRE(infer_shapes(*original, infer_only).is_ok());
  PassContext ctx;
  test::run_frontend_or_die(*g, ctx);
  CHECK(std::find(ctx.log.begin(), ctx.log.end(), "relabel_transposes") != ctx.log.end());
  CHECK(count_op(*g, "Transpose") == 1);
  const Node* x_t = g->find_value("xt")->producer;
  REQUIRE(x_t);
  CHECK(x_t->op_type == "Transpose");
  for (const char* v : {"qt", "kt"}) {
    const Node* r = g->find_value(v)->producer;
    REQUIRE(r);
    CHECK(r->op_type == "Reshape");
    CHECK(r->attrs.empty());
    REQUIRE(r->inputs.size() == 2);
    REQUIRE(r->inputs[1]->constant);
    CHECK(r->inputs[1]->constant->to_i64() ==
          std::vector<int64_t>(r->output(0)->dims->begin(), r->output(0)->dims->end()));
  }
  CHECK(g->find_value("qt")->producer->name == "q_heads");
  CHECK(g->find_value("kt")->type_string() == "f32[2x1x5x4]");
  // The swap of two size-1 axes is a Reshape to the same shape, which remove_noops drops.
  CHECK(g->find_value("c")->producer->inputs[0]->name == "u");
  TensorMap in{{"q", test::random_tensor(DType::kF32, {2, 1, 3, 4}, 1)},
               {"k", test::random_tensor(DType::kF32, {2, 5, 1, 4}, 2)},
               {"u", test::random_tensor(DType::kF32, {2, 1, 1, 4}, 3)},
               {"x", test::random_tensor(DType::kF32, {2, 5, 4}, 4)}};
  auto want = run_reference(*original, in);
  auto got = run_reference(*g, in);
  REQUIRE(want.is_ok());
  REQUIRE(got.is_ok());
  for (const char* o : {"a", "b", "c", "d"}) {
    INFO(o);
    CHECK(compare_tensors(got->at(o), want->at(o), 0, 0).ok);
  }
}

// TorchScript's repeat_interleave: a NonZero of a mask built from shapes (Cohere's rotary embedding).
static const char* kShapeNonZero = R"(graph "nz" opset 17 {
  input %x: f32[n,3]
  const %zero: i64[] = [0]
  const %one: i64[] = [1]
  const %two: i64[] = [2]
  const %ax: i64[1] = [0]
  %s = Shape(%x) @"shape"
  %len = Gather(%s, %zero) {axis = 0} @"len"
  %r = Range(%zero, %len, %one) @"range"
  %m = Less(%r, %two) @"less"
  %nz = NonZero(%m) @"nonzero"
  %idx = Squeeze(%nz, %ax) @"squeeze"
  %y = Gather(%x, %idx) {axis = 0} @"rows"
  output %y
}
)";

TEST_CASE("a NonZero of values known at compile time folds, and one of run-time data is refused by name") {
  auto g = test::parse_or_die(kShapeNonZero);
  PassContext ctx;
  REQUIRE(parse_shape_binding("n=5", ctx.bindings).is_ok());
  test::run_frontend_or_die(*g, ctx);
  CHECK(count_op(*g, "NonZero") == 0);
  CHECK(g->find_value("y")->type_string() == "f32[2x3]");
  Tensor x = test::random_tensor(DType::kF32, {5, 3}, 3);
  auto out = run_reference(*g, {{"x", x}});
  REQUIRE(out.is_ok());
  for (int64_t i = 0; i < 6; ++i) CHECK(out->at("y").get_f64(i) == x.get_f64(i));  // rows 0 and 1

  auto data = test::parse_or_die(R"(graph "nzd" opset 17 {
  input %m: bool[4]
  %nz = NonZero(%m) @"where_set"
  output %nz
}
)");
  PassContext bind;
  Status st = run_frontend(*data, bind);
  CHECK(st.code() == Code::kUser);
  CHECK_THAT(st.message(), Catch::Contains("node 'where_set' (NonZero)") &&
                               Catch::Contains("nonzero values of input 'm', which is computed at run time"));
  // The reference semantics: coordinates of the nonzero elements, one column each, row-major.
  auto ref = test::parse_or_die(R"(graph "nzr" opset 17 {
  input %a: f32[2,3]
  %nz = NonZero(%a) @"nz"
  output %nz
}
)");
  PassContext ref_ctx;
  REQUIRE(bind_shapes(*ref, ref_ctx).is_ok());
  auto coords = run_reference(*ref, {{"a", Tensor::from_f64(DType::kF32, {2, 3}, {0, 5, 0, 7, 0, 1})}});
  REQUIRE(coords.is_ok());
  CHECK(coords->at("nz").dims() == Dims{2, 3});
  CHECK(coords->at("nz").to_i64() == std::vector<int64_t>{0, 1, 1, 1, 0, 2});
}
