// The fiber side of the emulator: where every emulated thread starts, and the calls kernel
// code makes (barriers, warp collectives, grid barrier, yield, trap). Each call records what
// the thread waits for in its ThreadState and switches back to the block scheduler
// (scheduler.cc), which completes the operation and resumes the thread.
#include "internal.h"

namespace stitch::emu::detail {

thread_local ThreadState* t_thread = nullptr;
thread_local const BlockState* t_block = nullptr;

const char* warp_op_name(WarpOp op) {
  switch (op) {
    case WarpOp::kShfl:
      return "__shfl_sync";
    case WarpOp::kShflUp:
      return "__shfl_up_sync";
    case WarpOp::kShflDown:
      return "__shfl_down_sync";
    case WarpOp::kShflXor:
      return "__shfl_xor_sync";
    case WarpOp::kBallot:
      return "__ballot_sync";
    case WarpOp::kAny:
      return "__any_sync";
    case WarpOp::kAll:
      return "__all_sync";
    case WarpOp::kSyncwarp:
      return "__syncwarp";
    case WarpOp::kReduceAdd:
      return "__reduce_add_sync";
    case WarpOp::kReduceMin:
      return "__reduce_min_sync";
    case WarpOp::kReduceMax:
      return "__reduce_max_sync";
    case WarpOp::kReduceAnd:
      return "__reduce_and_sync";
    case WarpOp::kReduceOr:
      return "__reduce_or_sync";
    case WarpOp::kReduceXor:
      return "__reduce_xor_sync";
  }
  return "?";
}

namespace {

void suspend() {
  Worker* w = t_worker;
  void* fake = nullptr;
  asan_start_switch(&fake, w->native_bottom, w->native_size);
  stitch_emu_switch_context(&t_thread->sp, w->scheduler_sp);
  asan_finish_switch(fake, nullptr, nullptr);
}

}  // namespace

// Runs on the fiber's own stack: the kernel body, then a final switch back.
void fiber_entry(void*) {
  Worker* w = t_worker;
  asan_finish_switch(nullptr, &w->native_bottom, &w->native_size);
  w->launch->request.invoke(w->launch->request.ctx);
  t_thread->wait = Wait::kExited;
  asan_start_switch(nullptr, w->native_bottom, w->native_size);  // this fiber is done
  stitch_emu_switch_context(&t_thread->sp, w->scheduler_sp);
  __builtin_trap();  // an exited fiber is never resumed
}

int block_barrier(BarrierKind kind, int pred, const std::source_location& site) {
  ThreadState* t = t_thread;
  t->wait = Wait::kBarrier;
  t->barrier = kind;
  t->pred = pred;
  t->site = site;
  suspend();
  return t_thread->result;
}

void warp_collective(WarpOp op, unsigned mask, int arg, int width, const std::source_location& site) {
  ThreadState* t = t_thread;
  t->wait = Wait::kWarp;
  t->op = op;
  t->mask = mask;
  t->arg = arg;
  t->width = width;
  t->site = site;
  suspend();
}

void grid_barrier(const std::source_location& site) {
  ThreadState* t = t_thread;
  t->wait = Wait::kGrid;
  t->site = site;
  suspend();
}

void yield() {
  t_thread->wait = Wait::kYield;
  suspend();
}

void trap(const std::source_location& site) {
  t_thread->wait = Wait::kTrap;
  t_thread->site = site;
  suspend();
  __builtin_trap();  // a trapped thread is never resumed
}

}  // namespace stitch::emu::detail
