// fold_single_choices: a TopK, ArgMax or ArgMin over an axis of one element folds (its values the
// input, its indices zeros), and a Where whose condition is a constant of one value is the input it
// selects. Group-limited MoE routing with one group (transformers' default for GLM-4-MoE) becomes
// plain top-k routing. Each graph keeps the reference interpreter's results.
#include <fmt/format.h>

#include <cmath>

#include "fusion_test_util.h"
#include "passes/pass.h"
#include "reference/compare.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;
using stitch::test::has_node;

namespace {

// Runs the pipeline on `text` and compares with the graph as written, on random inputs.
std::unique_ptr<Graph> folded_and_checked(const std::string& text, uint32_t seed) {
  auto before = test::as_written(text);
  auto after = test::parse_or_die(text);
  test::run_frontend_or_die(*after);
  TensorMap in;
  for (const Value* v : before->inputs) in[v->name] = test::random_tensor(v->dtype, *v->dims, seed++);
  test::same_reference_outputs(*before, *after, in, false);
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

TEST_CASE("a reduction over one element is that element, plus 0 for a sum or mean") {
  // Top-1 MoE models sum their one slot so (ZAYA). Each op, with and without keepdims, its output
  // read by a Neg and a graph output itself; the reference keeps every value (NaNs of several
  // payloads, zeros of both signs, infinities) bit for bit against the op as written.
  uint32_t seed = 16;
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})
    for (int keep : {0, 1}) {
      INFO(op << " keepdims " << keep);
      const std::string text = fmt::format(R"(graph "g" opset 18 {{
  input %x: f32[3,1,4]
  const %ax: i64[1] = [1]
  %r = {}(%x, %ax) {{keepdims = {}}} @"one"
  %y = Neg(%r) @"neg"
  output %y
  output %r
}}
)",
                                           op, keep);
      auto g = folded_and_checked(text, seed++);
      const bool extreme = std::string(op) == "ReduceMax" || std::string(op) == "ReduceMin";
      CHECK(count_op(*g, op) == 0);
      CHECK(count_op(*g, "Add") ==
            (std::string(op) == "ReduceSum" || std::string(op) == "ReduceMean" ? 1 : 0));
      auto before = test::as_written(text);
      Tensor x(DType::kF32, {3, 1, 4});
      const uint32_t bits[12] = {0x80000000u, 0x00000000u, 0x7fc00001u, 0xffc12345u,
                                 0x7f800000u, 0xff800000u, 0x3fc00000u, 0xbf800000u,
                                 0x00000001u, 0x7f7fffffu, 0x7fd00000u, 0x80000001u};
      std::copy(bits, bits + 12, x.data_as<uint32_t>());
      auto a = run_reference(*before, {{"x", x}});
      auto b = run_reference(*g, {{"x", x}});
      REQUIRE(a.is_ok());
      REQUIRE(b.is_ok());
      for (const char* out : {"r", "y"}) {
        INFO(out);
        const Tensor &ta = a->at(out), &tb = b->at(out);
        REQUIRE(ta.size() == 12);
        REQUIRE(tb.size() == 12);
        for (int64_t i = 0; i < 12; ++i) {
          INFO("element " << i << ": 0x" << std::hex << bits[i]);
          const uint32_t got = tb.data_as<uint32_t>()[i], want = ta.data_as<uint32_t>()[i];
          if (extreme && std::isnan(ta.data_as<float>()[i])) {
            // The reference's ReduceMax and ReduceMin give the canonical NaN; a kernel's fold
            // (stitch_dev::Max from -inf) passes the NaN element itself on, as the Reshape does.
            CHECK(std::isnan(tb.data_as<float>()[i]));
            if (std::string(out) == "r") CHECK(got == bits[i]);
          } else {
            CHECK(got == want);
          }
        }
      }
    }
}

TEST_CASE("reductions over more than one element, or over none, stay") {
  // Two elements along the axis; an empty axis (the identity: 0 for a sum); noop_with_empty_axes.
  auto g = folded_and_checked(R"(graph "g" opset 18 {
  input %x: f32[3,2,4]
  input %e: f32[3,0,4]
  const %ax: i64[1] = [1]
  const %none: i64[0] = []
  %r = ReduceSum(%x, %ax) {keepdims = 0} @"two"
  %s = ReduceSum(%e, %ax) {keepdims = 0} @"empty"
  %t = ReduceMax(%x, %none) {keepdims = 1, noop_with_empty_axes = 1} @"noop"
  output %r
  output %s
  output %t
}
)",
                              40);
  CHECK(has_node(*g, "two"));
  CHECK(has_node(*g, "empty"));
}

