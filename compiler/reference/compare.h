// Compares computed tensors with expected ones under a tolerance, and
// reports per-output maximum absolute and relative error.
#pragma once

#include <string>

#include "ir/tensor.h"
#include "support/tolerances.h"

namespace stitch {

struct CompareResult {
  bool ok = true;
  double max_abs = 0;       // max |actual - expected|
  double max_rel = 0;       // max |actual - expected| / |expected| over nonzero expected
  int64_t mismatches = 0;   // elements outside the tolerance
  int64_t first_bad = -1;   // flat index of the first mismatch
  std::string problem;      // set when dtypes or shapes differ
};

CompareResult compare_tensors(const Tensor& actual, const Tensor& expected, double rtol, double atol);

}  // namespace stitch
