// GEMM calls doing more than the product: GELU and ReLU recognised by what they compute and
// applied in cuBLASLt's epilogue (codegen::match_activation, find_gemm_folds), and sibling GEMMs of one
// activation merged into one call whose column slices are read in place
// (fusion::merge_sibling_gemms). Every case runs on the emu backend against the reference.
#include <fmt/format.h>

#include <tuple>

#include "codegen/gemm_activation.h"
#include "codegen/gemm_folds.h"
#include "fusion/merge_gemms.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// y = x w + b, then an activation written out node by node (`body` reads %h, writes %a).
// `t` is the element type of everything, constants included.
std::unique_ptr<Graph> gemm_then(const std::string& body, const std::string& consts = "",
                                 const std::string& t = "f32") {
  std::string c = consts;
  for (size_t at = c.find("f32["); at != std::string::npos; at = c.find("f32[", at + t.size()))
    c.replace(at, 3, t);
  auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 20 {{
  input %x: {2}[6,16]
  input %w: {2}[16,24]
  input %b: {2}[24]
{0}
  %y = MatMul(%x, %w) @"mm"
  %h = Add(%y, %b) @"bias"
{1}
  %o = Neg(%a) @"after"
  output %o
}}
)",
                                          c, body, t));
  test::run_frontend_or_die(*g);
  return g;
}

const char* kGeluConsts = R"(  const %half: f32[] = [0.5]
  const %one: f32[] = [1.0]
  const %two: f32[] = [2.0]
  const %three: f32[] = [3.0]
  const %c0: f32[] = [0.7978845608]
  const %c1: f32[] = [0.044715]
  const %c1_off: f32[] = [0.046]
  const %rs2: f32[] = [0.70710678]
  const %s2: f32[] = [1.41421356])";

// GPT-2's GELU (HF gelu_new) as torch.onnx writes it, reading %h and writing %a.
const char* kGeluTanhBody = R"(  %m = Mul(%h, %half)
  %p = Pow(%h, %three)
  %q = Mul(%p, %c1)
  %s = Add(%h, %q)
  %t = Mul(%s, %c0)
  %th = Tanh(%t)
  %t1 = Add(%th, %one)
  %a = Mul(%m, %t1))";

// BERT's erf form, dividing by sqrt(2).
const char* kGeluErfBody = R"(  %u = Div(%h, %s2)
  %e = Erf(%u)
  %e1 = Add(%e, %one)
  %m = Mul(%h, %e1)
  %a = Mul(%m, %half))";

// GPT-2's form with a wrong cubic coefficient (%c1_off for %c1): not GELU.
const std::string kGeluOffBody = [] {
  std::string b = kGeluTanhBody;
  return b.replace(b.find("%c1)"), 3, "%c1_off");
}();

std::optional<codegen::Activation> activation_after_bias(const Graph& g) {
  const auto users = g.users();
  for (const auto& n : g.nodes())
    if (n->name == "bias") {
      auto r = codegen::match_activation(g, users, n->output(0), [](const Node*) { return true; });
      if (!r) return std::nullopt;
      return r->kind;
    }
  return std::nullopt;
}

}  // namespace

TEST_CASE("GELU is recognised by what it computes, however the exporter wrote it", "[fusion]") {
  using codegen::Activation;
  const std::vector<std::pair<std::string, std::optional<Activation>>> cases = {
      {kGeluTanhBody, Activation::kGeluTanh},
      // x*x*x instead of Pow, constants on the left, halving by a Div at the end
      {R"(  %x2 = Mul(%h, %h)
  %x3 = Mul(%x2, %h)
  %q = Mul(%c1, %x3)
  %s = Add(%q, %h)
  %t = Mul(%c0, %s)
  %th = Tanh(%t)
  %t1 = Add(%one, %th)
  %m = Mul(%t1, %h)
  %a = Div(%m, %two))",
       Activation::kGeluTanh},
      {kGeluErfBody, Activation::kGeluErf},
      {R"(  %a = Gelu(%h) {approximate = "tanh"})", Activation::kGeluTanh},
      {R"(  %a = Gelu(%h))", Activation::kGeluErf},
      {kGeluOffBody, std::nullopt},
      // a missing half is not GELU
      {R"(  %u = Mul(%h, %rs2)
  %e = Erf(%u)
  %e1 = Add(%e, %one)
  %a = Mul(%h, %e1))",
       std::nullopt},
  };
  for (const auto& [body, want] : cases) {
    INFO(body);
    auto g = gemm_then(body, kGeluConsts);
    CHECK(activation_after_bias(*g) == want);
  }
}

