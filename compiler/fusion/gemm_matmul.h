// Gemms as MatMuls: ONNX Gemm (Y = alpha * A' * B' + beta * C, A' and B' optionally transposed)
// becomes a MatMul of the two operands (alpha folded into a constant one, else a Mul of A) and an
// Add of C (scaled by beta) when there is one. Exporters write linear layers as Gemm (GPT-2's Conv1D,
// torchvision's classifiers, every nn.Linear on a 2-D input); as MatMuls they get everything the
// planner does for MatMuls: the call still takes the bias (epilogue), the residual (C), alpha
// and the operands' transposes (strides) back through the GEMM folds (codegen/gemm_folds.h), and
// in addition a small projection may become a loop in the stitched kernel of its neighbours
// (codegen::contraction_length), siblings may merge (merge_gemms.h) and a row scale may move
// past it (hoist_scales.h).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Rewrites every Gemm of the default domain (opset 7 or later: no `broadcast` attribute) with
// static shapes and a floating-point type. The Gemm node becomes the MatMul and keeps its name;
// a constant operand that it reads transposed is transposed into a new constant, any other
// through a Transpose node; alpha other than 1 scales B when B is a constant, else A (a new
// constant, or a Mul by a scalar); C scaled by a beta other than 1 is a new constant when C is one, a Mul
// otherwise; beta 0 drops C. The Gemm's output value keeps its name. Returns one line per Gemm.
// Gemms named in `keep` (--no-fuse) stay.
StatusOr<std::vector<std::string>> gemms_as_matmuls(Graph& g, const std::set<std::string>& keep = {});

// gemms_as_matmuls through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten
// graph is estimated no slower.
StatusOr<RewriteResult> gemms_as_matmuls_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                    const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
