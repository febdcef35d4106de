// Plans of transformer layers at deployed widths (hidden 768 to 1024, sequence 128 to 197): the
// small test graphs and shipped models keep their projections as loops in kernels, so only here do
// the per-layer counts say what a full-size model gets. Each graph is built as torch.export writes
// the architecture, its weights constants of seeded values (the rewrites need constant weights; the
// estimates that choose them depend on shapes alone), and planned as `stitchc compile` plans it.
// These tests fail when a layer's memory-intensive kernels or launches grow.
#include <fmt/format.h>

#include <set>

#include "codegen/stitch.h"
#include "fusion/rewrites.h"
#include "fusion_test_util.h"
#include "wide_layer_graphs.h"

using namespace stitch;
using namespace stitch::test;

using namespace stitch::test::wide;

namespace {

struct Counts {
  size_t kernels = 0, calls = 0;  // memory-intensive kernels (GEMM loops and tiles apart) and library calls
  size_t gemm_kernels = 0;
  std::string rewrites, plan;
  std::string mappings;  // every kernel's mapping line
};

// The rewrites and beam plan `stitchc compile` makes, and the schedule's steps.
Counts plan_counts(std::unique_ptr<Graph>& g, const fusion::RewriteSwitches& sw = {}) {
  auto r = fusion::rewrite_for_planning(g, opts("beam"), sw);
  REQUIRE(r.is_ok());
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  auto s = schedule_of(*g, *plan);
  REQUIRE(s.is_ok());
  Counts c;
  c.rewrites = r->text();
  c.plan = fusion::explain(*plan);
  c.calls = s->calls.size();
  for (const auto& k : s->kernels) {
    (codegen::is_gemm_kernel(k) ? c.gemm_kernels : c.kernels) += 1;
    c.mappings += k.mapping + "\n";
  }
  return c;
}

// Two layers and a final norm at 3 memory-intensive kernels a layer (one more for the embedding's
// or the final norm), no GEMM run as a kernel, and at most `calls` library calls a layer (fewer
// where a fine-grained MatMul joins a stitched kernel).
void check_two_layers(const Counts& c, size_t calls) {
  CHECK(c.gemm_kernels == 0);
  CHECK(c.kernels <= 3 * 2 + 1);
  CHECK(c.calls <= calls * 2);
}

}  // namespace

TEST_CASE("a LLaMA layer at hidden 1024 is 3 memory-intensive kernels and 9 launches", "[fusion][plan]") {
  // Per layer: the first norm's row scale packed with the rotary embeddings; scores scaled (the
  // row scale on rows and columns) + mask + softmax + P scaled; the second norm's row scale and
  // the SiLU gate. Calls: Q/K/V merged, Q.K^T, P.V, the output projection with its residual,
  // gate/up merged, down with its residual. The final norm is one kernel more.
  auto m = llama(2);
  const Counts c = plan_counts(m.graph);
  INFO(c.rewrites << c.plan);
  CHECK(c.rewrites.find("read by attention: estimated") != std::string::npos);
  CHECK(c.rewrites.find("read by attention: not applied") == std::string::npos);
  check_two_layers(c, 6);
  CHECK(c.kernels + c.calls <= 9 * 2 + 1);

  // Without the row-scale move each layer's first norm is a kernel of its own.
  auto kept = llama(2);
  fusion::RewriteSwitches sw;
  sw.hoist_row_scales = false;
  const Counts k = plan_counts(kept.graph, sw);
  INFO(k.plan);
  CHECK(k.kernels >= c.kernels + 2);
}

TEST_CASE("a float16 or bfloat16 LLaMA layer at hidden 1024 is 3 memory-intensive kernels too",
          "[fusion][plan]") {
  // The norms compute in float32 between Casts. The first norm's row scale cannot go onto the
  // scores in a half type; it scales the product in the kernel that rotates Q and K, which also
  // computes the statistics and stores the rotated heads first: no norm kernel, as in float32.
  for (const char* ty : {"f16", "bf16"}) {
    INFO(ty);
    auto m = llama(2, 1024, 16, 4, 2816, QkNorm::kNone, ty);
    const Counts c = plan_counts(m.graph);
    INFO(c.rewrites << c.plan);
    CHECK(c.rewrites.find("read by attention: estimated") != std::string::npos);
    check_two_layers(c, 6);
    INFO(c.mappings);
    CHECK(c.mappings.find("the rows moved by a Transpose or Reshape") != std::string::npos);
  }
}

