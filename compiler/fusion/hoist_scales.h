// Row scales moved past a GEMM: (x * r * c) W = r * (x (diag(c) W)) when r holds one value per row
// of x (a [..., 1] factor, such as RMSNorm's 1/sqrt(mean(x^2) + eps)) and c one constant per column
// (RMSNorm's weight). The column scales go into a new constant weight, the row scales multiply the
// product, and the normalized activation is never stored: the row scale and its reduction move
// into the kernel that reads the product (LLaMA's SiLU gate), so the norm needs no kernel of its
// own. A GEMM with a residual epilogue writes the norm's input (find_gemm_folds), and the GEMM
// after the norm reads that directly.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// For every MatMul whose B is a constant [k, n] matrix and whose A is, through Mul, Div (by a
// factor) and Casts between float types, each read only by the next, the product of exactly one value
// of A's shape, at least one row factor (last dim 1, the others 1 or A's) and any number of
// constant column factors ([k] or [1, ..., k], or scalars): the MatMul reads that value with the
// column factors folded into its weight, and Mul/Div nodes apply the row factors to its product.
// A itself may have other readers (an MoE's router and its experts' GEMM read one norm): the chain
// then stays for them, and the kernel after this GEMM computes the row factors again from the
// norm's input, so it no longer waits for the norm's kernel (the two can share a launch; the
// estimate decides, hoist_row_scales_if_cheaper).
// Only where every reader of the product (through views and Slices) is a kernel op, none a GEMM
// or convolution (those would need the scaled product stored, which is what the norm did), and
// the product is not a graph output; or, for a reader, where every path from it to a GEMM of two
// computed operands is linear in the product row by row (views, data movement, Neg, Add/Sub of
// two such values, Mul/Div by values the product does not reach: rotary embeddings). Those paths
// read the unscaled product and the row factors move past the GEMM: Q's rows and K's rows become
// the rows and columns of Q.K^T (a Mul on the scores, which the softmax's kernel applies), V's rows
// the columns of P (P diag(r) V: a Mul on P, in the same kernel). A pre-norm attention block's
// RMSNorm then needs no kernel: its row scale is computed where nothing but the softmax waits for
// it, beside the rotary embeddings in one launch. Half types whose norm computes in float32 keep
// the factors off attention's GEMMs (Q.K^T of unscaled rows could overflow the half type, and P
// would take a float32 factor): the product is scaled where it is read, as for kernel readers, and
// the GEMMs read the scaled product as before; the kernel that rotates Q and K (a row kernel
// storing the heads moved) then computes the norm's statistics too. The MatMul reads that value in A's
// type: itself, or the value a widening Cast made it from (a half model's norm computes in float32: the GEMM
// reads the half input, and the product is cast to the row factors' type, scaled and cast back). Returns one
// line per MatMul rewritten.
// Nodes named in `keep` (--no-fuse) are left as they are: no MatMul or chain node among them.

// LayerNorms moved past a GEMM, in float32 and float64 only: (((x - m) * r * c) + b) W =
// r * (x W' - m s) + b W, where m and r hold one value per row of x (a LayerNorm's mean and
// 1 / sqrt(variance + eps)), c and b one constant per column (its weight and bias), W' = diag(c) W
// and s the column sums of W'. The MatMul reads x, the un-normalized input, which a GEMM's residual
// epilogue writes, and the mean, the scale and the two constant rows are applied to the product in
// the kernel that reads it (BERT's GELU, CLIP's quick GELU): the norm needs no kernel before the
// GEMM. The decomposed form (ReduceMean, Sub, Pow, ..., Div, Mul, Add) and the LayerNormalization
// op (over the last axis, its Mean and InvStdDev outputs unused) both match; the op is first
// written as those nodes. Where the norm's output has other readers
// (a post-norm model's residual), it stays for them. The same conditions on the product's readers
// as hoist_row_scales. x W' - m s cancels where the rows' mean is large against their spread:
// measured on emu (test_hoist_norms.cc), within float32 kernel tolerance up to a mean 17 deviations
// from zero, and beyond that 2 to 3 times the error float32 already makes storing such rows. Half
// types are left alone (their product is stored in the half type, a step 8000 times float32's).
// --no-hoist-layer-norms keeps every norm in front of its GEMM. Returns one line per MatMul
// rewritten. kOther / kAttention: only the MatMuls whose product does not / does reach a MatMul
// of two computed operands (attention) through views and element-wise ops.
enum class NormReaders { kAll, kOther, kAttention };
// hoist_row_scales: kOther only where every reader of the product is a kernel op, kAttention
// only where some read it on paths to attention's GEMMs (below), kAll both.
StatusOr<std::vector<std::string>> hoist_row_scales(Graph& g, const std::set<std::string>& keep = {},
                                                    NormReaders readers = NormReaders::kAll);
StatusOr<std::vector<std::string>> hoist_layer_norms(Graph& g, const std::set<std::string>& keep = {},
                                                     NormReaders readers = NormReaders::kAll);

// hoist_layer_norms through rewrite_if_cheaper, twice: the norms feeding other work first, then
// those feeding attention, each kept when the plan's estimate is no slower.
StatusOr<RewriteResult> hoist_layer_norms_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                     const std::optional<Cost>& before = std::nullopt);

// hoist_row_scales through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten graph
// is estimated no slower, since a row scale applied in a kernel that would not otherwise exist
// costs a launch.
StatusOr<RewriteResult> hoist_row_scales_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                    const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
