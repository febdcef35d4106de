// Fine-grained GEMMs in stitched kernels: a MatMul of two computed operands with a short
// contraction (attention's Q.K^T) evaluated as a loop inside the kernel of its consumers. Which
// MatMuls qualify, the loop the stitcher emits, the planner's choice against the library call,
// the cost terms, and results on emu against the reference.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "codegen/scalar_ops.h"
#include "codegen/stitch.h"
#include "fusion/cost.h"
#include "fusion/merge_gemms.h"
#include "fusion_test_util.h"

namespace stitch {
namespace {

using test::node_named;
using test::opts;

// Scaled, masked attention scores and their softmax for B x H heads of S positions of size D;
// the probabilities then weight V through a second MatMul.
std::string attention_text(int b, int h, int s, int d, const char* type = "f32") {
  return fmt::format(R"(graph "attention" opset 18 {{
  input %q: {4}[{0},{1},{2},{3}]
  input %k: {4}[{0},{1},{2},{3}]
  input %v: {4}[{0},{1},{2},{3}]
  input %mask: {4}[{0},1,1,{2}]
  const %scale: {4}[] = [0.35]
  %kt = Transpose(%k) {{perm = ints[0, 1, 3, 2]}} @"k_t"
  %s = MatMul(%q, %kt) @"scores"
  %ss = Mul(%s, %scale) @"scale"
  %sm = Add(%ss, %mask) @"mask"
  %p = Softmax(%sm) {{axis = -1}} @"softmax"
  %c = MatMul(%p, %v) @"context"
  output %c
}})",
                     b, h, s, d, type);
}

// The plan's group holding node `name`.
const fusion::FusionGroup* group_of(const fusion::FusionPlan& p, const std::string& name) {
  for (const auto& grp : p.groups)
    for (const Node* n : grp.nodes)
      if (n->name == name) return &grp;
  return nullptr;
}

}  // namespace

TEST_CASE("fine-grained MatMuls: at most one constant operand, a short contraction, floating point",
          "[stitch]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %a: f32[4,8]
  input %b: f32[8,5]
  input %x: f32[8]
  input %y: f32[8]
  input %long: f32[4,300]
  input %longb: f32[300,5]
  input %i: i32[4,8]
  input %ib: i32[8,5]
  const %w: f32[8,5] = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40]
  const %wa: f32[4,8] = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]
  %m = MatMul(%a, %b) @"computed"
  %c = MatMul(%a, %w) @"weight"
  %c2 = MatMul(%wa, %b) @"weight_first"
  %d = MatMul(%x, %y) @"vectors"
  %e = MatMul(%long, %longb) @"long"
  %f = MatMul(%i, %ib) @"ints"
  output %m
  output %c
  output %c2
  output %d
  output %e
  output %f
})");
  test::run_frontend_or_die(*g);
  CHECK(codegen::contraction_length(*node_named(*g, "computed")) == 8);
  CHECK(codegen::stitch_role(*node_named(*g, "computed")) == codegen::StitchRole::kContraction);
  // A constant operand on either side: the planner weighs the loop against the call (its
  // re-reads of the weight, cost.h), e.g. FFN1 + bias + GELU in one kernel at small sizes.
  CHECK(codegen::contraction_length(*node_named(*g, "weight")) == 8);
  CHECK(codegen::stitch_role(*node_named(*g, "weight")) == codegen::StitchRole::kContraction);
  CHECK(codegen::contraction_length(*node_named(*g, "weight_first")) == 8);
  CHECK_FALSE(codegen::contraction_length(*node_named(*g, "vectors")));  // 1-D operands
  CHECK_FALSE(codegen::contraction_length(*node_named(*g, "long")));     // 300 > kMaxContraction
  // An integer MatMul is no MatMul after the front end: its products and their sum
  // (expand_integer_matmuls), since the loops accumulate in a float type.
  for (const auto& n : g->nodes()) CHECK_FALSE((n->op_type == "MatMul" && is_int(n->output(0)->dtype)));
  CHECK(node_named(*g, "ints/sum")->op_type == "ReduceSum");
}

