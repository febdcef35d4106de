// ArgMax and ArgMin as row reductions (fusion::arg_extremes_as_reductions) and ScatterElements of
// a few indices per row as selects (fusion::scatter_selects): the rewritten graphs compute what the
// ops did on the reference (ties to the first position, zeros of both signs tied, NaNs where the
// reference's scan leaves them, infinities, float32, float16, bfloat16 and float64, negative and
// int32 indices, reduction add and mul, several indices a row at repeated positions) and stay inside
// the axis by their own nodes' bounds, the forms they do not take stay,
// and PhiMoE's two picks around a masked logit become one row kernel in every planner, run on emu.
#include <fmt/format.h>

#include "fusion/arg_reductions.h"
#include "fusion/scatter_selects.h"
#include "fusion_test_util.h"
#include "ops/index_check.h"
#include "ops/op_util.h"
#include "ops/value_range.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// `op` along the last axis of a [7, 6] tensor of `type` holding ties, NaNs (first and later),
// infinities and zeros of both signs exactly (a random input times 0 plus the pattern, so that
// nothing folds it).
std::string special_rows(const std::string& op, int keepdims, const char* type = "f32") {
  return fmt::format(R"(graph "arg" opset 18 {{
  input %r: {2}[7,6]
  const %zero: {2}[] = [0.0]
  const %p: {2}[7,6] = [1, 3, 3, 2, 3, 0, nan, 1, inf, nan, -inf, 2, -inf, nan, -inf, -inf, nan, -inf, 2, nan, inf, 5, inf, nan, nan, nan, nan, nan, nan, nan, -0.0, 0.0, -0.0, -1, -2, 0.0, 0.0, -0.0, 0.0, 1, 2, -0.0]
  %z = Mul(%r, %zero) @"zeroed"
  %x = Add(%z, %p) @"pattern"
  %i = {0}(%x) {{axis = -1, keepdims = {1}}} @"arg"
  output %i
}}
)",
                     op, keepdims, type);
}

}  // namespace

TEST_CASE("ArgMax and ArgMin as row reductions pick what the op picks, NaNs and ties included",
          "[fusion][emu]") {
  uint32_t seed = 700;
  for (const char* type : {"f32", "f16", "bf16", "f64"})
    for (const char* op : {"ArgMax", "ArgMin"})
      for (const int keepdims : {1, 0}) {
        INFO(fmt::format("{} {} keepdims {}", type, op, keepdims));
        auto [g, original, lines] = rewritten(special_rows(op, keepdims, type),
                                              [](Graph& x) { return fusion::arg_extremes_as_reductions(x); });
        REQUIRE(lines.size() == 1);
        const char* which = std::string(op) == "ArgMax" ? "largest" : "smallest";
        // float64 values do not fit a key: the extreme, then its first position.
        CHECK(lines.front() ==
              (std::string(type) == "f64"
                   ? fmt::format("node 'arg' ({}): over rows of 6, the {} and its first position", op, which)
                   : fmt::format(
                         "node 'arg' ({}): over rows of 6, one row reduction of keys for the {} at its first "
                         "position",
                         op, which)));
        CHECK(count_op(*g, op) == 0);
        // Inside the axis by the rewrite's own nodes: a reader's index check has nothing to check.
        const auto bounds = ops::int_range(g->find_value("i"));
        REQUIRE(bounds);
        CHECK(bounds->min == 0);
        CHECK(bounds->max == 5);
        rewritten_is_one_kernel(*original, *g, seed);  // indices compared exactly
      }
}

TEST_CASE("ScatterElements of a few indices per row as selects writes what the scatter writes",
          "[fusion][emu]") {
  struct Case {
    const char* what;
    const char* data;     // dims
    const char* indices;  // dims (the updates' too)
    const char* len;      // a little under half the axis's extent
    int to;               // the indices' type: 7 int64, 6 int32
    const char* attrs;
    const char* line;
  };
  // The indices are computed at run time (a constant index would be folded by the front end):
  // floor(r * len) of r in [-2, 2), every index from -extent to extent - 1.
  const Case cases[] = {
      {"along the last axis, negative indices", "6,5", "6,1", "2.4995", 7, "axis = 1",
       "node 'scatter' (ScatterElements): one index per row along axis 1 of 5, as a Where"},
      {"along the first axis, int32 indices, reduction add", "4,3,2", "1,3,2", "1.9995", 6,
       "axis = 0, reduction = \"add\"",
       "node 'scatter' (ScatterElements): one index per row along axis 0 of 4, as a Where of the data plus "
       "the update"},
      {"a middle axis, reduction mul", "2,3,4", "2,1,4", "1.4995", 7, "axis = 1, reduction = \"mul\"",
       "node 'scatter' (ScatterElements): one index per row along axis 1 of 3, as a Where of the data times "
       "the update"},
      // DeepSeek-V3's groups' mask: ones at each token's 2 best groups, in zeros.
      {"two indices per row, reduction none", "6,5", "6,2", "2.4995", 7, "axis = 1",
       "node 'scatter' (ScatterElements): 2 indices per row along axis 1 of 5, as 2 Wheres"},
      // 3 indices in 3 positions of 8 rows: most rows repeat a position, where the updates add up.
      {"three indices per row along the first axis, repeated, reduction add", "3,8", "3,8", "1.4995", 7,
       "axis = 0, reduction = \"add\"",
       "node 'scatter' (ScatterElements): 3 indices per row along axis 0 of 3, as 3 Wheres of the data plus "
       "the update"},
  };
  uint32_t seed = 720;
  for (const Case& c : cases) {
    INFO(c.what);
    const std::string text = fmt::format(R"(graph "g" opset 18 {{
  input %data: f32[{}]
  input %upd: f32[{}]
  input %r: f32[{}]
  const %len: f32[] = [{}]
  %m = Mul(%r, %len)
  %f = Floor(%m)
  %idx = Cast(%f) {{to = {}}}
  %y = ScatterElements(%data, %idx, %upd) {{{}}} @"scatter"
  output %y
}})",
                                         c.data, c.indices, c.indices, c.len, c.to, c.attrs);
    auto [g, original, lines] = rewritten(text, [](Graph& x) { return fusion::scatter_selects(x); });
    REQUIRE(lines.size() == 1);
    CHECK(lines.front() == c.line);
    CHECK(count_op(*g, "ScatterElements") == 0);
    rewritten_is_one_kernel(*original, *g, seed);
  }
}

