// Launches: configuration checks, the pool of OS threads that run blocks, the watchdog, and
// the signal handlers that turn faults inside kernels into failed launches.
//
// Non-cooperative launches hand blocks to `workers` OS threads through a shared counter.
// Cooperative launches run every block on its own OS thread at once, so a grid-wide barrier
// can wait for all of them. Worker threads live for the whole process and keep their stacks,
// so a launch costs no mmap once the pool is warm.
#include <cxxabi.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "internal.h"

namespace stitch::emu {

namespace {
std::mutex g_options_mu;
Options g_options;
}  // namespace

void set_options(const Options& options) {
  std::lock_guard lock(g_options_mu);
  g_options = options;
}

Options options() {
  std::lock_guard lock(g_options_mu);
  return g_options;
}

unsigned max_cooperative_blocks() { return options().max_cooperative_blocks; }

const char* failure_name(Failure failure) {
  switch (failure) {
    case Failure::kNone:
      return "ok";
    case Failure::kLaunchConfig:
      return "invalid launch configuration";
    case Failure::kDivergentBarrier:
      return "divergent barrier";
    case Failure::kExitedAtBarrier:
      return "exited thread at barrier";
    case Failure::kBadWarpMask:
      return "bad warp mask";
    case Failure::kDeadlock:
      return "deadlock";
    case Failure::kWatchdog:
      return "watchdog";
    case Failure::kStackOverflow:
      return "stack overflow";
    case Failure::kMemoryFault:
      return "memory fault";
    case Failure::kGridSync:
      return "grid barrier misuse";
    case Failure::kTrap:
      return "trap";
  }
  return "?";
}

namespace detail {

// A failed launch's Result, with `message` in its buffer.
Result failed(Failure kind, const std::string& message) {
  Result r;
  r.failure = kind;
  // Cut to the buffer, ending in "..." when it does not fit.
  constexpr std::size_t kRoom = sizeof r.message - 1;
  const std::string text = message.size() > kRoom ? message.substr(0, kRoom - 3) + "..." : message;
  std::snprintf(r.message, sizeof r.message, "%s", text.c_str());
  return r;
}

thread_local Worker* t_worker = nullptr;

void Launch::fail(Failure kind, std::string message) {
  {
    std::lock_guard lock(fail_mu);
    if (failure.ok()) {
      failure = failed(kind, message);
    }
  }
  abort.store(true);
  { std::lock_guard lock(grid_mu); }
  grid_cv.notify_all();
}

uint3 Launch::block_index(unsigned linear) const {
  const dim3 g = request.grid;
  return uint3{linear % g.x, (linear / g.x) % g.y, linear / (g.x * g.y)};
}

uint3 Launch::thread_index(unsigned linear) const {
  const dim3 b = request.block;
  return uint3{linear % b.x, (linear / b.x) % b.y, linear / (b.x * b.y)};
}

std::string Launch::where_block(unsigned block_linear) const {
  const uint3 b = block_index(block_linear);
  return "kernel '" + kernel_name + "' block (" + std::to_string(b.x) + "," + std::to_string(b.y) + "," +
         std::to_string(b.z) + ")";
}

std::string Launch::where(unsigned block_linear, unsigned thread_linear) const {
  const uint3 t = thread_index(thread_linear);
  return where_block(block_linear) + " thread (" + std::to_string(t.x) + "," + std::to_string(t.y) + "," +
         std::to_string(t.z) + ")";
}

Worker::~Worker() { ::operator delete[](smem, std::align_val_t{128}); }

namespace {

constexpr std::size_t kMaxDynamicSmem = 232448;  // 227 KiB: sm_90's opt-in per-block maximum
constexpr std::size_t kAltStackBytes = 256 * 1024;
int watchdog_signal() { return SIGRTMIN + 5; }

std::string kernel_symbol(const void* kernel) {
  Dl_info info{};
  if (kernel != nullptr && dladdr(kernel, &info) != 0 && info.dli_sname != nullptr &&
      info.dli_saddr == kernel) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string name = status == 0 && demangled != nullptr ? demangled : info.dli_sname;
    std::free(demangled);
    if (const auto paren = name.find('('); paren != std::string::npos) name.resize(paren);
    return name;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "kernel@%p", kernel);
  return buf;
}

// ---- signals -------------------------------------------------------------------------------

// The handler that was installed before ours, per signal, to pass on faults that are not a
// kernel's. Test frameworks and sanitizers install their own handlers too, sometimes after
// ours, so every launch checks that ours are in place (a few system calls).
struct sigaction g_previous[65];
std::mutex g_signal_mu;

void on_fault(int sig, siginfo_t* info, void* context) {
  Worker* w = t_worker;
  if (w != nullptr && w->in_fiber) {
    w->fault_signal = sig;
    w->fault_address = info->si_addr;
    w->jump_reason = static_cast<int>(Jump::kFault);
    siglongjmp(w->jump, 1);
  }
  const struct sigaction& previous = g_previous[sig];
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
    return;
  }
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler != nullptr) {
    previous.sa_handler(sig);
    return;
  }
  // Default action: put it back; returning re-executes the faulting instruction.
  signal(sig, SIG_DFL);
}

