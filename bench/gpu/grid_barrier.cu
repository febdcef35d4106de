// What a row split over blocks costs on a GPU, apart from the model around it (results in
//   bench/gpu/results/2026-12-04-h200):
//   1. an empty kernel of G blocks x T threads launched plainly and cooperatively, with K grid-wide
//      barriers (cooperative_groups' grid sync, as stitch_dev::grid_sync): the cooperative launch's
//      cost over a plain one, and each barrier's (fusion/cost.h's grid_barrier, assumed 2 us);
//   2. the sum and the maximum of one row of N floats, as a split row kernel computes them (each
//      block its segment, partials through global memory, one grid barrier for both, every block
//      combines), at several grids, against one block for the row and against two plain launches
//      (partials, then a one-block combine). Two combines after the barrier: "serial", each thread
//      reading the partials one after another (stitch_dev::grid_row_combine until 2026-12-04), and
//      "tree", the project's stitch_dev::grid_row_combine (the partials read at once, folded through
//      warp shuffles and shared memory). The row is read from a rotation of buffers larger than
//      L2 ("cold") and from one buffer ("hot", as when the kernel before it just wrote the row).
// Times: CUDA events around graph replays of R launches, the median of the replays over R.
//   nvcc -O3 -arch=sm_90 -std=c++17 -I runtime/device/include bench/gpu/grid_barrier.cu -o grid_barrier
//   ./grid_barrier
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "cuda_check.h"
#include "stitch/device/stitch_device.cuh"

namespace cg = cooperative_groups;

__global__ void barriers(int k, int* sink) {
  for (int i = 0; i < k; ++i) cg::this_grid().sync();
  if (k < 0) sink[0] = 1;  // never: keeps the kernel from being empty of effects
}

// Block-wide sum and maximum; every thread gets both.
__device__ void block_reduce(float& s, float& m, float* sh) {
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_xor_sync(0xffffffffu, s, o);
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  }
  const int warps = blockDim.x / 32, w = threadIdx.x / 32;
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh[w] = s, sh[32 + w] = m;
  __syncthreads();
  s = 0.f;
  m = -INFINITY;
  for (int i = 0; i < warps; ++i) s += sh[i], m = fmaxf(m, sh[32 + i]);
}

// The block's segment of the row: a strided loop over it, as the generated segment loops are.
__device__ void segment_partial(const float* x, long n, float& s, float& m) {
  const long seg = (n + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * seg, hi = min(n, lo + seg);
  s = 0.f;
  m = -INFINITY;
  for (long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const float v = x[i];
    s += v;
    m = fmaxf(m, v);
  }
}

// Split row: partials published, one grid barrier, every block combines (block 0 stores).
__global__ void split_row(const float* x, long n, float* slot, float* out) {
  __shared__ float sh[64];
  float s, m;
  segment_partial(x, n, s, m);
  block_reduce(s, m, sh);
  if (threadIdx.x == 0) slot[2 * blockIdx.x] = s, slot[2 * blockIdx.x + 1] = m;
  cg::this_grid().sync();
  s = 0.f;
  m = -INFINITY;
  for (unsigned b = 0; b < gridDim.x; ++b) s += slot[2 * b], m = fmaxf(m, slot[2 * b + 1]);
  if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = s, out[1] = m;
}

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
// Split row with the project's publish, barrier and tree combine.
__global__ void split_row_tree(const float* x, long n, float* slot, float* out) {
  __shared__ float sh[64];
  __shared__ float scratch[32];
  float s, m;
  segment_partial(x, n, s, m);
  block_reduce(s, m, sh);
  stitch_dev::grid_row_publish(s, slot, blockIdx.x);
  stitch_dev::grid_row_publish(m, slot + gridDim.x, blockIdx.x);
  stitch_dev::grid_sync();
  s = stitch_dev::grid_row_combine(s, Add{}, slot, gridDim.x, scratch);
  m = stitch_dev::grid_row_combine(m, Max{}, slot + gridDim.x, gridDim.x, scratch);
  if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = s, out[1] = m;
}

// The same partials as a plain launch, then a one-block launch combines them.
__global__ void partials(const float* x, long n, float* slot) {
  __shared__ float sh[64];
  float s, m;
  segment_partial(x, n, s, m);
  block_reduce(s, m, sh);
  if (threadIdx.x == 0) slot[2 * blockIdx.x] = s, slot[2 * blockIdx.x + 1] = m;
}
__global__ void combine(const float* slot, int parts, float* out) {
  __shared__ float sh[64];
  float s = 0.f, m = -INFINITY;
  for (int b = threadIdx.x; b < parts; b += blockDim.x) s += slot[2 * b], m = fmaxf(m, slot[2 * b + 1]);
  block_reduce(s, m, sh);
  if (threadIdx.x == 0) out[0] = s, out[1] = m;
}

static cudaStream_t g_stream;

void launch(const void* fn, int blocks, int threads, void** args, bool coop) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.stream = g_stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = coop ? 1 : 0;
  CHECK(cudaLaunchKernelExC(&cfg, fn, args));
}

