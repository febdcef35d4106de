// Sub-warp shuffles and votes (cooperative_groups tiles of 4, 8 and 16 lanes; __shfl_sync with
// width 16, a half-warp mask after the other half exited), and the half / bfloat16 device math the code generator uses.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

template <unsigned N>
__device__ void tile_stats(const float* in, float* sums, unsigned* ballots, float* firsts) {
  cg::thread_block_tile<N> tile = cg::tiled_partition<N>(cg::this_thread_block());
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const float v = in[i];
  sums[i] = cg::reduce(tile, v, cg::plus<float>());
  ballots[i] = tile.ballot(v > 0.0f);
  firsts[i] = tile.shfl(v, 0) + tile.shfl_up(v, 1) - tile.shfl_down(v, 1);
}

// out arrays hold one value per thread for tiles of 4, 8 and 16.
__global__ void tile_features(const float* __restrict__ in, float* sums, unsigned* ballots, float* firsts) {
  const size_t n = static_cast<size_t>(gridDim.x) * blockDim.x;
  tile_stats<4>(in, sums, ballots, firsts);
  tile_stats<8>(in, sums + n, ballots + n, firsts + n);
  tile_stats<16>(in, sums + 2 * n, ballots + 2 * n, firsts + 2 * n);
}

// Lane 3 of each 16-lane segment broadcast with an explicit width; then the upper half of
// each warp leaves and the lower half goes on with 16-lane masks.
__global__ void width_and_syncwarp(const int* __restrict__ in, int* __restrict__ broadcast, int* __restrict__ after) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  broadcast[i] = __shfl_sync(0xffffffffu, in[i], 3, 16);
  if (threadIdx.x % 32 >= 16) return;
  __syncwarp(0x0000ffffu);
  after[i] = __shfl_sync(0x0000ffffu, in[i], (threadIdx.x % 32 + 1) % 16);
}

// y = [exp(x), tanh(x), rsqrt(|x|+1), fma(x, x, x)] in half, then the same in bfloat16.
__global__ void half_math(const float* __restrict__ x, __half* h, __nv_bfloat16* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const __half xh = __float2half_rn(x[i]);
  h[4 * i + 0] = hexp(xh);
  h[4 * i + 1] = htanh(xh);
  h[4 * i + 2] = hrsqrt(__hadd(__habs(xh), __float2half(1.0f)));
  h[4 * i + 3] = __hfma(xh, xh, xh);
  const __nv_bfloat16 xb = __float2bfloat16_rn(x[i]);
  b[4 * i + 0] = hexp(xb);
  b[4 * i + 1] = htanh(xb);
  b[4 * i + 2] = hrsqrt(__habs(xb) + __float2bfloat16(1.0f));
  b[4 * i + 3] = __hfma(xb, xb, xb);
}
