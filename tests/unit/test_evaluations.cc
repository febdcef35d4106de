// Kernel::evaluations: how many times a stitched kernel's code computes its nodes. A value read at
// other positions than its readers' own (a resampling's taps) is computed again at each, and
// chains of such reads multiply the copies: stitchc compile plans such a kernel again within
// --max-evaluations (tests/e2e/backend_tests.sh checks seg_small's).
#include <fmt/format.h>

#include "fusion_test_util.h"
#include "test_util.h"

using namespace stitch;

namespace {

// Copies of node `name` in kernel `k`'s code.
int64_t copies(const codegen::Kernel& k, const std::string& name) {
  for (const auto& [n, count] : k.node_evaluations)
    if (n->name == name) return count;
  return 0;
}

}  // namespace

TEST_CASE("an element-wise chain computes each node once per element", "[evaluations]") {
  // 37 columns: no 128-bit vector access, so one lane per thread.
  auto g = test::parse_or_die(R"(graph "chain" opset 18 {
  input %x: f32[3,37]
  input %b: f32[37]
  const %shape: i64[1] = [111]
  %a = Add(%x, %b) @"add"
  %t = Tanh(%a) @"tanh"
  %m = Mul(%t, %a) @"mul"
  %r = Reshape(%m, %shape) @"view"
  %y = Neg(%r) @"neg"
  output %y
})");
  test::run_frontend_or_die(*g);
  const codegen::Kernel k = test::lower_whole_graph(*g);
  // The add is read by the tanh and the mul at the same element: computed once. The view computes
  // nothing and is not counted.
  CHECK(copies(k, "add") == 1);
  CHECK(copies(k, "tanh") == 1);
  CHECK(copies(k, "mul") == 1);
  CHECK(copies(k, "view") == 0);
  CHECK(copies(k, "neg") == 1);
  CHECK(k.evaluations == 4);
}

TEST_CASE("resamplings in one kernel multiply the copies of the values before them", "[evaluations]") {
  // Two bilinear 2x upsamples, each two taps on each of two axes (expand_resize): the second reads
  // the first's result at 2 x 2 positions per element, and the first its input at as many.
  auto g = test::parse_or_die(R"(graph "up2" opset 18 {
  input %x: f32[1,1,3,5]
  const %s: f32[4] = [1.0, 1.0, 2.0, 2.0]
  %e = Exp(%x) @"exp"
  %u = Resize(%e, _, %s) {mode = "linear"} @"up1"
  %v = Resize(%u, _, %s) {mode = "linear"} @"up2"
  %y = Relu(%v) @"relu"
  output %y
})");
  test::run_frontend_or_die(*g);
  const codegen::Kernel k = test::lower_whole_graph(*g);
  INFO(k.source);
  const int64_t last = copies(k, "relu");
  REQUIRE(last >= 1);
  // Each resampling's axes are two steps of two taps: the first upsample's result is computed at
  // 4 positions per element of the second's, and the Exp before both at 16.
  CHECK(copies(k, "up2/axis3_tap1_sum") == last);
  CHECK(copies(k, "up1/axis3_tap1_sum") == 4 * last);
  CHECK(copies(k, "exp") == 16 * last);
  // Every node counted, views aside.
  int64_t sum = 0;
  for (const auto& [n, count] : k.node_evaluations) sum += count;
  CHECK(sum == k.evaluations);
}
