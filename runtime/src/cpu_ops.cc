#include "cpu_ops.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace stitch::rt {
namespace {

// Element access in the compute type (float for f32/f16/bf16, double for f64).
template <typename T>
struct Elem {
  using C = T;
  static C get(const void* p, int64_t i) { return static_cast<const T*>(p)[i]; }
  static void set(void* p, int64_t i, C v) { static_cast<T*>(p)[i] = v; }
};
template <>
struct Elem<__half> {
  using C = float;
  static C get(const void* p, int64_t i) { return __half2float(static_cast<const __half*>(p)[i]); }
  static void set(void* p, int64_t i, C v) { static_cast<__half*>(p)[i] = __float2half_rn(v); }
};
template <>
struct Elem<__nv_bfloat16> {
  using C = float;
  static C get(const void* p, int64_t i) { return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]); }
  static void set(void* p, int64_t i, C v) { static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); }
};

// GELU in the tanh form cuBLASLt's GELU epilogues compute, in the accumulator type.
template <typename C>
C gelu_tanh(C x) {
  const C k0 = C(0.7978845608028654), k1 = C(0.044715);
  return C(0.5) * x * (C(1) + std::tanh(k0 * (x + k1 * x * x * x)));
}

// `v` with a 10-bit mantissa (TF32), rounded to nearest with ties away from zero (PTX's
// cvt.rna.tf32.f32); infinities and NaNs unchanged. Which rounding cuBLAS and cuDNN apply is their
// own; the emulation gives results of the same accuracy, not the same bits.
float to_tf32(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return v;  // infinity or NaN
  // Add half the weight of the 13 dropped bits (away from zero) and drop them; a carry may reach
  // the exponent, which is the right rounding up.
  u = (u + 0x1000u) & ~0x1fffu;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// An operand of a product: as read, or rounded to TF32 (R: float32 calls with tf32).
template <bool R, typename C>
C operand(C v) {
  if constexpr (R) return to_tf32(v);
  return v;
}

template <typename T, bool R = false>
void gemm(const GemmDesc& g, const void* a, const void* b, void* c, const void* bias, const void* residual) {
  using E = Elem<T>;
  using C = typename E::C;
  std::vector<C> row(static_cast<size_t>(g.n));
  for (const auto& [oa, ob, oc] : batch_offsets(g, g.batch.size())) {
    for (int64_t i = 0; i < g.m; ++i) {
      std::fill(row.begin(), row.end(), C(0));
      for (int64_t k = 0; k < g.k; ++k) {
        const C av = operand<R>(E::get(a, oa + (g.trans_a ? k * g.lda + i : i * g.lda + k)));
        if (g.trans_b)
          for (int64_t j = 0; j < g.n; ++j) row[j] += av * operand<R>(E::get(b, ob + j * g.ldb + k));
        else
          for (int64_t j = 0; j < g.n; ++j) row[j] += av * operand<R>(E::get(b, ob + k * g.ldb + j));
      }
      for (int64_t j = 0; j < g.n; ++j) {
        const int64_t at = oc + i * g.ldc + j;
        C v = static_cast<C>(g.alpha) * row[j];
        if (g.beta != 0) v += static_cast<C>(g.beta) * E::get(c, at);
        if (bias) v += E::get(bias, j);
        if (residual) v += E::get(residual, at);
        if (g.gelu) v = gelu_tanh(v);
        if (g.relu) v = v > C(0) || v != v ? v : C(0);  // NaN propagates, as in Relu
        E::set(c, at, v);
      }
    }
  }
}

// A convolution's window with its spatial dims padded to 3 by leading size-1 axes.
struct Window3 {
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1}, st[3] = {1, 1, 1}, dl[3] = {1, 1, 1},
          pd[3] = {0, 0, 0};
  explicit Window3(const ConvDesc& p) {
    const size_t sp = p.in.size();
    for (size_t i = 0; i < sp; ++i) {
      const size_t j = 3 - sp + i;
      in[j] = p.in[i], k[j] = p.kernel[i], out[j] = p.out[i], st[j] = p.strides[i], dl[j] = p.dilations[i],
      pd[j] = p.pads[i];
    }
  }
};

template <typename T, bool R = false>
void conv(const ConvDesc& p, const void* x, const void* w, const void* bias, const void* z, void* y) {
  using E = Elem<T>;
  using C = typename E::C;
  const Window3 win(p);
  const auto &in = win.in, &k = win.k, &out = win.out, &st = win.st, &dl = win.dl, &pd = win.pd;
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  const int64_t in_plane = in[0] * in[1] * in[2], out_plane = out[0] * out[1] * out[2], kvol = k[0] * k[1] * k[2];
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t m = 0; m < p.m; ++m) {
      const int64_t g = m / mg;
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            C acc = bias ? E::get(bias, m) : C(0);
            for (int64_t c = 0; c < cg; ++c) {
              const int64_t xbase = (n * p.c + g * cg + c) * in_plane;
              const int64_t wbase = (m * cg + c) * kvol;
              for (int64_t k0 = 0; k0 < k[0]; ++k0) {
                const int64_t i0 = o0 * st[0] + k0 * dl[0] - pd[0];
                if (i0 < 0 || i0 >= in[0]) continue;
                for (int64_t k1 = 0; k1 < k[1]; ++k1) {
                  const int64_t i1 = o1 * st[1] + k1 * dl[1] - pd[1];
                  if (i1 < 0 || i1 >= in[1]) continue;
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t i2 = o2 * st[2] + k2 * dl[2] - pd[2];
                    if (i2 < 0 || i2 >= in[2]) continue;
                    acc += operand<R>(E::get(x, xbase + (i0 * in[1] + i1) * in[2] + i2)) *
                           operand<R>(E::get(w, wbase + (k0 * k[1] + k1) * k[2] + k2));
                  }
                }
              }
            }
            // cuDNN's fused call: the residual z and then ReLU, on the accumulator
            const int64_t at = (n * p.m + m) * out_plane + (o0 * out[1] + o1) * out[2] + o2;
            if (z) acc += E::get(z, at);
            if (p.relu) acc = acc > C(0) || acc != acc ? acc : C(0);  // CUDNN_PROPAGATE_NAN
            E::set(y, at, acc);
          }
    }
}

