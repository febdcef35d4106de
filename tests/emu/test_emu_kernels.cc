// The test kernels in kernels/ on the emulation layer against double-precision references,
// at odd sizes, for blocks of 32 to 1024 threads, in forward, reverse and random thread order.
#include <climits>

#include "emu_test_util.h"
#include "kernels.h"

using namespace stitch;
using namespace stitch::emu;
using namespace stitch::emu::test;

namespace {

std::vector<double> layernorm_ref(const std::vector<float>& x, const std::vector<float>& bias,
                                  const std::vector<float>& res, const std::vector<float>& gamma,
                                  const std::vector<float>& beta, int rows, int cols, double eps) {
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    std::vector<double> s(cols);
    double mean = 0;
    for (int c = 0; c < cols; ++c) {
      s[c] = double(x[r * cols + c]) + bias[c] + res[r * cols + c];
      mean += s[c];
    }
    mean /= cols;
    double var = 0;
    for (int c = 0; c < cols; ++c) var += (s[c] - mean) * (s[c] - mean);
    var /= cols;
    for (int c = 0; c < cols; ++c)
      y[r * cols + c] = (s[c] - mean) / std::sqrt(var + eps) * gamma[c] + beta[c];
  }
  return y;
}

struct LayerNormCase {
  int rows, cols;
};

}  // namespace

TEST_CASE("layer norm, one block per row, matches double reference", "[emu][kernels]") {
  const LayerNormCase cases[] = {{1, 770}, {37, 770}, {4, 1}, {3, 33}, {2, 4096}};
  for (const auto& [rows, cols] : cases) {
    const auto x = random_floats(size_t(rows) * cols, 1), res = random_floats(size_t(rows) * cols, 2);
    const auto bias = random_floats(cols, 3), gamma = random_floats(cols, 4, 0.5f, 1.5f),
               beta = random_floats(cols, 5);
    const auto ref = layernorm_ref(x, bias, res, gamma, beta, rows, cols, 1e-5);
    for (int threads : {32, 64, 128, 256, 1024}) {
      for (ThreadOrder order : kAllOrders) {
        ScopedOptions scoped(with_order(order));
        INFO(rows << "x" << cols << " threads " << threads << " order " << order_name(order));
        std::vector<float> y(x.size(), -1.0f);
        require_ok(launch(block_row_layernorm, dim3(rows), dim3(threads), 0, x.data(), bias.data(),
                          res.data(), gamma.data(), beta.data(), y.data(), cols, 1e-5f));
        check_close(ref, y, kEmuF32, "block_row_layernorm");
      }
    }
  }
}

TEST_CASE("layer norm through the void** launch form", "[emu][kernels]") {
  const int rows = 5, cols = 300;
  const auto x = random_floats(rows * cols, 11), res = random_floats(rows * cols, 12);
  const auto bias = random_floats(cols, 13), gamma = random_floats(cols, 14), beta = random_floats(cols, 15);
  std::vector<float> y(x.size());
  const float* px = x.data();
  const float* pb = bias.data();
  const float* pr = res.data();
  const float* pg = gamma.data();
  const float* pbe = beta.data();
  float* py = y.data();
  int c = cols;
  float eps = 1e-5f;
  void* args[] = {&px, &pb, &pr, &pg, &pbe, &py, &c, &eps};
  require_ok(launch_with_args(block_row_layernorm, dim3(rows), dim3(96), 0, args));
  check_close(layernorm_ref(x, bias, res, gamma, beta, rows, cols, 1e-5), y, kEmuF32, "void** launch");
}

TEST_CASE("layer norm, one warp per row with cooperative_groups tiles", "[emu][kernels]") {
  const LayerNormCase cases[] = {{1, 770}, {37, 770}, {100, 5}, {9, 64}};
  for (const auto& [rows, cols] : cases) {
    const auto x = random_floats(size_t(rows) * cols, 21), res = random_floats(size_t(rows) * cols, 22);
    const auto bias = random_floats(cols, 23), gamma = random_floats(cols, 24),
               beta = random_floats(cols, 25);
    const auto ref = layernorm_ref(x, bias, res, gamma, beta, rows, cols, 1e-6);
    for (int threads : {32, 128, 1024}) {
      for (ThreadOrder order : kAllOrders) {
        ScopedOptions scoped(with_order(order));
        INFO(rows << "x" << cols << " threads " << threads << " order " << order_name(order));
        const int rows_per_block = threads / 32;
        std::vector<float> y(x.size(), -1.0f);
        require_ok(launch(warp_row_layernorm, dim3((rows + rows_per_block - 1) / rows_per_block),
                          dim3(threads), 0, x.data(), bias.data(), res.data(), gamma.data(), beta.data(),
                          y.data(), rows, cols, 1e-6f));
        check_close(ref, y, kEmuF32, "warp_row_layernorm");
      }
    }
  }
}