void on_watchdog(int) {
  Worker* w = t_worker;
  if (w != nullptr && w->in_fiber) {
    w->jump_reason = static_cast<int>(Jump::kWatchdog);
    siglongjmp(w->jump, 1);
  }
}

void ensure_handlers() {
  std::lock_guard lock(g_signal_mu);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
    struct sigaction current {};
    sigaction(sig, nullptr, &current);
    if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == &on_fault) continue;
    struct sigaction action {};
    action.sa_sigaction = &on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, &g_previous[sig]);
  }
  struct sigaction current {};
  sigaction(watchdog_signal(), nullptr, &current);
  if (current.sa_handler != &on_watchdog) {
    struct sigaction wd {};
    wd.sa_handler = &on_watchdog;
    wd.sa_flags = SA_ONSTACK;
    sigemptyset(&wd.sa_mask);
    sigaction(watchdog_signal(), &wd, nullptr);
  }
}

// ---- the pool --------------------------------------------------------------------------------

class Pool {
 public:
  Pool() {
    monitor_ = std::thread([this] { monitor_main(); });
  }

  Result run(Launch& launch, unsigned participants) {
    ensure_handlers();
    ensure_workers(participants);
    {
      std::lock_guard lock(mu_);
      job_ = &launch;
      participants_ = participants;
      done_ = 0;
      ++generation_;
    }
    cv_.notify_all();
    monitor_cv_.notify_all();
    {
      std::unique_lock lock(mu_);
      done_cv_.wait(lock, [&] { return done_ == participants_; });
      job_ = nullptr;
    }
    std::lock_guard lock(launch.fail_mu);
    return launch.failure;
  }

  std::mutex launch_mu;  // one launch at a time

 private:
  void ensure_workers(unsigned n) {
    std::lock_guard lock(mu_);
    while (workers_.size() < n) {
      auto w = std::make_unique<Worker>();
      w->index = static_cast<unsigned>(workers_.size());
      Worker* raw = w.get();
      const std::uint64_t seen = generation_;
      w->thread = std::thread([this, raw, seen] { worker_main(raw, seen); });
      workers_.push_back(std::move(w));
    }
  }

