// Fibers for emulated CUDA threads: guarded stacks and a hand-written x86-64 context switch.
//
// A switch saves the six callee-saved registers plus MXCSR and the x87 control word on the
// current stack and loads the other stack; about ten instructions each way (ucontext also
// saves the signal mask with a system call, which measured about 9x slower). Every stack has
// an inaccessible guard region below it, so an overflow faults instead of corrupting a
// neighbour; the fault handler in launch.cc turns that into a diagnostic.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "the stitch CPU emulation layer has a context switch for x86-64 only"
#endif

asm(R"(
  .text
  .globl stitch_emu_switch_context
  .hidden stitch_emu_switch_context
  .type stitch_emu_switch_context, @function
  .p2align 4
stitch_emu_switch_context:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size stitch_emu_switch_context, .-stitch_emu_switch_context

  .globl stitch_emu_fiber_trampoline
  .hidden stitch_emu_fiber_trampoline
  .type stitch_emu_fiber_trampoline, @function
  .p2align 4
stitch_emu_fiber_trampoline:
  .cfi_startproc
  .cfi_undefined rip
  movq %r13, %rdi
  callq *%r12
  ud2
  .cfi_endproc
  .size stitch_emu_fiber_trampoline, .-stitch_emu_fiber_trampoline
)");

extern "C" void stitch_emu_fiber_trampoline();

namespace stitch::emu::detail {

bool Stack::contains_guard(const void* address) const {
  const char* a = static_cast<const char*>(address);
  return a >= guard && a < guard + guard_size;
}

StackPool::~StackPool() { release(); }

void StackPool::release() {
  if (region_ != nullptr) munmap(region_, region_bytes_);
  region_ = nullptr;
  region_bytes_ = 0;
  stacks_.clear();
}

bool StackPool::reserve(std::size_t count, std::size_t bytes) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  bytes = (bytes + page - 1) / page * page;
  if (count <= stacks_.size() && bytes <= stack_bytes_) return true;
  count = std::max(count, stacks_.size());
  bytes = std::max(bytes, stack_bytes_);
  release();
  const std::size_t slot = bytes + kGuardBytes;
  void* region =
      mmap(nullptr, slot * count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (region == MAP_FAILED) return false;
  region_ = static_cast<char*>(region);
  region_bytes_ = slot * count;
  stack_bytes_ = bytes;
  stacks_.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    char* guard = region_ + i * slot;
    if (mprotect(guard, kGuardBytes, PROT_NONE) != 0) {
      release();
      return false;
    }
    stacks_[i] = Stack{guard + kGuardBytes, bytes, guard, kGuardBytes};
  }
  return true;
}

void* prepare_stack(const Stack& stack, void (*entry)(void*)) {
  // Frame popped by stitch_emu_switch_context, lowest address first:
  //   [mxcsr | x87 cw] r15 r14 r13 r12 rbx rbp return-address
  // r12 holds the entry function and r13 its argument for the trampoline. After `ret` the
  // stack pointer is 16-byte aligned, as the ABI wants before the trampoline's call.
  const auto top = reinterpret_cast<std::uintptr_t>(stack.base + stack.size) & ~std::uintptr_t{15};
  auto* frame = reinterpret_cast<std::uint64_t*>(top - 80);
  const std::uint32_t mxcsr = 0x1F80;  // all exceptions masked, round to nearest
  const std::uint16_t fpu_cw = 0x037F;
  std::memset(frame, 0, 80);
  std::memcpy(reinterpret_cast<char*>(frame), &mxcsr, 4);
  std::memcpy(reinterpret_cast<char*>(frame) + 4, &fpu_cw, 2);
  frame[3] = 0;                                       // r13: argument
  frame[4] = reinterpret_cast<std::uint64_t>(entry);  // r12: function
  frame[7] = reinterpret_cast<std::uint64_t>(&stitch_emu_fiber_trampoline);
  return frame;
}

std::size_t default_stack_bytes() {
#if defined(__SANITIZE_ADDRESS__)
  return 256 * 1024;  // instrumented frames carry redzones
#else
  return 64 * 1024;
#endif
}

void asan_start_switch(void** fake_stack_save, const void* bottom, std::size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}

void asan_finish_switch(void* fake_stack_save, const void** old_bottom, std::size_t* old_size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack_save, old_bottom, old_size);
#else
  (void)fake_stack_save, (void)old_bottom, (void)old_size;
#endif
}

}  // namespace stitch::emu::detail
