// Benchmark of the fusion planners on a BERT-base-shaped encoder: L layers (default 12) of
// hidden 768, 12 heads, sequence 128, batch 8, the way an opset-16 TorchScript export writes
// them (decomposed 9-op layer norm, erf GELU, additive attention mask shared by every layer,
// bias adds after each MatMul). Weights are graph inputs (shared by the layers) unless
// --constant-weights 1: planning only needs the shapes.
// Prints, per planner, planning time (median of --reps), kernels, kernels per layer, the
// memory-intensive ones per layer (every generated kernel but tiled GEMMs, which are GEMMs with
// their epilogues), library calls per layer, and the estimated bytes against --fusion none. The
// graph first goes through stitchc's rewrites before planning (fusion/rewrites.h), whose judged
// ones plan it too: their time (median of --reps, each on a fresh copy) is printed first. It is
// what `stitchc compile` spends planning when the last judged rewrite planned the graph as left
// (compile then uses that plan); the table's times are make_plan's of the rewritten graph.
// --rewrites 0 plans the graph as written. Most rewrites need constant weights: with
// --constant-weights 1 each layer has its own, of seeded values (as an export's initializers; the
// estimates depend on shapes alone), and the rewrites' time is the planning time of the target
// "a 12-layer BERT-base graph in under 2 s". (Its weights are graph inputs, so the sibling merge, which
// needs constant weights, leaves Q, K and V apart; an export's are merged into one GEMM.) --tiled-gemm-eff
// sets the cost model's tiled GEMM efficiency (fusion/cost.h), as a device spec from a measurement would.
// Results: docs/fusion-results.md.
//   stitch_plan_bench [--layers L] [--reps N] [--window W] [--explain 1] [--tiled-gemm-eff E] [--rewrites 0]
//                     [--constant-weights 1]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "codegen/stitch.h"
#include "fusion/plan.h"
#include "fusion/rewrites.h"
#include "ir/text.h"
#include "passes/pass.h"

