// expand_trilu: a Trilu of a static shape is Where(constant mask, x, 0), bit for bit the op's
// result, and joins the kernels around it; a mask too large to be a constant leaves the Trilu as it
// is.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "fusion_test_util.h"
#include "passes/pass.h"
#include "reference/compare.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;

namespace {

}  // namespace

TEST_CASE("a Trilu of a static shape is a Where of a constant mask, bit for bit") {
  // Upper and lower, k inside, on the edges of and past the matrix, tall and wide matrices, float
  // (with NaN, infinities and zeros of both signs among the values), int32 and bool.
  uint32_t seed = 1;
  for (const char* type : {"f32", "i32", "bool"})
    for (int upper = 0; upper < 2; ++upper)
      for (int64_t k : {0, 2, -1, -3, 5, -7, 40})
        for (const char* shape : {"2,3,4", "5,2", "1,4,4"}) {
          INFO(type << " upper " << upper << " k " << k << " shape " << shape);
          const std::string text = fmt::format(R"(graph "g" opset 18 {{
  input %x: {}[{}]
  const %k: i64[] = [{}]
  %y = Trilu(%x, %k) {{upper = {}}} @"tri"
  output %y
}}
)",
                                               type, shape, k, upper);
          auto before = test::as_written(text);
          auto after = test::parse_or_die(text);
          test::run_frontend_or_die(*after);
          CHECK(count_op(*after, "Trilu") == 0);
          const Value* in = before->inputs[0];
          Tensor x = test::random_tensor(in->dtype, *in->dims, seed++);
          if (in->dtype == DType::kF32) {
            const double special[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0};
            for (int64_t e = 0; e < x.size() && e < 5; ++e) x.set_f64(e * 3 % x.size(), special[e]);
          }
          test::same_reference_outputs(*before, *after, {{"x", x}}, true);
        }
}

TEST_CASE("a Trilu whose mask would be large stays") {
  // (A k computed at run time is refused before this pass: stitch needs it known at compile time.)
  auto big = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[257,256]
  %y = Trilu(%x) {upper = 1} @"tri"
  output %y
}
)");
  test::run_frontend_or_die(*big);
  CHECK(count_op(*big, "Trilu") == 1);
}

TEST_CASE("the delta rule's lower triangle of a scaled product, negated, is one kernel on emu") {
  // -tril(x * decay): the Trilu was a kernel of its own between the Mul and the Neg.
  auto plan = test::written_out_matches_op(R"(graph "g" opset 18 {
  input %x: f32[2,3,16,16]
  input %decay: f32[2,3,16,16]
  const %k: i64[] = [-1]
  %m = Mul(%x, %decay) @"scaled"
  %t = Trilu(%m, %k) {upper = 0} @"tril"
  %y = Neg(%t) @"neg"
  output %y
}
)",
                                           {"Trilu"}, 7);
  CHECK(plan.cost.kernels == 1);
}
