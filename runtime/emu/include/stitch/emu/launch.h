// Host side of the CPU emulation layer: launch a CUDA kernel compiled by g++.
//
// Every launch is synchronous and returns a Result. A kernel that misbehaves (divergent
// barrier, bad warp mask, deadlock, spin loop, stack overflow, memory fault) makes the launch
// fail with a message naming the kernel, the block and the thread; the process keeps going.
// Launches are serialised: one at a time in the whole process.
#pragma once

#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace stitch::emu {

// Order in which the threads of a block are resumed. A kernel with a missing barrier
// usually computes something different in reverse or random order.
enum class ThreadOrder { kForward, kReverse, kRandom };

struct Options {
  ThreadOrder order = ThreadOrder::kForward;
  std::uint64_t seed = 1;                 // for ThreadOrder::kRandom
  int workers = 0;                        // OS threads running blocks; 0 = all hardware threads
  std::size_t stack_bytes = 0;            // per emulated thread; 0 = 64 KiB (256 KiB under ASan)
  double watchdog_seconds = 20.0;         // one thread running this long without reaching a
                                          // barrier, warp operation, atomic or exit fails the launch
  unsigned max_cooperative_blocks = 128;  // emulated co-residency limit for cooperative launches
};

// Process-wide options; take effect at the next launch.
void set_options(const Options& options);
Options options();

enum class Failure {
  kNone,
  kLaunchConfig,      // invalid grid/block/shared-memory configuration
  kDivergentBarrier,  // threads of a block wait at different barriers
  kExitedAtBarrier,   // threads exited while others wait at (or later reach) a barrier
  kBadWarpMask,       // a warp mask names absent or exited lanes, or a lane reads outside it
  kDeadlock,          // every thread waits and nothing can complete
  kWatchdog,          // a thread ran too long without synchronising (spin loop?)
  kStackOverflow,     // a thread ran off its stack
  kMemoryFault,       // SIGSEGV/SIGBUS/SIGFPE inside a kernel
  kGridSync,          // grid-wide barrier misuse (non-cooperative launch, exited blocks)
  kTrap,              // the kernel called __trap()
};
const char* failure_name(Failure failure);

struct [[nodiscard]] Result {
  Failure failure = Failure::kNone;
  // What went wrong, NUL-terminated, cut to fit. A buffer, not a std::string: every artifact's
  // emulation library is built on this header, and <string> (with <atomic>, which emu.h no longer
  // includes either) was a third of the compile of a one-kernel library.
  char message[4096] = {};
  bool ok() const { return failure == Failure::kNone; }
  explicit operator bool() const { return ok(); }
};

// Largest grid (in blocks) a cooperative launch accepts with the current options.
unsigned max_cooperative_blocks();

namespace detail {

struct LaunchRequest {
  const void* kernel = nullptr;  // for naming the kernel in messages
  const char* name = nullptr;    // overrides the symbol lookup when set
  dim3 grid, block;
  std::size_t dynamic_smem_bytes = 0;
  bool cooperative = false;
  void (*invoke)(const void* ctx) = nullptr;  // calls the kernel with its arguments
  const void* ctx = nullptr;
};

Result launch_impl(const LaunchRequest& request);

template <class Kernel, class Tuple>
struct Call {
  Kernel kernel;
  Tuple args;
  static void invoke(const void* self) {
    const auto* call = static_cast<const Call*>(self);
    std::apply(call->kernel, call->args);
  }
};

template <class... P, class Tuple>
Result launch_tuple(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t smem, bool cooperative,
                    const char* name, Tuple&& args) {
  using C = Call<void (*)(P...), std::decay_t<Tuple>>;
  const C call{kernel, std::forward<Tuple>(args)};
  LaunchRequest request;
  request.kernel = reinterpret_cast<const void*>(kernel);
  request.name = name;
  request.grid = grid;
  request.block = block;
  request.dynamic_smem_bytes = smem;
  request.cooperative = cooperative;
  request.invoke = &C::invoke;
  request.ctx = &call;
  return launch_impl(request);
}

template <class... P, std::size_t... I>
std::tuple<std::decay_t<P>...> unpack_args(void** args, std::index_sequence<I...>) {
  return std::tuple<std::decay_t<P>...>(*static_cast<std::decay_t<P>*>(args[I])...);
}

}  // namespace detail

// kernel<<<grid, block, dynamic_smem_bytes>>>(args...)
template <class... P, class... A>
Result launch(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t dynamic_smem_bytes, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch: argument count differs from the kernel's");
  return detail::launch_tuple(kernel, grid, block, dynamic_smem_bytes, false, nullptr,
                              std::tuple<std::decay_t<P>...>(std::forward<A>(args)...));
}

// cudaLaunchCooperativeKernel: all blocks resident, cooperative_groups::this_grid().sync() works.
template <class... P, class... A>
Result launch_cooperative(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t dynamic_smem_bytes,
                          A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch: argument count differs from the kernel's");
  return detail::launch_tuple(kernel, grid, block, dynamic_smem_bytes, true, nullptr,
                              std::tuple<std::decay_t<P>...>(std::forward<A>(args)...));
}

// cudaLaunchKernel form: args[i] points at the i-th argument, as the runtime stores them.
template <class... P>
Result launch_with_args(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t dynamic_smem_bytes,
                        void** args, bool cooperative = false, const char* name = nullptr) {
  return detail::launch_tuple(kernel, grid, block, dynamic_smem_bytes, cooperative, name,
                              detail::unpack_args<P...>(args, std::index_sequence_for<P...>{}));
}

// A type-erased entry point, for loading kernels by name from a shared object:
// STITCH_EMU_EXPORT_KERNEL(my_kernel) defines `extern "C" stitch_emu_entry_my_kernel`.
struct KernelEntry {
  const char* name;
  Result (*launch)(dim3 grid, dim3 block, std::size_t dynamic_smem_bytes, void** args, bool cooperative);
};

}  // namespace stitch::emu

#define STITCH_EMU_EXPORT_KERNEL(kernel)                                        \
  extern "C" const ::stitch::emu::KernelEntry stitch_emu_entry_##kernel = {     \
      #kernel, [](dim3 g, dim3 b, std::size_t s, void** a, bool c) {            \
        return ::stitch::emu::launch_with_args(kernel, g, b, s, a, c, #kernel); \
      }}
