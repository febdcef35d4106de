#include "reference/compare.h"

#include <fmt/format.h>

#include <cmath>

namespace stitch {

CompareResult compare_tensors(const Tensor& a, const Tensor& e, double rtol, double atol) {
  CompareResult r;
  if (a.dtype() != e.dtype()) {
    r.ok = false;
    r.problem = fmt::format("element type {} but expected {}", dtype_name(a.dtype()), dtype_name(e.dtype()));
    return r;
  }
  if (a.dims() != e.dims()) {
    r.ok = false;
    r.problem = fmt::format("shape {} but expected {}", dims_to_string(a.dims()), dims_to_string(e.dims()));
    return r;
  }
  bool exact = !is_float(a.dtype());
  for (int64_t i = 0; i < a.size(); ++i) {
    bool bad;
    if (exact) {
      int64_t x = a.get_i64(i), y = e.get_i64(i);
      double d = std::fabs(double(x) - double(y));
      r.max_abs = std::max(r.max_abs, d);
      if (y != 0) r.max_rel = std::max(r.max_rel, d / std::fabs(double(y)));
      bad = x != y;
    } else {
      double x = a.get_f64(i), y = e.get_f64(i);
      if (std::isnan(x) || std::isnan(y)) {
        bad = std::isnan(x) != std::isnan(y);
      } else if (std::isinf(x) || std::isinf(y)) {
        bad = x != y;
      } else {
        double d = std::fabs(x - y);
        r.max_abs = std::max(r.max_abs, d);
        if (y != 0) r.max_rel = std::max(r.max_rel, d / std::fabs(y));
        bad = d > atol + rtol * std::fabs(y);
      }
    }
    if (bad) {
      if (r.first_bad < 0) r.first_bad = i;
      ++r.mismatches;
    }
  }
  r.ok = r.mismatches == 0;
  return r;
}

}  // namespace stitch