TEST_CASE("attention scores join their softmax: one row kernel, the scores never stored",
          "[stitch][fusion][emu]") {
  auto g = test::parse_or_die(attention_text(2, 3, 20, 8));
  test::run_frontend_or_die(*g);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, opts(mode));
    REQUIRE(plan.is_ok());
    const std::string text = fusion::explain(*plan);
    INFO(text);
    const fusion::FusionGroup* grp = group_of(*plan, "scores");
    REQUIRE(grp != nullptr);
    CHECK(grp->scheme == "regional");
    CHECK(group_of(*plan, "softmax") == grp);
    CHECK(group_of(*plan, "k_t") == grp);  // the transpose is an index map of the loop
    CHECK(group_of(*plan, "context")->scheme == "library");
    CHECK_THAT(text, Catch::Contains("fine-grained MatMuls stitched into kernels (1 of them"));
    CHECK_THAT(text, Catch::Contains("node 'scores' (MatMul)"));
    CHECK(plan->cost.kernels == 1);
    CHECK(plan->cost.library_calls == 1);
    CHECK(test::fused_matches_reference(*g, 3, mode) == 1);
  }
  // The kernel: a loop over the 8 steps inside the row pass, reading q and k directly.
  std::vector<const Node*> group;
  for (const char* name : {"k_t", "scores", "scale", "mask", "softmax"})
    group.push_back(node_named(*g, name));
  const Value* probs = node_named(*g, "softmax")->output(0);
  auto k = codegen::lower_stitched(group, {probs}, 0, true);
  INFO(k.status().message());
  REQUIRE(k.is_ok());
  INFO(k->source);
  CHECK_THAT(k->source, Catch::Contains("// MatMul 'scores': 8 steps"));
  // 32-bit index arithmetic: every tensor here is far below kIndex32Limit.
  CHECK_THAT(k->source, Catch::Contains("for (int kk0 = 0; kk0 < 8; ++kk0)"));
  std::set<std::string> params;
  for (const auto& p : k->params) params.insert(p.value->name);
  CHECK(params == std::set<std::string>{"q", "k", "mask", "scale", "p"});
  // The scores row is cached by the first pass: later passes do not run the loop again.
  CHECK_THAT(k->mapping, Catch::Contains("cached in shared memory"));
  size_t loops = 0;
  for (size_t at = k->source.find("for (int kk"); at != std::string::npos;
       at = k->source.find("for (int kk", at + 1))
    ++loops;
  CHECK(loops == 1);
}

namespace {

// BERT's FFN1: rows of k features times a constant [k, n] weight, its bias and the erf-form GELU.
std::unique_ptr<Graph> ffn1(int rows, int k, int n) {
  return test::ffn_gelu(std::to_string(rows), k, n, 4242, -0.5, "ffn1");
}

}  // namespace

TEST_CASE(
    "a MatMul with a constant weight joins its bias and erf GELU when the loop is cheaper than the call",
    "[fusion][emu]") {
  // 6 rows of 16 times [16, 24]: one element kernel, the weight read by the loop, no call (cuBLASLt's
  // GELU epilogue is the tanh form, so with the call the GELU would be a second launch).
  auto g = ffn1(6, 16, 24);
  test::run_frontend_or_die(*g);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, opts(mode));
    REQUIRE(plan.is_ok());
    const std::string text = fusion::explain(*plan);
    INFO(text);
    const fusion::FusionGroup* grp = group_of(*plan, "ffn1");
    REQUIRE(grp != nullptr);
    CHECK(grp->scheme == "local");
    for (const char* name : {"bias", "erf", "gelu"}) CHECK(group_of(*plan, name) == grp);
    CHECK(plan->cost.kernels == 1);
    CHECK(plan->cost.library_calls == 0);
    CHECK_THAT(text, Catch::Contains("fine-grained MatMuls stitched into kernels (1 of them"));
    CHECK(test::fused_matches_reference(*g, 11, mode) == 1);
  }
  // 8192 rows of 256 times [256, 256]: the loop would re-read the weight once per row (2 GB from
  // L2), the call reads it once; the planner keeps the call with its bias epilogue, and the GELU
  // stays a kernel of its own.
  auto big = ffn1(8192, 256, 256);
  test::run_frontend_or_die(*big);
  auto plan = fusion::make_plan(*big, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(group_of(*plan, "ffn1")->scheme == "library");
  CHECK(plan->cost.library_calls == 1);
  CHECK(plan->cost.kernels == 1);
}

