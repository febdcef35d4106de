// CPU implementations of the library calls, for the emu backend: the same parameters the cuda
// backend hands to cuBLAS and cuDNN, computed with float accumulation like the GPU libraries.
#pragma once

#include "model.h"

namespace stitch::rt {

// C = alpha * op(A) op(B) + beta * C over the batch dims; dtype f32, f64 or f16.
// bias: n elements added to every row of C after the product (GemmDesc::bias), else null.
// residual: a tensor laid out as C, added after the bias (GemmDesc::residual), else null.
// tf32: f32 operands rounded to TF32 before each product (cpu_ops.cc), as the GPU's tensor cores
// take them where the artifact asks (ModelData::tf32); sums stay float32.
void cpu_gemm(const GemmDesc& g, const std::string& dtype, const void* a, const void* b, void* c,
              const void* bias = nullptr, const void* residual = nullptr, bool tf32 = false);

// Y = conv(X, W) (+ bias per output channel); NCHW with 1 to 3 spatial dims, groups.
// z: the residual added before ReLU (p.residual), or null. tf32: as for cpu_gemm.
void cpu_conv(const ConvDesc& p, const std::string& dtype, const void* x, const void* w, const void* bias,
              const void* z, void* y, bool tf32 = false);

// Y = the transposed convolution of X by W [C, M / group, kernel...] (ConvDesc's conv_transpose
// form: cuDNN's backward-data convolution); tf32: as for cpu_gemm.
void cpu_conv_transpose(const ConvDesc& p, const std::string& dtype, const void* x, const void* w, void* y,
                        bool tf32 = false);

}  // namespace stitch::rt
