// RMSNorm of %h into %y as exporters spell it, for the row-scale tests (test_hoist_scales*.cc):
// each reads %h, %gamma, %two, %one and %eps, which the test's graph declares.
#pragma once

#include <fmt/format.h>

#include <string>

namespace stitch::test {

// HuggingFace's RMSNorm as torch.export writes it: x * rsqrt(mean(x^2) + eps) * weight.
inline const char* kDynamoNorm = R"(  %sq = Pow(%h, %two) @"pow"
  %ms = ReduceMean(%sq) {axes = ints[-1], keepdims = 1} @"mean"
  %ve = Add(%ms, %eps) @"add_eps"
  %sd = Sqrt(%ve) @"sqrt"
  %rs = Reciprocal(%sd) @"rsqrt"
  %xn = Mul(%h, %rs) @"normalize"
  %y = Mul(%gamma, %xn) @"weight")";

// The same through TorchScript: casts to the same type and 1 / sqrt as a Div.
inline const char* kScriptNorm = R"(  %hc = Cast(%h) {to = 1} @"cast_in"
  %sq = Pow(%hc, %two) @"pow"
  %ms = ReduceMean(%sq) {axes = ints[-1], keepdims = 1} @"mean"
  %ve = Add(%ms, %eps) @"add_eps"
  %sd = Sqrt(%ve) @"sqrt"
  %rs = Div(%one, %sd) @"rsqrt"
  %xn = Mul(%hc, %rs) @"normalize"
  %xc = Cast(%xn) {to = 1} @"cast_out"
  %y = Mul(%gamma, %xc) @"weight")";

// A half model's RMSNorm as PyTorch computes it (LLaMA's): %h of type TO, the norm in float32
// between a widening Cast and a narrowing one, the weight applied in the half type.
inline std::string half_norm(int to) {
  return fmt::format(R"(  %hc = Cast(%h) {{to = 1}} @"cast_in"
  %sq = Pow(%hc, %two) @"pow"
  %ms = ReduceMean(%sq) {{axes = ints[-1], keepdims = 1}} @"mean"
  %ve = Add(%ms, %eps) @"add_eps"
  %sd = Sqrt(%ve) @"sqrt"
  %rs = Reciprocal(%sd) @"rsqrt"
  %xn = Mul(%hc, %rs) @"normalize"
  %xc = Cast(%xn) {{to = {}}} @"cast_out"
  %y = Mul(%gamma, %xc) @"weight")",
                     to);
}

}  // namespace stitch::test