TEST_CASE("the user can keep fine-grained MatMuls as library calls", "[fusion]") {
  auto g = test::parse_or_die(attention_text(2, 3, 20, 8));
  test::run_frontend_or_die(*g);
  fusion::FusionOptions off = opts("beam");
  off.stitch_matmul = false;
  auto lib = fusion::make_plan(*g, off);
  REQUIRE(lib.is_ok());
  CHECK(group_of(*lib, "scores")->scheme == "library");
  CHECK(lib->contraction_note.empty());
  // Named in --no-fuse: that MatMul alone stays a call (with its transpose and scaling folded in).
  auto kept = fusion::make_plan(*g, opts("beam", {"scores"}));
  REQUIRE(kept.is_ok());
  INFO(fusion::explain(*kept));
  CHECK(group_of(*kept, "scores")->scheme == "library");
  CHECK(group_of(*kept, "k_t")->scheme == "folded");
  CHECK(kept->cost.library_calls == 2);
}

TEST_CASE("the cost model keeps large attention on the library: the loop's operand reads are charged",
          "[fusion]") {
  // BERT-base's heads at sequence 128: every score row would read all of K again (402 MB).
  auto g = test::parse_or_die(attention_text(8, 12, 128, 64));
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  const std::string text = fusion::explain(*plan);
  INFO(text);
  CHECK(group_of(*plan, "scores")->scheme == "library");
  CHECK_THAT(text, Catch::Contains("fine-grained MatMuls stay library calls"));
  // The terms behind it, on the group the search weighed.
  std::vector<const Node*> group;
  for (const char* name : {"k_t", "scores", "scale", "mask", "softmax"})
    group.push_back(node_named(*g, name));
  const Value* probs = node_named(*g, "softmax")->output(0);
  auto info = codegen::analyze_stitch(group, {probs});
  REQUIRE(info.is_ok());
  const double scores = 8.0 * 12 * 128 * 128;
  CHECK(info->contraction_macs == Approx(scores * 64));
  CHECK(info->contraction_ops == Approx(scores * 64));  // the transpose of K, once per step
  // K's element once per score and step; Q's shared by a warp's 32 lanes.
  CHECK(info->contraction_reads == static_cast<int64_t>(scores * 64 * 4 + scores / 32 * 64 * 4));
  auto spec = fusion::device_spec("sm_90");
  REQUIRE(spec.is_ok());
  const fusion::Cost c = fusion::stitched_cost(group, *info, *spec);
  CHECK(c.reread >= info->contraction_reads);
  CHECK(c.flops >= 2 * info->contraction_macs);
}

