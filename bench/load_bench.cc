// Benchmark of loading an artifact: stitch::rt::Model::load(DIR), which reads every file the
// manifest lists, checks its size and checksum, and parses the schedule (no backend is created).
// Prints each load's time and the median. Loads after the first find the files in the page cache,
// as a service restarting on the same machine would. Results: docs/fusion-results.md.
//   stitch_load_bench DIR [REPS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "stitch/runtime.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: stitch_load_bench DIR [REPS]\n");
    return 2;
  }
  const int reps = argc == 3 ? std::atoi(argv[2]) : 5;
  if (reps < 1) {
    std::fprintf(stderr, "stitch_load_bench: REPS must be a positive count, not '%s'\n", argv[2]);
    return 2;
  }
  std::vector<double> seconds;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      auto model = stitch::rt::Model::load(argv[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "stitch_load_bench: %s\n", e.what());
      return 2;
    }
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::printf("load %d: %.3f s\n", i + 1, seconds.back());
  }
  std::sort(seconds.begin(), seconds.end());
  std::printf("median of %d: %.3f s\n", reps, seconds[seconds.size() / 2]);
  return 0;
}
