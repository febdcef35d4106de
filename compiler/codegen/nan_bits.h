// Which kernels need stitch_dev::cvt's bitwise NaN handling for float16 and bfloat16
// (runtime/device/include/stitch/device/stitch_device.cuh). The GPU's own conversions give the
// canonical NaN (bench/gpu/nan_cvt.cu, on an H200), so cvt keeps a NaN's sign and payload by its
// bits, at a few integer instructions for every element converted: about 1 us of each of
// gpt2_tiny_f16's 5.7 us layer-norm kernels at batch 128 x sequence 64
// (bench/gpu/results/2026-12-04-h200, calls 4 and 5). The bits matter only where a value goes from
// a kernel's input to its output unchanged (a view, a copy, a select, a sign change, a maximum, a
// cast, BitCast): arithmetic gives the canonical NaN whatever its operands' payloads. A kernel none
// of whose outputs can hold such a value converts with cvt_plain, the conversion instructions alone.
#pragma once

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "codegen/kernel.h"
#include "ir/graph.h"

namespace stitch::codegen {

// Ops whose float outputs are computed, never one of their inputs' elements passed on (a NaN
// input gives the canonical NaN). Ops not listed are taken to pass elements on.
inline bool computes_fresh_values(const std::string& op) {
  static const std::string kOps =
      " Add Sub Mul Div Pow Sqrt Reciprocal Exp Log Tanh Sigmoid Erf Sin Cos Softplus Softsign Gelu FastGelu"
      " BiasGelu QuickGelu Softmax LogSoftmax LayerNormalization RMSNormalization "
      "SimplifiedLayerNormalization"
      " SkipLayerNormalization SkipSimplifiedLayerNormalization ReduceSum ReduceMean ReduceProd ReduceL1"
      " ReduceL2 ReduceSumSquare ReduceLogSum ReduceLogSumExp MatMul Gemm DequantizeLinear ";
  return !op.empty() && op.find(' ') == std::string::npos && kOps.find(" " + op + " ") != std::string::npos;
}

// Whether one of `k`'s outputs can hold an element of one of its inputs unchanged, by the ops on
// the way (its workspace and the fault word aside). Constants of up to kSmallConstant elements are
// looked at: one without a NaN passes none on.
inline constexpr int64_t kSmallConstant = 4096;
inline bool passes_elements_on(const Kernel& k) {
  const std::set<const Node*> in_kernel(k.nodes.begin(), k.nodes.end());
  std::map<const Value*, bool> memo;
  auto passes = [&](auto&& self, const Value* v) -> bool {
    if (!v) return false;
    // A BitCast's result is its input's bits, whatever the types either side: float16 bits read as
    // an integer, or an integer's bits stored as a float16, go through the conversions.
    if (v->producer && in_kernel.count(v->producer) && v->producer->op_type == "BitCast") return true;
    if (!is_float(v->dtype)) return false;
    if (v->constant && v->constant->size() <= kSmallConstant) {  // a mask's fill, a scale: no NaN in it?
      for (int64_t i = 0; i < v->constant->size(); ++i)
        if (std::isnan(v->constant->get_f64(i))) return true;
      return false;
    }
    if (!v->producer || !in_kernel.count(v->producer)) return true;  // read from outside the kernel
    if (auto it = memo.find(v); it != memo.end()) return it->second;
    memo[v] = true;  // a cycle cannot be, but stays conservative
    bool r = false;
    if (!computes_fresh_values(v->producer->op_type))
      for (const Value* in : v->producer->inputs) r = r || self(self, in);
    return memo[v] = r;
  };
  for (const KernelParam& p : k.params) {
    if (!p.output || p.value == fault_word() || (k.workspace && p.value == k.workspace.get())) continue;
    if (passes(passes, p.value)) return true;
  }
  return false;
}

// Gives `k` the plain conversions where none of its outputs can hold an input's element unchanged.
inline void use_plain_conversions_where_bits_cannot_show(Kernel& k) {
  if (passes_elements_on(k)) return;
  const std::string from = "stitch_dev::cvt<", to = "stitch_dev::cvt_plain<";
  for (size_t at = k.source.find(from); at != std::string::npos; at = k.source.find(from, at + to.size()))
    k.source.replace(at, from.size(), to);
}

}  // namespace stitch::codegen
