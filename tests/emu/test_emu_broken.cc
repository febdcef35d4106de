// Broken kernels: each launch must fail with the right diagnostic, naming the kernel, block
// and thread, instead of hanging or returning a wrong answer; later launches still work.
#include "emu_test_util.h"
#include "kernels.h"

using namespace stitch;
using namespace stitch::emu;
using namespace stitch::emu::test;

namespace {

void require_failure(const Result& r, Failure kind, const std::vector<std::string>& parts) {
  INFO("failure: " << failure_name(r.failure) << "\nmessage: " << r.message);
  REQUIRE(r.failure == kind);
  for (const std::string& part : parts) {
    INFO("expected in message: " << part);
    CHECK(std::string(r.message).find(part) != std::string::npos);
  }
}

// A correct launch after a failed one: the emulator recovered.
void require_healthy() {
  const int n = 256;
  std::vector<float> x(n, 1.0f), y(n);
  std::vector<float> zeros(n, 0.0f), ones(n, 1.0f);
  require_ok(launch(block_row_layernorm, dim3(1), dim3(128), 0, x.data(), zeros.data(), x.data(), ones.data(),
                    ones.data(), y.data(), n, 1e-5f));
  for (float v : y) REQUIRE(v == 1.0f);  // constant row: normalised to 0, plus beta = 1
}

}  // namespace

TEST_CASE("a missing barrier changes the result with the thread order", "[emu][broken]") {
  const int threads = 256, blocks = 3;
  const auto in = random_floats(threads * blocks, 5);
  std::vector<float> want(in.size());
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t) want[b * threads + t] = in[b * threads + threads - 1 - t];
  std::vector<std::vector<float>> outs;
  for (ThreadOrder order : {ThreadOrder::kForward, ThreadOrder::kReverse}) {
    ScopedOptions scoped(with_order(order));
    std::vector<float> out(in.size());
    require_ok(launch(reverse_missing_barrier, dim3(blocks), dim3(threads), 0, in.data(), out.data()));
    INFO("order " << order_name(order));
    CHECK(out != want);
    outs.push_back(out);
  }
  CHECK(outs[0] != outs[1]);
}

TEST_CASE("divergent __syncthreads is reported", "[emu][broken]") {
  std::vector<float> out(64);
  require_failure(
      launch(divergent_barrier, dim3(2), dim3(64), 0, out.data()), Failure::kDivergentBarrier,
      {"kernel 'divergent_barrier'", "block (", "divergent barrier",
       "threads 0-31: __syncthreads at broken.cu:", "threads 32-63: __syncthreads at broken.cu:"});
  require_healthy();
}

TEST_CASE("threads that exit before a barrier are reported", "[emu][broken]") {
  std::vector<float> in(64, 1.0f), out(64);
  require_failure(launch(exit_before_barrier, dim3(1), dim3(64), 0, in.data(), out.data(), 20),
                  Failure::kExitedAtBarrier,
                  {"kernel 'exit_before_barrier' block (0,0,0)", "exited",
                   "__syncthreads at broken.cu:", "every thread must reach each barrier"});
  require_healthy();
}

TEST_CASE("a warp mask naming lanes that do not exist is reported", "[emu][broken]") {
  std::vector<float> out(48);
  require_failure(launch(shuffle_absent_lanes, dim3(1), dim3(48), 0, out.data()), Failure::kBadWarpMask,
                  {"kernel 'shuffle_absent_lanes' block (0,0,0) thread (32,0,0)", "__shfl_down_sync",
                   "mask 0xffffffff", "names lanes 16-31 that do not exist"});
  require_healthy();
}

TEST_CASE("a warp mask that leaves out the calling lane is reported", "[emu][broken]") {
  std::vector<float> out(32);
  require_failure(
      launch(shuffle_mask_excludes_caller, dim3(1), dim3(32), 0, out.data()), Failure::kBadWarpMask,
      {"thread (16,0,0)", "__shfl_sync", "mask 0x0000ffff", "does not include the calling lane 16"});
  require_healthy();
}

