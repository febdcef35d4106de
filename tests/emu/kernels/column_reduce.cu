// Column reductions of a row-major rows x cols matrix.
// column_sum_tiled: 2-D blocks of (32, TY) threads; each block owns 32 adjacent columns,
// threads walk down the rows, partial sums meet in a padded shared-memory tile.
// column_sum_atomic: the rows are split over blockIdx.y too; blocks add into the output with
// float atomics, so blocks running in parallel touch the same addresses.
#include <cuda_runtime.h>

constexpr int kTileRows = 32;

__global__ void column_sum_tiled(const float* __restrict__ x, float* __restrict__ sums,
                                 float* __restrict__ means, int rows, int cols) {
  __shared__ float tile[kTileRows][33];  // +1 column: no bank conflicts on the transposed read
  const int col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  if (col < cols)
    for (int r = threadIdx.y; r < rows; r += blockDim.y) acc += x[static_cast<size_t>(r) * cols + col];
  tile[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  // Warp ty finishes tile columns ty, ty + blockDim.y, ...: lane i reads row i of the tile.
  for (int c = threadIdx.y; c < 32; c += blockDim.y) {
    float v = threadIdx.x < blockDim.y ? tile[threadIdx.x][c] : 0.0f;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    const int out_col = blockIdx.x * 32 + c;
    if (threadIdx.x == 0 && out_col < cols) {
      sums[out_col] = v;
      means[out_col] = v / rows;
    }
  }
}

__global__ void column_sum_atomic(const float* __restrict__ x, float* __restrict__ sums, int rows, int cols,
                                  int rows_per_block) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  const int r0 = blockIdx.y * rows_per_block;
  const int r1 = min(rows, r0 + rows_per_block);
  float acc = 0.0f;
  for (int r = r0; r < r1; ++r) acc += x[static_cast<size_t>(r) * cols + col];
  atomicAdd(&sums[col], acc);
}