TEST_CASE("a top-1 MoE's sum over its one slot joins the kernel around it on emu") {
  // ZAYA's form: each token's expert output times its routing weight, summed over the k = 1 slot
  // axis, then scaled (a product, not a residual Add: in float16 the reference rounds the weighted
  // value where the kernel does not, and a sum that cancels would turn that into a relative
  // error of any size). The sum was a kernel of its own between two others.
  for (const char* dtype : {"f32", "f16"}) {
    INFO(dtype);
    auto plan =
        test::written_out_matches_op(fmt::format(R"(graph "g" opset 18 {{
  input %e: {0}[64,1,128]
  input %w: {0}[64,1,1]
  input %h: {0}[64,128]
  const %ax: i64[1] = [1]
  %p = Mul(%e, %w) @"weighted"
  %s = ReduceSum(%p, %ax) {{keepdims = 0}} @"slot_sum"
  %y = Mul(%s, %h) @"scaled"
  output %y
}}
)",
                                                 dtype),
                                     {"ReduceSum"}, 41, std::string(dtype) == "f16" ? kEmuF16Chain : kEmuF32);
    CHECK(plan.cost.kernels == 1);
  }
}

TEST_CASE("a softmax over one element is 1, a log-softmax 0, NaN where the element is not finite") {
  // The attention of a first decoding step over its one key (a cache of 0 rows), in float32 and
  // float16, the legacy form (opset 11: the axes from 1 on flattened, one element between them)
  // and opset 13's; against the op as written, bit for bit, with infinities, NaN, zeros of both
  // signs and the largest and smallest values among the inputs.
  struct Case {
    const char* op;
    int opset;
    const char* type;
    const char* axis;
  };
  const Case cases[] = {{"Softmax", 18, "f32", "-1"}, {"LogSoftmax", 18, "f32", "-1"},
                        {"Softmax", 18, "f16", "3"},  {"LogSoftmax", 13, "f16", "-1"},
                        {"Softmax", 11, "f32", "1"},  {"LogSoftmax", 11, "f32", "2"}};
  uint32_t seed = 50;
  for (const Case& c : cases) {
    INFO(c.op << " opset " << c.opset << " " << c.type << " axis " << c.axis);
    const std::string text = fmt::format(R"(graph "g" opset {} {{
  input %x: {}[2,1,1,1]
  %p = {}(%x) {{axis = {}}} @"over_one"
  %y = Neg(%p) @"neg"
  output %y
  output %p
}}
)",
                                         c.opset, c.type, c.op, c.axis);
    auto g = folded_and_checked(text, seed++);
    CHECK(count_op(*g, c.op) == 0);
    auto before = test::as_written(text);
    const bool half = std::string(c.type) == "f16";
    const std::vector<double> values = {INFINITY, -INFINITY, NAN,  -0.0, 0.0,
                                        65504.0,  -65504.0,  6e-8, 1.5,  -2.0};
    for (double v : values) {
      INFO("x = " << v);
      const Tensor x = Tensor::from_f64(half ? DType::kF16 : DType::kF32, {2, 1, 1, 1}, {v, -v});
      auto a = run_reference(*before, {{"x", x}});
      auto b = run_reference(*g, {{"x", x}});
      REQUIRE(a.is_ok());
      REQUIRE(b.is_ok());
      for (const char* out : {"p", "y"}) {
        INFO(out);
        CHECK(b->at(out).same_as(a->at(out)));
      }
    }
  }
  // Over two elements it stays.
  auto g = folded_and_checked(R"(graph "g" opset 18 {
  input %x: f32[2,2]
  %p = Softmax(%x) {axis = -1} @"over_two"
  output %p
}
)",
                              60);
  CHECK(has_node(*g, "over_two"));
}

TEST_CASE("a first decoding step's softmax over its one key joins the kernel around it on emu") {
  // The scores of one query against one key, masked, the softmax, and the NaN guard transformers'
  // exports put after it: one kernel (the softmax was one of its own before).
  auto plan = test::written_out_matches_op(R"(graph "g" opset 18 {
  input %s: f32[2,4,1,1]
  input %m: f32[2,1,1,1]
  const %zero: f32[] = [0]
  %a = Add(%s, %m) @"masked"
  %p = Softmax(%a) {axis = -1} @"softmax"
  %n = IsNaN(%p) @"is_nan"
  %y = Where(%n, %zero, %p) @"guard"
  output %y
}
)",
                                           {"Softmax"}, 61);
  CHECK(plan.cost.kernels == 1);
}
