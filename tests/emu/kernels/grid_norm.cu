// Grid-synchronised RMS normalisation of a whole tensor: y = x / sqrt(mean(x^2) + eps).
// Every block reduces its part, publishes a partial sum, waits at a grid-wide barrier, then
// scales its part. Needs a cooperative launch (all blocks resident); blockDim.x a multiple of 32.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

__global__ void grid_rms_normalize(const float* __restrict__ x, float* __restrict__ y, float* partials,
                                   long long n, float eps) {
  cg::grid_group grid = cg::this_grid();
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  __shared__ float warp_sums[32];
  __shared__ float total;

  float sq = 0.0f;
  for (long long i = grid.thread_rank(); i < n; i += grid.size()) sq += x[i] * x[i];
  sq = cg::reduce(warp, sq, cg::plus<float>());
  if (warp.thread_rank() == 0) warp_sums[warp.meta_group_rank()] = sq;
  block.sync();
  if (block.thread_rank() == 0) {
    float s = 0.0f;
    for (unsigned w = 0; w < warp.meta_group_size(); ++w) s += warp_sums[w];
    partials[grid.block_rank()] = s;
  }

  grid.sync();  // every block's partial is visible after this

  if (block.thread_rank() == 0) {
    float s = 0.0f;
    for (unsigned long long b = 0; b < grid.num_blocks(); ++b) s += partials[b];
    total = s;
  }
  block.sync();
  const float scale = rsqrtf(total / static_cast<float>(n) + eps);
  for (long long i = grid.thread_rank(); i < n; i += grid.size()) y[i] = x[i] * scale;
}