TEST_CASE("the cost model weighs each op by the instructions of its expression", "[stitch][cost]") {
  auto g = test::parse_or_die(R"(graph "g" opset 20 {
  input %h: f32[4,8]
  input %p: f32[4,8]
  const %w: f32[8,5] = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40]
  const %sqrt2: f32[] = [1.4142135]
  const %two: f32[] = [2.0]
  %d = Div(%h, %sqrt2) @"div"
  %e = Erf(%d) @"erf"
  %e1 = Add(%e, %sqrt2) @"add"
  %m = Mul(%h, %e1) @"mul"
  %y = MatMul(%m, %w) @"ffn2"
  %s = Sigmoid(%h) @"sigmoid"
  %q = Pow(%h, %two) @"square"
  %r = Pow(%h, %p) @"pow"
  %ge = Gelu(%h) @"gelu"
  %gt = Gelu(%h) {approximate = "tanh"} @"gelu_tanh"
  %t = Transpose(%h) @"transpose"
  output %y
  output %s
  output %q
  output %r
  output %ge
  output %gt
  output %t
})");
  test::run_frontend_or_die(*g);
  // 1 per node, plus nvcc's sm_90 instructions for each function and division (measure.py).
  const std::map<std::string, int> want = {{"div", 13},  {"erf", 31},       {"add", 1},      {"mul", 1},
                                           {"ffn2", 1},  {"sigmoid", 23},   {"square", 1},   {"pow", 96},
                                           {"gelu", 31}, {"gelu_tanh", 18}, {"transpose", 1}};
  for (const auto& [name, n] : want) {
    INFO(name);
    CHECK(codegen::op_instructions(*node_named(*g, name)) == n);
  }
  // The GELU chain in front of the loop runs once per step: 4 x 5 outputs x 8 steps.
  std::vector<const Node*> group;
  for (const char* name : {"div", "erf", "add", "mul", "ffn2"}) group.push_back(node_named(*g, name));
  auto info = codegen::analyze_stitch(group, {node_named(*g, "ffn2")->output(0)});
  REQUIRE(info.is_ok());
  CHECK(info->contraction_macs == Approx(4 * 5 * 8));
  CHECK(info->contraction_ops == Approx(4 * 5 * 8 * (13 + 31 + 1 + 1)));
  // Alone, an Erf costs 31 operations per element, a Transpose 1.
  auto spec = fusion::device_spec("sm_90");
  REQUIRE(spec.is_ok());
  CHECK(fusion::single_cost(*node_named(*g, "erf"), *spec).flops == Approx(32 * 31));
  CHECK(fusion::single_cost(*node_named(*g, "transpose"), *spec).flops == Approx(32));
}

TEST_CASE("the cost model charges a group the columns it keeps through views and transposes of a slice",
          "[stitch][cost]") {
  // A merged GEMM's product [4,6,16]: its first 12 columns viewed as 3 heads of 4, 2 heads kept
  // and put heads first. The group reads 2 heads' columns (8 of 16), not the 12 the outer Slice
  // keeps; a reader of the whole view reads all 12.
  auto g = test::parse_or_die(R"(graph "g" opset 20 {
  input %x: f32[4,6,16]
  const %c0: i64[1] = [0]
  const %c2: i64[1] = [2]
  const %c12: i64[1] = [12]
  const %ax2: i64[1] = [2]
  const %heads: i64[4] = [4, 6, 3, 4]
  const %two: f32[] = [2.0]
  %c = Slice(%x, %c0, %c12, %ax2) @"columns"
  %v = Reshape(%c, %heads) @"view"
  %q = Slice(%v, %c0, %c2, %ax2) @"q_heads"
  %t = Transpose(%q) {perm = ints[0, 2, 1, 3]} @"q_first"
  %y = Mul(%t, %two) @"scaled"
  %w = Mul(%v, %two) @"whole"
  output %y
  output %w
})");
  test::run_frontend_or_die(*g);
  auto spec = fusion::device_spec("sm_90");
  REQUIRE(spec.is_ok());
  auto bytes = [&](const std::vector<const char*>& names) {
    std::vector<const Node*> group;
    for (const char* name : names) group.push_back(node_named(*g, name));
    const Value* out = group.back()->output(0);
    auto info = codegen::analyze_stitch(group, {out});
    REQUIRE(info.is_ok());
    return fusion::stitched_cost(group, *info, *spec).bytes;
  };
  // Read and stored f32 elements, plus the small constants the group reads: the Slices' starts,
  // ends and axes (i64[1] each, %c0 shared), the shape (i64[4]) and the factor (f32).
  const int64_t heads2 = 4 * 6 * 8 * 4, columns = 4 * 6 * 12 * 4;
  CHECK(bytes({"columns", "view", "q_heads", "q_first", "scaled"}) == heads2 + heads2 + 4 * 8 + 32 + 4);
  CHECK(bytes({"view", "q_heads", "q_first", "scaled"}) == heads2 + heads2 + 3 * 8 + 32 + 4);
  CHECK(bytes({"columns", "view", "whole"}) == columns + columns + 3 * 8 + 32 + 4);
}

