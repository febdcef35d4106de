// Grid-wide barriers used wrongly: launched without a cooperative launch, or with blocks
// that leave early.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

__global__ void grid_sync_kernel(float* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
  cg::this_grid().sync();
  out[blockIdx.x * blockDim.x + threadIdx.x] += 1.0f;
}

__global__ void grid_sync_block_exits(float* out) {
  if (blockIdx.x == 0) return;
  cg::this_grid().sync();
  out[blockIdx.x] = 1.0f;
}
