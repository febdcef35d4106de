// LayerNorms moved past GEMMs (fusion::hoist_layer_norms): a float32 LayerNorm in front of a GEMM
// with a constant weight becomes a GEMM of the norm's input, its weight folded in, with the mean,
// the scale and the bias applied to the product in the kernel that reads it (BERT's FFN1 and its
// GELU). Every rewrite is checked against the reference interpreter on the original graph, every
// plan on emu against the reference, and the cancellation in x W' - mean * column sums is measured
// at rows far from zero.
#include <fmt/format.h>

#include <string>

#include "fusion/hoist_scales.h"
#include "fusion_test_util.h"
#include "ir/graph.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// The norm as TorchScript writes it (mean, centered rows, Pow, mean, eps, Sqrt, Div, weight,
// bias), reading %x and writing %y.
const char* kScriptLayerNorm = R"(  %mu = ReduceMean(%x) {axes = ints[-1], keepdims = 1} @"mean"
  %d = Sub(%x, %mu) @"center"
  %sq = Pow(%d, %two) @"pow"
  %var = ReduceMean(%sq) {axes = ints[-1], keepdims = 1} @"variance"
  %ve = Add(%var, %eps) @"add_eps"
  %sd = Sqrt(%ve) @"sqrt"
  %n = Div(%d, %sd) @"normalize"
  %m = Mul(%n, %gamma) @"weight"
  %y = Add(%m, %beta) @"bias")";

// The op, as torch.export writes it from opset 17.
const char* kOpLayerNorm =
    R"(  %y = LayerNormalization(%x, %gamma, %beta) {axis = -1, epsilon = 0.00001} @"ln")";

// BERT's FFN1: the norm of %x (rows of 16, %x = %h + offset), its GEMM to 24 with a bias, the
// erf GELU. `post`: the norm's output is also read by a residual (a post-norm model), a second
// output. `t`: the type of everything.
std::unique_ptr<Graph> ln_ffn(const char* norm, bool post, double offset = 0.0,
                              const std::string& t = "f32") {
  uint32_t state = 4242;
  const std::string consts = fmt::format(
      "  const %gamma: {0}[16] = {1}\n  const %beta: {0}[16] = {2}\n  const %w: {0}[16,24] = {3}\n"
      "  const %b: {0}[24] = {4}\n  const %off: {0}[] = [{5}]\n",
      t, lcg_values(state, 16, 0.5), lcg_values(state, 16), lcg_values(state, 16 * 24), lcg_values(state, 24),
      offset);
  auto g = parse_or_die(fmt::format(R"(graph "g" opset 17 {{
  input %h: {0}[2,5,16]
  const %two: {0}[] = [2.0]
  const %eps: {0}[] = [0.00001]
  const %sqrt2: {0}[] = [1.4142135]
  const %one: {0}[] = [1.0]
  const %half: {0}[] = [0.5]
{1}  %x = Add(%h, %off) @"offset"
{2}
  %p = MatMul(%y, %w) @"ffn1"
  %pb = Add(%p, %b) @"ffn1_bias"
  %e0 = Div(%pb, %sqrt2) @"gelu_div"
  %e1 = Erf(%e0) @"gelu_erf"
  %e2 = Add(%e1, %one) @"gelu_add"
  %e3 = Mul(%pb, %e2) @"gelu_mul"
  %o = Mul(%e3, %half) @"gelu_half"
{3}  output %o
{4}}}
)",
                                    t, consts, norm, post ? "  %r = Add(%y, %h) @\"residual\"\n" : "",
                                    post ? "  output %r\n" : ""));
  run_frontend_or_die(*g);
  return g;
}

const Node* find_node(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (n->name == name) return n.get();
  return nullptr;
}

// The one MatMul of `g` and the value it reads.
std::string matmul_reads(const Graph& g) {
  std::string a;
  int matmuls = 0;
  for (const auto& n : g.nodes())
    if (n->op_type == "MatMul") {
      ++matmuls;
      a = n->input(0)->name;
    }
  CHECK(matmuls == 1);
  return a;
}

}  // namespace