// Median microseconds of one call of `body` (which enqueues one launch, or two), over graph replays
// of `per_graph` calls each; `body` gets the call's index (to rotate buffers).
double time_us(const std::function<void(int)>& body, int per_graph = 50, int replays = 30) {
  for (int i = 0; i < 10; ++i) body(i);
  CHECK(cudaStreamSynchronize(g_stream));
  CHECK(cudaGetLastError());
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < per_graph; ++i) body(i);
  CHECK(cudaStreamEndCapture(g_stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaGraphLaunch(exec, g_stream));  // warm-up replay
  std::vector<float> ms;
  for (int r = 0; r < replays; ++r) {
    CHECK(cudaEventRecord(a, g_stream));
    CHECK(cudaGraphLaunch(exec, g_stream));
    CHECK(cudaEventRecord(b, g_stream));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms[ms.size() / 2] * 1e3 / per_graph;
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  int* sink;
  CHECK(cudaMalloc(&sink, sizeof(int)));

  // Device-to-device copy of 1 GiB: bytes read plus bytes written over the time.
  const size_t copy_bytes = size_t(1) << 30;
  void *ca, *cb;
  CHECK(cudaMalloc(&ca, copy_bytes));
  CHECK(cudaMalloc(&cb, copy_bytes));
  CHECK(cudaMemset(ca, 1, copy_bytes));
  const double copy_us = time_us(
      [&](int) { CHECK(cudaMemcpyAsync(cb, ca, copy_bytes, cudaMemcpyDeviceToDevice, g_stream)); }, 5, 11);
  const double copy_gbs = 2.0 * copy_bytes / (copy_us * 1e3);
  std::printf("device-to-device copy: %.0f GB/s\n", copy_gbs);
  CHECK(cudaFree(ca));
  CHECK(cudaFree(cb));

  // 1. Launches and barriers.
  std::printf(
      "\n| blocks x threads | resident blocks | plain, 0 barriers | cooperative, 0 | 1 | 4 | 16 | per "
      "barrier (16 vs 0) |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  const int sms = prop.multiProcessorCount;
  const int grids[][2] = {{128, 128},      {sms, 128}, {2 * sms, 128}, {4 * sms, 128}, {8 * sms, 128},
                          {16 * sms, 128}, {sms, 256}, {4 * sms, 256}, {sms, 1024}};
  for (const auto& g : grids) {
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, barriers, g[1], 0));
    if (per_sm * sms < g[0]) {
      std::printf("| %d x %d | %d | (not co-resident) |\n", g[0], g[1], per_sm * sms);
      continue;
    }
    double t[5];
    const int ks[] = {0, 0, 1, 4, 16};
    for (int i = 0; i < 5; ++i) {
      int k = ks[i];
      void* args[] = {&k, &sink};
      t[i] = time_us([&](int) { launch(reinterpret_cast<const void*>(barriers), g[0], g[1], args, i > 0); });
    }
    std::printf("| %d x %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f |\n", g[0], g[1], per_sm * sms,
                t[0], t[1], t[2], t[3], t[4], (t[4] - t[1]) / 16);
  }

  // 2. One row's sum and maximum.
  const long lens[] = {524288, 4194304};
  for (long n : lens) {
    const size_t bytes = n * sizeof(float);
    const int rot = int(std::max<size_t>(1, (size_t(256) << 20) / bytes));  // >= 256 MB of rows: past L2
    float* x;
    CHECK(cudaMalloc(&x, bytes * rot));
    std::vector<float> h(n);
    std::mt19937 rng(1234 + n);
    std::normal_distribution<float> nd(0.f, 1.f);
    double ref_s = 0, ref_m = -INFINITY;
    for (long i = 0; i < n; ++i) h[i] = nd(rng), ref_s += h[i], ref_m = std::max<double>(ref_m, h[i]);
    for (int r = 0; r < rot; ++r) CHECK(cudaMemcpy(x + r * n, h.data(), bytes, cudaMemcpyHostToDevice));
    float *slot, *out;
    CHECK(cudaMalloc(&slot, 2 * 4096 * sizeof(float)));
    CHECK(cudaMalloc(&out, 2 * sizeof(float)));
    std::printf("\nrow of %ld floats (%.1f MB; cold: %d buffers in rotation)\n", n, bytes / 1e6, rot);
    std::printf(
        "| form | blocks x threads | cold us | cold GB/s | %% of copy | hot us | result ok "
        "|\n|---|---|---|---|---|---|---|\n");
    struct Form {
      const char* name;
      int blocks, threads;
      int kind;  // 0 split (cooperative), 1 two plain launches, 2 one block, 3 split with the tree combine
    };
    std::vector<Form> forms = {{"one block", 1, 1024, 2}};
    for (int b : {64, 128, sms, 2 * sms, 4 * sms, 8 * sms})
      forms.push_back({"split, serial combine", b, 128, 0});
    for (int b : {sms, 4 * sms}) forms.push_back({"split, serial combine", b, 256, 0});
    for (int b : {64, 128, sms, 2 * sms, 4 * sms, 8 * sms})
      forms.push_back({"split, tree combine", b, 128, 3});
    for (int b : {128, sms, 4 * sms, 8 * sms}) forms.push_back({"partials + combine", b, 128, 1});
    for (const Form& f : forms) {
      if (f.kind == 0 || f.kind == 3) {
        int per_sm = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f.kind ? split_row_tree : split_row,
                                                            f.threads, 0));
        if (per_sm * sms < f.blocks) {
          std::printf("| %s | %d x %d | (not co-resident) |\n", f.name, f.blocks, f.threads);
          continue;
        }
      }
      auto body = [&](int i, int rows) {
        const float* xi = x + long(i % rows) * n;
        long nn = n;
        if (f.kind == 0 || f.kind == 3) {
          void* args[] = {&xi, &nn, &slot, &out};
          launch(reinterpret_cast<const void*>(f.kind ? split_row_tree : split_row), f.blocks, f.threads,
                 args, true);
        } else {  // one block: its partial is the result (in slot); else partials, then the combine
          const int blocks = f.kind == 2 ? 1 : f.blocks;
          void* a1[] = {&xi, &nn, &slot};
          launch(reinterpret_cast<const void*>(partials), blocks, f.threads, a1, false);
          if (f.kind == 2) return;
          int parts = blocks;
          void* a2[] = {&slot, &parts, &out};
          launch(reinterpret_cast<const void*>(combine), 1, 256, a2, false);
        }
      };
      // Poisoned result, one run, checked against the float64 sum and the maximum.
      const float poison[2] = {NAN, NAN};
      float* result = f.kind == 2 ? slot : out;
      CHECK(cudaMemcpy(result, poison, sizeof poison, cudaMemcpyHostToDevice));
      body(0, 1);
      CHECK(cudaStreamSynchronize(g_stream));
      CHECK(cudaGetLastError());
      float got[2];
      CHECK(cudaMemcpy(got, result, sizeof got, cudaMemcpyDeviceToHost));
      const bool ok = std::fabs(got[0] - ref_s) <= 1e-4 * std::sqrt(double(n)) * 8 && got[1] == float(ref_m);
      const double cold = time_us([&](int i) { body(i, rot); });
      const double hot = time_us([&](int i) { body(i, 1); });
      const double gbs = bytes / (cold * 1e3);
      std::printf("| %s | %d x %d | %.2f | %.0f | %.1f%% | %.2f | %s |\n", f.name, f.kind == 2 ? 1 : f.blocks,
                  f.threads, cold, gbs, 100.0 * gbs / copy_gbs, hot, ok ? "yes" : "NO");
      if (!ok) std::printf("  sum %.6g (float64 %.6g), max %.6g (%.6g)\n", got[0], ref_s, got[1], ref_m);
    }
    CHECK(cudaFree(x));
    CHECK(cudaFree(slot));
    CHECK(cudaFree(out));
  }
  return 0;
}
