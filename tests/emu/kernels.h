// Host-side declarations of the test kernels in kernels/*.cu, for launching them through the
// emulation layer. Plain prototypes: __global__ means nothing on the host side.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// layernorm.cu
void block_row_layernorm(const float* x, const float* bias, const float* residual, const float* gamma,
                         const float* beta, float* y, int cols, float eps);
void warp_row_layernorm(const float* x, const float* bias, const float* residual, const float* gamma,
                        const float* beta, float* y, int rows, int cols, float eps);
// softmax.cu
void scaled_softmax_f16(const float* x, __half* y, int cols, float scale);
void softmax_f16_in(const __half2* x, __half* y, int cols, __half scale);
// grid_norm.cu
void grid_rms_normalize(const float* x, float* y, float* partials, long long n, float eps);
// column_reduce.cu
void column_sum_tiled(const float* x, float* sums, float* means, int rows, int cols);
void column_sum_atomic(const float* x, float* sums, int rows, int cols, int rows_per_block);
// atomics.cu
struct Stats {
  int max_value;
  int min_value;
  unsigned positives;
  unsigned positive_ballots;
  unsigned long long sum;
  float max_abs;
  int blocks_all_positive;
  int blocks_any_positive;
  unsigned warps_any_negative;
};
void histogram(const int* values, int n, unsigned* bins, int num_bins);
void statistics(const int* values, int n, Stats* stats);
void locked_sum(const float* values, int n, double* out);
void warp_scan(const int* in, int* scan, int* warp_totals);
// warp_features.cu
void tile_features(const float* in, float* sums, unsigned* ballots, float* firsts);
void width_and_syncwarp(const int* in, int* broadcast, int* after);
void half_math(const float* x, __half* h, __nv_bfloat16* b, int n);
// broken.cu
void reverse_missing_barrier(const float* in, float* out);
void divergent_barrier(float* out);
void exit_before_barrier(const float* in, float* out, int n);
void shuffle_absent_lanes(float* out);
void shuffle_mask_excludes_caller(float* out);
void warp_deadlock(float* out);
void spin_forever(const volatile int* flag, float* out);
void stack_overflow(float* out, int depth);
void out_of_bounds_write(float* out, int n);
void null_write(float* out);
void trap_on_negative(const float* in);
void racy_last_writer(int* out);
// grid_misuse.cu
void grid_sync_kernel(float* out);
void grid_sync_block_exits(float* out);
