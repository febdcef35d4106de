// Fused bias + residual + layer norm over the last dimension:
//   y = (s - mean(s)) / sqrt(var(s) + eps) * gamma + beta,  s = x + bias + residual.
// block_row_layernorm: one block per row; warp shuffles reduce inside a warp, shared memory
// across warps. warp_row_layernorm: one warp per row (cooperative_groups tiles), for short rows.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block; every thread gets the result. blockDim.x must be a multiple of 32.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < num_warps ? partial[lane] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  const float total = partial[0];
  __syncthreads();  // partial is reused by the next call
  return total;
}

__global__ void __launch_bounds__(1024)
    block_row_layernorm(const float* __restrict__ x, const float* __restrict__ bias,
                        const float* __restrict__ residual, const float* __restrict__ gamma,
                        const float* __restrict__ beta, float* __restrict__ y, int cols, float eps) {
  const size_t row = blockIdx.x;
  const float* xr = x + row * cols;
  const float* rr = residual + row * cols;
  float* yr = y + row * cols;

  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float s = xr[c] + __ldg(&bias[c]) + rr[c];
    yr[c] = s;  // the row's sum stays in y until the last pass
    sum += s;
  }
  const float mean = block_sum(sum) / cols;

  float sq = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = yr[c] - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(block_sum(sq) / cols + eps);

  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = (yr[c] - mean) * rstd * __ldg(&gamma[c]) + __ldg(&beta[c]);
}

__global__ void warp_row_layernorm(const float* __restrict__ x, const float* __restrict__ bias,
                                   const float* __restrict__ residual, const float* __restrict__ gamma,
                                   const float* __restrict__ beta, float* __restrict__ y, int rows, int cols,
                                   float eps) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  const int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
  if (row >= rows) return;  // the whole warp leaves together; no block barrier follows
  const size_t base = static_cast<size_t>(row) * cols;

  float sum = 0.0f;
  for (int c = warp.thread_rank(); c < cols; c += 32) {
    const float s = x[base + c] + bias[c] + residual[base + c];
    y[base + c] = s;
    sum += s;
  }
  const float mean = cg::reduce(warp, sum, cg::plus<float>()) / cols;
  float sq = 0.0f;
  for (int c = warp.thread_rank(); c < cols; c += 32) {
    const float d = y[base + c] - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(cg::reduce(warp, sq, cg::plus<float>()) / cols + eps);
  for (int c = warp.thread_rank(); c < cols; c += 32)
    y[base + c] = (y[base + c] - mean) * rstd * gamma[c] + beta[c];
}