TEST_CASE("a LLaMA layer with LayerNorms (StableLM's) at hidden 1024 is 3 memory-intensive kernels",
          "[fusion][plan]") {
  // The first LayerNorm moves past Q/K/V: the rotary's row kernel computes its statistics and
  // corrects the product, which P.V reads; the second past gate/up into the SiLU gate's kernel.
  auto m = llama(2, 1024, 16, 4, 2816, QkNorm::kNone, "f32", true);
  const Counts c = plan_counts(m.graph);
  INFO(c.rewrites << c.plan);
  CHECK(c.rewrites.find("feeding attention: estimated") != std::string::npos);
  check_two_layers(c, 6);
}

TEST_CASE("Q/K norms before the rotary embedding take the head transpose and the rotation into their kernel",
          "[fusion][plan]") {
  // Qwen3 (per head, after the head split) and OLMo2's form (over all heads, before it) at hidden
  // 1024: each layer's Q and K norms, their heads-first Transposes and rotary embeddings are one
  // launch (a pack of the Q and the K kernel), so a layer is 4 memory-intensive kernels: the first
  // norm, the Q/K norms with the rotation, the softmax, the second norm's row scale with the SiLU
  // gate. Before, the rotation was a launch of its own (the Transpose after the norm changed the
  // layout of a value computed from a row op), 5 a layer.
  for (QkNorm qk : {QkNorm::kPerHead, QkNorm::kAllHeads}) {
    INFO((qk == QkNorm::kPerHead ? "per head" : "all heads"));
    auto m = llama(2, 1024, 16, 4, 2816, qk);
    const Counts c = plan_counts(m.graph);
    INFO(c.rewrites << c.plan);
    CHECK(c.gemm_kernels == 0);
    CHECK(c.kernels <= 4 * 2 + 1);
    CHECK(c.calls == 6 * 2);
    CHECK(c.plan.find("changes the layout of a value computed from a row op") == std::string::npos);
    // The rotated Q and K leave their norms' kernels heads first.
    INFO(c.mappings);
    CHECK(c.mappings.find("the rows moved by a Transpose or Reshape") != std::string::npos);
  }
}

TEST_CASE(
    "Qwen3's layers at 2 x 32 are 3 launches: the input norm's statistics in the Q and K norms' kernels",
    "[fusion][plan]") {
  // With the input RMSNorm's scale moved past Q/K/V, the per-head Q and K norms each compute their
  // token's statistics (a copy each, an outer reduction of their kernel), so the Q kernel, the K
  // kernel and V's statistics (for P) pack into one launch: then softmax, then the gate. At 8 x 128
  // this is estimated slower (the test above) and the norm keeps a launch of its own.
  auto m = llama(2, 1024, 16, 4, 2816, QkNorm::kPerHead, "f32", false, 2, 32);
  const Counts c = plan_counts(m.graph);
  INFO(c.rewrites << c.plan);
  CHECK(c.rewrites.find("computed again for") != std::string::npos);
  CHECK(c.plan.find("an outer reduction") != std::string::npos);
  check_two_layers(c, 6);
}

