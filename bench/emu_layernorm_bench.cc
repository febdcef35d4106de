// Benchmark of the CPU emulation layer: the fused bias + residual + layer-norm test kernel on
// a 1024 x 768 input with 128-thread blocks (1024 blocks, 131072 emulated threads). Reports
// the median wall time over repetitions and emulated CUDA threads per second; then the cost of
// a nearly empty launch (one 32-thread block on a 32-element row), which bounds how fast a
// schedule of many small kernels can replay.
//   stitch_emu_bench [--reps N] [--rows R] [--cols C] [--threads T] [--workers W]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "stitch/emu/launch.h"

void block_row_layernorm(const float* x, const float* bias, const float* residual, const float* gamma,
                         const float* beta, float* y, int cols, float eps);

int main(int argc, char** argv) {
  int reps = 7, rows = 1024, cols = 768, threads = 128, workers = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--reps")
      reps = value;
    else if (flag == "--rows")
      rows = value;
    else if (flag == "--cols")
      cols = value;
    else if (flag == "--threads")
      threads = value;
    else if (flag == "--workers")
      workers = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  stitch::emu::Options options = stitch::emu::options();
  options.workers = workers;
  stitch::emu::set_options(options);

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> x(size_t(rows) * cols), res(x.size()), y(x.size()), bias(cols), gamma(cols), beta(cols);
  for (auto* v : {&x, &res, &bias, &gamma, &beta})
    for (float& e : *v) e = u(rng);

  std::vector<double> seconds;
  for (int r = 0; r < reps + 1; ++r) {  // the first run warms the worker pool and stacks
    const auto t0 = std::chrono::steady_clock::now();
    const auto result =
        stitch::emu::launch(block_row_layernorm, dim3(rows), dim3(threads), 0, x.data(), bias.data(),
                            res.data(), gamma.data(), beta.data(), y.data(), cols, 1e-5f);
    const auto t1 = std::chrono::steady_clock::now();
    if (!result.ok()) {
      std::fprintf(stderr, "launch failed: %s\n", result.message);
      return 1;
    }
    if (r > 0) seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  const double emulated = double(rows) * threads;
  std::printf("layernorm %dx%d, %d threads/block, %d blocks, %.0f emulated threads\n", rows, cols, threads,
              rows, emulated);
  std::printf("median %.4f s (min %.4f, max %.4f) over %d runs: %.2f million emulated threads/s\n", median,
              seconds.front(), seconds.back(), reps, emulated / median / 1e6);

  const int small_launches = 2000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < small_launches; ++i) {
    const auto result = stitch::emu::launch(block_row_layernorm, dim3(1), dim3(32), 0, x.data(), bias.data(),
                                            res.data(), gamma.data(), beta.data(), y.data(), 32, 1e-5f);
    if (!result.ok()) return 1;
  }
  const double per_launch = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                            small_launches;
  std::printf("small launch (1 block x 32 threads, 32 columns): %.1f us each over %d launches\n",
              per_launch * 1e6, small_launches);
  return 0;
}