TEST_CASE("a LayerNorm before BERT's FFN1 moves past the GEMM into the GELU's kernel", "[fusion][emu]") {
  for (const char* norm : {kScriptLayerNorm, kOpLayerNorm}) {
    for (bool post : {false, true}) {
      const bool op = norm == kOpLayerNorm;
      INFO((op ? "LayerNormalization op" : "decomposed norm") << (post ? ", post-norm" : ", pre-norm"));
      auto g = ln_ffn(norm, post);
      auto original = clone_graph(*g);
      auto lines = fusion::hoist_layer_norms(*g);
      REQUIRE(lines.is_ok());
      REQUIRE(lines->size() == 1);
      const std::string& line = lines->front();
      INFO(line);
      CHECK(line.find("times the weight's column sums subtracted") != std::string::npos);
      CHECK(line.find("'beta' times the weight added") != std::string::npos);
      CHECK((line.find("LayerNormalization 'ln' decomposed") != std::string::npos) == op);
      CHECK((line.find("the norm stays for its other readers") != std::string::npos) == post);
      // The GEMM reads the norm's input; the normalized rows remain only for the residual.
      CHECK(matmul_reads(*g) == "x");
      CHECK(find_node(*g, "ln") == nullptr);
      CHECK((find_node(*g, op ? "ln/decomposed_biased" : "bias") != nullptr) == post);
      same_as_original(*original, *g, 3);
      for (const char* mode : {"greedy", "beam", "ilp"}) {
        auto plan = fusion::make_plan(*g, opts_lib(mode));
        REQUIRE(plan.is_ok());
        INFO(mode << "\n" << fusion::explain(*plan));
        // One kernel after the GEMM call: the norm's statistics over rows of 16, the centering,
        // scale and bias of the product, the GELU over rows of 24 (and the residual's rows). The
        // offset Add is a kernel before the call.
        CHECK(plan->cost.kernels == 2);
        CHECK(fused_matches_reference(*g, 11, opts_lib(mode)) == 2);
      }
    }
  }
}

TEST_CASE("LayerNorms stay in front of GEMMs in half types, and where the product is stored", "[fusion]") {
  for (const std::string t : {"f16", "bf16"}) {
    INFO(t);
    auto g = ln_ffn(kScriptLayerNorm, false, 0.0, t);
    const size_t nodes = g->nodes().size();
    auto lines = fusion::hoist_layer_norms(*g);
    REQUIRE(lines.is_ok());
    CHECK(lines->empty());
    CHECK(g->nodes().size() == nodes);
  }
  // The product a graph output: stored either way.
  uint32_t state = 5;
  auto g =
      parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2,5,16]
  const %gamma: f32[16] = )" +
                   lcg_values(state, 16, 0.5) + "\n  const %w: f32[16,4] = " + lcg_values(state, 64) + R"(
  %y = LayerNormalization(%x, %gamma) {axis = -1} @"ln"
  %p = MatMul(%y, %w) @"proj"
  output %p
}
)");
  run_frontend_or_die(*g);
  auto lines = fusion::hoist_layer_norms(*g);
  REQUIRE(lines.is_ok());
  CHECK(lines->empty());
  CHECK(find_node(*g, "ln") != nullptr);
}

TEST_CASE("a LayerNorm read by two GEMMs, both moved past, leaves no norm behind", "[fusion]") {
  // The first MatMul sees the norm shared and keeps its chain for the second; once the second is
  // rewritten too, nothing reads the chain and it goes.
  uint32_t state = 17;
  auto g = parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[2,5,16]
  const %gamma: f32[16] = )" +
                        lcg_values(state, 16, 0.5) + "\n  const %beta: f32[16] = " + lcg_values(state, 16) +
                        "\n  const %w1: f32[16,8] = " + lcg_values(state, 128) +
                        "\n  const %w2: f32[16,8] = " + lcg_values(state, 128) + R"(
  %y = LayerNormalization(%x, %gamma, %beta) {axis = -1} @"ln"
  %p1 = MatMul(%y, %w1) @"a"
  %p2 = MatMul(%y, %w2) @"b"
  %e1 = Relu(%p1) @"relu1"
  %e2 = Relu(%p2) @"relu2"
  output %e1
  output %e2
}
)");
  run_frontend_or_die(*g);
  auto original = clone_graph(*g);
  auto lines = fusion::hoist_layer_norms(*g);
  REQUIRE(lines.is_ok());
  CHECK(lines->size() == 2u);
  size_t divs = 0;
  for (const auto& n : g->nodes())
    divs += n->op_type == "Div" && n->name.find("normalized") != std::string::npos;
  CHECK(divs == 0);  // the decomposed norm's normalized rows, read by nothing once both moved
  same_as_original(*original, *g, 7);
}

