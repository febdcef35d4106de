// The CPU emulation layer's device side. g++ compiles an unchanged `.cu` file with
//   g++ -x c++ -std=c++20 -include stitch/emu/emu.h -I<emu include> -I<cuda include> file.cu
// and links it against libstitch_emu. Each CUDA thread runs as a fiber; see
// runtime/emu/README.md for the execution model and SUPPORTED.md for what is emulated.
#pragma once

#define __STITCH_EMU__ 1

// Static __shared__ variables are per block. A block runs on one OS thread from start to end
// and an OS thread runs one block at a time, so a thread_local is exactly one block's copy.
// Must be defined before CUDA's host_defines.h, which otherwise defines it as nothing.
#ifndef __shared__
#define __shared__ static thread_local
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "stitch/emu/launch.h"
#include "stitch/emu/state.h"

#define __launch_bounds__(...)
#ifndef __grid_constant__
#define __grid_constant__
#endif

#define threadIdx (::stitch::emu::detail::t_thread->tid)
#define blockIdx (::stitch::emu::detail::t_block->block_idx)
#define blockDim (::stitch::emu::detail::t_block->block_dim)
#define gridDim (::stitch::emu::detail::t_block->grid_dim)
constexpr int warpSize = 32;

namespace stitch::emu::detail {
using Site = std::source_location;

template <class T>
T shuffle(WarpOp op, unsigned mask, T value, int arg, int width, const Site& site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "shuffle operands are at most 16 bytes");
  ThreadState* t = t_thread;
  std::memcpy(t->in, &value, sizeof(T));
  warp_collective(op, mask, arg, width, site);
  T result;
  std::memcpy(&result, t_thread->out, sizeof(T));
  return result;
}

inline int vote(WarpOp op, unsigned mask, int pred, const Site& site) {
  t_thread->pred = pred;
  warp_collective(op, mask, 0, 32, site);
  return t_thread->result;
}

template <class T>
T warp_reduce(WarpOp op, unsigned mask, T value, const Site& site) {
  ThreadState* t = t_thread;
  const std::uint64_t bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(value));
  t->in[0] = bits;
  t->is_signed = std::is_signed_v<T>;
  warp_collective(op, mask, 0, 32, site);
  return static_cast<T>(t_thread->out[0]);
}

// Atomics run on real hardware atomics (blocks run in parallel). A thread doing many atomics
// in a row gives up the CPU now and then, so spin locks between threads of a block progress.
inline void note_atomic() {
  if ((++t_thread->atomics & 63u) == 0) yield();
}

