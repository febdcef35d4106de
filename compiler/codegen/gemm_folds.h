// GEMM folds: work next to a MatMul that its GEMM call does instead of a kernel, found on the
// whole graph before fusion planning (the planner then leaves those nodes out of its groups, and
// the schedule gives them no step).
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace stitch::codegen {

// Work next to a MatMul that its GEMM call does instead of a kernel (found on the whole graph,
// before fusion planning; the nodes involved then need no step):
//  - bias: the MatMul's output is read only by an Add of a vector of its n columns that is a
//    constant or a graph input (ready before the call); the call adds it in its epilogue and
//    writes the Add's output;
//  - output transpose: the (biased) product is read only by a Transpose keeping the last axis
//    last; the call writes the transposed layout through ldc and per-batch-dim strides;
//  - operands: an operand reached from a stored value through views, Transposes and
//    multiplications by a scalar constant, each read only by the next; the call reads the stored
//    value through its leading dimension, transpose flag and batch strides, and the scalars go
//    into alpha (attention's Q, K and V head transposes and the 1/sqrt(d) scaling). A Split on
//    the way is taken over too (an offset into its input) when every output of it is.
struct GemmFolds {
  struct Operand {
    const Value* root = nullptr;  // null: the operand is read as it is
    bool trans = false;           // row-major op(X) = X^T with leading dimension ld
    int64_t ld = 0;
    Dims batch_strides;  // per batch dim of the operand (its rank minus 2)
    int64_t offset = 0;  // elements from root's start
  };
  struct Fold {
    const Node* bias_add = nullptr;
    const Value* bias = nullptr;
    const Node* out_transpose = nullptr;
    Operand operand[2];
    double alpha = 1;
  };
  std::map<const Node*, Fold> by_matmul;
  std::map<const Node*, std::string> folded;  // node -> why it needs no step
};
using UsersMap = std::unordered_map<const Value*, std::vector<Node*>>;
// `exclude`: nodes that must keep their own step (e.g. members of fused groups).
GemmFolds find_gemm_folds(const Graph& g, const std::set<const Node*>& exclude = {});

}  // namespace stitch::codegen
