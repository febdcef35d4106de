// stitchc: the stitch compiler's command line.
//   stitchc inspect MODEL [--shape NAME=DxD...]
//   stitchc run MODEL --inputs DIR [--expect DIR] [--rtol R --atol A] [--save-outputs DIR]
//   stitchc compile MODEL -o DIR [--shape ...] [--arch sm_80,sm_90] [--fusion none] [--report-json F]
//   stitchc MODEL -o DIR  (the same)
//   stitchc bench DIR [--backend cuda|emu] [--iters N] [--warmup N] [--no-cuda-graph] [--steps]
//                     [--against DIR] [--rounds N] [--json FILE] [--seed N]
//   stitchc ops
// Exit codes: 0 ok, 1 verification mismatch, 2 user error, 3 internal error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common.h"
#include "cli/subcommands.h"
#include "support/check.h"

namespace stitch::cli {

Status prepare_model(Graph& g, const std::string& path, const std::vector<std::string>& shapes,
                     const ShapeBindings& extra, const std::string& dump_dir,
                     const std::string& conv_transpose_form) {
  PassContext ctx;
  ctx.dump_dir = dump_dir;
  ctx.conv_transpose_form = conv_transpose_form;
  for (const auto& s : shapes) RETURN_IF_ERROR(parse_shape_binding(s, ctx.bindings));
  for (const auto& [k, v] : extra.by_input)
    if (!ctx.bindings.by_input.count(k)) ctx.bindings.by_input[k] = v;
  return run_frontend(g, ctx).with_context(path);
}

int report(const Status& st) {
  if (st.is_ok()) return 0;
  const char* kind = st.code() == Code::kInternal ? "internal error" : "error";
  std::fprintf(stderr, "stitchc: %s: %s\n", kind, st.message().c_str());
  return static_cast<int>(st.code());
}

std::string human_bytes(int64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < 1024 * 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (b < int64_t{1024} * 1024 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
}

}  // namespace stitch::cli

int main(int argc, char** argv) {
  using namespace stitch::cli;
  CLI::App app{"stitchc: ahead-of-time compiler for ONNX models on NVIDIA GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stitchc 0.1.0");

  InspectArgs ia;
  CLI::App* inspect = app.add_subcommand("inspect", "show inputs, outputs, op histogram and sizes of a model");
  inspect->add_option("model", ia.model, "model.onnx")->required();
  inspect->add_option("--shape", ia.shapes, "bind a dynamic input or symbolic dim: NAME=1x128 or SYMBOL=4");
  inspect->add_option(
      "--constant-input", ia.constant_inputs,
      "fix a graph input to a value (it stops being an input; an If it decides keeps only its branch, e.g. "
      "Optimum's merged decoders: use_cache_branch=1): NAME=V or NAME=V1,V2,...");
  inspect->add_option("--dump-dir", ia.dump_dir, "write the IR after each pass into this directory");
  inspect->add_flag("--json", ia.json, "print a JSON report instead of text");

  RunArgs ra;
  CLI::App* run = app.add_subcommand("run", "run a model on given inputs and check expected outputs");
  run->add_option("model", ra.model, "model.onnx, or an artifact directory from stitchc compile")->required();
  run->add_option("--inputs", ra.inputs, "directory with input_0.pb, input_1.pb... (ONNX test-data layout)")
      ->required();
  run->add_option("--expect", ra.expect, "directory with output_0.pb... to compare against");
  run->add_option("--backend", ra.backend, "reference (CPU interpreter, MODEL.onnx), emu (CPU emulation of an artifact DIR) or cuda (GPU)")->default_val("reference");
  run->add_option("--rtol", ra.rtol, "relative tolerance for --expect");
  run->add_option("--atol", ra.atol, "absolute tolerance for --expect");
  run->add_option("--save-outputs", ra.save, "write output_0.pb... into this directory");
  run->add_option("--shape", ra.shapes, "bind a dynamic input or symbolic dim (default: from the input data)");
  run->add_option("--constant-input", ra.constant_inputs,
                  "fix a graph input to a value (it stops being an input; an If it decides keeps only its "
                  "branch, e.g. Optimum's merged decoders: use_cache_branch=1): NAME=V or NAME=V1,V2,...");
  run->add_option("--dump-dir", ra.dump_dir, "write the IR after each pass into this directory");

  CompileArgs ca;
  CLI::App* compile = app.add_subcommand("compile", "compile a model into an artifact directory");
  compile->add_option("model", ca.model, "model.onnx")->required();
  compile->add_option("-o,--output", ca.out, "artifact directory to write")->required();
  compile->add_option("--shape", ca.shapes, "bind a dynamic input or symbolic dim: NAME=1x128 or SYMBOL=4");
  compile->add_option(
      "--constant-input", ca.constant_inputs,
      "fix a graph input to a value (it stops being an input; an If it decides keeps only its branch, e.g. "
      "Optimum's merged decoders: use_cache_branch=1): NAME=V or NAME=V1,V2,...");
  compile->add_option("--arch", ca.arch, "comma-separated GPU targets")->default_val("sm_90");
  compile->add_option("--fusion", ca.fusion,
                      "fusion planner: beam (default), ilp (exact per component, GLPK), greedy (baseline) or none")
      ->default_val("beam");
  compile->add_option("--beam-width", ca.beam_width, "partitions kept per beam step")->default_val(8);
  compile
      ->add_option(
          "--plan-budget", ca.plan_budget,
          "steps of the fusion search (a count, so plans do not depend on the machine; best plan so far "
          "after)")
      ->default_val(50'000'000);
  compile
      ->add_option("--plan-time-limit", ca.plan_time_limit,
                   "wall-clock seconds for the fusion search, a safety net behind --plan-budget")
      ->default_val(60);
  compile->add_option("--device-spec", ca.device_spec,
                      "cost-model device: sm_80, sm_90 or a JSON file from stitchc calibrate (default: the newest --arch)");
  compile->add_flag("--explain-fusion", ca.explain, "print every group, its reason, and every rejected merge");
  compile->add_option(
      "--no-fuse", ca.no_fuse,
      "keep this node (by name) out of every fused group and every graph rewrite (sibling GEMM "
      "merge, scale fold, Splits and constant Gathers as Slices, row scales past GEMMs, gathered "
      "expert GEMMs as GEMMs of every expert's weights, TopKs as rounds); repeatable");
  compile
      ->add_option("--max-group-size", ca.max_group_size,
                   "at most this many nodes per fused group (views, which emit no code, not counted)")
      ->default_val(128);
  compile->add_flag("--no-pack", ca.no_pack, "do not pack independent stitched kernels into one launch");
  compile->add_flag(
      "--no-merge-gemms", ca.no_merge_gemms,
      "keep sibling GEMMs (MatMuls of one activation with constant weights, e.g. Q, K and V) apart");
  compile->add_flag(
      "--no-unflatten-gemms", ca.no_unflatten_gemms,
      "keep 2-D GEMMs that read a flattening view of their activation ([batch*seq, k], as onnxruntime's "
      "level-1 optimizations write dense layers) as they are (by default they read the activation "
      "itself, their bias and activation follow at its shape, and the views go)");
  compile->add_flag(
      "--no-fold-scales", ca.no_fold_scales,
      "keep a constant per-column scale after a GEMM (a layer scale, or an inference BatchNormalization "
      "of its columns) as a node (by default it is folded into the GEMM's weight and bias)");
  compile->add_flag(
      "--no-hoist-row-scales", ca.no_hoist_row_scales,
      "keep RMSNorm-style row scales in front of the GEMMs they feed (by default they move after "
      "the product, the norm's weight into the GEMM's, when the plan's estimate is lower)");
  compile->add_flag(
      "--no-hoist-layer-norms", ca.no_hoist_layer_norms,
      "keep float32 LayerNorms in front of the GEMMs they feed (by default the GEMM reads the norm's "
      "input, and the mean, scale, weight and bias are applied to its product, when the plan's "
      "estimate is lower)");
  compile->add_flag(
      "--no-split-group-norms", ca.no_split_group_norms,
      "keep a GroupNorm's InstanceNormalization over [N, groups, rest] with its Reshape back to "
      "channels right after it (by default each group's channels become an axis of their own and the "
      "Reshape moves past the weight, bias and activation, so that they join the norm's kernel)");
  compile->add_flag(
      "--no-split-head-rows", ca.no_split_head_rows,
      "keep a norm over rows that a Reshape merged ([B, S*H, D], a token's heads among the tokens, as "
      "onnxruntime-genai writes Q/K norms) in that shape (by default it runs over [B, S, H, D], the same "
      "rows, so that its kernel can tell a token's heads apart and take the token's own statistics)");
  compile->add_flag(
      "--no-gemms-as-matmuls", ca.no_gemms_as_matmuls,
      "keep Gemm nodes whole (by default each becomes a MatMul with its transposes, alpha and C as "
      "nodes around it, so a small projection can be a loop in a stitched kernel, when the plan's "
      "estimate is lower; a call takes them back either way)");
  compile->add_flag(
      "--no-all-expert-gemms", ca.no_all_expert_gemms,
      "keep a MatMul of expert weights gathered per routed token (transformers' MoE exports: a "
      "GatherND of [experts, m, k] by each slot's expert, then a batched MatMul) as it is (by default "
      "each slot is multiplied by every expert's weights in one GEMM that reads them once, and its "
      "expert's part of the product is picked after, when the plan's estimate is lower)");
  compile->add_flag(
      "--no-expert-sums", ca.no_expert_sums,
      "keep an MoE token's sum over its routed slots as it is (by default, after the GEMMs of every "
      "expert's weights, the activation runs on every expert's part of the first projection, times "
      "the token's routing weight for the expert, 0 where not chosen, and the second projection of "
      "every expert, weighted and summed, is one GEMM, as onnxruntime's MoE op is read, a shared "
      "expert added to the sum, maybe times a gate per token, more rows of that GEMM, when the plan's "
      "estimate is lower)");
  compile->add_flag(
      "--no-topk-rounds", ca.no_topk_rounds,
      "keep each TopK a kernel of its own (by default a TopK of at most 8 along a float32, float16 or "
      "bfloat16 tensor's last axis becomes that many rounds of one row reduction each, the largest key "
      "left holding the value and its first index, so that it joins the kernel of the rows it reads, "
      "such as an MoE router's softmax, when the plan's estimate is lower)");
  compile->add_flag(
      "--no-short-reductions", ca.no_short_reductions,
      "keep a ReduceSum or ReduceMean over 2 to 8 elements of one axis, and a Softmax over a last axis of "
      "2 to 8, a row op (by default the sum becomes that many Slices added up, and the softmax Max, Exp, "
      "Adds and Div, "
      "element-wise, so that any kernel can take them, such as the sum of an MoE token's expert outputs "
      "over its slots or a router's softmax over its top 2, when the plan's estimate is lower); and "
      "keep a ReduceMax or ReduceMin over 2 to 8 elements of one axis a row op (by default, after the "
      "TopK rounds, Slices combined by Max or Min, judged per row length, when the estimate is no "
      "higher with no more kernels)");
  compile->add_flag(
      "--no-pool-taps", ca.no_pool_taps,
      "keep each MaxPool and AveragePool a kernel of its own (by default a pool whose window has at most "
      "9 positions becomes one strided Slice per position, of a Pad where the windows reach past the "
      "input, combined by Max or Add, an average then divided by its count, so that the kernel of its "
      "producer or its reader computes it, when the plan's estimate is lower)");
  compile->add_flag(
      "--no-shared-duplicates", ca.no_shared_duplicates,
      "keep a node that repeats another (a norm's statistic computed again for a reader that scales a "
      "GEMM's product) where the plan puts its reader in the kernel computing the original (by "
      "default that reader reads the original and the copy goes, when the plan's estimate is no higher)");
  compile->add_flag(
      "--no-arg-reductions", ca.no_arg_reductions,
      "keep each ArgMax and ArgMin a kernel of its own, and each ScatterElements of up to 8 indices per row "
      "(by default an ArgMax or ArgMin along a float tensor's last axis becomes one row reduction of "
      "keys holding the extreme and its first position, two reductions for float64, and such a scatter "
      "one select a slot, so that they join the "
      "kernel of the rows they read, such as PhiMoE's router, when the plan's estimate is lower)");
  compile->add_flag(
      "--no-split-slices", ca.no_split_slices,
      "keep Splits and Gathers whole (by default a Split becomes one Slice per output, and a Gather "
      "of a constant run of indices a Slice, so that each part can be read in place by a GEMM or "
      "stitched on its own, when the plan's estimate is lower)");
  compile->add_flag(
      "--no-relayout-copies", ca.no_relayout_copies,
      "keep a Transpose, Slice or Reshape that several nodes read as one node (by default, where "
      "a GEMM reads the chain, each reader gets a copy, so that the GEMM reads it in place and "
      "the others as index maps, when the plan's estimate is lower)");
  compile->add_flag(
      "--no-output-copies", ca.no_output_copies,
      "keep a graph output that other nodes read as one stored tensor (by default, when it is "
      "data movement and element-wise work over stored values, such as a decoder's present keys, "
      "its readers compute it again, so that their kernel need not wait for the one that writes "
      "it, when the plan's estimate is lower)");
  compile->add_flag(
      "--approximate-gelu", ca.approximate_gelu,
      "let GELU in its erf form (BERT's) run as cuBLASLt's GELU epilogue, which computes the tanh "
      "form (up to 4.7e-4 away); the tanh form (GPT-2's) always may");
  compile->add_flag(
      "--no-stitch-matmul", ca.no_stitch_matmul,
      "keep every MatMul a library call; by default a fine-grained one (both operands computed, "
      "a contraction of at most 256, e.g. attention's Q.K^T) may join a stitched kernel "
      "when the cost model says so");
  compile->add_flag(
      "--tf32", ca.tf32,
      "run float32 GEMMs and convolutions on TF32 tensor cores (operands rounded to a 10-bit "
      "mantissa, float32 sums): several times the float32 rate, with results about 1e-3 away; by "
      "default they compute in float32, as PyTorch's matmuls do");
  compile
      ->add_option("--conv-transpose", ca.conv_transpose,
                   "how a strided ConvTranspose runs: subpixel (default: one forward convolution per output "
                   "phase, all in one call, then a kernel that interleaves them; constant weights, no "
                   "dilation), call (cuDNN's backward-data convolution, where its pads allow), or zeros "
                   "(a forward convolution over the input with zeros between the values: stride^2 times "
                   "the work in 2-D); each falls back to the next that applies")
      ->check(CLI::IsMember({"subpixel", "call", "zeros"}))
      ->default_val("subpixel");
  compile->add_option("--max-registers", ca.max_registers,
                      "per-thread register budget: a fused kernel above it, or spilling, is planned again split")
      ->default_val(128);
  compile
      ->add_option(
          "--max-evaluations", ca.max_evaluations,
          "most node evaluations in one fused kernel's code (each node once per vector lane and pass, "
          "and again wherever its value is read at other positions, as through a resampling's "
          "gathers): a kernel above it is planned again split, before nvcc")
      ->default_val(1024);
  compile->add_option("--report-json", ca.report_json, "also write the plan report here");
  compile->add_option("--dump-dir", ca.dump_dir, "write the IR after each pass into this directory");
  compile->add_flag("--no-nvcc", ca.no_nvcc, "emit sources only; do not run nvcc");
  compile->add_flag("--no-emu", ca.no_emu, "do not build the CPU emulation library");
  compile->add_option(
      "--build-cache", ca.build_cache,
      "a directory of kernel builds (nvcc's fatbins, emulation libraries), each named by a checksum "
      "of everything its build read: a compile of the same kernels with the same tools copies them "
      "instead of building, and adds what it builds; compiles may share one");
  compile
      ->add_option(
          "--build-cache-max-size", ca.build_cache_max_mb,
          "the build cache's size in MB, kept after each compile by removing the entries least recently "
          "added or used")
      ->default_val(2048);

  CalibrateArgs cal;
  CLI::App* calibrate = app.add_subcommand("calibrate",
                                           "fit the cost model's launch overhead and bandwidth efficiency "
                                           "(and tiled GEMM efficiency) from measured kernel times");
  calibrate
      ->add_option(
          "measurements", cal.measurements,
          "JSON: {\"arch\": \"sm_90\", \"measurements\": [{\"bytes\": B, \"launches\": L, \"seconds\": T}, "
          "...], "
          "and optionally \"tiled_gemms\": [{\"flops\": F, \"bytes\": B, \"seconds\": T}, ...] (tiled GEMM "
          "kernels' times, for tiled_gemm_eff)}")
      ->required();
  calibrate->add_option("-o,--output", cal.out, "device spec file to write (for --device-spec)")->required();

  BenchArgs ba;
  CLI::App* bench = app.add_subcommand("bench", "time an artifact's run() after warm-up");
  bench->add_option("dir", ba.dir, "artifact directory from stitchc compile")->required();
  bench->add_option("--backend", ba.backend, "cuda (GPU) or emu (CPU emulation)")->default_val("cuda");
  bench->add_option("--iters", ba.iters, "timed runs")->default_val(100);
  bench->add_option("--warmup", ba.warmup, "untimed runs first")->default_val(10);
  bench->add_flag("--no-cuda-graph", ba.no_cuda_graph, "launch every step each run instead of replaying a CUDA Graph");
  bench->add_flag("--steps", ba.steps,
                  "also time each step alone: achieved GB/s and % of a device-to-device copy (cuda)");
  bench
      ->add_option(
          "--against", ba.against,
          "another artifact of the same model (e.g. --fusion none): time it too and set the steps that "
          "run the same ONNX nodes side by side")
      ->check(CLI::ExistingDirectory);
  bench
      ->add_option("--rounds", ba.rounds,
                   "time the whole schedule in this many rounds of --warmup and --iters runs, alternating "
                   "which artifact goes first with --against, and give each round's median and ratio")
      ->default_val(1);
  bench->add_option("--json", ba.json, "write every number to this JSON file");
  bench->add_option("--seed", ba.seed, "seed of the random inputs")->default_val(1);

  CLI::App* ops = app.add_subcommand("ops", "list the supported ONNX ops with opsets and fusion categories");

  // `stitchc MODEL -o DIR` is `stitchc compile MODEL -o DIR`.
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0].size() > 5 && args[0].compare(args[0].size() - 5, 5, ".onnx") == 0)
    args.insert(args.begin(), "compile");
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    if (*inspect) return run_inspect(ia);
    if (*run) return run_run(ra);
    if (*ops) return run_ops();
    if (*compile) return run_compile(ca);
    if (*bench) return run_bench(ba);
    if (*calibrate) return run_calibrate(cal);
  } catch (const std::bad_alloc&) {
    return report(stitch::Status::user(
        "out of memory: the model needs a tensor larger than this machine can hold (check --shape bindings)"));
  } catch (const std::length_error&) {
    return report(stitch::Status::user("a tensor of the model is too large to allocate (check --shape bindings)"));
  }
  return 2;
}