  void worker_main(Worker* w, std::uint64_t seen) {
    t_worker = w;
    w->signal_stack = std::make_unique<char[]>(kAltStackBytes);
    stack_t alt{};
    alt.ss_sp = w->signal_stack.get();
    alt.ss_size = kAltStackBytes;
    sigaltstack(&alt, nullptr);
    for (;;) {
      Launch* launch = nullptr;
      unsigned participants = 0;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        launch = job_;
        participants = participants_;
      }
      if (w->index >= participants || launch == nullptr) continue;
      work(*w, *launch);
      {
        std::lock_guard lock(mu_);
        ++done_;
      }
      done_cv_.notify_all();
    }
  }

  static void work(Worker& w, Launch& launch) {
    w.launch = &launch;
    const std::size_t stack_bytes =
        launch.options.stack_bytes != 0 ? launch.options.stack_bytes : default_stack_bytes();
    if (!w.stacks.reserve(launch.block_threads, stack_bytes)) {
      launch.fail(Failure::kLaunchConfig, "kernel '" + launch.kernel_name + "': cannot map " +
                                              std::to_string(launch.block_threads) + " thread stacks of " +
                                              std::to_string(stack_bytes) + " bytes");
      return;
    }
    const std::size_t smem = launch.request.dynamic_smem_bytes;
    if (smem > w.smem_capacity) {
      ::operator delete[](w.smem, std::align_val_t{128});
      w.smem = static_cast<unsigned char*>(::operator new[](smem, std::align_val_t{128}));
      w.smem_capacity = smem;
    }
    w.busy.store(true);
    if (launch.request.cooperative) {
      if (run_block(w, launch, w.index)) finish_cooperative_block(launch, w.index);
    } else {
      while (!launch.abort.load(std::memory_order_relaxed)) {
        const unsigned block = launch.next_block.fetch_add(1);
        if (block >= launch.num_blocks || !run_block(w, launch, block)) break;
      }
    }
    w.busy.store(false);
  }

  // Fails a launch whose running thread makes no progress (no barrier, warp operation or exit)
  // for longer than the watchdog limit, and interrupts that thread.
  void monitor_main() {
    using Clock = std::chrono::steady_clock;
    struct Seen {
      std::uint64_t progress = 0;
      Clock::time_point since;
    };
    std::vector<Seen> seen;
    std::uint64_t generation = 0;
    for (;;) {
      std::unique_lock lock(mu_);
      // Sleeps until a launch runs, then looks every 20 ms while it does.
      monitor_cv_.wait(lock, [&] { return job_ != nullptr; });
      monitor_cv_.wait_for(lock, std::chrono::milliseconds(20), [&] { return job_ == nullptr; });
      if (job_ == nullptr) continue;
      Launch& launch = *job_;
      const auto now = Clock::now();
      if (generation != generation_ || seen.size() != workers_.size()) {
        generation = generation_;
        seen.assign(workers_.size(), Seen{0, now});
      }
      const double limit = launch.options.watchdog_seconds;
      if (limit <= 0 || launch.abort.load()) continue;
      for (unsigned i = 0; i < participants_ && i < workers_.size(); ++i) {
        Worker& w = *workers_[i];
        const std::uint64_t p = w.progress.load(std::memory_order_relaxed);
        if (!w.busy.load(std::memory_order_relaxed) || p != seen[i].progress) {
          seen[i] = Seen{p, now};
          continue;
        }
        const double stalled = std::chrono::duration<double>(now - seen[i].since).count();
        if (stalled < limit) continue;
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.1f", stalled);
        launch.fail(
            Failure::kWatchdog,
            launch.where(w.current_block.load(), w.current_thread.load()) + ": no progress for " + secs +
                " s: the thread neither reached a barrier, warp operation or exit nor let another "
                "thread run (a spin loop waiting on plain memory? spin on atomics instead); the limit "
                "is Options::watchdog_seconds");
        pthread_kill(w.thread.native_handle(), watchdog_signal());
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  std::condition_variable monitor_cv_;
  std::vector<std::unique_ptr<Worker>> workers_;
  Launch* job_ = nullptr;
  std::uint64_t generation_ = 0;
  unsigned participants_ = 0;
  unsigned done_ = 0;
  std::thread monitor_;
};

Pool& pool() {
  static Pool* p = new Pool;  // lives until the process exits; its threads are never joined
  return *p;
}

Result config_error(const std::string& name, const std::string& what) {
  return failed(Failure::kLaunchConfig, "kernel '" + name + "': " + what);
}

std::string dims(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

}  // namespace

Result launch_impl(const LaunchRequest& request) {
  Launch launch;
  launch.request = request;
  launch.options = options();
  launch.kernel_name = request.name != nullptr ? request.name : kernel_symbol(request.kernel);
  const dim3 g = request.grid, b = request.block;
  const std::string& name = launch.kernel_name;
  if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0)
    return config_error(name, "grid " + dims(g) + " and block " + dims(b) + " must have no zero dimension");
  if (b.x > 1024 || b.y > 1024 || b.z > 64 || std::uint64_t{b.x} * b.y * b.z > 1024)
    return config_error(name, "block " + dims(b) + " exceeds 1024 threads (x, y <= 1024, z <= 64)");
  if (g.y > 65535 || g.z > 65535 || g.x > 0x7fffffffu)
    return config_error(name, "grid " + dims(g) + " exceeds (2^31-1, 65535, 65535)");
  const std::uint64_t blocks = std::uint64_t{g.x} * g.y * g.z;
  if (blocks > 0xffffffffull) return config_error(name, "grid " + dims(g) + " has more than 2^32 blocks");
  if (request.dynamic_smem_bytes > kMaxDynamicSmem)
    return config_error(
        name, std::to_string(request.dynamic_smem_bytes) +
                  " bytes of dynamic shared memory exceed the 232448-byte (227 KiB) per-block maximum");
  if (request.cooperative && blocks > launch.options.max_cooperative_blocks)
    return config_error(name,
                        "a cooperative launch of " + std::to_string(blocks) + " blocks exceeds the " +
                            std::to_string(launch.options.max_cooperative_blocks) +
                            " blocks that can be co-resident (size the grid with max_cooperative_blocks())");
  launch.num_blocks = static_cast<unsigned>(blocks);
  launch.block_threads = b.x * b.y * b.z;

  unsigned participants = launch.num_blocks;
  if (!request.cooperative) {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    const unsigned workers = launch.options.workers > 0 ? static_cast<unsigned>(launch.options.workers) : hw;
    participants = std::min(workers, launch.num_blocks);
  }
  Pool& p = pool();
  std::lock_guard serial(p.launch_mu);
  return p.run(launch, participants);
}

}  // namespace detail
}  // namespace stitch::emu