TEST_CASE("a ViT-B block is 3 memory-intensive kernels, with DINOv2's layer scale folded into the weights",
          "[fusion][plan]") {
  // Per block: softmax; the second LayerNorm moved past FFN1 with the erf GELU; the first
  // LayerNorm of the next block (or the final one). Calls: Q/K/V merged, Q.K^T, P.V, the output
  // projection with its bias and residual, FFN1 with its bias, FFN2 with its bias and residual.
  for (bool layer_scale : {false, true}) {
    INFO((layer_scale ? "DINOv2" : "ViT"));
    auto m = vit(2, layer_scale);
    const Counts c = plan_counts(m.graph);
    INFO(c.rewrites << c.plan);
    CHECK((c.rewrites.find("after GEMMs folded into their weights") != std::string::npos) == layer_scale);
    check_two_layers(c, 6);
  }
  // Unfolded, the layer scale keeps the residual out of the calls: 4 kernels per block.
  auto m = vit(2, true);
  fusion::RewriteSwitches sw;
  sw.fold_scales = false;
  const Counts k = plan_counts(m.graph, sw);
  INFO(k.plan);
  CHECK(k.kernels > 3 * 2 + 1);
}

TEST_CASE(
    "a ViT-B block written as onnxruntime's level 1 writes it (Gemms between flattening views) plans as "
    "the block itself",
    "[fusion][plan]") {
  // The views hide the second LayerNorm from FFN1 and the biases from the products: unflattened,
  // the plan is the block's, kernel for kernel and call for call.
  auto plain = vit(2, false);
  const Counts p = plan_counts(plain.graph);
  auto flat = vit(2, false, true);
  const Counts c = plan_counts(flat.graph);
  INFO(c.rewrites << c.plan);
  CHECK(c.rewrites.find("GEMMs of flattened activations read them unflattened") != std::string::npos);
  CHECK(c.rewrites.find("LayerNorms moved past GEMMs (feeding other work: estimated") != std::string::npos);
  check_two_layers(c, 6);
  CHECK(c.kernels == p.kernels);
  CHECK(c.calls == p.calls);
  // Left flattened, each block's second LayerNorm is a kernel of its own.
  auto kept = vit(2, false, true);
  fusion::RewriteSwitches sw;
  sw.unflatten_gemms = false;
  const Counts k = plan_counts(kept.graph, sw);
  INFO(k.rewrites << k.plan);
  CHECK(k.kernels >= p.kernels + 2);
}

TEST_CASE(
    "a Falcon layer at hidden 1024 is 3 memory-intensive launches: its K/V Gathers become Slices with "
    "per-reader copies",
    "[fusion][plan]") {
  // Per layer: Q's rotary, K's rotary and the erf GELU packed, each reading its columns of the
  // merged GEMM; mask + softmax; the residual + the next LayerNorm. The Slices alone are estimated
  // slower; with the copies of the heads-first Transpose they leave shared, faster: judged together.
  // Q's rotary reads its heads through the view of the QKV columns: costed as the columns it keeps,
  // not the whole view, else the columns are stored by a kernel of their own (4 per layer).
  auto m = falcon(2);
  const Counts c = plan_counts(m.graph);
  INFO(c.rewrites << c.plan);
  CHECK(c.rewrites.find("with the relayout copies they leave room for") != std::string::npos);
  check_two_layers(c, 5);

  // Either rewrite alone leaves K and V picked out of a stored Transpose.
  for (bool slices : {false, true}) {
    auto k = falcon(2);
    fusion::RewriteSwitches sw;
    (slices ? sw.relayout_copies : sw.split_slices) = false;
    const Counts kc = plan_counts(k.graph, sw);
    INFO(kc.rewrites << kc.plan);
    CHECK(kc.kernels > c.kernels);
  }
}

TEST_CASE(
    "a BLOOM layer at hidden 1024 is 3 memory-intensive kernels: heads merged into the batch are read and "
    "written in place",
    "[fusion][plan]") {
  // Per layer: alibi + scaled scores + mask + softmax; the second LayerNorm; the next layer's first
  // (or the final one). Calls: QKV with its bias, Q.K^T reading Q and K merged with the batch in
  // place, P.V writing the context straight into [b, s, heads, 64], the dense projection with its
  // bias and residual, FFN1 with its bias and GELU, FFN2 with its bias and residual.
  auto m = bloom(2);
  const Counts c = plan_counts(m.graph);
  INFO(c.rewrites << c.plan);
  check_two_layers(c, 6);
  CHECK(c.plan.find("in the layout of the Transpose it feeds") != std::string::npos);
}
