// Emulation-layer stand-in for CUDA's <cooperative_groups.h>: the subset listed in
// runtime/emu/SUPPORTED.md (thread_block, thread_block_tile<N> for N = 1..32, grid_group).
#pragma once

#include "stitch/emu/emu.h"

namespace cooperative_groups {

class thread_block {
 public:
  void sync(STITCH_EMU_SITE) const { __syncthreads(site); }
  unsigned thread_rank() const { return ::stitch::emu::detail::t_thread->linear; }
  unsigned size() const { return blockDim.x * blockDim.y * blockDim.z; }
  unsigned num_threads() const { return size(); }
  dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};

inline thread_block this_thread_block() { return {}; }

template <unsigned N>
class thread_block_tile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tile sizes are powers of two up to 32");

 public:
  static constexpr unsigned num_threads() { return N; }
  static constexpr unsigned size() { return N; }
  unsigned thread_rank() const { return ::stitch::emu::detail::t_thread->lane % N; }
  unsigned meta_group_rank() const { return ::stitch::emu::detail::t_thread->linear / N; }
  unsigned meta_group_size() const { return (blockDim.x * blockDim.y * blockDim.z + N - 1) / N; }
  // The lanes of the caller's warp that belong to its tile.
  unsigned mask() const {
    const unsigned base = ::stitch::emu::detail::t_thread->lane / N * N;
    return static_cast<unsigned>(((1ull << N) - 1) << base);
  }
  void sync(STITCH_EMU_SITE) const { __syncwarp(mask(), site); }
  template <class T>
  T shfl(T v, int src, STITCH_EMU_SITE) const {
    return __shfl_sync(mask(), v, src, N, site);
  }
  template <class T>
  T shfl_down(T v, unsigned delta, STITCH_EMU_SITE) const {
    return __shfl_down_sync(mask(), v, delta, N, site);
  }
  template <class T>
  T shfl_up(T v, unsigned delta, STITCH_EMU_SITE) const {
    return __shfl_up_sync(mask(), v, delta, N, site);
  }
  template <class T>
  T shfl_xor(T v, int lane_mask, STITCH_EMU_SITE) const {
    return __shfl_xor_sync(mask(), v, lane_mask, N, site);
  }
  unsigned ballot(int pred, STITCH_EMU_SITE) const {
    const unsigned base = ::stitch::emu::detail::t_thread->lane / N * N;
    return (__ballot_sync(mask(), pred, site) >> base) & static_cast<unsigned>((1ull << N) - 1);
  }
  int any(int pred, STITCH_EMU_SITE) const { return __any_sync(mask(), pred, site); }
  int all(int pred, STITCH_EMU_SITE) const { return __all_sync(mask(), pred, site); }
};

template <unsigned N, class Parent>
thread_block_tile<N> tiled_partition(const Parent&) {
  return {};
}

class grid_group {
 public:
  void sync(STITCH_EMU_SITE) const { ::stitch::emu::detail::grid_barrier(site); }
  bool is_valid() const { return true; }
  unsigned long long thread_rank() const {
    return block_rank() * static_cast<unsigned long long>(blockDim.x * blockDim.y * blockDim.z) +
           ::stitch::emu::detail::t_thread->linear;
  }
  unsigned long long size() const {
    return num_blocks() * static_cast<unsigned long long>(blockDim.x * blockDim.y * blockDim.z);
  }
  unsigned long long num_threads() const { return size(); }
  unsigned long long block_rank() const {
    return blockIdx.x + static_cast<unsigned long long>(gridDim.x) * (blockIdx.y + gridDim.y * blockIdx.z);
  }
  unsigned long long num_blocks() const {
    return static_cast<unsigned long long>(gridDim.x) * gridDim.y * gridDim.z;
  }
  dim3 group_dim() const { return gridDim; }
};

inline grid_group this_grid() { return {}; }

template <class Group>
void sync(const Group& group, STITCH_EMU_SITE) {
  group.sync(site);
}

template <class T>
struct plus {
  T operator()(T a, T b) const { return a + b; }
};
template <class T>
struct less {
  T operator()(T a, T b) const { return b < a ? b : a; }
};
template <class T>
struct greater {
  T operator()(T a, T b) const { return a < b ? b : a; }
};
template <class T>
struct bit_and {
  T operator()(T a, T b) const { return a & b; }
};
template <class T>
struct bit_or {
  T operator()(T a, T b) const { return a | b; }
};
template <class T>
struct bit_xor {
  T operator()(T a, T b) const { return a ^ b; }
};

// cooperative_groups::reduce over a tile: every lane gets the reduction of the tile.
template <unsigned N, class T, class Op>
T reduce(const thread_block_tile<N>& tile, T value, Op op) {
  for (unsigned offset = N / 2; offset > 0; offset /= 2)
    value = op(value, tile.shfl_xor(value, static_cast<int>(offset)));
  return value;
}

}  // namespace cooperative_groups
