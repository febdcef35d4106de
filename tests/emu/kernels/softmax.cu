// Scaled softmax over rows with a float32 row cache in dynamic shared memory and float16
// output: y = softmax(x * scale). One block per row; the row is read from global memory once.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "stitch/device/compat.cuh"

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  static constexpr float identity = -INFINITY;
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
  static constexpr float identity = 0.0f;
};

template <class Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float partial[32];
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  const unsigned num_warps = (blockDim.x + 31) / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < num_warps ? partial[lane] : Op::identity;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  const float result = partial[0];
  __syncthreads();
  return result;
}

// Launch with cols * sizeof(float) bytes of dynamic shared memory.
__global__ void scaled_softmax_f16(const float* __restrict__ x, __half* __restrict__ y, int cols, float scale) {
  STITCH_DYNAMIC_SMEM(float, row_cache);
  const size_t base = static_cast<size_t>(blockIdx.x) * cols;

  float local_max = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = x[base + c] * scale;
    row_cache[c] = v;
    local_max = fmaxf(local_max, v);
  }
  const float row_max = block_reduce(local_max, MaxOp{});

  float local_sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = __expf(row_cache[c] - row_max);
    row_cache[c] = e;
    local_sum += e;
  }
  const float inv_sum = __frcp_rn(block_reduce(local_sum, SumOp{}));

  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[base + c] = __float2half_rn(row_cache[c] * inv_sum);
}

// Same softmax over float16 input, staged through shared memory as half2 pairs with half
// arithmetic for the scale; cols must be even.
__global__ void softmax_f16_in(const __half2* __restrict__ x, __half* __restrict__ y, int cols, __half scale) {
  STITCH_DYNAMIC_SMEM(float, row_cache);
  const int pairs = cols / 2;
  const size_t base = static_cast<size_t>(blockIdx.x) * pairs;
  const __half2 scale2 = __half2half2(scale);
  float local_max = -INFINITY;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const float2 v = __half22float2(__hmul2(x[base + p], scale2));
    row_cache[2 * p] = v.x;
    row_cache[2 * p + 1] = v.y;
    local_max = fmaxf(local_max, fmaxf(v.x, v.y));
  }
  const float row_max = block_reduce(local_max, MaxOp{});
  float local_sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    // Each thread reads cache entries written by other threads: a barrier is needed, and
    // block_reduce above provides it.
    const float e = expf(row_cache[c] - row_max);
    local_sum += e;
  }
  const float sum = block_reduce(local_sum, SumOp{});
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    y[static_cast<size_t>(blockIdx.x) * cols + c] = __float2half_rn(expf(row_cache[c] - row_max) / sum);
}