namespace {

std::string layer_norm(const std::string& p, const std::string& x, const std::string& g,
                       const std::string& b) {
  return fmt::format(
      "  %{0}_mu = ReduceMean(%{1}, %axes_last) {{keepdims = 1}}\n"
      "  %{0}_d = Sub(%{1}, %{0}_mu)\n"
      "  %{0}_sq = Pow(%{0}_d, %two)\n"
      "  %{0}_var = ReduceMean(%{0}_sq, %axes_last) {{keepdims = 1}}\n"
      "  %{0}_ve = Add(%{0}_var, %eps)\n"
      "  %{0}_sd = Sqrt(%{0}_ve)\n"
      "  %{0}_n = Div(%{0}_d, %{0}_sd)\n"
      "  %{0}_g = Mul(%{0}_n, %{2})\n"
      "  %{0} = Add(%{0}_g, %{3})\n",
      p, x, g, b);
}

// `own_weights`: each layer has weights of its own (w3_wq, ...), as an export's initializers are;
// else every layer reads the same inputs.
std::string bert_text(int layers, bool own_weights) {
  std::string t = "graph \"bert_base\" opset 18 {\n";
  t += "  input %x: f32[8,128,768]\n  input %mask: f32[8,1,1,128]\n";
  for (int l = 0; l < (own_weights ? layers : 1); ++l) {
    const std::string p = own_weights ? fmt::format("w{}_", l) : "";
    for (const char* w : {"wq", "wk", "wv", "wo"}) t += fmt::format("  input %{}{}: f32[768,768]\n", p, w);
    t += fmt::format("  input %{0}wi: f32[768,3072]\n  input %{0}wd: f32[3072,768]\n", p);
    for (const char* b : {"bq", "bk", "bv", "bo", "bd", "g1", "b1", "g2", "b2"})
      t += fmt::format("  input %{}{}: f32[768]\n", p, b);
    t += fmt::format("  input %{}bi: f32[3072]\n", p);
  }
  t += "  const %axes_last: i64[1] = [-1]\n  const %two: f32[] = [2.0]\n  const %eps: f32[] = [1e-12]\n";
  t += "  const %scale: f32[] = [0.125]\n  const %half: f32[] = [0.5]\n  const %one: f32[] = [1.0]\n";
  t += "  const %rsqrt2: f32[] = [1.4142135]\n";
  t += "  const %heads: i64[4] = [8, 128, 12, 64]\n  const %flat: i64[3] = [8, 128, 768]\n";
  std::string h = "x";
  for (int l = 0; l < layers; ++l) {
    const std::string p = fmt::format("l{}", l);
    const std::string w = own_weights ? fmt::format("w{}_", l) : "";  // the layer's weights
    for (const char* qkv : {"q", "k", "v"}) {
      t += fmt::format("  %{0}_{1}m = MatMul(%{2}, %{3}w{1})\n  %{0}_{1}b = Add(%{0}_{1}m, %{3}b{1})\n", p,
                       qkv, h, w);
      t += fmt::format("  %{0}_{1}r = Reshape(%{0}_{1}b, %heads)\n", p, qkv);
    }
    t += fmt::format("  %{0}_qt = Transpose(%{0}_qr) {{perm = ints[0, 2, 1, 3]}}\n", p);
    t += fmt::format("  %{0}_kt = Transpose(%{0}_kr) {{perm = ints[0, 2, 3, 1]}}\n", p);
    t += fmt::format("  %{0}_vt = Transpose(%{0}_vr) {{perm = ints[0, 2, 1, 3]}}\n", p);
    t += fmt::format("  %{0}_s = MatMul(%{0}_qt, %{0}_kt)\n  %{0}_ss = Mul(%{0}_s, %scale)\n", p);
    t += fmt::format("  %{0}_sm = Add(%{0}_ss, %mask)\n  %{0}_p = Softmax(%{0}_sm) {{axis = -1}}\n", p);
    t += fmt::format("  %{0}_c = MatMul(%{0}_p, %{0}_vt)\n", p);
    t += fmt::format(
        "  %{0}_ct = Transpose(%{0}_c) {{perm = ints[0, 2, 1, 3]}}\n  %{0}_cf = Reshape(%{0}_ct, %flat)\n",
        p);
    t += fmt::format(
        "  %{0}_o = MatMul(%{0}_cf, %{2}wo)\n  %{0}_ob = Add(%{0}_o, %{2}bo)\n  %{0}_r1 = Add(%{0}_ob, "
        "%{1})\n",
        p, h, w);
    t += layer_norm(p + "_ln1", p + "_r1", w + "g1", w + "b1");
    t += fmt::format("  %{0}_i = MatMul(%{0}_ln1, %{1}wi)\n  %{0}_ib = Add(%{0}_i, %{1}bi)\n", p, w);
    t += fmt::format(
        "  %{0}_gd = Div(%{0}_ib, %rsqrt2)\n  %{0}_ge = Erf(%{0}_gd)\n  %{0}_g1 = Add(%{0}_ge, %one)\n", p);
    t += fmt::format("  %{0}_g2 = Mul(%{0}_ib, %{0}_g1)\n  %{0}_g3 = Mul(%{0}_g2, %half)\n", p);
    t += fmt::format(
        "  %{0}_d = MatMul(%{0}_g3, %{1}wd)\n  %{0}_db = Add(%{0}_d, %{1}bd)\n  %{0}_r2 = Add(%{0}_db, "
        "%{0}_ln1)\n",
        p, w);
    t += layer_norm(p + "_ln2", p + "_r2", w + "g2", w + "b2");
    h = p + "_ln2";
  }
  t += fmt::format("  output %{}\n}}\n", h);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 12, reps = 5, window = stitch::fusion::FusionOptions{}.beam_window, explain = 0;
  double tiled_eff = 0;  // 0: the spec's own
  int rewrites = 1, constant_weights = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--tiled-gemm-eff")
      tiled_eff = std::atof(argv[i + 1]);
    else if (flag == "--rewrites")
      rewrites = value;
    else if (flag == "--layers")
      layers = value;
    else if (flag == "--reps")
      reps = value;
    else if (flag == "--window")
      window = value;
    else if (flag == "--explain")
      explain = value;
    else if (flag == "--constant-weights")
      constant_weights = value;
    else {
      std::fprintf(stderr,
                   "unknown flag %s (flags: --layers L --reps N --window W --explain 1 --tiled-gemm-eff E "
                   "--rewrites 0 --constant-weights 1)\n",
                   argv[i]);
      return 2;
    }
  }
  if (layers < 1 || reps < 1 || window < 2 || tiled_eff < 0 || tiled_eff > 1) {
    std::fprintf(stderr,
                 "--layers and --reps must be at least 1, --window at least 2, --tiled-gemm-eff in (0, 1]\n");
    return 2;
  }
  auto g = stitch::parse_graph(bert_text(layers, constant_weights != 0));
  if (!g.is_ok()) {
    std::fprintf(stderr, "%s\n", g.status().message().c_str());
    return 1;
  }
  if (constant_weights) {  // every input but the activation and the mask: seeded values in [-1, 1)
    uint32_t state = 1;
    std::vector<stitch::Value*> kept;
    for (stitch::Value* v : (*g)->inputs) {
      if (v->name == "x" || v->name == "mask") {
        kept.push_back(v);
        continue;
      }
      stitch::Tensor t(v->dtype, *v->dims);
      float* f = t.data_as<float>();
      for (int64_t i = 0; i < t.size(); ++i) {
        state = state * 1664525u + 1013904223u;
        f[i] = static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
      }
      v->constant = std::move(t);
    }
    (*g)->inputs = kept;
  }
  stitch::PassContext ctx;
  if (auto st = stitch::run_frontend(**g, ctx); !st.is_ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  auto spec = stitch::fusion::device_spec("sm_90");
  if (tiled_eff > 0) spec->tiled_gemm_eff = tiled_eff;
  double rewrite_s = 0;
  if (rewrites) {
    stitch::fusion::FusionOptions o;
    o.beam_window = window;
    o.device = *spec;
    std::vector<double> secs;
    std::unique_ptr<stitch::Graph> done;
    for (int r = 0; r < reps; ++r) {
      std::unique_ptr<stitch::Graph> copy = stitch::clone_graph(**g);
      const auto t0 = std::chrono::steady_clock::now();
      auto rw = stitch::fusion::rewrite_for_planning(copy, o);
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!rw.is_ok()) {
        std::fprintf(stderr, "%s\n", rw.status().message().c_str());
        return 1;
      }
      if (explain && r == 0) std::printf("%s", rw->text().c_str());
      done = std::move(copy);
    }
    std::sort(secs.begin(), secs.end());
    rewrite_s = secs[secs.size() / 2];
    *g = std::move(done);
  }
  std::printf("BERT-base encoder, %d layers, %zu nodes after the front end%s; beam window %d\n", layers,
              (*g)->nodes().size(), rewrites ? " and the rewrites before planning" : "", window);
  std::printf("tiled GEMM efficiency %.2f of the library's rate\n", spec->tiled_gemm_eff);
  if (rewrites)
    std::printf("rewrites before planning (beam, judged by planning): median %.4f s\n", rewrite_s);
  std::printf("%-7s %12s %12s %8s %10s %14s %15s %12s %12s %s\n", "planner", "median_s", "steps", "kernels",
              "per_layer", "mem_per_layer", "calls_per_layer", "est_bytes", "none_bytes", "cut_by");
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    stitch::fusion::FusionOptions o;
    o.mode = mode;
    o.beam_window = window;
    o.device = *spec;
    std::vector<double> secs;
    stitch::fusion::FusionPlan plan;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      auto p = stitch::fusion::make_plan(**g, o);
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!p.is_ok()) {
        std::fprintf(stderr, "%s\n", p.status().message().c_str());
        return 1;
      }
      plan = std::move(p).value();
    }
    std::sort(secs.begin(), secs.end());
    if (explain && std::string(mode) == "beam") std::printf("%s", stitch::fusion::explain(plan).c_str());
    int tiled = 0;
    for (const auto& grp : plan.groups)
      for (const stitch::Node* n : grp.nodes)
        tiled += grp.nodes.size() > 1 &&
                 stitch::codegen::stitch_role(*n) == stitch::codegen::StitchRole::kTiledGemm;
    std::printf("%-7s %12.4f %12lld %8d %10.2f %14.2f %15.2f %12lld %12lld %s\n", mode, secs[secs.size() / 2],
                static_cast<long long>(plan.work), plan.cost.kernels,
                static_cast<double>(plan.cost.kernels) / layers,
                static_cast<double>(plan.cost.kernels - tiled) / layers,
                static_cast<double>(plan.cost.library_calls) / layers,
                static_cast<long long>(plan.cost.bytes), static_cast<long long>(plan.unfused.bytes),
                plan.budget_spent ? "budget"
                : plan.timed_out  ? "time"
                                  : "-");
  }
  return 0;
}
