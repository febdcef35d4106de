// stitchc bench: end-to-end latency of an artifact's run() (inputs already on the device,
// schedule launched and synchronised), after warm-up, as min / median / mean over iterations.
// On the emu backend the numbers time the CPU emulation and say nothing about a GPU.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "cli/common.h"
#include "cli/subcommands.h"
#include "stitch/runtime.hpp"

namespace stitch::cli {

int run_bench(const BenchArgs& a) {
  if (a.iters < 1 || a.warmup < 0) return report(Status::user("--iters must be at least 1 and --warmup at least 0"));
  try {
    auto model = rt::Model::load(a.dir);
    rt::SessionOptions opts;
    opts.cuda_graph = !a.no_cuda_graph;
    rt::Session session(model, rt::parse_backend(a.backend), opts);
    // Inputs: zeros (ids 0 are valid for embeddings); timing does not depend on values here.
    for (const rt::TensorInfo& t : model->inputs()) {
      std::vector<uint8_t> zeros(static_cast<size_t>(t.bytes), 0);
      session.set_input(t.name, t.dtype, t.dims, zeros.data(), zeros.size());
    }
    for (int i = 0; i < a.warmup; ++i) session.run();
    std::vector<double> ms;
    for (int i = 0; i < a.iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      session.run();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / ms.size();
    fmt::print("{} on {}\n", a.dir, session.describe());
    fmt::print("run(): {} iterations after {} warm-up: min {:.4f} ms, median {:.4f} ms, mean {:.4f} ms\n", a.iters,
               a.warmup, sorted.front(), sorted[sorted.size() / 2], mean);
    if (a.backend == "emu") fmt::print("note: emu times the CPU emulation layer, not a GPU\n");
    return 0;
  } catch (const rt::Error& e) {
    return report(e.code() == 2 ? Status::user(e.what()) : Status::internal(e.what()));
  }
}

}  // namespace stitch::cli