// Relaxed atomic loads and compare-and-swaps on plain memory, through the compiler's builtins
// (what std::atomic_ref does; <atomic> itself cost every emulation library's compile about a tenth
// of a second). `expected` takes the value found when the swap fails.
template <class T>
T atomic_load(T* address) {
  T value;
  __atomic_load(address, &value, __ATOMIC_RELAXED);
  return value;
}
template <class T>
bool atomic_cas(T* address, T& expected, T desired, bool weak) {
  return __atomic_compare_exchange(address, &expected, &desired, weak, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

template <class T, class F>
T atomic_update(T* address, F f) {
  note_atomic();
  T old = atomic_load(address);
  while (!atomic_cas(address, old, f(old), true)) {
  }
  return old;
}

template <class T>
T atomic_add(T* address, T value) {
  if constexpr (std::is_integral_v<T>) {
    note_atomic();
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
  } else {
    return atomic_update(address, [value](T old) { return old + value; });
  }
}

// 16-bit floating-point atomics through a 16-bit compare-and-swap.
template <class H, class F>
H atomic_update16(H* address, F f) {
  static_assert(sizeof(H) == 2);
  note_atomic();
  auto* bits = reinterpret_cast<std::uint16_t*>(address);
  std::uint16_t old = atomic_load(bits);
  for (;;) {
    const H old_h = std::bit_cast<H>(old);
    if (atomic_cas(bits, old, std::bit_cast<std::uint16_t>(f(old_h)), true)) return old_h;
  }
}

}  // namespace stitch::emu::detail

#define STITCH_EMU_SITE ::std::source_location site = ::std::source_location::current()

// ---- Barriers ----------------------------------------------------------------------------
inline void __syncthreads(STITCH_EMU_SITE) {
  ::stitch::emu::detail::block_barrier(::stitch::emu::detail::BarrierKind::kSync, 1, site);
}
inline int __syncthreads_count(int pred, STITCH_EMU_SITE) {
  return ::stitch::emu::detail::block_barrier(::stitch::emu::detail::BarrierKind::kCount, pred, site);
}
inline int __syncthreads_and(int pred, STITCH_EMU_SITE) {
  return ::stitch::emu::detail::block_barrier(::stitch::emu::detail::BarrierKind::kAnd, pred, site);
}
inline int __syncthreads_or(int pred, STITCH_EMU_SITE) {
  return ::stitch::emu::detail::block_barrier(::stitch::emu::detail::BarrierKind::kOr, pred, site);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, STITCH_EMU_SITE) {
  ::stitch::emu::detail::warp_collective(::stitch::emu::detail::WarpOp::kSyncwarp, mask, 0, 32, site);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __nanosleep(unsigned) { ::stitch::emu::detail::yield(); }
[[noreturn]] inline void __trap(STITCH_EMU_SITE) { ::stitch::emu::detail::trap(site); }

// ---- Warp shuffles, votes, reductions ---------------------------------------------------
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize, STITCH_EMU_SITE) {
  return ::stitch::emu::detail::shuffle(::stitch::emu::detail::WarpOp::kShfl, mask, var, src_lane, width,
                                        site);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize, STITCH_EMU_SITE) {
  return ::stitch::emu::detail::shuffle(::stitch::emu::detail::WarpOp::kShflUp, mask, var,
                                        static_cast<int>(delta), width, site);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize, STITCH_EMU_SITE) {
  return ::stitch::emu::detail::shuffle(::stitch::emu::detail::WarpOp::kShflDown, mask, var,
                                        static_cast<int>(delta), width, site);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize, STITCH_EMU_SITE) {
  return ::stitch::emu::detail::shuffle(::stitch::emu::detail::WarpOp::kShflXor, mask, var, lane_mask, width,
                                        site);
}
inline unsigned __ballot_sync(unsigned mask, int pred, STITCH_EMU_SITE) {
  return static_cast<unsigned>(
      ::stitch::emu::detail::vote(::stitch::emu::detail::WarpOp::kBallot, mask, pred, site));
}
inline int __any_sync(unsigned mask, int pred, STITCH_EMU_SITE) {
  return ::stitch::emu::detail::vote(::stitch::emu::detail::WarpOp::kAny, mask, pred, site);
}
inline int __all_sync(unsigned mask, int pred, STITCH_EMU_SITE) {
  return ::stitch::emu::detail::vote(::stitch::emu::detail::WarpOp::kAll, mask, pred, site);
}
#define STITCH_EMU_WARP_REDUCE(name, op, T)                                                          \
  inline T name(unsigned mask, T value, STITCH_EMU_SITE) {                                           \
    return ::stitch::emu::detail::warp_reduce(::stitch::emu::detail::WarpOp::op, mask, value, site); \
  }
STITCH_EMU_WARP_REDUCE(__reduce_add_sync, kReduceAdd, unsigned)
STITCH_EMU_WARP_REDUCE(__reduce_add_sync, kReduceAdd, int)
STITCH_EMU_WARP_REDUCE(__reduce_min_sync, kReduceMin, unsigned)
STITCH_EMU_WARP_REDUCE(__reduce_min_sync, kReduceMin, int)
STITCH_EMU_WARP_REDUCE(__reduce_max_sync, kReduceMax, unsigned)
STITCH_EMU_WARP_REDUCE(__reduce_max_sync, kReduceMax, int)
STITCH_EMU_WARP_REDUCE(__reduce_and_sync, kReduceAnd, unsigned)
STITCH_EMU_WARP_REDUCE(__reduce_or_sync, kReduceOr, unsigned)
STITCH_EMU_WARP_REDUCE(__reduce_xor_sync, kReduceXor, unsigned)
#undef STITCH_EMU_WARP_REDUCE

// ---- Atomics (global and shared memory alike) --------------------------------------------
inline int atomicAdd(int* a, int v) { return ::stitch::emu::detail::atomic_add(a, v); }
inline unsigned atomicAdd(unsigned* a, unsigned v) { return ::stitch::emu::detail::atomic_add(a, v); }
inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) {
  return ::stitch::emu::detail::atomic_add(a, v);
}
inline float atomicAdd(float* a, float v) { return ::stitch::emu::detail::atomic_add(a, v); }
inline double atomicAdd(double* a, double v) { return ::stitch::emu::detail::atomic_add(a, v); }
inline __half atomicAdd(__half* a, __half v) {
  return ::stitch::emu::detail::atomic_update16(a, [v](__half o) { return __hadd(o, v); });
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* a, __nv_bfloat16 v) {
  return ::stitch::emu::detail::atomic_update16(a, [v](__nv_bfloat16 o) { return __hadd(o, v); });
}
inline int atomicSub(int* a, int v) { return ::stitch::emu::detail::atomic_add(a, -v); }
inline unsigned atomicSub(unsigned* a, unsigned v) { return ::stitch::emu::detail::atomic_add(a, 0u - v); }
#define STITCH_EMU_ATOMIC_FN(name, T, expr)                                      \
  inline T name(T* a, T v) {                                                     \
    return ::stitch::emu::detail::atomic_update(a, [v](T o) { return (expr); }); \
  }