TEST_CASE("a contraction cannot follow a row op in its kernel, nor be broadcast into the rows", "[stitch]") {
  auto g = test::parse_or_die(attention_text(2, 3, 20, 8));
  test::run_frontend_or_die(*g);
  std::vector<const Node*> group{node_named(*g, "softmax"), node_named(*g, "context")};
  auto info = codegen::analyze_stitch(group, {node_named(*g, "context")->output(0)});
  REQUIRE_FALSE(info.is_ok());
  CHECK_THAT(
      info.status().message(),
      Catch::Contains("node 'context' (MatMul) multiplies a value computed from a row op in the group"));
  auto h = test::parse_or_die(R"(graph "g" opset 18 {
  input %a: f32[6,1,8]
  input %b: f32[8,1]
  input %x: f32[6,4,40]
  %m = MatMul(%a, %b) @"per_row"
  %y = Add(%x, %m) @"add"
  %z = Softmax(%y) {axis = -1} @"softmax"
  output %z
})");
  test::run_frontend_or_die(*h);
  auto bad = codegen::analyze_stitch(test::all_nodes(*h), {h->outputs[0]});
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("would be broadcast into the rows"));
}

TEST_CASE("a kernel is a GEMM with its epilogue, or memory-intensive once it reduces or has no GEMM",
          "[stitch]") {
  std::string weight;
  for (int i = 0; i < 16 * 8; ++i) weight += fmt::format("{}{}", i ? ", " : "", (i % 7) * 0.125 - 0.375);
  // x [4, 16] times a constant [16, 8], then `tail` (the kernel's nodes point into the graph).
  const auto graph_of = [&](const std::string& tail) {
    auto g = test::parse_or_die("graph \"g\" opset 18 {\n  input %x: f32[4,16]\n  const %w: f32[16,8] = [" +
                                weight + "]\n  %m = MatMul(%x, %w) @\"m\"\n" + tail + "\n}\n");
    test::run_frontend_or_die(*g);
    return g;
  };
  SECTION("a loop GEMM with its bias and activation") {
    const auto g = graph_of(R"(  const %b: f32[8] = [1, 2, 3, 4, 5, 6, 7, 8]
  %y = Add(%m, %b) @"bias"
  %r = Relu(%y) @"relu"
  output %r)");
    const codegen::Kernel k = test::lower_whole_graph(*g);
    REQUIRE(k.nodes.size() == 3);
    CHECK(codegen::is_gemm_kernel(k));
  }
  SECTION("the same GEMM before a softmax") {
    const auto g = graph_of(R"(  %s = Softmax(%m) {axis = -1} @"softmax"
  output %s)");
    const codegen::Kernel k = test::lower_whole_graph(*g);
    REQUIRE(k.nodes.size() == 2);
    CHECK_FALSE(codegen::is_gemm_kernel(k));
  }
  SECTION("element-wise work alone") {
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,16]
  %a = Abs(%x) @"abs"
  %e = Exp(%a) @"exp"
  output %e
})");
    test::run_frontend_or_die(*g);
    CHECK_FALSE(codegen::is_gemm_kernel(test::lower_whole_graph(*g)));
  }
}

