// The fusion cost model: estimated time of one kernel (or library call) of a plan, from written
// formulas over device constants whose sources are listed with them (device_spec in cost.cc).
//
//   t(kernel) = launch
//             + max(dram_bytes / (dram_bw * bw_eff),
//                   round_trips * latency + flops / threads / clock + loop_time,
//                   flops / fp32)                              (bandwidth-bound or latency-bound)
//             + reread_bytes / l2_bw                          (row passes after the first, uncached;
//                                                              replicas' reads of their rows)
//             + barriers * barrier                            (block-wide trees in block-per-row kernels)
//             + grid_barriers * grid_barrier                  (rows split over blocks: one per reduction)
//   round_trips: element kernels one per grid-stride iteration; row kernels per pass
//               ceil(row / lanes / 4) (four loads in flight per thread) + 1 for the tree, where a
//               row split over blocks counts its block's segment, not the row, and per wide store
//               loop ceil(share / lanes / 4), share = the replica's elements of the wide value
//   threads:    row kernels rows x lanes x replicas (RowMapping)
//   dram_bytes = each external input once + each stored value once
//   flops      = per node and element computed, recomputation included, the instructions of its
//                expression (codegen::op_instructions: 1 for an add, 31 for an erf), plus 2 per
//                multiply-add of a fine-grained GEMM's loop and one per evaluation of its operands'
//                producers in each step (once, or once per pass when a row kernel does not cache
//                its row; an A operand whose row a row kernel holds in shared memory, once per
//                row and step: StitchInfo::a_row_cached)
//   reread_bytes also counts the operand reads of those loops beyond the first (StitchInfo::
//                contraction_reads), charged at L2 bandwidth though many hit L1, and an outer
//                reduction's row read again by every kernel row after the first of its outer row
//                (StitchInfo::outer: each also adds its passes' round trips, trees and one
//                instruction per element read again)
//   loop_time  = loop_steps * loop_step, added to the latency-bound term: loop_steps = a fine-grained
//                GEMM's multiply-adds over the threads (evaluations x contraction length; once per
//                pass in a row kernel that does not cache its row), the steps each thread runs in
//                sequence
//   t(library call) = launch + 2*M*N*K / rate + operand bytes / dram_bw (the same in every plan), rate
//                the call's math: fp32 GEMMs and convolutions on the fp32 pipes (cuBLASLt's
//                CUBLAS_COMPUTE_32F and cuDNN's FMA math use no TF32), or on TF32 tensor cores with
//                --tf32 (DeviceSpec::tf32); fp16/bf16 on fp16 tensor cores (2x the TF32 rate), fp64
//                at half the fp32 rate
//   t(view) = 0
//   t(tiled GEMM with its epilogue, codegen/gemm_tile.h) = launch
//             + max(2*R*N*K / (fp32 * tiled_gemm_eff * fill), the epilogue's round trip, flops and
//                   loop_time, waves * K steps * latency)
//             + dram_bytes / (dram_bw * bw_eff)
//   the library call's form, so that tiled_gemm_eff is the kernel's rate against the library's (both
//   fp32 SIMT): it takes in the operands' re-reads from L2, the shared-memory traffic, the barriers
//   of each K step and the tile edges; fill = min(1, tiles / sms) (a tile's block runs on one SM);
//   waves = ceil(tiles / (sms * kTileBlocksPerSm)): each step of a block's K loop waits for its
//   slices' round trip, which bounds few tiles over a long K (the library call splits K instead);
//   dram_bytes: each input once (the operands, a bias, a residual) and each stored value once
//
// launch, bw_eff, barrier and tiled_gemm_eff are assumptions until calibrated on the device; loop_step
// was measured on an H100 (cost.cc)
// (`stitchc calibrate MEASUREMENTS.json` fits launch and bw_eff by least squares from
// measured kernel times and writes a spec file that `--device-spec` loads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/stitch.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

