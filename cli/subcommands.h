#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stitch::cli {

struct InspectArgs {
  std::string model, dump_dir;
  std::vector<std::string> shapes, constant_inputs;
  bool json = false;
};
int run_inspect(const InspectArgs& a);
int run_ops();

struct RunArgs {
  std::string model, inputs, expect, backend = "reference", save, dump_dir;
  std::vector<std::string> shapes, constant_inputs;
  double rtol = -1, atol = -1;
};
int run_run(const RunArgs& a);

struct CompileArgs {
  std::string model, out, arch = "sm_90", fusion = "beam", report_json, dump_dir, device_spec, build_cache;
  std::vector<std::string> shapes, no_fuse, constant_inputs;
  int max_group_size = 128, beam_width = 8;
  bool no_pack = false;
  bool approximate_gelu = false;
  bool no_stitch_matmul = false;
  bool no_merge_gemms = false;
  bool no_unflatten_gemms = false;
  bool no_fold_scales = false;
  bool no_hoist_row_scales = false;
  bool no_hoist_layer_norms = false;
  bool no_split_group_norms = false;
  bool no_split_head_rows = false;
  bool no_split_slices = false;
  bool no_all_expert_gemms = false;
  bool no_expert_sums = false;
  bool no_topk_rounds = false;
  bool no_short_reductions = false;
  bool no_pool_taps = false;
  bool no_shared_duplicates = false;
  bool no_arg_reductions = false;
  bool no_relayout_copies = false;
  bool no_output_copies = false;
  bool no_gemms_as_matmuls = false;
  bool tf32 = false;
  std::string conv_transpose = "subpixel";
  int max_registers = 128;
  int64_t max_evaluations = 1024;
  int64_t plan_budget = 50'000'000;
  double plan_time_limit = 60;
  bool no_nvcc = false, no_emu = false, explain = false;
  double build_cache_max_mb = 2048;
};
int run_compile(const CompileArgs& a);

struct CalibrateArgs {
  std::string measurements, out;
};
int run_calibrate(const CalibrateArgs& a);

struct BenchArgs {
  std::string dir, backend = "cuda";
  int iters = 100, warmup = 10;
  int rounds = 1;  // alternating rounds of this artifact and --against's, each warm-up + iters
  bool no_cuda_graph = false;
  bool steps = false;   // time each step alone
  std::string against;  // another artifact of the same model to set beside this one
  std::string json;     // write every number here
  unsigned seed = 1;    // of the random inputs
};
int run_bench(const BenchArgs& a);

}  // namespace stitch::cli