TEST_CASE("contractions in element kernels: broadcast batch axes, nested products, f16, on emu",
          "[stitch][emu]") {
  SECTION("batch axes broadcast both ways, with a bias and an activation") {
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %a: f32[2,1,4,6]
  input %b: f32[3,6,5]
  input %bias: f32[5]
  %m = MatMul(%a, %b) @"m"
  %y = Add(%m, %bias) @"bias"
  %z = Relu(%y) @"relu"
  output %z
})");
    test::run_frontend_or_die(*g);
    CHECK(test::one_group_matches_reference(*g, 5));
    const codegen::Kernel k = test::lower_whole_graph(*g);
    CHECK_THAT(k.source, Catch::Contains("// MatMul 'm': 6 steps"));
  }
  SECTION("a product of a product: nested loops") {
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[7,6]
  input %y: f32[6,5]
  input %w: f32[5,3]
  %m = MatMul(%x, %y) @"inner"
  %n = MatMul(%m, %w) @"outer"
  %o = Neg(%n) @"neg"
  output %o
})");
    test::run_frontend_or_die(*g);
    CHECK(test::one_group_matches_reference(*g, 9));
    const codegen::Kernel k = test::lower_whole_graph(*g);
    INFO(k.source);
    // The inner loop runs inside the outer one: its step variable is declared after the outer's.
    const size_t outer = k.source.find("// MatMul 'outer': 5 steps");
    const size_t inner = k.source.find("// MatMul 'inner': 6 steps");
    REQUIRE(outer != std::string::npos);
    REQUIRE(inner != std::string::npos);
    CHECK(outer < inner);
    auto info = codegen::analyze_stitch(test::all_nodes(*g), {g->outputs[0]});
    REQUIRE(info.is_ok());
    // outer: 21 outputs x 5 steps; inner: once per output and step of the outer loop, 6 steps each.
    CHECK(info->contraction_macs == Approx(21.0 * 5 + 21.0 * 5 * 6));
  }
  SECTION("4 outputs a thread: the 4 lanes share one loop, one A load and one float4 of B a step") {
    // The product read at the domain's columns, and a Slice of it at columns shifted by 16 (a
    // merged Q/K/V projection's third).
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[6,40]
  input %w: f32[40,48]
  input %bias: f32[48]
  const %st: i64[1] = [16]
  const %en: i64[1] = [32]
  const %ax: i64[1] = [1]
  %m = MatMul(%x, %w) @"proj"
  %y = Add(%m, %bias) @"bias"
  %s = Slice(%y, %st, %en, %ax) @"third"
  %r = Relu(%s) @"relu"
  output %r
})");
    test::run_frontend_or_die(*g);
    const codegen::Kernel kern = test::lower_whole_graph(*g);
    INFO(kern.source);
    REQUIRE_THAT(kern.mapping, Catch::Contains("one thread per 4 elements"));
    CHECK_THAT(kern.source, Catch::Contains("// MatMul 'proj': 40 steps, the 4 lanes' columns"));
    CHECK_THAT(kern.source,
               Catch::Contains("reinterpret_cast<const float4*>(x1)[((kk0 * 48 + (16 + (i % 16)))) >> 2]"));
    CHECK(kern.source.find("// MatMul 'proj': 40 steps\n") ==
          std::string::npos);  // no loop of its own per lane
    CHECK(test::one_group_matches_reference(*g, 21));
  }
  SECTION("4 outputs a thread, B computed in the kernel: each lane's loop, unrolled up to 64 steps") {
    for (const auto& [k, unrolled] : {std::pair{64, true}, {65, false}}) {
      INFO(k);
      auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 18 {{
  input %x: f32[6,{0}]
  input %v: f32[{0},16]
  input %bias: f32[16]
  %w = Neg(%v) @"neg"
  %m = MatMul(%x, %w) @"proj"
  %y = Add(%m, %bias) @"bias"
  output %y
}})",
                                              k));
      test::run_frontend_or_die(*g);
      const codegen::Kernel kern = test::lower_whole_graph(*g);
      INFO(kern.source);
      REQUIRE_THAT(kern.mapping, Catch::Contains("one thread per 4 elements"));
      CHECK(kern.source.find("the 4 lanes' columns") == std::string::npos);
      CHECK((kern.source.find("#pragma unroll\n    for (int kk") != std::string::npos) == unrolled);
      CHECK(test::one_group_matches_reference(*g, 21));
    }
  }
  SECTION("f16 scores and softmax, f32 accumulation") {
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %q: f16[1,2,24,16]
  input %k: f16[1,2,24,16]
  input %mask: f16[1,1,1,24]
  const %scale: f16[] = [0.25]
  %kt = Transpose(%k) {perm = ints[0, 1, 3, 2]} @"k_t"
  %s = MatMul(%q, %kt) @"scores"
  %ss = Mul(%s, %scale) @"scale"
  %sm = Add(%ss, %mask) @"mask"
  %p = Softmax(%sm) {axis = -1} @"softmax"
  output %p
})");
    test::run_frontend_or_die(*g);
    CHECK(test::one_group_matches_reference(*g, 13, kEmuF16Chain));
    const codegen::Kernel k = test::lower_whole_graph(*g);
    CHECK_THAT(k.source, Catch::Contains("float dot"));
  }
}

