// Seeded mutations of whole ONNX models, for stitch_model_fuzz (model_fuzz.cc).
//
// Where the node-test mutation tests (tests/onnx_node/mutation_tests.cc) change one attribute or
// one input shape of a one-node model, these change a multi-node model the way an exporter bug,
// a hand edit or a corrupted file would: a constant's value (a Reshape's shape, a Slice's bounds,
// an epsilon), an attribute (a Transpose's permutation, a reduction's axes), an op swapped for
// its sibling (Add for Sub, ReduceMean for ReduceSum, Softmax for LogSoftmax), an input wired to
// another value, a graph input's axis or element type, a name left dangling. Many mutants are
// still valid models that the planner's pattern rewrites no longer quite match, which is what
// the fuzzer's comparison of the fused artifact against the reference interpreter is for.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <random>
#include <string>

namespace stitch::fuzz {

// Applies one mutation, drawn with `rng`, to `m` and says what it changed, naming the node,
// initializer or input ("node 'Softmax_3' (Softmax): attribute axis -1 -> 0"). Tries kinds until
// one applies to the model; "" when none does.
std::string mutate(onnx::ModelProto& m, std::mt19937_64& rng);

}  // namespace stitch::fuzz