STITCH_EMU_ATOMIC_FN(atomicExch, int, (static_cast<void>(o), v))
STITCH_EMU_ATOMIC_FN(atomicExch, unsigned, (static_cast<void>(o), v))
STITCH_EMU_ATOMIC_FN(atomicExch, unsigned long long, (static_cast<void>(o), v))
STITCH_EMU_ATOMIC_FN(atomicExch, float, (static_cast<void>(o), v))
STITCH_EMU_ATOMIC_FN(atomicMin, int, (o < v ? o : v))
STITCH_EMU_ATOMIC_FN(atomicMin, unsigned, (o < v ? o : v))
STITCH_EMU_ATOMIC_FN(atomicMin, long long, (o < v ? o : v))
STITCH_EMU_ATOMIC_FN(atomicMin, unsigned long long, (o < v ? o : v))
STITCH_EMU_ATOMIC_FN(atomicMax, int, (o > v ? o : v))
STITCH_EMU_ATOMIC_FN(atomicMax, unsigned, (o > v ? o : v))
STITCH_EMU_ATOMIC_FN(atomicMax, long long, (o > v ? o : v))
STITCH_EMU_ATOMIC_FN(atomicMax, unsigned long long, (o > v ? o : v))
STITCH_EMU_ATOMIC_FN(atomicAnd, int, (o & v))
STITCH_EMU_ATOMIC_FN(atomicAnd, unsigned, (o & v))
STITCH_EMU_ATOMIC_FN(atomicAnd, unsigned long long, (o & v))
STITCH_EMU_ATOMIC_FN(atomicOr, int, (o | v))
STITCH_EMU_ATOMIC_FN(atomicOr, unsigned, (o | v))
STITCH_EMU_ATOMIC_FN(atomicOr, unsigned long long, (o | v))
STITCH_EMU_ATOMIC_FN(atomicXor, int, (o ^ v))
STITCH_EMU_ATOMIC_FN(atomicXor, unsigned, (o ^ v))
STITCH_EMU_ATOMIC_FN(atomicXor, unsigned long long, (o ^ v))
STITCH_EMU_ATOMIC_FN(atomicInc, unsigned, (o >= v ? 0u : o + 1u))
STITCH_EMU_ATOMIC_FN(atomicDec, unsigned, ((o == 0u || o > v) ? v : o - 1u))
#undef STITCH_EMU_ATOMIC_FN
template <class T>
T stitch_emu_atomic_cas(T* a, T compare, T value) {
  ::stitch::emu::detail::note_atomic();
  ::stitch::emu::detail::atomic_cas(a, compare, value, false);
  return compare;
}
inline int atomicCAS(int* a, int c, int v) { return stitch_emu_atomic_cas(a, c, v); }
inline unsigned atomicCAS(unsigned* a, unsigned c, unsigned v) { return stitch_emu_atomic_cas(a, c, v); }
inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long c, unsigned long long v) {
  return stitch_emu_atomic_cas(a, c, v);
}
inline unsigned short atomicCAS(unsigned short* a, unsigned short c, unsigned short v) {
  return stitch_emu_atomic_cas(a, c, v);
}

// ---- Cache-hinted loads and stores --------------------------------------------------------
template <class T>
T __ldg(const T* p) {
  return *p;
}
template <class T>
T __ldca(const T* p) {
  return *p;
}
template <class T>
T __ldcg(const T* p) {
  return *p;
}
template <class T>
T __ldcs(const T* p) {
  return *p;
}
template <class T>
T __ldlu(const T* p) {
  return *p;
}
template <class T>
T __ldcv(const T* p) {
  return *p;
}
template <class T>
void __stwb(T* p, T v) {
  *p = v;
}
template <class T>
void __stcg(T* p, T v) {
  *p = v;
}
template <class T>
void __stcs(T* p, T v) {
  *p = v;
}
template <class T>
void __stwt(T* p, T v) {
  *p = v;
}

