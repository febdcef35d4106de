// Decomposed transformer patterns as IR text lines, shared by the stitching tests
// (test_stitch_patterns.cc, test_moved_rows.cc).
#pragma once

#include <fmt/format.h>

#include <string>

namespace stitch::test {

// RMSNorm of %{x} over its last axis, weighted by %w, into %y (reads the constants %ax, %two and
// %eps), as HuggingFace's exports spell it.
inline std::string rms_lines(const std::string& x) {
  return fmt::format(R"(  %p = Pow(%{0}, %two) @"pow"
  %m = ReduceMean(%p, %ax) @"mean"
  %e = Add(%m, %eps) @"add_eps"
  %s = Sqrt(%e) @"sqrt"
  %r = Reciprocal(%s) @"rsqrt"
  %n = Mul(%{0}, %r) @"norm"
  %y = Mul(%w, %n) @"weight"
)",
                     x);
}

// The rotary embedding of %t (halves of 8 swapped along the axis the constant %{axis} names, rows
// of 16), times %cos and %sin, into %{out}; reads the constants %s0, %s8 and %s16.
inline std::string rotary_lines(const std::string& axis, int axis_index, const std::string& out) {
  return fmt::format(R"(  %x1 = Slice(%t, %s0, %s8, %{0}) @"slice_lo"
  %x2 = Slice(%t, %s8, %s16, %{0}) @"slice_hi"
  %nx2 = Neg(%x2) @"neg"
  %rot = Concat(%nx2, %x1) {{axis = {1}}} @"cat"
  %a = Mul(%t, %cos) @"mul_cos"
  %b = Mul(%rot, %sin) @"mul_sin"
  %{2} = Add(%a, %b) @"add"
)",
                     axis, axis_index, out);
}

}  // namespace stitch::test