TEST_CASE("GELU in float16, its constants rounded to float16, is still told from the erf form", "[fusion]") {
  // GPT-2 exported in float16 writes sqrt(2 / pi) and 0.044715 as float16 constants, which move
  // the function by about 1e-5; the erf form stays 4.7e-4 away from the tanh form.
  using codegen::Activation;
  CHECK(activation_after_bias(*gemm_then(kGeluTanhBody, kGeluConsts, "f16")) == Activation::kGeluTanh);
  CHECK(activation_after_bias(*gemm_then(kGeluErfBody, kGeluConsts, "f16")) == Activation::kGeluErf);
  CHECK(activation_after_bias(*gemm_then(kGeluOffBody, kGeluConsts, "f16")) == std::nullopt);
  // bfloat16 rounds the constants 8 times coarser: its tanh form is not told apart, and stays a kernel
  CHECK(activation_after_bias(*gemm_then(kGeluTanhBody, kGeluConsts, "bf16")) == std::nullopt);
}

TEST_CASE("a GEMM applies GELU's tanh form in its epilogue, the erf form only when allowed",
          "[fusion][emu]") {
  const std::string tanh_form = kGeluTanhBody;
  const std::string erf_form = R"(  %u = Mul(%h, %rs2)
  %e = Erf(%u)
  %e1 = Add(%e, %one)
  %m = Mul(%h, %e1)
  %a = Mul(%m, %half))";
  struct Case {
    std::string body;
    bool approximate;
    std::string epilogue;  // of the MatMul's call
    int folded;            // nodes the call takes over: the bias Add and the activation's nodes
  };
  for (const Case& c : {Case{tanh_form, false, "bias_gelu", 9}, Case{erf_form, false, "bias", 1},
                        Case{erf_form, true, "bias_gelu", 6}}) {
    INFO(c.body << "\napproximate: " << c.approximate);
    auto g = gemm_then(c.body, kGeluConsts);
    fusion::FusionOptions o = opts_lib("beam");
    o.approximate_gelu = c.approximate;
    auto plan = fusion::make_plan(*g, o);
    REQUIRE(plan.is_ok());
    const std::string text = fusion::explain(*plan);
    INFO(text);
    CHECK((text.find("stays a kernel: cuBLASLt's GELU epilogue computes the tanh form") !=
           std::string::npos) == (c.epilogue == "bias"));
    auto s = schedule_of(*g, *plan);
    REQUIRE(s.is_ok());
    CHECK(s->folded == c.folded);
    CHECK(s->kernels.size() == 1);  // the Neg, with the erf form when that stays a kernel
    REQUIRE(s->calls.size() == 1);
    CHECK(s->calls[0].gemm.epilogue == c.epilogue);
    if (c.epilogue == "bias_gelu") CHECK(s->calls[0].args[2]->name == "a");
    // The erf form run as the tanh form is within the emu tolerance only because GELU's two forms
    // differ by at most 4.7e-4; the reference computes the erf form.
    plan_matches_reference(*g, *plan, 71, c.approximate ? kGeluTanhForErf : kEmuF32);
  }
}

TEST_CASE("ReLU, as Relu or as Max with zero, is a GEMM epilogue with the bias or without", "[fusion][emu]") {
  using codegen::Activation;
  const std::string consts = R"(  const %zero: f32[] = [0.0]
  const %half: f32[] = [0.5])";
  const std::vector<std::pair<std::string, std::optional<Activation>>> recognised = {
      {"  %a = Relu(%h)", Activation::kRelu},
      {"  %a = Max(%zero, %h)", Activation::kRelu},
      {"  %a = Max(%h, %half)", std::nullopt},  // max(x, 0.5) is no ReLU
      {"  %a = LeakyRelu(%h) {alpha = 0.01}", std::nullopt},
  };
  for (const auto& [body, want] : recognised) {
    INFO(body);
    CHECK(activation_after_bias(*gemm_then(body, consts)) == want);
  }
  // Without the bias: the ReLU reads the product itself.
  auto plain = test::parse_or_die(R"(graph "g" opset 20 {
  input %x: f32[6,16]
  input %w: f32[16,24]
  %y = MatMul(%x, %w) @"mm"
  %a = Relu(%y) @"relu"
  %o = Neg(%a) @"after"
  output %o
}
)");
  test::run_frontend_or_die(*plain);
  struct Case {
    Graph* g;
    std::string epilogue;
    int folded;
  };
  auto biased = gemm_then("  %a = Relu(%h)");
  auto as_max = gemm_then("  %a = Max(%h, %zero)", consts);
  for (const Case& c : {Case{biased.get(), "bias_relu", 2}, Case{as_max.get(), "bias_relu", 2},
                        Case{plain.get(), "relu", 1}}) {
    INFO(c.epilogue);
    auto plan = fusion::make_plan(*c.g, opts_lib("beam"));
    REQUIRE(plan.is_ok());
    auto s = schedule_of(*c.g, *plan);
    REQUIRE(s.is_ok());
    CHECK(s->folded == c.folded);
    CHECK(s->kernels.size() == 1);  // the Neg
    REQUIRE(s->calls.size() == 1);
    CHECK(s->calls[0].gemm.epilogue == c.epilogue);
    CHECK(s->calls[0].args[2]->name == "a");
    // Half the products are negative: the emu GEMM's ReLU against the reference's.
    plan_matches_reference(*c.g, *plan, 79, kEmuF32);
  }
}

