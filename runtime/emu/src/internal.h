// Internals of the CPU emulation layer shared by fiber.cc, scheduler.cc and launch.cc.
#pragma once

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "stitch/emu/launch.h"
#include "stitch/emu/state.h"

namespace stitch::emu::detail {

// ---- fiber.cc: stacks and context switches -------------------------------------------------

// One fiber stack: usable bytes [base, base + size), an inaccessible guard region below it.
struct Stack {
  char* base = nullptr;
  std::size_t size = 0;
  char* guard = nullptr;
  std::size_t guard_size = 0;
  bool contains_guard(const void* address) const;
};

// Stacks for the threads of one block, mapped once and reused for every block a worker runs.
class StackPool {
 public:
  StackPool() = default;
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool();
  // Ensures `count` stacks of at least `bytes` each. Returns false when memory is exhausted.
  bool reserve(std::size_t count, std::size_t bytes);
  const Stack& operator[](std::size_t i) const { return stacks_[i]; }

 private:
  void release();
  char* region_ = nullptr;
  std::size_t region_bytes_ = 0;
  std::size_t stack_bytes_ = 0;
  std::vector<Stack> stacks_;
};

// Lays out a fresh stack so that switching to the returned stack pointer calls entry(nullptr).
void* prepare_stack(const Stack& stack, void (*entry)(void*));
// Saves the callee-saved registers on the current stack, stores the stack pointer in *save,
// and continues on the stack `load` (made by prepare_stack or saved by an earlier switch).
extern "C" void stitch_emu_switch_context(void** save, void* load);

// AddressSanitizer fiber annotations; no-ops in other builds.
void asan_start_switch(void** fake_stack_save, const void* bottom, std::size_t size);
void asan_finish_switch(void* fake_stack_save, const void** old_bottom, std::size_t* old_size);

std::size_t default_stack_bytes();
constexpr std::size_t kGuardBytes = 64 * 1024;  // large frames cannot jump over it

// ---- launch.cc: one launch shared by all workers --------------------------------------------

struct Launch {
  LaunchRequest request;
  Options options;
  std::string kernel_name;
  unsigned num_blocks = 0;
  unsigned block_threads = 0;
  std::atomic<unsigned> next_block{0};
  std::atomic<bool> abort{false};

  std::mutex fail_mu;
  Result failure;  // its message cut to Result's buffer (failed)
  // Records the first failure and stops the launch; later failures are dropped.
  void fail(Failure kind, std::string message);

  // Grid-wide barrier of a cooperative launch.
  std::mutex grid_mu;
  std::condition_variable grid_cv;
  unsigned grid_arrived = 0;
  std::uint64_t grid_generation = 0;
  unsigned blocks_finished = 0;

  uint3 block_index(unsigned linear) const;
  uint3 thread_index(unsigned linear) const;
  // "kernel 'name' block (x,y,z) thread (x,y,z)"
  std::string where(unsigned block_linear, unsigned thread_linear) const;
  std::string where_block(unsigned block_linear) const;
};

enum class Jump : int { kNone = 0, kFault = 1, kWatchdog = 2 };

struct WarpBits {
  unsigned present = 0;  // lanes that exist in this block
  unsigned exited = 0;
  unsigned waiting = 0;  // lanes suspended in a warp collective
};

struct Worker {
  unsigned index = 0;
  std::thread thread;
  Launch* launch = nullptr;

  StackPool stacks;
  std::vector<ThreadState> threads;
  std::vector<WarpBits> warps;
  std::vector<unsigned> order;
  unsigned char* smem = nullptr;  // dynamic shared memory of the running block
  std::size_t smem_capacity = 0;

  std::unique_ptr<char[]> signal_stack;  // where fault handlers run, off the fiber stacks
  void* scheduler_sp = nullptr;
  sigjmp_buf jump;
  volatile sig_atomic_t in_fiber = 0;
  volatile sig_atomic_t jump_reason = 0;
  void* volatile fault_address = nullptr;
  volatile sig_atomic_t fault_signal = 0;
  const Stack* volatile current_stack = nullptr;

  // Read by the watchdog.
  std::atomic<bool> busy{false};
  std::atomic<std::uint64_t> progress{0};
  std::atomic<unsigned> current_block{0};
  std::atomic<unsigned> current_thread{0};

  // AddressSanitizer: the worker's own stack, for switches back from fibers.
  const void* native_bottom = nullptr;
  std::size_t native_size = 0;
  void* fake_stack = nullptr;

  ~Worker();
};

extern thread_local Worker* t_worker;

// thread_calls.cc: where every fiber starts (prepare_stack's entry).
void fiber_entry(void*);

// scheduler.cc: runs one block to completion. False when the launch failed.
bool run_block(Worker& worker, Launch& launch, unsigned block_linear);
// Called by a worker after a cooperative block finished; false when the launch failed.
bool finish_cooperative_block(Launch& launch, unsigned block_linear);

}  // namespace stitch::emu::detail
