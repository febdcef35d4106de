// Activations a GEMM call can apply in its epilogue: the element-wise function that the nodes
// reading a GEMM's output compute, recognised by what it computes rather than how it is written
// (exporters spell GELU in many orders: Pow or x*x*x, 0.5*x or x/2, constants on either side).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace stitch::codegen {

enum class Activation {
  kNone,
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): cuBLASLt's GELU epilogue
  kGeluErf,   // 0.5 x (1 + erf(x / sqrt(2))): no cuBLASLt epilogue computes it
  kRelu,      // max(x, 0): cuBLASLt's ReLU epilogue
};
const char* activation_name(Activation a);

struct ActivationRegion {
  Activation kind = Activation::kNone;
  std::vector<const Node*> nodes;  // graph order
  const Value* out = nullptr;      // the activation of x
};

// The activation of `x` computed by nodes that read only `x`, each other and scalar float
// constants, in x's dtype and shape (Add, Sub, Mul, Div, Pow, Sqrt, Tanh, Erf, Neg, Gelu, Relu,
// Max of two), when
// every reader of `x` is one of them, only `out` is read outside them, and the function they
// compute, evaluated in double precision on 337 points of [-10, 10], agrees with GELU (tanh or erf
// form) or ReLU within the rounding of fp32 constants (2e-6 (1 + |x|); the two forms differ by up to
// 4.7e-4, so they are never confused). `usable(n)`: nodes that may join (e.g. not in fused groups).
using NodeUsers = std::unordered_map<const Value*, std::vector<Node*>>;
std::optional<ActivationRegion> match_activation(const Graph& g, const NodeUsers& users, const Value* x,
                                                 const std::function<bool(const Node*)>& usable);

// Reference values in double precision (the emu CPU GEMM applies the fp32 form of kGeluTanh).
double activation_value(Activation a, double x);

}  // namespace stitch::codegen