TEST_CASE("a Gemm applies GELU through a view, readers elsewhere keep the activation a kernel",
          "[fusion][emu]") {
  // GPT-2's MLP: Gemm with a bias vector, a Reshape back to [b, s, n], then the activation.
  auto g = test::parse_or_die(R"(graph "g" opset 20 {
  input %x: f32[8,16]
  input %w: f32[16,24]
  input %b: f32[24]
  input %w2: f32[16,24]
  const %shape: i64[3] = [2, 4, 24]
  %y = Gemm(%x, %w, %b) @"fc"
  %r = Reshape(%y, %shape) @"view"
  %a = Gelu(%r) {approximate = "tanh"} @"act"
  %y2 = Gemm(%x, %w2, %b) @"fc2"
  %a2 = Gelu(%y2) {approximate = "tanh"} @"act2"
  %n2 = Neg(%y2) @"also_reads_product"
  output %a
  output %a2
  output %n2
}
)");
  test::run_frontend_or_die(*g);
  CHECK(folded_names(*g, codegen::FoldOptions(true)) == std::set<std::string>{"view", "act"});
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  auto s = schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  for (const auto& call : s->calls)
    CHECK(call.gemm.epilogue == (call.node->name == "fc" ? "bias_gelu" : "bias"));
  CHECK(fused_matches_reference(*g, 73) == 1);  // act2 and the Neg: one kernel
}

