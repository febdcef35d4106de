// The weight arithmetic of a row scale or LayerNorm moved past a GEMM (hoist_scales.cc), kept
// for when its results are read (Tensor::deferred).
#pragma once

#include <mutex>
#include <vector>

#include "ir/tensor.h"

namespace stitch::fusion {

// One pass over a weight W [k, n]: the new weight (row i of W times scale[i], in double, rounded
// once), the column sums of the new weight before it is rounded (with a centering) and the bias
// row b W (with a beta, one value per row of W). Run once, when a constant made from it is first
// read, from whichever thread reads it.
struct ScaledWeightPass {
  Tensor w0;  // shares the old weight's bytes until the pass has run
  std::vector<double> scale, beta;
  bool center = false;
  std::once_flag once;
  Tensor scaled;
  std::vector<double> sums, bw;

  void run() {
    std::call_once(once, [this] {
      const int64_t k = w0.dims()[0], n = w0.dims()[1];
      if (center) sums.assign(static_cast<size_t>(n), 0.0);
      if (!beta.empty()) bw.assign(static_cast<size_t>(n), 0.0);
      const Tensor& src = w0;
      scaled = Tensor(src.dtype(), src.dims());
      const bool f32 = src.dtype() == DType::kF32;
      const float* w0f = f32 ? src.data_as<float>() : nullptr;
      float* scaledf = f32 ? scaled.data_as<float>() : nullptr;
      for (int64_t i = 0; i < k; ++i) {
        const double si = scale[static_cast<size_t>(i)];
        const double bi = beta.empty() ? 0.0 : beta[static_cast<size_t>(i)];
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = i * n + j;
          const double x = f32 ? w0f[at] : src.get_f64(at), v = x * si;
          if (f32)
            scaledf[at] = static_cast<float>(v);
          else
            scaled.set_f64(at, v);
          if (center) sums[static_cast<size_t>(j)] += v;
          if (!beta.empty()) bw[static_cast<size_t>(j)] += bi * x;
        }
      }
      w0 = Tensor();
    });
  }
};

}  // namespace stitch::fusion