struct DeviceSpec {
  std::string arch;             // sm_80, sm_90
  std::string name;
  int sms = 0;
  int max_threads_per_sm = 2048;
  int64_t smem_per_sm = 0;      // bytes usable by blocks
  int64_t regs_per_sm = 65536;
  double dram_bw = 0;           // bytes/s, datasheet peak
  double l2_bw = 0;             // bytes/s
  double fp32 = 0;              // flop/s, non-tensor
  double tensor = 0;            // flop/s, dense tf32 tensor cores (GEMMs)
  double bw_eff = 0.85;         // achievable fraction of dram_bw (assumed until calibrated)
  double launch = 3e-6;         // s per kernel launch on a stream (assumed until calibrated)
  double barrier = 1e-7;        // s per block-wide barrier round (assumed)
  double grid_barrier = 2e-6;   // s per grid-wide barrier of a cooperative kernel (assumed)
  double latency = 5e-7;        // s per dependent global-memory round trip (assumed until calibrated)
  double clock = 1.5e9;         // Hz, SM boost clock
  // The generated tiled GEMM's fp32 rate as a fraction of fp32 (the library calls' rate in this
  // model). Assumed until measured: SIMT SGEMMs with 8 x 8 register blocking and no vector loads
  // reach about 70% of cuBLAS (S. Boehm, "How to Optimize a CUDA Matmul Kernel for cuBLAS-like
  // Performance", 2022: 2D block tiling 68.7%, vectorized 78.4%, on an RTX A6000).
  double tiled_gemm_eff = 0.7;
  // s per step of a fine-grained GEMM's loop in one thread (a multiply-add waiting on its operand
  // loads, with the loop's unrolling overlapping some of them): the loops run their steps one after
  // another, so a long contraction over few threads is latency-bound however few bytes it moves.
  double loop_step = 4.5e-8;
  std::string sources;          // where each number comes from
  // Not the device's but the artifact's: float32 GEMM and convolution calls run on TF32 tensor
  // cores (stitchc compile --tf32), priced at `tensor` instead of `fp32`. Not in spec files.
  bool tf32 = false;
};

// Built-in specs: "sm_80" (A100 SXM4 80GB) and "sm_90" (H100 SXM5 80GB).
StatusOr<DeviceSpec> device_spec(const std::string& arch);
// A spec file written by `stitchc calibrate` (JSON with the fields above).
StatusOr<DeviceSpec> load_device_spec(const std::string& path);
std::string device_spec_json(const DeviceSpec& s);

struct Cost {
  double time = 0;          // seconds
  int64_t bytes = 0;        // dram bytes moved by generated kernels
  int64_t library_bytes = 0;  // operand and result bytes of library calls (each once)
  int64_t reread = 0;       // bytes re-read from L2 by later passes
  double flops = 0;
  int launches = 0;         // generated kernels + library calls
  int kernels = 0;          // generated kernels only
  int library_calls = 0;
  Cost& operator+=(const Cost& o) {
    time += o.time;
    bytes += o.bytes;
    library_bytes += o.library_bytes;
    reread += o.reread;
    flops += o.flops;
    launches += o.launches;
    kernels += o.kernels;
    library_calls += o.library_calls;
    return *this;
  }
};

// The cost of one node alone (kernel, library call or view).
Cost single_cost(const Node& n, const DeviceSpec& d);
// The cost of a stitched kernel with this analysis, over these nodes.
Cost stitched_cost(const std::vector<const Node*>& nodes, const codegen::StitchInfo& info, const DeviceSpec& d);

// A row kernel of `passes` loops over each of `rows` rows, `reductions` of them ending in a tree,
// under mapping `m` (codegen::row_mapping): its threads, its dependent round trips (per pass the
// strided loop over the row, or over the block's segment when the row is split, with 4 loads in
// flight per thread, and the tree) and its barrier time (block trees and tiled columns: two
// block-wide barriers per reduction and per wave of blocks; a row split over blocks: a grid-wide
// barrier per reduction). Tiled column kernels split each column over mapping.lanes() threads.
// `shared` more reductions end in a tree of their own in one of those passes (StitchInfo::
// shared_pass): their block-wide barriers are charged, and no grid-wide one.
struct RowShape {
  int64_t threads = 0;
  double trips = 0;
  double barrier_time = 0;
};
RowShape row_shape(const codegen::RowMapping& m, int64_t rows, int passes, int reductions,
                   const DeviceSpec& d, int shared = 0);

// Calibration: measured kernel times with their bytes and launch counts; fits launch and bw_eff.
struct Measurement {
  int64_t bytes = 0;
  int launches = 1;
  double seconds = 0;
};
StatusOr<DeviceSpec> calibrate(DeviceSpec base, const std::vector<Measurement>& m);
// A tiled GEMM kernel's measured time (bench/gpu's ffn1_gelu.tiled step) with its multiply-adds
// and DRAM bytes (its step in the plan: 2RNK flops, the bytes the cost model counts).
struct TiledMeasurement {
  double flops = 0;
  int64_t bytes = 0;
  double seconds = 0;
};
// tiled_gemm_eff from such measurements, after launch and bw_eff are fitted: per measurement the
// time left for the math, (seconds - launch - bytes / (dram_bw * bw_eff)), against flops / fp32;
// the median of those ratios, at most 1.
StatusOr<DeviceSpec> calibrate_tiled(DeviceSpec base, const std::vector<TiledMeasurement>& m);

}  // namespace stitch::fusion