// The transposed convolution (ConvDesc), as a gather: each output sums the inputs whose window
// reaches it, over i = (o + pad - k * dilation) / stride where that divides.
template <typename T, bool R = false>
void conv_transpose(const ConvDesc& p, const void* x, const void* w, void* y) {
  using E = Elem<T>;
  using C = typename E::C;
  const Window3 win(p);
  const auto &in = win.in, &k = win.k, &out = win.out, &st = win.st, &dl = win.dl, &pd = win.pd;
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  const int64_t in_plane = in[0] * in[1] * in[2], out_plane = out[0] * out[1] * out[2],
                kvol = k[0] * k[1] * k[2];
  // The input position along one axis that kernel tap t brings to output position o, or -1.
  auto source = [&](int a, int64_t o, int64_t t) -> int64_t {
    const int64_t at = o + pd[a] - t * dl[a];
    if (at < 0 || at % st[a] != 0 || at / st[a] >= in[a]) return -1;
    return at / st[a];
  };
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t m = 0; m < p.m; ++m) {
      const int64_t g = m / mg;
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            C acc = C(0);
            for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
              const int64_t xbase = (n * p.c + c) * in_plane;
              const int64_t wbase = (c * mg + m % mg) * kvol;
              for (int64_t k0 = 0; k0 < k[0]; ++k0) {
                const int64_t i0 = source(0, o0, k0);
                if (i0 < 0) continue;
                for (int64_t k1 = 0; k1 < k[1]; ++k1) {
                  const int64_t i1 = source(1, o1, k1);
                  if (i1 < 0) continue;
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t i2 = source(2, o2, k2);
                    if (i2 < 0) continue;
                    acc += operand<R>(E::get(x, xbase + (i0 * in[1] + i1) * in[2] + i2)) *
                           operand<R>(E::get(w, wbase + (k0 * k[1] + k1) * k[2] + k2));
                  }
                }
              }
            }
            E::set(y, (n * p.m + m) * out_plane + (o0 * out[1] + o1) * out[2] + o2, acc);
          }
    }
}

}  // namespace

void cpu_gemm(const GemmDesc& g, const std::string& dtype, const void* a, const void* b, void* c,
              const void* bias, const void* residual, bool tf32) {
  if (dtype == "f32")
    return tf32 ? gemm<float, true>(g, a, b, c, bias, residual) : gemm<float>(g, a, b, c, bias, residual);
  if (dtype == "f64") return gemm<double>(g, a, b, c, bias, residual);
  if (dtype == "f16") return gemm<__half>(g, a, b, c, bias, residual);
  if (dtype == "bf16") return gemm<__nv_bfloat16>(g, a, b, c, bias, residual);
  fail(3, fmt::format("gemm on {} is not implemented on the emu backend", dtype));
}

void cpu_conv(const ConvDesc& p, const std::string& dtype, const void* x, const void* w, const void* bias,
              const void* z, void* y, bool tf32) {
  if (p.in.empty() || p.in.size() > 3) fail(3, "conv with other than 1 to 3 spatial dims on the emu backend");
  if (dtype == "f32") return tf32 ? conv<float, true>(p, x, w, bias, z, y) : conv<float>(p, x, w, bias, z, y);
  if (dtype == "f64") return conv<double>(p, x, w, bias, z, y);
  if (dtype == "f16") return conv<__half>(p, x, w, bias, z, y);
  if (dtype == "bf16") return conv<__nv_bfloat16>(p, x, w, bias, z, y);
  fail(3, fmt::format("conv on {} is not implemented on the emu backend", dtype));
}

void cpu_conv_transpose(const ConvDesc& p, const std::string& dtype, const void* x, const void* w, void* y,
                        bool tf32) {
  if (p.in.empty() || p.in.size() > 3)
    fail(3, "conv_transpose with other than 1 to 3 spatial dims on the emu backend");
  if (dtype == "f32")
    return tf32 ? conv_transpose<float, true>(p, x, w, y) : conv_transpose<float>(p, x, w, y);
  if (dtype == "f64") return conv_transpose<double>(p, x, w, y);
  if (dtype == "f16") return conv_transpose<__half>(p, x, w, y);
  if (dtype == "bf16") return conv_transpose<__nv_bfloat16>(p, x, w, y);
  fail(3, fmt::format("conv_transpose on {} is not implemented on the emu backend", dtype));
}

}  // namespace stitch::rt
