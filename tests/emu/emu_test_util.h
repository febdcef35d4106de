// Helpers for the emulation-layer tests: seeded data, tolerance checks, thread orders.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "stitch/emu/launch.h"
#include "support/tolerances.h"

namespace stitch::emu::test {

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -2.0f,
                                        float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Every element within tolerance; reports the first few mismatches.
template <class Got>
void check_close(const std::vector<double>& expected, const Got& got, Tolerance tol,
                 const std::string& what) {
  REQUIRE(expected.size() == got.size());
  std::size_t bad = 0;
  std::string first;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    const double e = expected[i];
    if (!(std::fabs(g - e) <= tol.atol + tol.rtol * std::fabs(e))) {
      if (bad < 3)
        first += " [" + std::to_string(i) + "] got " + std::to_string(g) + " want " + std::to_string(e);
      ++bad;
    }
  }
  INFO(what << ": " << bad << " of " << expected.size() << " elements outside rtol " << tol.rtol << " atol "
            << tol.atol << ":" << first);
  CHECK(bad == 0);
}

inline const char* order_name(ThreadOrder order) {
  return order == ThreadOrder::kForward ? "forward" : order == ThreadOrder::kReverse ? "reverse" : "random";
}

inline constexpr ThreadOrder kAllOrders[] = {ThreadOrder::kForward, ThreadOrder::kReverse,
                                             ThreadOrder::kRandom};

// Sets process-wide emulator options for one scope.
class ScopedOptions {
 public:
  explicit ScopedOptions(const Options& o) : saved_(options()) { set_options(o); }
  ~ScopedOptions() { set_options(saved_); }

 private:
  Options saved_;
};

inline Options with_order(ThreadOrder order, std::uint64_t seed = 7) {
  Options o = options();
  o.order = order;
  o.seed = seed;
  return o;
}

inline void require_ok(const Result& r) {
  INFO(failure_name(r.failure) << ": " << r.message);
  REQUIRE(r.ok());
}

}  // namespace stitch::emu::test