TEST_CASE("LayerNorms feeding attention and feeding other work are told apart", "[fusion]") {
  // The norm's GEMM feeds Q.K^T through a bias, a reshape and a transpose: kAttention takes it,
  // kOther does not.
  uint32_t state = 31;
  const std::string src = R"(graph "g" opset 17 {
  input %x: f32[2,5,16]
  input %k: f32[2,4,5]
  const %gamma: f32[16] = )" +
                          lcg_values(state, 16, 0.5) + "\n  const %beta: f32[16] = " + lcg_values(state, 16) +
                          "\n  const %w: f32[16,8] = " + lcg_values(state, 128) +
                          "\n  const %b: f32[8] = " + lcg_values(state, 8) + R"(
  const %shape: i64[4] = [2, 5, 2, 4]
  %y = LayerNormalization(%x, %gamma, %beta) {axis = -1} @"ln"
  %q = MatMul(%y, %w) @"q_proj"
  %qb = Add(%q, %b) @"q_bias"
  %qr = Reshape(%qb, %shape) @"q_heads"
  %qt = Transpose(%qr) {perm = ints[0, 2, 1, 3]} @"q_t"
  %s = MatMul(%qt, %k) @"scores"
  %o = Softmax(%s) {axis = -1} @"softmax"
  output %o
}
)";
  for (auto readers :
       {fusion::NormReaders::kOther, fusion::NormReaders::kAttention, fusion::NormReaders::kAll}) {
    auto g = parse_or_die(src);
    run_frontend_or_die(*g);
    auto original = clone_graph(*g);
    auto lines = fusion::hoist_layer_norms(*g, {}, readers);
    REQUIRE(lines.is_ok());
    CHECK(lines->size() == (readers == fusion::NormReaders::kOther ? 0u : 1u));
    same_as_original(*original, *g, 7);
  }
}

TEST_CASE("a hoisted LayerNorm keeps float32 accuracy on rows far from zero", "[fusion][emu]") {
  // x W' - mean * (column sums of W') cancels: its terms grow with the rows' mean while the
  // result does not. Rows of 16 (inputs in [-1, 1), deviation 0.58) shifted by an offset, on emu
  // in float32 against the float64 reference of the same graph, hoisted and not. Within the
  // emulated kernels' tolerance up to an offset of 10. Beyond, float32 already loses accuracy
  // storing the shifted rows (measured, the unhoisted graph: 3.7e-5 at 100, 1.2e-4 at 300, 3.2e-4
  // at 1000), and the hoisted product loses 2 to 3 times that (8.3e-5, 3.8e-4, 9.3e-4; outputs of
  // GELU near 1): checked at 4 times the unhoisted error. Half types, whose step is 8000 times larger,
  // are not rewritten.
  auto emu_error = [](const Graph& g) {
    auto plan = fusion::make_plan(g, opts_lib("beam"));
    REQUIRE(plan.is_ok());
    const auto groups = groups_of(*plan);
    const auto packs = packs_of(*plan);
    double err = 0;
    const Tolerance any = {1.0, 1.0, "measured, not checked"};
    emu_matches_reference(g, &groups, 13, any, &packs, plan->gemm_folds, {}, &err);
    return err;
  };
  for (double offset : {0.0, 10.0, 100.0, 300.0, 1000.0}) {
    INFO("offset " << offset);
    auto g = ln_ffn(kOpLayerNorm, false, offset);
    const double before = emu_error(*g);
    auto lines = fusion::hoist_layer_norms(*g);
    REQUIRE(lines.is_ok());
    REQUIRE(lines->size() == 1);
    const double after = emu_error(*g);
    INFO("max abs error " << before << " unhoisted, " << after << " hoisted");
    if (offset <= 10) {
      CHECK(fused_matches_reference(*g, 13, opts_lib("beam")) == 2);
    } else {
      CHECK(after <= 4 * before);
    }
  }
}

