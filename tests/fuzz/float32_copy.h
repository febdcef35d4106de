// A float32 copy of a half-precision model, for stitch_model_fuzz (model_fuzz.cc): where a mutant
// of a float16 or bfloat16 model misses the reference, the same mutant run in float32 tells an
// answer that hangs on where the halves are rounded (a Div by a GEMM output that cancels to nearly
// zero) from a kernel that computes the wrong thing.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>

#include "ir/tensor.h"
#include "support/status.h"

namespace stitch::fuzz {

// `m` with every float16 and bfloat16 tensor made float32: initializers and constant attributes
// (their values widened exactly), the types of graph inputs, outputs and values, and the element
// types ops are told to make (Cast's and EyeLike's targets, random ops' dtype); subgraphs
// included. Nothing when `m` has no such tensor; an error names a tensor that cannot be read.
StatusOr<std::optional<onnx::ModelProto>> float32_copy(const onnx::ModelProto& m);

// `t` as float32 when it is float16 or bfloat16, else `t`.
Tensor widened(const Tensor& t);

}  // namespace stitch::fuzz