namespace {
std::vector<double> softmax_ref(const std::vector<double>& v, int rows, int cols) {
  std::vector<double> y(v.size());
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; ++c) m = std::max(m, v[r * cols + c]);
    for (int c = 0; c < cols; ++c) s += std::exp(v[r * cols + c] - m);
    for (int c = 0; c < cols; ++c) y[r * cols + c] = std::exp(v[r * cols + c] - m) / s;
  }
  return y;
}
std::vector<float> to_float(const std::vector<__half>& h) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = __half2float(h[i]);
  return f;
}
}  // namespace

TEST_CASE("scaled softmax with a dynamic shared-memory row cache and float16 output", "[emu][kernels]") {
  const LayerNormCase cases[] = {{1, 770}, {37, 770}, {3, 1}, {2, 3000}};
  for (const auto& [rows, cols] : cases) {
    const auto x = random_floats(size_t(rows) * cols, 31, -8.0f, 8.0f);
    const float scale = 0.125f;
    std::vector<double> scaled(x.size());
    for (size_t i = 0; i < x.size(); ++i) scaled[i] = double(x[i]) * scale;
    const auto ref = softmax_ref(scaled, rows, cols);
    for (int threads : {32, 128, 256, 1024}) {
      for (ThreadOrder order : kAllOrders) {
        ScopedOptions scoped(with_order(order));
        INFO(rows << "x" << cols << " threads " << threads << " order " << order_name(order));
        std::vector<__half> y(x.size(), __float2half(-1.0f));
        require_ok(launch(scaled_softmax_f16, dim3(rows), dim3(threads), cols * sizeof(float), x.data(),
                          y.data(), cols, scale));
        check_close(ref, to_float(y), kEmuF16Output, "scaled_softmax_f16");
      }
    }
  }
}

TEST_CASE("softmax over float16 input staged as half2 through shared memory", "[emu][kernels]") {
  const LayerNormCase cases[] = {{1, 770}, {37, 770}, {5, 2}, {2, 64}};
  for (const auto& [rows, cols] : cases) {
    const auto xf = random_floats(size_t(rows) * cols, 41, -6.0f, 6.0f);
    std::vector<__half> xh(xf.size());
    const __half scale = __float2half(0.5f);
    std::vector<double> scaled(xf.size());
    for (size_t i = 0; i < xf.size(); ++i) {
      xh[i] = __float2half(xf[i]);
      scaled[i] = __half2float(__hmul(xh[i], scale));  // the kernel scales in half precision
    }
    const auto ref = softmax_ref(scaled, rows, cols);
    for (int threads : {32, 256, 1024}) {
      for (ThreadOrder order : kAllOrders) {
        ScopedOptions scoped(with_order(order));
        INFO(rows << "x" << cols << " threads " << threads << " order " << order_name(order));
        std::vector<__half> y(xh.size(), __float2half(-1.0f));
        require_ok(launch(softmax_f16_in, dim3(rows), dim3(threads), cols * sizeof(float),
                          reinterpret_cast<const __half2*>(xh.data()), y.data(), cols, scale));
        check_close(ref, to_float(y), kEmuF16Output, "softmax_f16_in");
      }
    }
  }
}