TEST_CASE("ArgMax, ArgMin and scatters the rewrites do not take stay as they are", "[fusion]") {
  struct Case {
    const char* what;
    const char* text;
  };
  const Case cases[] = {
      {"an ArgMax along an axis other than the last", R"(graph "g" opset 18 {
  input %x: f32[6,4]
  %i = ArgMax(%x) {axis = 0} @"n"
  output %i
})"},
      {"an ArgMax of integers", R"(graph "g" opset 18 {
  input %x: i64[4,6]
  %i = ArgMax(%x) {axis = -1} @"n"
  output %i
})"},
      {"an ArgMin of the last index", R"(graph "g" opset 18 {
  input %x: f32[4,6]
  %i = ArgMin(%x) {axis = -1, select_last_index = 1} @"n"
  output %i
})"},
      {"a scatter of nine indices per row", R"(graph "g" opset 18 {
  input %data: f32[3,9]
  input %upd: f32[3,9]
  input %idx: i64[3,9]
  %y = ScatterElements(%data, %idx, %upd) {axis = 1} @"n"
  output %y
})"},
      {"a scatter taking the maximum", R"(graph "g" opset 18 {
  input %data: f32[3,5]
  input %upd: f32[3,1]
  input %idx: i64[3,1]
  %y = ScatterElements(%data, %idx, %upd) {axis = 1, reduction = "max"} @"n"
  output %y
})"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto g = parse_or_die(c.text);
    run_frontend_or_die(*g);
    const size_t nodes = g->nodes().size();
    auto args = fusion::arg_extremes_as_reductions(*g);
    auto selects = fusion::scatter_selects(*g);
    REQUIRE(args.is_ok());
    REQUIRE(selects.is_ok());
    CHECK(args->empty());
    CHECK(selects->empty());
    CHECK(g->nodes().size() == nodes);
  }
  SECTION("--no-fuse on the node") {
    auto g = parse_or_die(special_rows("ArgMax", 1));
    run_frontend_or_die(*g);
    auto lines = fusion::arg_extremes_as_reductions(*g, {"arg"});
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    CHECK(count_op(*g, "ArgMax") == 1);
  }
}

TEST_CASE("PhiMoE's two picks around a masked logit are one row kernel", "[fusion][emu]") {
  // The router's logits of 24 tokens over 8 experts: the first pick (an ArgMax), its logit masked
  // to -inf by a scatter, the second pick from what is left, and both picks side by side. As ops of
  // their own: 3 kernels; as reductions and a select, one.
  auto g = parse_or_die(R"(graph "sparsemixer" opset 18 {
  input %logits: f32[24,8]
  const %minus_inf: f32[24,1] = )" +
                        [] {
                          std::string s = "[";
                          for (int i = 0; i < 24; ++i) s += i ? ", -inf" : "-inf";
                          return s + "]";
                        }() +
                        R"(
  %first = ArgMax(%logits) {axis = -1} @"first"
  %masked = ScatterElements(%logits, %first, %minus_inf) {axis = 1} @"mask"
  %second = ArgMax(%masked) {axis = -1} @"second"
  %picks = Concat(%first, %second) {axis = 1} @"picks"
  output %picks
})");
  run_frontend_or_die(*g);
  {
    auto before = fusion::make_plan(*g, opts("beam"));
    REQUIRE(before.is_ok());
    CHECK(before->cost.kernels >= 3);
  }
  auto original = clone_graph(*g);
  auto kept = fusion::arg_extremes_as_reductions_if_cheaper(g, opts("beam"));
  REQUIRE(kept.is_ok());
  INFO(kept->verdict);
  CHECK(kept->lines.size() == 3);
  // The first pick's position is inside the row by the rewrite's own nodes, so the mask's select
  // takes it unchecked.
  CHECK(count_op(*g, ops::kIndexCheck) == 0);
  same_as_original(*original, *g, 740);
  uint32_t seed = 741;
  one_kernel_in_every_planner(*g, seed);
}
