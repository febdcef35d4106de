// State shared between emulated kernels and the emulator's scheduler. Kernel code reaches it
// only through the builtins in emu.h; nothing here is part of the public API.
#pragma once

#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <source_location>

namespace stitch::emu::detail {

enum class Wait : std::uint8_t {
  kRunnable,  // may be resumed
  kYield,     // gave up the CPU voluntarily (atomics in a loop, __nanosleep); still runnable
  kBarrier,   // in __syncthreads and friends
  kWarp,      // in a warp collective (__shfl*_sync, __ballot_sync, __syncwarp, ...)
  kGrid,      // in cooperative_groups::this_grid().sync()
  kExited,
  kTrap,  // called __trap()
};

enum class WarpOp : std::uint8_t {
  kShfl,
  kShflUp,
  kShflDown,
  kShflXor,
  kBallot,
  kAny,
  kAll,
  kSyncwarp,
  kReduceAdd,
  kReduceMin,
  kReduceMax,
  kReduceAnd,
  kReduceOr,
  kReduceXor,
};
const char* warp_op_name(WarpOp op);

enum class BarrierKind : std::uint8_t { kSync, kCount, kAnd, kOr };

// One emulated CUDA thread (one fiber).
struct ThreadState {
  uint3 tid;
  unsigned linear = 0;  // x + y*bx + z*bx*by
  unsigned lane = 0;
  unsigned warp = 0;
  void* sp = nullptr;  // saved stack pointer while suspended
  Wait wait = Wait::kRunnable;
  WarpOp op = WarpOp::kSyncwarp;
  BarrierKind barrier = BarrierKind::kSync;
  bool is_signed = false;          // operand signedness of __reduce_*_sync
  unsigned mask = 0;
  int arg = 0;  // srcLane, delta or laneMask
  int width = 32;
  int pred = 0;    // vote / barrier predicate
  int result = 0;  // barrier and vote result
  unsigned atomics = 0;
  alignas(16) std::uint64_t in[2] = {0, 0};
  alignas(16) std::uint64_t out[2] = {0, 0};
  std::source_location site;  // where the thread waits
};

struct BlockState {
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  unsigned char* dynamic_smem = nullptr;
  std::size_t dynamic_smem_bytes = 0;
};

extern thread_local ThreadState* t_thread;
extern thread_local const BlockState* t_block;

// Entered from kernel code; each suspends the calling fiber until the operation completes.
int block_barrier(BarrierKind kind, int pred, const std::source_location& site);
void warp_collective(WarpOp op, unsigned mask, int arg, int width, const std::source_location& site);
void grid_barrier(const std::source_location& site);
void yield();
[[noreturn]] void trap(const std::source_location& site);

}  // namespace stitch::emu::detail
