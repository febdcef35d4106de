// Scalar expressions of the elementwise and broadcasting ops, as CUDA C text.
//
// Operands arrive already loaded in their compute types (kernel.h); the result is an
// expression in the compute type of the node's output. These mirror the reference rows in
// ops/elementwise.cc (the oracle) op by op, in float instead of double for float inputs.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::codegen {

struct Kernel;

// True when the node is lowered as a per-element expression of broadcast operands.
bool has_scalar_expr(const Node& n);

// The expression for output 0 from operand expressions `a` (one per node input; "" for an
// omitted optional input). Error (naming the node) for a case the back end does not handle.
// `k`: the kernel it goes into, which a StitchIndexCheck (ops/index_check.h) needs for its fault;
// optional for every other op.
StatusOr<std::string> scalar_expr(const Node& n, const std::vector<std::string>& a, Kernel* k = nullptr);

// Float expression `x` converted to integer type `to`, in `to`'s compute type, the way the
// reference's Cast converts: NaN gives 0, a value past the type's range its nearest end
// (stitch_dev::float_to_int).
std::string float_to_int(const std::string& x, DType to);

// Whether the expression reads input `i` of `n` (every present input but CastLike's target, whose
// type alone counts, and the exponent of Pow by a constant 2, which is x * x). Lowerings load only
// these: nvcc rejects a loaded operand no expression uses.
bool reads_operand(const Node& n, size_t i);

// Whether x / d may be computed as x * (1 / d) with the special values unchanged: d is a Sqrt's
// result (the smallest positive one is 2^-74.5, so 1 / d is finite unless d is zero, where both
// forms give an infinity or NaN alike), or a scalar constant whose reciprocal is a normal float.
bool reciprocal_safe(const Value& d);

// Estimated instructions per element of the node's expression on sm_90: 1, plus for each math
// function and division in the expression scalar_expr writes the instructions nvcc emits for it
// (SASS up to the kernel's exit, bench/op_costs/measure.py: erff 30, expf 10, tanhf 17, a division
// 13, powf 95, ...; the same weights for the double functions). 1 for nodes without an expression.
// The cost model's per-element operation count (fusion/cost.h).
int op_instructions(const Node& n);

// A literal of `v` in compute type `ct` ("float": 0.5f, "double": 0.5, integers: 5LL).
std::string literal(double v, const std::string& ct);
// A literal of tensor `t`'s first element in compute type `ct`: an integer exactly (through a
// double, one past 2^53 would be rounded), unsigned as such; an integer for a float type rounded
// once.
std::string first_literal(const Tensor& t, const std::string& ct);

// The first value of a maximum (`max`) or minimum reduction in compute type `ct`: an infinity for
// floating point, the type's lowest or highest value for integers (0 or all ones unsigned).
std::string extreme_literal(bool max, const std::string& ct);

// |e| in compute type `ct` (ReduceL1's terms): e itself for unsigned integers.
std::string magnitude(const std::string& e, const std::string& ct);

}  // namespace stitch::codegen
