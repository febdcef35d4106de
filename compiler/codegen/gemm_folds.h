// GEMM folds: work next to a MatMul that its GEMM call does instead of a kernel, found on the
// whole graph before fusion planning (the planner then leaves those nodes out of its groups, and
// the schedule gives them no step).
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/gemm_activation.h"
#include "ir/graph.h"

namespace stitch::codegen {

// Work next to a MatMul that its GEMM call does instead of a kernel (found on the whole graph,
// before fusion planning; the nodes involved then need no step):
//  - bias: the MatMul's output is read only by an Add of a vector of its n columns that is a
//    constant or a graph input (ready before the call); the call adds it in its epilogue and
//    writes the Add's output;
//  - residual: the (biased) product is read only by an Add of a value of the same shape and type
//    (a residual connection) whose producer comes before the MatMul in graph order; the call
//    reads that value as its C (beta 1, cuBLASLt's C and D apart) and writes the Add's output.
//    No activation or output transpose then: cuBLASLt adds C before its epilogue;
//  - output transpose: the (biased) product, through views, is read only by a Transpose that
//    leaves each row of the product in one place (columns stepping by 1); the call writes the
//    transposed layout through ldc and per-batch-dim strides, sub-axes where a view merged batch
//    dims (attention's context [b*h, s, d] written straight into [b, s, h, d]);
//  - operands: an operand reached from a stored value through views, Transposes and
//    multiplications by a scalar constant, each read only by the next; the call reads the stored
//    value through its leading dimension, transpose flag and batch strides, and the scalars go
//    into alpha (attention's Q, K and V head transposes and the 1/sqrt(d) scaling). A Split on
//    the way is taken over too (an offset into its input) when every output of it is, and an
//    Expand of batch axes is a stride of 0 (grouped-query attention's repeated K/V heads);
//  - activation: the (biased) product, through views, is read only by nodes computing GELU in
//    its tanh form (match_activation), the function cuBLASLt's GELU epilogue computes; the call
//    applies it and writes the activation's value (MatMul and Gemm alike). The erf form (BERT's)
//    is folded only with FoldOptions::approximate_gelu (it then runs as the tanh form, up to
//    4.7e-4 away), else it stays a kernel and `notes` says why.
// A Conv (f32 or f16) takes over a residual Add (as MatMul's residual) and then a ReLU, which
// cuDNN's fused convolution computes in that order: y = relu(conv(x) + bias + z).
struct FoldOptions {
  bool on = false;                // fold at all (off for --fusion none: the unfused baseline)
  bool approximate_gelu = false;  // the erf form of GELU may run as cuBLASLt's tanh form
  FoldOptions(bool fold = false, bool approximate = false) : on(fold), approximate_gelu(approximate) {}
  explicit operator bool() const { return on; }
};

// The strided sub-axes of one axis of an operand layout, outermost first, (size, stride) each;
// none for a size-1 axis. Several where a view merged axes no single stride describes.
using SubAxes = std::vector<std::pair<int64_t, int64_t>>;

struct GemmFolds {
  struct Operand {
    const Value* root = nullptr;  // null: the operand is read as it is
    bool trans = false;           // row-major op(X) = X^T with leading dimension ld
    int64_t ld = 0;
    // Per batch dim of the operand (its rank minus 2). Several sub-axes where a view merged a
    // repeat into an axis: grouped-query attention's K/V heads, each read by several query heads,
    // are an Expand (stride 0) merged with the kv-head axis.
    std::vector<SubAxes> batch_axes;
    int64_t offset = 0;  // elements from root's start
  };
  struct Fold {
    const Node* bias_add = nullptr;
    const Value* bias = nullptr;
    const Node* residual_add = nullptr;
    const Value* residual = nullptr;  // added to the (biased) product: read as the call's C
    const Node* out_transpose = nullptr;
    // With out_transpose: per product axis, its sub-axes in the Transpose's output.
    std::vector<SubAxes> out_axes;
    Operand operand[2];
    double alpha = 1;
    Activation activation = Activation::kNone;
    const Value* activation_out = nullptr;  // what the call writes when it applies an activation
  };
  std::map<const Node*, Fold> by_matmul;      // MatMul, Gemm and Conv nodes
  std::map<const Node*, std::string> folded;  // node -> why it needs no step
  std::vector<std::string> notes;             // activations left as kernels, and why
};
using UsersMap = std::unordered_map<const Value*, std::vector<Node*>>;
// `exclude`: nodes that must keep their own step (e.g. members of fused groups).
GemmFolds find_gemm_folds(const Graph& g, const std::set<const Node*>& exclude = {}, const FoldOptions& o = {});

}  // namespace stitch::codegen
