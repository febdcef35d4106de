// Atomics on shared and global memory, barrier reductions and warp votes.
#include <cuda_runtime.h>

#include "stitch/device/compat.cuh"

// Histogram of values in [0, num_bins): per-block counts in dynamic shared memory
// (num_bins * sizeof(unsigned) bytes), then one global atomic per bin and block.
__global__ void histogram(const int* __restrict__ values, int n, unsigned* __restrict__ bins, int num_bins) {
  STITCH_DYNAMIC_SMEM(unsigned, local);
  for (int b = threadIdx.x; b < num_bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&local[values[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < num_bins; b += blockDim.x)
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);
}

// Float maximum through the integer compare-and-swap loop users write for it.
__device__ float atomic_max_float(float* address, float value) {
  int* bits = reinterpret_cast<int*>(address);
  int old = *bits;
  while (__int_as_float(old) < value) {
    const int assumed = old;
    old = atomicCAS(bits, assumed, __float_as_int(value));
    if (old == assumed) break;
  }
  return __int_as_float(old);
}

struct Stats {
  int max_value;
  int min_value;
  unsigned positives;        // via __syncthreads_count
  unsigned positive_ballots; // via __ballot_sync + __popc
  unsigned long long sum;
  float max_abs;
  int blocks_all_positive;   // via __syncthreads_and
  int blocks_any_positive;   // via __syncthreads_or
  unsigned warps_any_negative;  // via __any_sync
};

__global__ void statistics(const int* __restrict__ values, int n, Stats* stats) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool valid = i < n;
  const int v = valid ? values[i] : 0;
  if (valid) {
    atomicMax(&stats->max_value, v);
    atomicMin(&stats->min_value, v);
    atomicAdd(&stats->sum, static_cast<unsigned long long>(v + 1000));
    atomic_max_float(&stats->max_abs, fabsf(static_cast<float>(v)));
  }
  const int positive = valid && v > 0;
  const int block_count = __syncthreads_count(positive);
  if (threadIdx.x == 0) atomicAdd(&stats->positives, static_cast<unsigned>(block_count));
  const unsigned ballot = __ballot_sync(0xffffffffu, positive);
  if (threadIdx.x % 32 == 0) atomicAdd(&stats->positive_ballots, static_cast<unsigned>(__popc(ballot)));
  const int any_negative = __any_sync(0xffffffffu, valid && v < 0);
  if (threadIdx.x % 32 == 0 && any_negative) atomicAdd(&stats->warps_any_negative, 1u);
  const int all_positive = __syncthreads_and(!valid || v > 0);
  const int any_positive = __syncthreads_or(positive);
  if (threadIdx.x == 0) {
    atomicAdd(&stats->blocks_all_positive, all_positive);
    atomicAdd(&stats->blocks_any_positive, any_positive);
  }
}

// A spin lock in shared memory guarding a non-atomic double accumulator: correct with
// independent thread scheduling (sm_70 and later).
__global__ void locked_sum(const float* __restrict__ values, int n, double* out) {
  __shared__ int lock;
  __shared__ double sum;
  if (threadIdx.x == 0) {
    lock = 0;
    sum = 0.0;
  }
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    bool done = false;
    while (!done) {
      if (atomicCAS(&lock, 0, 1) == 0) {
        sum += values[i];
        __threadfence_block();
        atomicExch(&lock, 0);
        done = true;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(out, sum);
}

// Inclusive prefix sum within each warp (__shfl_up_sync) and warp-wide integer reduction
// (__reduce_add_sync, sm_80 and later).
__global__ void warp_scan(const int* __restrict__ in, int* __restrict__ scan, int* __restrict__ warp_totals) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += up;
  }
  scan[i] = v;
  const int total = __reduce_add_sync(0xffffffffu, in[i]);
  if (lane == 0) warp_totals[i / 32] = total;
}
