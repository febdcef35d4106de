// The block scheduler: runs the threads of one block as fibers on one OS thread.
//
// Threads run until they reach a synchronisation point (barrier, warp collective, grid
// barrier, atomic yield) or exit; the scheduler then resumes the next runnable thread in the
// chosen order. A barrier completes when every thread of the block waits at the same one; a
// warp collective completes when every lane its mask names has arrived with the same mask.
// When nothing is runnable and nothing can complete, the block is stuck: the scheduler names
// the threads and where they wait instead of hanging. Checks follow CUDA's rules for
// independent thread scheduling (sm_70 and later), which the code generator targets.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include "internal.h"

namespace stitch::emu::detail {

namespace {

const char* barrier_name(BarrierKind kind) {
  switch (kind) {
    case BarrierKind::kSync:
      return "__syncthreads";
    case BarrierKind::kCount:
      return "__syncthreads_count";
    case BarrierKind::kAnd:
      return "__syncthreads_and";
    case BarrierKind::kOr:
      return "__syncthreads_or";
  }
  return "?";
}

std::string site_text(const std::source_location& s) {
  const char* file = s.file_name();
  if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
  return std::string(file) + ":" + std::to_string(s.line());
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// "3, 5-9, 12"
std::string ranges(const std::vector<unsigned>& sorted) {
  std::string out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(sorted[i]);
    if (j > i) out += "-" + std::to_string(sorted[j]);
    i = j + 1;
  }
  return out;
}

std::string lanes_of(unsigned mask) {
  std::vector<unsigned> lanes;
  for (unsigned l = 0; l < 32; ++l)
    if (mask & (1u << l)) lanes.push_back(l);
  return ranges(lanes);
}

bool is_shuffle(WarpOp op) {
  return op == WarpOp::kShfl || op == WarpOp::kShflUp || op == WarpOp::kShflDown || op == WarpOp::kShflXor;
}

std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class BlockRun {
 public:
  BlockRun(Worker& w, Launch& launch, unsigned block_linear)
      : w_(w), launch_(launch), block_(block_linear), n_(launch.block_threads) {}

  bool run();

 private:
  void resume(ThreadState& t);
  void on_suspend(ThreadState& t);
  void on_exit(ThreadState& t);
  void on_warp_arrival(ThreadState& t);
  void report_bad_mask(const ThreadState& t);
  void try_complete(unsigned warp, const ThreadState& arriving);
  bool release_barrier();
  bool release_grid();
  void make_order(std::uint64_t pass);
  void fail(Failure kind, const std::string& message);
  std::string where(const ThreadState& t) const { return launch_.where(block_, t.linear); }
  std::string describe_waits() const;
  void fail_from_signal();

  Worker& w_;
  Launch& launch_;
  const unsigned block_;
  const unsigned n_;
  BlockState state_;
  unsigned live_ = 0;
  unsigned runnable_ = 0;
  unsigned at_barrier_ = 0;
  unsigned at_grid_ = 0;
  bool failed_ = false;
};

void BlockRun::fail(Failure kind, const std::string& message) {
  failed_ = true;
  launch_.fail(kind, message);
}

void BlockRun::resume(ThreadState& t) {
  t_thread = &t;
  w_.current_stack = &w_.stacks[t.linear];
  w_.current_thread.store(t.linear, std::memory_order_relaxed);
  w_.in_fiber = 1;
  asan_start_switch(&w_.fake_stack, w_.current_stack->base, w_.current_stack->size);
  stitch_emu_switch_context(&w_.scheduler_sp, t.sp);
  asan_finish_switch(w_.fake_stack, nullptr, nullptr);
  w_.in_fiber = 0;
}

void BlockRun::make_order(std::uint64_t pass) {
  auto& order = w_.order;
  order.resize(n_);
  switch (launch_.options.order) {
    case ThreadOrder::kForward:
      for (unsigned i = 0; i < n_; ++i) order[i] = i;
      break;
    case ThreadOrder::kReverse:
      for (unsigned i = 0; i < n_; ++i) order[i] = n_ - 1 - i;
      break;
    case ThreadOrder::kRandom: {
      for (unsigned i = 0; i < n_; ++i) order[i] = i;
      std::uint64_t state =
          launch_.options.seed ^ (std::uint64_t{block_} << 32) ^ (pass * 0x2545F4914F6CDD1Dull);
      for (unsigned i = n_; i > 1; --i) std::swap(order[i - 1], order[splitmix(state) % i]);
      break;
    }
  }
}

bool BlockRun::run() {
  const uint3 bidx = launch_.block_index(block_);
  state_.block_idx = bidx;
  state_.block_dim = launch_.request.block;
  state_.grid_dim = launch_.request.grid;
  state_.dynamic_smem = w_.smem;
  state_.dynamic_smem_bytes = launch_.request.dynamic_smem_bytes;
  // Poison dynamic shared memory (all-ones bytes read as NaN floats) so reads of
  // never-written shared memory show up in results.
  if (state_.dynamic_smem_bytes > 0) std::memset(w_.smem, 0xFF, state_.dynamic_smem_bytes);
  t_block = &state_;
  w_.current_block.store(block_, std::memory_order_relaxed);

  w_.threads.resize(n_);
  const unsigned num_warps = (n_ + 31) / 32;
  w_.warps.assign(num_warps, WarpBits{});
  for (unsigned i = 0; i < n_; ++i) {
    ThreadState& t = w_.threads[i];
    t = ThreadState{};
    t.tid = launch_.thread_index(i);
    t.linear = i;
    t.lane = i % 32;
    t.warp = i / 32;
    t.sp = prepare_stack(w_.stacks[i], &fiber_entry);
    w_.warps[t.warp].present |= 1u << t.lane;
  }
  live_ = runnable_ = n_;
  at_barrier_ = at_grid_ = 0;

  if (sigsetjmp(w_.jump, 1) != 0) {
    fail_from_signal();
    return false;
  }
  for (std::uint64_t pass = 0; live_ > 0; ++pass) {
    if (launch_.abort.load(std::memory_order_relaxed)) return false;
    // Forward and reverse orders are fixed; a random order is drawn afresh for every pass.
    if (pass == 0 || launch_.options.order == ThreadOrder::kRandom) make_order(pass);
    for (unsigned i : w_.order) {
      ThreadState& t = w_.threads[i];
      if (t.wait != Wait::kRunnable && t.wait != Wait::kYield) continue;
      t.wait = Wait::kRunnable;
      resume(t);
      on_suspend(t);
      if (failed_) return false;
    }
    if (live_ == 0 || runnable_ > 0) continue;
    if (at_barrier_ == live_) {
      if (!release_barrier()) return false;
    } else if (at_grid_ == live_) {
      if (!release_grid()) return false;
    } else if (at_barrier_ + at_grid_ == live_) {
      fail(Failure::kDivergentBarrier, launch_.where_block(block_) +
                                           ": some threads wait at __syncthreads, others at "
                                           "this_grid().sync():\n" +
                                           describe_waits());
      return false;
    } else {
      fail(Failure::kDeadlock,
           launch_.where_block(block_) +
               ": deadlock: every thread waits and no barrier or warp operation can "
               "complete (mismatched warp masks or a warp operation in divergent code?):\n" +
               describe_waits());
      return false;
    }
  }
  t_thread = nullptr;
  return true;
}

void BlockRun::fail_from_signal() {
  w_.in_fiber = 0;
  const unsigned thread = w_.current_thread.load(std::memory_order_relaxed);
  const Stack* stack = w_.current_stack;
  if (w_.jump_reason == static_cast<int>(Jump::kFault)) {
    char addr[32];
    std::snprintf(addr, sizeof addr, "%p", w_.fault_address);
    if (stack != nullptr && stack->contains_guard(w_.fault_address)) {
      fail(Failure::kStackOverflow,
           launch_.where(block_, thread) + ": stack overflow: the thread used more than " +
               std::to_string(stack->size / 1024) +
               " KiB of stack (deep recursion or large local arrays; raise Options::stack_bytes)");
    } else {
      const char* sig = w_.fault_signal == SIGSEGV  ? "SIGSEGV"
                        : w_.fault_signal == SIGBUS ? "SIGBUS"
                        : w_.fault_signal == SIGFPE ? "SIGFPE (integer division by zero?)"
                                                    : "SIGILL";
      fail(Failure::kMemoryFault, launch_.where(block_, thread) + ": " + sig + " at address " + addr +
                                      " (an out-of-bounds or invalid pointer in the kernel)");
    }
  } else {
    // The watchdog recorded its message before interrupting the thread.
    fail(Failure::kWatchdog, launch_.where(block_, thread) + ": interrupted by the watchdog");
  }
  w_.jump_reason = 0;
  t_thread = nullptr;
}

void BlockRun::on_suspend(ThreadState& t) {
  switch (t.wait) {
    case Wait::kYield:
      return;  // still runnable; the watchdog sees no progress from yields alone
    case Wait::kExited:
      on_exit(t);
      break;
    case Wait::kBarrier:
      --runnable_;
      ++at_barrier_;
      break;
    case Wait::kGrid:
      if (!launch_.request.cooperative) {
        fail(Failure::kGridSync, where(t) + ": this_grid().sync() at " + site_text(t.site) +
                                     " in a launch that is not cooperative (use launch_cooperative)");
        return;
      }
      --runnable_;
      ++at_grid_;
      break;
    case Wait::kWarp:
      --runnable_;
      on_warp_arrival(t);
      break;
    case Wait::kTrap:
      fail(Failure::kTrap, where(t) + ": __trap() called at " + site_text(t.site));
      return;
    case Wait::kRunnable:
      fail(Failure::kDeadlock, where(t) + ": internal error: thread suspended without a reason");
      return;
  }
  // One writer (this worker), one reader (the watchdog): no read-modify-write needed.
  w_.progress.store(w_.progress.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void BlockRun::on_exit(ThreadState& t) {
  --live_;
  --runnable_;
  WarpBits& wb = w_.warps[t.warp];
  const unsigned bit = 1u << t.lane;
  wb.exited |= bit;
  if (at_barrier_ > 0 || at_grid_ > 0) {
    fail(Failure::kExitedAtBarrier,
         where(t) +
             " exited while other threads of its block wait at a barrier; every thread must reach "
             "each barrier:\n" +
             describe_waits());
    return;
  }
  for (unsigned l = 0; l < 32; ++l) {
    if (!(wb.waiting & (1u << l))) continue;
    const ThreadState& other = w_.threads[t.warp * 32 + l];
    if (other.mask & bit) {
      fail(Failure::kBadWarpMask, where(t) + " exited while lane " + std::to_string(l) + " waits for it in " +
                                      warp_op_name(other.op) + " at " + site_text(other.site) +
                                      " with mask " + hex(other.mask));
      return;
    }
  }
}

void BlockRun::on_warp_arrival(ThreadState& t) {
  WarpBits& wb = w_.warps[t.warp];
  const unsigned bit = 1u << t.lane;
  const unsigned m = t.mask;
  const bool bad_width = is_shuffle(t.op) && (t.width < 1 || t.width > 32 || (t.width & (t.width - 1)) != 0);
  if (!(m & bit) || (m & ~wb.present) || (m & wb.exited) || bad_width) {
    report_bad_mask(t);
    return;
  }
  wb.waiting |= bit;
  if ((wb.waiting & m) == m) try_complete(t.warp, t);
}

void BlockRun::report_bad_mask(const ThreadState& t) {
  const WarpBits& wb = w_.warps[t.warp];
  const unsigned m = t.mask;
  const std::string call =
      std::string(warp_op_name(t.op)) + " at " + site_text(t.site) + " with mask " + hex(m);
  if (!(m & (1u << t.lane))) {
    fail(Failure::kBadWarpMask,
         where(t) + ": " + call + " does not include the calling lane " + std::to_string(t.lane));
  } else if (m & ~wb.present) {
    fail(Failure::kBadWarpMask, where(t) + ": " + call + " names lanes " + lanes_of(m & ~wb.present) +
                                    " that do not exist (warp " + std::to_string(t.warp) + " of a block of " +
                                    std::to_string(n_) + " threads has lanes " + lanes_of(wb.present) + ")");
  } else if (m & wb.exited) {
    fail(Failure::kBadWarpMask,
         where(t) + ": " + call + " names lanes " + lanes_of(m & wb.exited) + " that have exited");
  } else {
    fail(Failure::kBadWarpMask, where(t) + ": " + call + " has width " + std::to_string(t.width) +
                                    "; width must be a power of two from 1 to 32");
  }
}

void BlockRun::try_complete(unsigned warp, const ThreadState& arriving) {
  const unsigned m = arriving.mask;
  ThreadState* lanes = &w_.threads[warp * 32];
  for (unsigned l = 0; l < 32; ++l) {
    if (!(m & (1u << l))) continue;
    const ThreadState& s = lanes[l];
    // A lane in another collective, or the same one with another mask, belongs to another
    // group; wait, and report a deadlock if that group never completes.
    if (s.mask != m || s.op != arriving.op || s.width != arriving.width) return;
  }
  switch (arriving.op) {
    case WarpOp::kShfl:
    case WarpOp::kShflUp:
    case WarpOp::kShflDown:
    case WarpOp::kShflXor:
      for (unsigned l = 0; l < 32; ++l) {
        if (!(m & (1u << l))) continue;
        ThreadState& s = lanes[l];
        const unsigned w = static_cast<unsigned>(s.width);
        const unsigned seg = l & ~(w - 1);
        const unsigned pos = l & (w - 1);
        unsigned src = l;
        switch (s.op) {
          case WarpOp::kShfl:
            src = seg + (static_cast<unsigned>(s.arg) & (w - 1));
            break;
          case WarpOp::kShflUp:
            src = pos >= static_cast<unsigned>(s.arg) ? l - s.arg : l;
            break;
          case WarpOp::kShflDown:
            src = pos + static_cast<unsigned>(s.arg) < w ? l + s.arg : l;
            break;
          default: {
            const unsigned x = l ^ static_cast<unsigned>(s.arg);
            src = (x < 32 && x <= (l | (w - 1))) ? x : l;
          }
        }
        if (src != l && !(m & (1u << src))) {
          fail(Failure::kBadWarpMask, where(s) + ": " + warp_op_name(s.op) + " at " + site_text(s.site) +
                                          " reads lane " + std::to_string(src) + ", which is not in mask " +
                                          hex(m) + " (its value is undefined)");
          return;
        }
        std::memcpy(s.out, lanes[src].in, sizeof s.out);
      }
      break;
    case WarpOp::kBallot:
    case WarpOp::kAny:
    case WarpOp::kAll: {
      unsigned ballot = 0;
      for (unsigned l = 0; l < 32; ++l)
        if ((m & (1u << l)) && lanes[l].pred) ballot |= 1u << l;
      const int result = arriving.op == WarpOp::kBallot ? static_cast<int>(ballot)
                         : arriving.op == WarpOp::kAny  ? ballot != 0
                                                        : ballot == m;
      for (unsigned l = 0; l < 32; ++l)
        if (m & (1u << l)) lanes[l].result = result;
      break;
    }
    case WarpOp::kSyncwarp:
      break;
    default: {  // __reduce_*_sync on 32-bit integers
      std::int64_t acc = 0;
      bool first = true;
      for (unsigned l = 0; l < 32; ++l) {
        if (!(m & (1u << l))) continue;
        const std::uint32_t raw = static_cast<std::uint32_t>(lanes[l].in[0]);
        const std::int64_t v =
            arriving.is_signed ? std::int64_t{static_cast<std::int32_t>(raw)} : std::int64_t{raw};
        if (first) {
          acc = v;
          first = false;
          continue;
        }
        switch (arriving.op) {
          case WarpOp::kReduceAdd:
            acc += v;
            break;
          case WarpOp::kReduceMin:
            acc = std::min(acc, v);
            break;
          case WarpOp::kReduceMax:
            acc = std::max(acc, v);
            break;
          case WarpOp::kReduceAnd:
            acc &= v;
            break;
          case WarpOp::kReduceOr:
            acc |= v;
            break;
          default:
            acc ^= v;
            break;
        }
      }
      for (unsigned l = 0; l < 32; ++l)
        if (m & (1u << l)) lanes[l].out[0] = static_cast<std::uint32_t>(acc);
    }
  }
  for (unsigned l = 0; l < 32; ++l) {
    if (!(m & (1u << l))) continue;
    lanes[l].wait = Wait::kRunnable;
    ++runnable_;
  }
  w_.warps[warp].waiting &= ~m;
}

bool BlockRun::release_barrier() {
  const ThreadState* first = nullptr;
  for (const ThreadState& t : w_.threads) {
    if (t.wait != Wait::kBarrier) continue;
    if (first == nullptr) first = &t;
    if (!same_site(t.site, first->site) || t.barrier != first->barrier) {
      fail(Failure::kDivergentBarrier, launch_.where_block(block_) +
                                           ": divergent barrier: threads wait at different barriers:\n" +
                                           describe_waits());
      return false;
    }
  }
  if (live_ != n_) {
    fail(Failure::kExitedAtBarrier,
         launch_.where_block(block_) + ": " + std::to_string(live_) + " of " + std::to_string(n_) +
             " threads wait at " + barrier_name(first->barrier) + " at " + site_text(first->site) +
             " but the others have exited; every thread must reach each barrier:\n" + describe_waits());
    return false;
  }
  int count = 0;
  for (const ThreadState& t : w_.threads) count += t.pred != 0;
  const int result = first->barrier == BarrierKind::kCount ? count
                     : first->barrier == BarrierKind::kAnd ? count == static_cast<int>(n_)
                     : first->barrier == BarrierKind::kOr  ? count > 0
                                                           : 0;
  for (ThreadState& t : w_.threads) {
    t.result = result;
    t.wait = Wait::kRunnable;
  }
  runnable_ = live_;
  at_barrier_ = 0;
  return true;
}

bool BlockRun::release_grid() {
  const ThreadState* first = nullptr;
  for (const ThreadState& t : w_.threads) {
    if (t.wait != Wait::kGrid) continue;
    if (first == nullptr) first = &t;
    if (!same_site(t.site, first->site)) {
      fail(Failure::kDivergentBarrier, launch_.where_block(block_) +
                                           ": divergent grid barrier: threads wait at different "
                                           "this_grid().sync() calls:\n" +
                                           describe_waits());
      return false;
    }
  }
  if (live_ != n_) {
    fail(Failure::kExitedAtBarrier, launch_.where_block(block_) + ": threads wait at this_grid().sync() at " +
                                        site_text(first->site) + " but others of the block have exited:\n" +
                                        describe_waits());
    return false;
  }
  w_.busy.store(false, std::memory_order_relaxed);
  bool ok = true;
  std::string error;
  {
    std::unique_lock lock(launch_.grid_mu);
    if (launch_.blocks_finished > 0) {
      ok = false;
      error = launch_.where_block(block_) + " reached this_grid().sync() at " + site_text(first->site) +
              " after " + std::to_string(launch_.blocks_finished) +
              " block(s) had exited; every block must reach each grid barrier";
    } else {
      const std::uint64_t generation = launch_.grid_generation;
      if (++launch_.grid_arrived == launch_.num_blocks) {
        launch_.grid_arrived = 0;
        ++launch_.grid_generation;
        launch_.grid_cv.notify_all();
      } else {
        launch_.grid_cv.wait(lock, [&] {
          return launch_.grid_generation != generation || launch_.abort.load(std::memory_order_relaxed);
        });
      }
      ok = !launch_.abort.load(std::memory_order_relaxed);
    }
  }
  w_.busy.store(true, std::memory_order_relaxed);
  w_.progress.fetch_add(1, std::memory_order_relaxed);
  if (!error.empty()) fail(Failure::kGridSync, error);
  if (!ok) return false;
  for (ThreadState& t : w_.threads) t.wait = Wait::kRunnable;
  runnable_ = live_;
  at_grid_ = 0;
  return true;
}

std::string BlockRun::describe_waits() const {
  // Group threads by what they wait for, in thread order; at most 12 lines.
  std::map<std::string, std::vector<unsigned>> groups;
  std::vector<std::string> keys;
  for (const ThreadState& t : w_.threads) {
    std::string key;
    switch (t.wait) {
      case Wait::kBarrier:
        key = std::string(barrier_name(t.barrier)) + " at " + site_text(t.site);
        break;
      case Wait::kWarp:
        key = std::string(warp_op_name(t.op)) + " with mask " + hex(t.mask) + " at " + site_text(t.site);
        break;
      case Wait::kGrid:
        key = "this_grid().sync() at " + site_text(t.site);
        break;
      case Wait::kExited:
        key = "exited";
        break;
      default:
        key = "not yet at a barrier";
        break;
    }
    auto [it, inserted] = groups.try_emplace(key);
    if (inserted) keys.push_back(key);
    it->second.push_back(t.linear);
  }
  std::ostringstream out;
  std::size_t shown = 0;
  for (const std::string& key : keys) {
    if (shown++ == 12) {
      out << "  ... " << keys.size() - 12 << " more groups\n";
      break;
    }
    out << "  threads " << ranges(groups[key]) << ": " << key << "\n";
  }
  return out.str();
}

}  // namespace

bool run_block(Worker& worker, Launch& launch, unsigned block_linear) {
  BlockRun run(worker, launch, block_linear);
  return run.run();
}

bool finish_cooperative_block(Launch& launch, unsigned block_linear) {
  unsigned waiting = 0;
  {
    std::lock_guard lock(launch.grid_mu);
    ++launch.blocks_finished;
    waiting = launch.grid_arrived;
  }
  if (waiting == 0) return true;
  launch.fail(Failure::kGridSync,
              launch.where_block(block_linear) + " exited while " + std::to_string(waiting) +
                  " block(s) wait at this_grid().sync(); every block must reach each grid barrier");
  return false;
}

}  // namespace stitch::emu::detail