TEST_CASE("sibling GEMMs (Q, K, V) become one GEMM whose column slices are read in place", "[fusion][emu]") {
  // BERT's projections: three MatMuls of one activation with constant weights and biases, each
  // split into heads for the attention GEMMs; two bias-free siblings whose products are gated
  // (LLaMA's gate and up); a MatMul with a weight given at run time; two siblings of another
  // activation that are graph outputs (a copy each out of a merged product: not merged).
  // Constant weights with values in [-1, 1) from a fixed linear congruential sequence.
  uint32_t state = 12345;
  auto values = [&](int count) {
    std::string out;
    for (int i = 0; i < count; ++i) {
      state = state * 1664525u + 1013904223u;
      out += fmt::format("{}{:.4f}", i ? ", " : "", static_cast<double>(state >> 8) / (1 << 23) - 1.0);
    }
    return "[" + out + "]";
  };
  std::string consts;
  for (const auto& [name, shape, count] :
       std::vector<std::tuple<std::string, std::string, int>>{{"wq", "8,8", 64},
                                                              {"wk", "8,8", 64},
                                                              {"wv", "8,8", 64},
                                                              {"bq", "8", 8},
                                                              {"bk", "8", 8},
                                                              {"bv", "8", 8},
                                                              {"wo", "8,8", 64},
                                                              {"w1", "8,6", 48},
                                                              {"w2", "8,6", 48}})
    consts += fmt::format("  const %{}: f32[{}] = {}\n", name, shape, values(count));
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2,5,8]
  input %z: f32[2,5,8]
  input %wr: f32[8,8]
)" + consts + R"(  const %heads: i64[4] = [2, 5, 2, 4]
  %q0 = MatMul(%x, %wq) @"q"
  %q = Add(%q0, %bq) @"q_bias"
  %k0 = MatMul(%x, %wk) @"k"
  %k = Add(%bk, %k0) @"k_bias"
  %v0 = MatMul(%x, %wv) @"v"
  %v = Add(%v0, %bv) @"v_bias"
  %qh = Reshape(%q, %heads) @"q_heads"
  %kh = Reshape(%k, %heads) @"k_heads"
  %vh = Reshape(%v, %heads) @"v_heads"
  %qt = Transpose(%qh) {perm = ints[0, 2, 1, 3]} @"q_t"
  %kt = Transpose(%kh) {perm = ints[0, 2, 3, 1]} @"k_t"
  %vt = Transpose(%vh) {perm = ints[0, 2, 1, 3]} @"v_t"
  %s = MatMul(%qt, %kt) @"scores"
  %p = Softmax(%s) {axis = -1} @"softmax"
  %c = MatMul(%p, %vt) @"context"
  %o = MatMul(%z, %wo) @"output_1"
  %o2 = MatMul(%z, %w1) @"output_2"
  %r = MatMul(%x, %wr) @"runtime_weight"
  %g1 = MatMul(%x, %w1) @"gate"
  %u1 = MatMul(%x, %w2) @"up"
  %gu = Mul(%g1, %u1) @"gated"
  output %c
  output %o
  output %o2
  output %r
  output %gu
}
)");
  test::run_frontend_or_die(*g);
  const size_t nodes_before = g->nodes().size();
  auto merged = fusion::merge_sibling_gemms(*g);
  REQUIRE(merged.is_ok());
  REQUIRE(merged->size() == 2);
  CHECK(
      (*merged)[0].find(
          "node 'q' (MatMul), node 'k' (MatMul), node 'v' (MatMul) -> node 'q/merged' (MatMul, n = 8+8+8)") !=
      std::string::npos);
  CHECK((*merged)[1].find("node 'gate' (MatMul), node 'up' (MatMul) -> ") != std::string::npos);
  CHECK((*merged)[1].find("n = 6+6") != std::string::npos);
  // q, k, v and their biases, gate and up -> two MatMuls, one Add and five Slices
  CHECK(g->nodes().size() == nodes_before - 8 + 8);
  int matmuls = 0;
  for (const auto& n : g->nodes()) matmuls += n->op_type == "MatMul";
  CHECK(matmuls == 7);  // q/merged, scores, context, output_1, output_2, runtime_weight, gate/merged
  auto plan = fusion::make_plan(*g, opts_lib("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  auto s = schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  CHECK(s->calls.size() == 7);
  for (const auto& call : s->calls) {
    if (call.node->name == "q/merged") CHECK(call.gemm.epilogue == "bias");
    if (call.node->name == "scores") {  // Q and K read out of the merged product: offsets 0 and 8, rows of 24
      CHECK(call.gemm.offset_a == 0);
      CHECK(call.gemm.offset_b == 8);
      CHECK(call.gemm.lda == 24);
      CHECK(call.gemm.ldb == 24);
      CHECK(call.gemm.trans_b);
    }
    if (call.node->name == "context") CHECK(call.gemm.offset_b == 16);
  }
  CHECK(s->kernels.size() == 1);  // the softmax, packed with the gating Mul that reads both slices
  plan_matches_reference(*g, *plan, 81);
}

TEST_CASE("GEMMs and convolutions in float16 and bfloat16 are calls with their epilogues", "[fusion][emu]") {
  // A layer with a bias and ReLU, a product through a transposed weight (Gemm) and a convolution
  // with a bias: each a library call in the half type, computed in float by the emu backend's CPU
  // GEMM and convolution against the reference, which rounds each op's output to the half type.
  // (Each reads graph inputs: one product's rounded output feeding another would compare the
  // reference's extra roundings amplified by the contraction, not the calls.)
  for (const std::string t : {"f16", "bf16"}) {
    INFO(t);
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 20 {{
  input %x: {0}[6,40]
  input %w: {0}[40,24]
  input %b: {0}[24]
  input %x2: {0}[5,24]
  input %w2: {0}[8,24]
  input %img: {0}[1,3,9,9]
  input %k: {0}[4,3,3,3]
  input %kb: {0}[4]
  %y = MatMul(%x, %w) @"mm"
  %h = Add(%y, %b) @"bias"
  %a = Relu(%h) @"relu"
  %o = Neg(%a) @"after"
  %z = Gemm(%x2, %w2) {{transB = 1}} @"gemm"
  %c = Conv(%img, %k, %kb) {{pads = ints[1, 1, 1, 1]}} @"conv"
  output %o
  output %z
  output %c
}}
)",
                                            t));
    test::run_frontend_or_die(*g);
    auto plan = fusion::make_plan(*g, opts_lib("beam"));
    REQUIRE(plan.is_ok());
    auto s = schedule_of(*g, *plan);
    INFO(s.status().message());
    REQUIRE(s.is_ok());
    REQUIRE(s->calls.size() == 3);
    CHECK(s->calls[0].gemm.epilogue == "bias_relu");
    CHECK(s->kernels.size() == 1);  // the Neg
    for (const auto& c : s->calls) CHECK(dtype_name(c.dtype) == t);
    plan_matches_reference(*g, *plan, 83, t == "f16" ? kEmuF16Chain : kEmuBF16Chain);
  }
}
