// StitchRowSubstitution, the compiler's own op for a triangular solve written out row by row.
//
// The chunked gated delta rule (Qwen3.5's and OLMo hybrid's linear attention, as transformers
// writes it) inverts a unit lower-triangular matrix by forward substitution, one row a step:
//
//   for i in range(first, last + 1):
//       row = attn[..., i, :i].clone()
//       attn[..., i, :i] = row + (row.unsqueeze(-1) * attn[..., :i, :i]).sum(-2)
//
// Exported, each step is a dozen nodes (a Gather of row i, Slices, a Mul, a ReduceSum, an Add and
// the two scatters that write the row back), and the next step reads the whole matrix the step
// wrote, so no two steps can share a kernel: 63 steps of a 64 x 64 matrix were about 180 kernels.
// passes/fold_row_substitutions.cc finds such a run of steps and writes it as one node of this op:
// input 0 is the matrix before step `first`, output 0 the matrix after step `last` (float32, the
// matrix in the last two axes, any leading axes), attributes "first" and "last" (1 <= first <= last
// < n), and "steps_of", the name of the node that wrote the last step's matrix (for messages).
// Optional input 1 is a constant added to the result, of n x n elements (leading axes of size 1
// allowed) broadcast over the leading axes: the solve's `attn + torch.eye(chunk_size)`.
//
// Step i, for each column k < i: S[i][k] = a[k] + sum over j < i of a[j] * S[j][k], where a is row i
// as it was before the step and S the matrix as the earlier steps left it. Entries on and above the
// diagonal of row i, and rows outside [first, last], keep their values. The reference computes
// exactly what the written-out steps compute on the reference interpreter: each product rounded to
// float, the products summed in double from 0 in order of j, rounded to float, then added to a[k];
// then the addend, as a float Add.
// Each column depends only on itself and on the rows' values before their steps, so the kernel
// (codegen/lower_segment_threads.cc) runs a thread per column of each matrix through the steps in order.
#pragma once

#include "ir/graph.h"

namespace stitch::ops {

inline constexpr const char* kRowSubstitution = "StitchRowSubstitution";

// Whether `v` can be StitchRowSubstitution's addend for matrices of `size` x `size`: a float32
// constant whose dims are [size, size] after any leading 1s.
bool row_substitution_addend(const Value* v, int64_t size);

}  // namespace stitch::ops