TEST_CASE(
    "a LayerNorm before Q/K/V whose V feeds P.V moves past the GEMM: the product is corrected where it is "
    "read",
    "[fusion][emu]") {
  // No centering passes a GEMM, so V's path (P.V reads it through views) cannot take the mean and
  // the scale: the product is corrected where the rotary's or the heads' kernel reads it, and P.V
  // reads the corrected V as it read the normalized rows' product before.
  uint32_t state = 57;
  const std::string src = R"(graph "g" opset 17 {
  input %x: f32[2,5,16]
  const %gamma: f32[16] = )" +
                          lcg_values(state, 16, 0.5) + "\n  const %beta: f32[16] = " + lcg_values(state, 16) +
                          "\n  const %w: f32[16,24] = " + lcg_values(state, 16 * 24) + R"(
  const %shape: i64[4] = [2, 5, 2, 4]
  const %c0: i64[1] = [0]
  const %c8: i64[1] = [8]
  const %c16: i64[1] = [16]
  const %c24: i64[1] = [24]
  const %last: i64[1] = [-1]
  %y = LayerNormalization(%x, %gamma, %beta) {axis = -1} @"ln"
  %p = MatMul(%y, %w) @"qkv"
  %q = Slice(%p, %c0, %c8, %last) @"q_columns"
  %k = Slice(%p, %c8, %c16, %last) @"k_columns"
  %v = Slice(%p, %c16, %c24, %last) @"v_columns"
  %qh = Reshape(%q, %shape) @"q_heads"
  %qt = Transpose(%qh) {perm = ints[0, 2, 1, 3]} @"q_first"
  %qn = Neg(%qt) @"q_neg"
  %kh = Reshape(%k, %shape) @"k_heads"
  %kt = Transpose(%kh) {perm = ints[0, 2, 3, 1]} @"k_first"
  %s = MatMul(%qn, %kt) @"scores"
  %pr = Softmax(%s) {axis = -1} @"softmax"
  %vh = Reshape(%v, %shape) @"v_heads"
  %vt = Transpose(%vh) {perm = ints[0, 2, 1, 3]} @"v_first"
  %o = MatMul(%pr, %vt) @"attention"
  output %o
}
)";
  auto g = parse_or_die(src);
  run_frontend_or_die(*g);
  auto original = clone_graph(*g);
  auto other = fusion::hoist_layer_norms(*g, {}, fusion::NormReaders::kOther);
  REQUIRE(other.is_ok());
  CHECK(other->empty());
  auto lines = fusion::hoist_layer_norms(*g, {}, fusion::NormReaders::kAttention);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1u);
  INFO(lines->front());
  // Q's, K's and V's columns are each corrected on their own, from a Slice of the unscaled
  // product: the kernel storing V for P.V stores its 8 columns, not the product's 24.
  int parts = 0, full_width = 0;
  for (const auto& n : g->nodes()) {
    CHECK(n->op_type != "LayerNormalization");
    if (n->name == "qkv/unscaled") CHECK(n->input(0)->name == "x");
    if (n->op_type == "Slice") {
      CHECK(n->input(0)->name == "qkv/unscaled_product");
      ++parts;
    }
    const Value* out = n->output(0);
    if (out && out->dims && *out->dims == Dims{2, 5, 24}) ++full_width;
    if (out && out->name == "v") {
      CHECK(n->op_type == "Add");  // the last step: beta times the weight's columns of V
      CHECK(*out->dims == Dims{2, 5, 8});
    }
  }
  CHECK(parts == 3);
  CHECK(full_width == 1);  // the unscaled product alone
  same_as_original(*original, *g, 61);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    CHECK(fused_matches_reference(*g, 63, opts_lib(mode)) >= 1);
  }
}