// ---- Integer and float intrinsics ---------------------------------------------------------
// The fast-math forms are computed precisely: emulated numbers are not bitwise GPU numbers.
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / std::cbrt(x); }
inline float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678118654752f); }
inline double normcdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return std::fma(x, y, z); }
inline double __fma_rn(double x, double y, double z) { return std::fma(x, y, z); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(std::trunc(x)); }
inline int __float2int_rd(float x) { return static_cast<int>(std::floor(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(std::ceil(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(std::nearbyint(x)); }
inline long long __float2ll_rn(float x) { return static_cast<long long>(std::nearbyint(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline int __float_as_int(float x) {
  int r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline unsigned __float_as_uint(float x) {
  unsigned r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline float __int_as_float(int x) {
  float r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline float __uint_as_float(unsigned x) {
  float r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline long long __double_as_longlong(double x) {
  long long r;
  std::memcpy(&r, &x, 8);
  return r;
}
inline double __longlong_as_double(long long x) {
  double r;
  std::memcpy(&r, &x, 8);
  return r;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline int __mul24(int x, int y) { return (x << 8 >> 8) * (y << 8 >> 8); }
inline unsigned __umul24(unsigned x, unsigned y) { return (x & 0xffffffu) * (y & 0xffffffu); }
inline int __mulhi(int x, int y) { return static_cast<int>((static_cast<long long>(x) * y) >> 32); }
inline unsigned __umulhi(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) * y) >> 32);
}
inline long long clock64() { return static_cast<long long>(__builtin_ia32_rdtsc()); }

// CUDA's global min/max overloads.
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned min(int a, unsigned b) { return min(static_cast<unsigned>(a), b); }
inline unsigned min(unsigned a, int b) { return min(a, static_cast<unsigned>(b)); }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline unsigned max(int a, unsigned b) { return max(static_cast<unsigned>(a), b); }
inline unsigned max(unsigned a, int b) { return max(a, static_cast<unsigned>(b)); }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// ---- half and bfloat16 math that CUDA's headers define for the device only ----------------
#define STITCH_EMU_HALF_UNARY(name, name2, fn)                                                          \
  inline __half name(__half x) { return __double2half(fn(static_cast<double>(__half2float(x)))); }      \
  inline __nv_bfloat16 name(__nv_bfloat16 x) {                                                          \
    return __double2bfloat16(fn(static_cast<double>(__bfloat162float(x))));                             \
  }                                                                                                     \
  inline __half2 name2(__half2 x) { return __halves2half2(name(__low2half(x)), name(__high2half(x))); } \
  inline __nv_bfloat162 name2(__nv_bfloat162 x) {                                                       \
    return __halves2bfloat162(name(__low2bfloat16(x)), name(__high2bfloat16(x)));                       \
  }
namespace stitch::emu::detail {
inline double rsqrt_d(double x) { return 1.0 / std::sqrt(x); }
inline double rcp_d(double x) { return 1.0 / x; }
inline double exp10_d(double x) { return std::pow(10.0, x); }
}  // namespace stitch::emu::detail
STITCH_EMU_HALF_UNARY(hexp, h2exp, std::exp)
STITCH_EMU_HALF_UNARY(hexp2, h2exp2, std::exp2)
STITCH_EMU_HALF_UNARY(hexp10, h2exp10, ::stitch::emu::detail::exp10_d)
STITCH_EMU_HALF_UNARY(hlog, h2log, std::log)
STITCH_EMU_HALF_UNARY(hlog2, h2log2, std::log2)
STITCH_EMU_HALF_UNARY(hlog10, h2log10, std::log10)
STITCH_EMU_HALF_UNARY(hsqrt, h2sqrt, std::sqrt)
STITCH_EMU_HALF_UNARY(hrsqrt, h2rsqrt, ::stitch::emu::detail::rsqrt_d)
STITCH_EMU_HALF_UNARY(hrcp, h2rcp, ::stitch::emu::detail::rcp_d)
STITCH_EMU_HALF_UNARY(htanh, h2tanh, std::tanh)
STITCH_EMU_HALF_UNARY(hsin, h2sin, std::sin)
STITCH_EMU_HALF_UNARY(hcos, h2cos, std::cos)
STITCH_EMU_HALF_UNARY(hfloor, h2floor, std::floor)
STITCH_EMU_HALF_UNARY(hceil, h2ceil, std::ceil)
STITCH_EMU_HALF_UNARY(htrunc, h2trunc, std::trunc)
STITCH_EMU_HALF_UNARY(hrint, h2rint, std::nearbyint)
#undef STITCH_EMU_HALF_UNARY
// Products of two halves are exact in double, so one rounding to half is a true fused fma.
inline __half __hfma(__half a, __half b, __half c) {
  return __double2half(static_cast<double>(__half2float(a)) * __half2float(b) + __half2float(c));
}
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __double2bfloat16(static_cast<double>(__bfloat162float(a)) * __bfloat162float(b) +
                           __bfloat162float(c));
}
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __halves2half2(__hfma(__low2half(a), __low2half(b), __low2half(c)),
                        __hfma(__high2half(a), __high2half(b), __high2half(c)));
}
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return __halves2bfloat162(__hfma(__low2bfloat16(a), __low2bfloat16(b), __low2bfloat16(c)),
                            __hfma(__high2bfloat16(a), __high2bfloat16(b), __high2bfloat16(c)));
}
inline int __half2int_rn(__half h) { return __float2int_rn(__half2float(h)); }
inline int __bfloat162int_rn(__nv_bfloat16 h) { return __float2int_rn(__bfloat162float(h)); }

#include "stitch/device/compat.cuh"