TEST_CASE("a warp operation waiting on lanes stuck at a barrier is a reported deadlock", "[emu][broken]") {
  std::vector<float> out(64);
  require_failure(launch(warp_deadlock, dim3(1), dim3(64), 0, out.data()), Failure::kDeadlock,
                  {"kernel 'warp_deadlock' block (0,0,0)", "deadlock", "__shfl_xor_sync with mask 0xffffffff",
                   "__syncthreads at broken.cu:"});
  require_healthy();
}

TEST_CASE("the watchdog stops a spin loop", "[emu][broken]") {
  Options o = options();
  o.watchdog_seconds = 0.3;
  ScopedOptions scoped(o);
  int flag = 0;
  std::vector<float> out(64);
  require_failure(launch(spin_forever, dim3(4), dim3(64), 0, &flag, out.data()), Failure::kWatchdog,
                  {"kernel 'spin_forever' block (", "thread (", "no progress for", "watchdog_seconds"});
  require_healthy();
}

TEST_CASE("stack overflow is caught by the guard region", "[emu][broken]") {
  std::vector<float> out(32);
  require_failure(
      launch(stack_overflow, dim3(1), dim3(32), 0, out.data(), 1000), Failure::kStackOverflow,
      {"kernel 'stack_overflow' block (0,0,0) thread (", "stack overflow", "Options::stack_bytes"});
  require_healthy();
}

TEST_CASE("a null-pointer write is a memory fault, not a crash", "[emu][broken][faults-under-ubsan]") {
  require_failure(launch(null_write, dim3(2), dim3(32), 0, static_cast<float*>(nullptr)),
                  Failure::kMemoryFault, {"kernel 'null_write' block (", "SIGSEGV at address"});
  require_healthy();
}

TEST_CASE("__trap() fails the launch", "[emu][broken]") {
  std::vector<float> in(32, 1.0f);
  in[7] = -1.0f;
  require_failure(
      launch(trap_on_negative, dim3(1), dim3(32), 0, in.data()), Failure::kTrap,
      {"kernel 'trap_on_negative' block (0,0,0) thread (7,0,0)", "__trap() called at broken.cu:"});
  require_healthy();
}

TEST_CASE("grid barriers need a cooperative launch in which every block arrives", "[emu][broken]") {
  std::vector<float> out(4 * 64, 0.0f);
  require_failure(launch(grid_sync_kernel, dim3(4), dim3(64), 0, out.data()), Failure::kGridSync,
                  {"kernel 'grid_sync_kernel'", "not cooperative"});
  require_ok(launch_cooperative(grid_sync_kernel, dim3(4), dim3(64), 0, out.data()));
  for (float v : out) CHECK(v == 2.0f);
  require_failure(launch_cooperative(grid_sync_block_exits, dim3(4), dim3(32), 0, out.data()),
                  Failure::kGridSync,
                  {"kernel 'grid_sync_block_exits' block (", "every block must reach each grid barrier"});
  require_healthy();
}

TEST_CASE("invalid launch configurations are rejected before running", "[emu][broken]") {
  std::vector<float> out(64);
  require_failure(launch(divergent_barrier, dim3(1), dim3(2048), 0, out.data()), Failure::kLaunchConfig,
                  {"kernel 'divergent_barrier'", "exceeds 1024 threads"});
  require_failure(launch(divergent_barrier, dim3(0), dim3(32), 0, out.data()), Failure::kLaunchConfig,
                  {"no zero dimension"});
  require_failure(launch(divergent_barrier, dim3(1), dim3(32), 300000, out.data()), Failure::kLaunchConfig,
                  {"dynamic shared memory"});
  require_failure(
      launch_cooperative(grid_sync_kernel, dim3(max_cooperative_blocks() + 1), dim3(32), 0, out.data()),
      Failure::kLaunchConfig, {"co-resident"});
  // A message longer than Result's buffer is cut, and says so.
  const std::string name(6000, 'k');
  void* args[] = {nullptr};
  float* none = nullptr;
  args[0] = &none;
  const Result r = launch_with_args(divergent_barrier, dim3(0), dim3(32), 0, args, false, name.c_str());
  require_failure(r, Failure::kLaunchConfig, {"kernel 'kkk"});
  CHECK(std::string(r.message).size() == sizeof r.message - 1);
  CHECK(std::string(r.message).substr(sizeof r.message - 4) == "...");
}