TEST_CASE("with fine-grained MatMuls, ILP still equals brute force and beam is not worse than greedy",
          "[fusion]") {
  auto g = test::parse_or_die(attention_text(2, 2, 12, 4));
  test::run_frontend_or_die(*g);
  const test::AllPlans plans = test::plans_agree(*g);
  CHECK(plans.brute.contraction_note == plans.ilp.contraction_note);
}

TEST_CASE("llama_tiny: rotary, scores and softmax in one kernel, at most 10 launches per layer",
          "[fusion][models][emu]") {
  auto g = test::prepared_model("llama_tiny");
  REQUIRE(fusion::merge_sibling_gemms(*g).is_ok());
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  const std::string text = fusion::explain(*plan);
  INFO(text);
  const auto layers = test::groups_with(*plan, {"MatMul", "Softmax"});
  CHECK(layers.size() == 2);
  for (const fusion::FusionGroup* grp : layers) {
    CHECK(test::has_op(*grp, "Concat"));  // the rotary halves
    CHECK(grp->scheme == "regional");
  }
  auto s = test::schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  // Per layer 5 GEMM calls (Q/K/V merged, P.V, the output projection with its residual as C,
  // gate/up merged, down with its residual) and 4 generated kernels (rotary + scores + softmax;
  // the second RMSNorm; the SiLU gate; the next RMSNorm); besides the layers, the embedding's
  // RMSNorm packed with the mask's kernel (Cast, GatherND, And, Where). stitchc moves the norms'
  // row scales past gate/up, which makes the norm and the gate one kernel: 3 per layer
  // (test_fusion.cc). (Until loop_step was measured on an H100, the output and down projections
  // were loops in the norms' row kernels: 3 calls and 3 kernels per layer, slower on the GPU;
  // before the GatherND was an index map: 3 launches besides the layers. Its results against
  // PyTorch on emu: tests/e2e/backend_tests.sh.)
  CHECK(s->calls.size() == 2 * 5);
  CHECK(s->kernels.size() == 1 + 2 * 4);
  CHECK(s->kernels.size() + s->calls.size() <= 2 + 2 * 10);
}

}  // namespace stitch

namespace stitch {

TEST_CASE("kernels with contraction loops compile with nvcc for sm_80 and sm_90 without spills",
          "[stitch][nvcc]") {
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %q: f16[2,4,64,32]
  input %k: f16[2,4,64,32]
  input %mask: f16[2,1,1,64]
  input %x: f32[7,6]
  input %y: f32[6,5]
  input %w: f32[5,3]
  const %scale: f16[] = [0.25]
  %kt = Transpose(%k) {perm = ints[0, 1, 3, 2]} @"k_t"
  %s = MatMul(%q, %kt) @"scores"
  %ss = Mul(%s, %scale) @"scale"
  %sm = Add(%ss, %mask) @"mask"
  %p = Softmax(%sm) {axis = -1} @"softmax"
  %m = MatMul(%x, %y) @"inner"
  %n = MatMul(%m, %w) @"outer"
  %o = Neg(%n) @"neg"
  output %p
  output %o
})");
  test::run_frontend_or_die(*g);
  codegen::NodeGroups groups(2);
  for (const auto& n : g->nodes()) groups[n->output(0)->dtype == DType::kF16 ? 0 : 1].push_back(n.get());
  auto s = codegen::build_schedule(*g, &groups);
  REQUIRE(s.is_ok());
  REQUIRE(s->kernels.size() == 2);
  REQUIRE(s->calls.empty());
  const auto dir = test::compile_without_spills(*g, *s, "contract");
  std::filesystem::remove_all(dir);
}

}  // namespace stitch
