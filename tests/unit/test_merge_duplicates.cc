// merge_duplicates: a view that repeats an earlier one goes, its readers reading the earlier one.
#include "fusion/merge_gemms.h"
#include "reference/compare.h"
#include "test_util.h"

using namespace stitch;

namespace {

// Q, K and V as onnxruntime's MatMulAddFusion writes them: each projection reshapes the activation
// on its own (shape constants of equal contents, not one value) before its GEMM.
const char* kWrapped = R"(graph "wrapped" opset 17 {
  input %x: f32[2,3,8]
  const %s1: i64[2] = [6, 8]
  const %s2: i64[2] = [6, 8]
  const %s3: i64[2] = [6, 8]
  const %other: i64[2] = [3, 16]
  const %wq: f32[8,4] = [0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, 1.0, -1.1, 1.2, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, -0.8, 0.9, 1.0, 1.1, 1.2, -0.1, 0.2, 0.3, 0.4, 0.5, 0.6, -0.7, 0.8]
  const %wk: f32[8,4] = [0.2, 0.2, -0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, -1.0, 1.1, 1.2, 0.1, 0.2, 0.3, -0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, -1.1, 1.2, 0.1, 0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8]
  const %wv: f32[8,4] = [0.3, 0.2, 0.3, -0.4, 0.5, 0.6, 0.7, 0.8, -0.9, 1.0, 1.1, 1.2, 0.1, -0.2, 0.3, 0.4, 0.5, 0.6, -0.7, 0.8, 0.9, 1.0, 1.1, -1.2, 0.1, 0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8]
  %xq = Reshape(%x, %s1) @"reshape_q"
  %xk = Reshape(%x, %s2) @"reshape_k"
  %xv = Reshape(%x, %s3) @"reshape_v"
  %xo = Reshape(%x, %other) @"reshape_other"
  %q = MatMul(%xq, %wq) @"q"
  %k = MatMul(%xk, %wk) @"k"
  %v = MatMul(%xv, %wv) @"v"
  %qr = Tanh(%q) @"q_tanh"
  %kr = Tanh(%k) @"k_tanh"
  %vr = Tanh(%v) @"v_tanh"
  %r1 = Relu(%xo) @"relu_1"
  %r2 = Relu(%xo) @"relu_2"
  %out = Reshape(%x, %s1) @"reshape_out"
  output %qr
  output %kr
  output %vr
  output %r1
  output %r2
  output %out
}
)";

}  // namespace

TEST_CASE("a repeated view goes, so that Q, K and V's GEMMs read one operand and merge",
          "[passes][merge_duplicates]") {
  auto r = test::run_rewrite(kWrapped, 3);
  Graph& g = *r.graph;
  // reshape_k and reshape_v repeat reshape_q; reshape_other views x otherwise; reshape_out writes a
  // graph output; the two Relus compute and stay (a kernel decides whether to share them).
  CHECK(test::count_op(g, "Reshape") == 3);
  CHECK(test::count_op(g, "Relu") == 2);
  const Value* xq = g.find_value("xq");
  REQUIRE(xq != nullptr);
  for (const char* p : {"q", "k", "v"}) CHECK(g.find_value(p)->producer->input(0) == xq);
  CHECK(g.find_value("out")->producer->name == "reshape_out");
  for (const auto& [name, want] : r.want) {
    INFO(name);
    CHECK(compare_tensors(r.got.at(name), want, 0, 0).ok);
  }
  // One operand: merge_gemms makes the three GEMMs one.
  auto merged = fusion::merge_sibling_gemms(g);
  REQUIRE(merged.is_ok());
  CHECK(test::count_op(g, "MatMul") == 1);
}