TEST_CASE("grid-synchronised RMS normalisation in a cooperative launch", "[emu][kernels]") {
  for (long long n : {1LL, 1000LL, 37LL * 770LL}) {
    const auto x = random_floats(size_t(n), 51);
    double sq = 0;
    for (float v : x) sq += double(v) * v;
    const double scale = 1.0 / std::sqrt(sq / double(n) + 1e-6);
    std::vector<double> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = x[i] * scale;
    for (unsigned blocks : {1u, 3u, 8u}) {
      for (int threads : {32, 256, 1024}) {
        for (ThreadOrder order : kAllOrders) {
          ScopedOptions scoped(with_order(order));
          INFO("n " << n << " blocks " << blocks << " threads " << threads << " order " << order_name(order));
          std::vector<float> y(x.size(), -1.0f), partials(blocks, -1.0f);
          require_ok(launch_cooperative(grid_rms_normalize, dim3(blocks), dim3(threads), 0, x.data(),
                                        y.data(), partials.data(), n, 1e-6f));
          check_close(ref, y, kEmuF32, "grid_rms_normalize");
        }
      }
    }
  }
}

TEST_CASE("column reductions: shared-memory tiles and float atomics", "[emu][kernels]") {
  const LayerNormCase cases[] = {{37, 770}, {1, 1}, {1000, 37}, {3, 5000}};
  for (const auto& [rows, cols] : cases) {
    const auto x = random_floats(size_t(rows) * cols, 61);
    std::vector<double> sums(cols, 0.0), means(cols);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) sums[c] += x[size_t(r) * cols + c];
    for (int c = 0; c < cols; ++c) means[c] = sums[c] / rows;
    for (unsigned ty : {1u, 8u, 32u}) {
      for (ThreadOrder order : kAllOrders) {
        ScopedOptions scoped(with_order(order));
        INFO(rows << "x" << cols << " block (32," << ty << ") order " << order_name(order));
        std::vector<float> s(cols, -1.0f), m(cols, -1.0f);
        require_ok(launch(column_sum_tiled, dim3((cols + 31) / 32), dim3(32, ty), 0, x.data(), s.data(),
                          m.data(), rows, cols));
        // A column sum of `rows` float32 values: allow the reordered-sum error per row.
        check_close(sums, s, Tolerance{kEmuF32.rtol, kEmuF32.atol * rows, "sums"}, "column sums");
        check_close(means, m, kEmuF32, "column means");
      }
    }
    for (int threads : {32, 256}) {
      for (int rows_per_block : {1, 7, 1000}) {
        INFO(rows << "x" << cols << " threads " << threads << " rows/block " << rows_per_block);
        std::vector<float> s(cols, 0.0f);
        const dim3 grid((cols + threads - 1) / threads, (rows + rows_per_block - 1) / rows_per_block);
        require_ok(launch(column_sum_atomic, grid, dim3(threads), 0, x.data(), s.data(), rows, cols,
                          rows_per_block));
        check_close(sums, s, Tolerance{kEmuF32.rtol, kEmuF32.atol * rows, "sums"}, "atomic column sums");
      }
    }
  }
}

TEST_CASE("histogram with shared- and global-memory atomics", "[emu][kernels]") {
  for (int n : {1, 100000}) {
    const int num_bins = 37;
    std::mt19937 rng(71);
    std::vector<int> values(n);
    std::vector<double> expected(num_bins, 0.0);
    for (int& v : values) {
      v = static_cast<int>(rng() % num_bins);
      expected[v] += 1;
    }
    for (ThreadOrder order : kAllOrders) {
      ScopedOptions scoped(with_order(order));
      std::vector<unsigned> bins(num_bins, 0);
      require_ok(launch(histogram, dim3(8), dim3(256), num_bins * sizeof(unsigned), values.data(), n,
                        bins.data(), num_bins));
      check_close(expected, bins, Tolerance{0, 0, "exact"}, "histogram");
    }
  }
}

