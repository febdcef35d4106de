// fold_single_choices: a TopK, ArgMax or ArgMin over an axis of one element folds (its values the
// input, its indices zeros), and a Where whose condition is a constant of one value is the input it
// selects. Group-limited MoE routing with one group (transformers' default for GLM-4-MoE) becomes
// plain top-k routing. Each graph keeps the reference interpreter's results.
#include <fmt/format.h>

#include "passes/pass.h"
#include "reference/compare.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;
using stitch::test::has_node;

namespace {

// Runs the pipeline on `text` and compares with the graph only bound and inferred, on random inputs.
std::unique_ptr<Graph> folded_and_checked(const std::string& text, uint32_t seed) {
  auto before = test::parse_or_die(text);
  auto after = test::parse_or_die(text);
  PassContext raw;
  REQUIRE(bind_shapes(*before, raw).is_ok());
  REQUIRE(infer_shapes(*before, raw).is_ok());
  test::run_frontend_or_die(*after);
  TensorMap in;
  for (const Value* v : before->inputs) in[v->name] = test::random_tensor(v->dtype, *v->dims, seed++);
  auto a = run_reference(*before, in);
  auto b = run_reference(*after, in);
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  for (const Value* o : before->outputs) {
    INFO(o->name);
    CHECK(compare_tensors(b->at(o->name), a->at(o->name), 0, 0).ok);
  }
  return after;
}

}  // namespace

TEST_CASE("routing limited to the best of one group of experts is plain top-k routing") {
  // DeepSeek-V3's group-limited routing as transformers exports it, with one group: each group's
  // score, the top group (of one), a mask scattered from it, the scores outside it zeroed, then the
  // top 2 experts and their scores.
  auto g = folded_and_checked(R"(graph "g" opset 18 {
  input %s: f32[6,4]
  const %k1: i64[1] = [1]
  const %k2: i64[1] = [2]
  const %last: i64[1] = [-1]
  const %zeros: f32[6,1] = [0, 0, 0, 0, 0, 0]
  const %ones: f32[6,1] = [1, 1, 1, 1, 1, 1]
  const %grouped: i64[3] = [6, 1, 4]
  const %flat: i64[2] = [6, 4]
  const %fill: f32[] = [0]
  %gs = ReduceMax(%s, %last) {keepdims = 1} @"group_scores"
  %gv, %gi = TopK(%gs, %k1) {axis = -1, largest = 1, sorted = 0} @"group_topk"
  %mask = ScatterElements(%zeros, %gi, %ones) {axis = 1} @"group_mask"
  %mu = Unsqueeze(%mask, %last) @"mask_axis"
  %me = Expand(%mu, %grouped) @"mask_expand"
  %mr = Reshape(%me, %flat) @"mask_flat"
  %mb = Cast(%mr) {to = 9} @"mask_bool"
  %nm = Not(%mb) @"not_mask"
  %masked = Where(%nm, %fill, %s) @"masked_fill"
  %tv, %ti = TopK(%masked, %k2) {axis = -1, largest = 1, sorted = 1} @"expert_topk"
  %w = GatherElements(%s, %ti) {axis = 1} @"weights"
  output %w
  output %ti
}
)",
                              11);
  CHECK(!has_node(*g, "group_topk"));
  CHECK(!has_node(*g, "group_mask"));
  CHECK(!has_node(*g, "masked_fill"));
  CHECK(count_op(*g, "TopK") == 1);
  CHECK(count_op(*g, "Where") == 0);
  // The experts' TopK reads the scores themselves.
  for (const auto& n : g->nodes())
    if (n->op_type == "TopK") CHECK(n->input(0)->name == "s");
}

TEST_CASE("an ArgMax or ArgMin over one element is zeros") {
  for (const char* op : {"ArgMax", "ArgMin"}) {
    INFO(op);
    auto g = folded_and_checked(fmt::format(R"(graph "g" opset 18 {{
  input %x: f32[3,1,5]
  %a = {}(%x) {{axis = 1, keepdims = 1}} @"choice"
  %b = Cast(%a) {{to = 1}} @"as_float"
  %y = Add(%x, %b) @"add"
  output %y
}}
)",
                                            op),
                                12);
    CHECK(count_op(*g, op) == 0);
    CHECK(count_op(*g, "Add") == 1);
  }
}

TEST_CASE("a Where of a constant condition of one value is the input it selects") {
  struct Case {
    const char* what;
    const char* condition;  // bool[2,3] values
    const char* other;      // the type of the input not read by a uniform condition
    bool folds;
  };
  const Case cases[] = {
      {"all true", "[1, 1, 1, 1, 1, 1]", "f32[2,3]", true},
      {"all false", "[0, 0, 0, 0, 0, 0]", "f32[2,3]", true},
      {"mixed", "[1, 0, 1, 1, 1, 1]", "f32[2,3]", false},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto g = folded_and_checked(fmt::format(R"(graph "g" opset 18 {{
  input %a: f32[2,3]
  input %b: {}
  const %c: bool[2,3] = {}
  %w = Where(%c, %a, %b) @"select"
  %y = Neg(%w) @"neg"
  output %y
}}
)",
                                            c.other, c.condition),
                                13);
    CHECK(has_node(*g, "select") == !c.folds);
  }
  // The selected input broadcast to the output's shape: the Where stays (it expands it).
  auto g = folded_and_checked(R"(graph "g" opset 18 {
  input %a: f32[1,3]
  input %b: f32[2,3]
  const %c: bool[2,3] = [1, 1, 1, 1, 1, 1]
  %w = Where(%c, %a, %b) @"select"
  %y = Neg(%w) @"neg"
  output %y
}
)",
                              14);
  CHECK(has_node(*g, "select"));
}

TEST_CASE("choices that are not over one element, or that write graph outputs, stay") {
  // A TopK over two elements; a TopK over one whose indices are a graph output; a Where of a
  // uniform condition that writes one.
  auto g = folded_and_checked(R"(graph "g" opset 18 {
  input %x: f32[4,2]
  input %z: f32[4,1]
  const %k1: i64[1] = [1]
  const %c: bool[4,1] = [1, 1, 1, 1]
  %v, %i = TopK(%x, %k1) {axis = -1} @"over_two"
  %zv, %zi = TopK(%z, %k1) {axis = -1} @"read_out"
  %w = Where(%c, %z, %zv) @"select_out"
  output %v
  output %i
  output %zi
  output %w
}
)",
                              15);
  CHECK(has_node(*g, "over_two"));
  CHECK(has_node(*g, "read_out"));
  CHECK(has_node(*g, "select_out"));
}