TEST_CASE("integer and float atomics, barrier reductions and warp votes", "[emu][kernels]") {
  const int n = 1000, threads = 128, blocks = (n + threads - 1) / threads;
  std::mt19937 rng(81);
  std::vector<int> values(n);
  for (int& v : values) v = static_cast<int>(rng() % 1001) - 500;
  for (int b = 0; b < threads; ++b) values[b] = 1 + b;  // block 0: all positive
  Stats want{INT_MIN, INT_MAX, 0, 0, 0, 0.0f, 0, 0, 0};
  for (int b = 0; b < blocks; ++b) {
    bool all = true, any = false;
    for (int t = 0; t < threads; ++t) {
      const int i = b * threads + t;
      if (i >= n) continue;
      const int v = values[i];
      want.max_value = std::max(want.max_value, v);
      want.min_value = std::min(want.min_value, v);
      want.positives += v > 0;
      want.sum += static_cast<unsigned long long>(v + 1000);
      want.max_abs = std::max(want.max_abs, std::fabs(float(v)));
      all = all && v > 0;
      any = any || v > 0;
    }
    want.blocks_all_positive += all;
    want.blocks_any_positive += any;
    for (int w = 0; w < threads / 32; ++w) {
      bool neg = false;
      for (int l = 0; l < 32; ++l) {
        const int i = b * threads + w * 32 + l;
        neg = neg || (i < n && values[i] < 0);
      }
      want.warps_any_negative += neg;
    }
  }
  for (ThreadOrder order : kAllOrders) {
    ScopedOptions scoped(with_order(order));
    INFO("order " << order_name(order));
    Stats got{INT_MIN, INT_MAX, 0, 0, 0, 0.0f, 0, 0, 0};
    require_ok(launch(statistics, dim3(blocks), dim3(threads), 0, values.data(), n, &got));
    CHECK(got.max_value == want.max_value);
    CHECK(got.min_value == want.min_value);
    CHECK(got.positives == want.positives);
    CHECK(got.positive_ballots == want.positives);
    CHECK(got.sum == want.sum);
    CHECK(got.max_abs == want.max_abs);
    CHECK(got.blocks_all_positive == want.blocks_all_positive);
    CHECK(got.blocks_any_positive == want.blocks_any_positive);
    CHECK(got.warps_any_negative == want.warps_any_negative);
  }
}

TEST_CASE("a shared-memory spin lock makes progress", "[emu][kernels]") {
  const auto values = random_floats(5000, 91);
  double want = 0;
  for (float v : values) want += v;
  for (ThreadOrder order : kAllOrders) {
    ScopedOptions scoped(with_order(order));
    double got = 0;
    require_ok(launch(locked_sum, dim3(4), dim3(128), 0, values.data(), int(values.size()), &got));
    CHECK(std::fabs(got - want) <= 1e-9 * std::fabs(want) + 1e-9);
  }
}

TEST_CASE("warp prefix sums with __shfl_up_sync and __reduce_add_sync", "[emu][kernels]") {
  const int threads = 64, blocks = 3, n = threads * blocks;
  std::mt19937 rng(101);
  std::vector<int> in(n), scan(n, -1), totals(n / 32, -1);
  for (int& v : in) v = static_cast<int>(rng() % 100) - 50;
  require_ok(launch(warp_scan, dim3(blocks), dim3(threads), 0, in.data(), scan.data(), totals.data()));
  for (int w = 0; w < n / 32; ++w) {
    int acc = 0;
    for (int l = 0; l < 32; ++l) {
      acc += in[w * 32 + l];
      CHECK(scan[w * 32 + l] == acc);
    }
    CHECK(totals[w] == acc);
  }
}

TEST_CASE("cooperative_groups tiles of 4, 8 and 16 lanes: reduce, ballot, shuffles", "[emu][kernels]") {
  const int threads = 64, blocks = 2, n = threads * blocks;
  const auto in = random_floats(n, 111);
  std::vector<float> sums(3 * n), firsts(3 * n);
  std::vector<unsigned> ballots(3 * n);
  for (ThreadOrder order : kAllOrders) {
    ScopedOptions scoped(with_order(order));
    INFO("order " << order_name(order));
    require_ok(launch(tile_features, dim3(blocks), dim3(threads), 0, in.data(), sums.data(), ballots.data(),
                      firsts.data()));
    int k = 0;
    for (int size : {4, 8, 16}) {
      std::vector<double> want_sum(n), want_first(n);
      for (int i = 0; i < n; ++i) {
        const int base = i / size * size, rank = i % size;
        double s = 0;
        unsigned ballot = 0;
        for (int j = 0; j < size; ++j) {
          s += in[base + j];
          if (in[base + j] > 0) ballot |= 1u << j;
        }
        want_sum[i] = s;
        CHECK(ballots[k * n + i] == ballot);
        const float up = rank >= 1 ? in[i - 1] : in[i];
        const float down = rank + 1 < size ? in[i + 1] : in[i];
        want_first[i] = double(in[base]) + up - down;
      }
      check_close(want_sum, std::vector<float>(sums.begin() + k * n, sums.begin() + (k + 1) * n), kEmuF32,
                  "tile reduce " + std::to_string(size));
      check_close(want_first, std::vector<float>(firsts.begin() + k * n, firsts.begin() + (k + 1) * n),
                  kEmuF32, "tile shuffles " + std::to_string(size));
      ++k;
    }
  }
}

TEST_CASE("__shfl_sync with width 16, and __syncwarp of half a warp after the other half exits",
          "[emu][kernels]") {
  const int threads = 64, n = threads;
  std::vector<int> in(n), broadcast(n, -1), after(n, -1);
  for (int i = 0; i < n; ++i) in[i] = 100 + i;
  for (ThreadOrder order : kAllOrders) {
    ScopedOptions scoped(with_order(order));
    require_ok(
        launch(width_and_syncwarp, dim3(1), dim3(threads), 0, in.data(), broadcast.data(), after.data()));
    for (int i = 0; i < n; ++i) {
      CHECK(broadcast[i] == in[i / 16 * 16 + 3]);
      CHECK(after[i] == (i % 32 < 16 ? in[i / 32 * 32 + (i % 32 + 1) % 16] : -1));
    }
  }
}

TEST_CASE("half and bfloat16 device math", "[emu][kernels]") {
  const int n = 300;
  const auto x = random_floats(n, 121, -3.0f, 3.0f);
  std::vector<__half> h(4 * n);
  std::vector<__nv_bfloat16> b(4 * n);
  require_ok(launch(half_math, dim3((n + 127) / 128), dim3(128), 0, x.data(), h.data(), b.data(), n));
  std::vector<double> want_h(4 * n), want_b(4 * n);
  std::vector<float> got_h(4 * n), got_b(4 * n);
  for (int i = 0; i < n; ++i) {
    const double xh = __half2float(__float2half_rn(x[i]));
    const double xb = __bfloat162float(__float2bfloat16_rn(x[i]));
    // The kernel adds |x| + 1 in the narrow type before the rsqrt.
    const double sh = __half2float(__float2half_rn(float(std::fabs(xh) + 1)));
    const double sb = __bfloat162float(__float2bfloat16_rn(float(std::fabs(xb) + 1)));
    const double hv[4] = {std::exp(xh), std::tanh(xh), 1 / std::sqrt(sh), xh * xh + xh};
    const double bv[4] = {std::exp(xb), std::tanh(xb), 1 / std::sqrt(sb), xb * xb + xb};
    for (int k = 0; k < 4; ++k) {
      want_h[4 * i + k] = hv[k];
      want_b[4 * i + k] = bv[k];
      got_h[4 * i + k] = __half2float(h[4 * i + k]);
      got_b[4 * i + k] = __bfloat162float(b[4 * i + k]);
    }
  }
  check_close(want_h, got_h, kEmuF16Output, "half math");
  // bfloat16 keeps 8 significant bits: one rounding is a relative step of 2^-8.
  check_close(want_b, got_b, Tolerance{4e-3, 1e-5, "one rounding to bfloat16"}, "bfloat16 math");
}

TEST_CASE("thread order decides a write race, random order is reproducible from its seed", "[emu][kernels]") {
  const int threads = 128, blocks = 4;
  auto run = [&](ThreadOrder order, std::uint64_t seed) {
    ScopedOptions scoped(with_order(order, seed));
    std::vector<int> out(threads * blocks, -1);
    require_ok(launch(racy_last_writer, dim3(blocks), dim3(threads), 0, out.data()));
    return out;
  };
  CHECK(run(ThreadOrder::kForward, 0) == std::vector<int>(threads * blocks, threads - 1));
  CHECK(run(ThreadOrder::kReverse, 0) == std::vector<int>(threads * blocks, 0));
  CHECK(run(ThreadOrder::kRandom, 5) == run(ThreadOrder::kRandom, 5));
  CHECK(run(ThreadOrder::kRandom, 5) != run(ThreadOrder::kRandom, 6));
}
