// Device helpers that generated kernels include: element conversions, warp and block
// reductions. Compiles with nvcc and with g++ under the emulation layer (stitch/emu/emu.h).
// stitchc copies this file and compat.cuh next to the generated sources of every artifact, so
// an artifact's kernels/ directory compiles on its own.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "compat.cuh"

namespace stitch_dev {

// ---- conversions between storage and compute types ------------------------------------------
// Half and bfloat16 compute in float; every other type computes in itself. A NaN keeps its sign and
// payload both ways (the payload's top bits where float16 or bfloat16 has fewer; a quiet NaN where
// none of them is left), by its bits rather than the conversion instructions: the GPU's and the host
// library's conversions may give the canonical NaN instead, and a model that moves 16-bit values
// unchanged or bit-casts them (BitCast, opset 26) must get its bits back. The reference
// interpreter's conversions (ir/dtype.cc) follow the same rule.
template <typename To, typename From>
__device__ __forceinline__ To cvt(From x) { return static_cast<To>(x); }
template <> __device__ __forceinline__ float cvt<float, __half>(__half x) {
  const unsigned b = __half_as_ushort(x);
  if ((b & 0x7fffu) > 0x7c00u)  // a NaN
    return __uint_as_float(((b & 0x8000u) << 16) | 0x7f800000u | ((b & 0x3ffu) << 13));
  return __half2float(x);
}
template <> __device__ __forceinline__ __half cvt<__half, float>(float x) {
  if (x != x) {
    const unsigned u = __float_as_uint(x), m = (u >> 13) & 0x3ffu;
    return __ushort_as_half(
        static_cast<unsigned short>(((u >> 16) & 0x8000u) | 0x7c00u | (m ? m : 0x200u)));
  }
  return __float2half_rn(x);
}
template <> __device__ __forceinline__ float cvt<float, __nv_bfloat16>(__nv_bfloat16 x) {
  return __uint_as_float(static_cast<unsigned>(__bfloat16_as_ushort(x)) << 16);  // exact, NaNs too
}
template <> __device__ __forceinline__ __nv_bfloat16 cvt<__nv_bfloat16, float>(float x) {
  if (x != x) {
    const unsigned u = __float_as_uint(x) >> 16;
    return __ushort_as_bfloat16(static_cast<unsigned short>(u & 0x7fu ? u : u | 0x40u));
  }
  return __float2bfloat16_rn(x);
}

// The conversion instructions alone, which give the canonical NaN: for kernels none of whose outputs
// can hold one of their inputs' elements unchanged (codegen/nan_bits.h), where only arithmetic
// produces the NaNs they store. On an H200, cvt's bitwise NaN handling took gpt2_tiny_f16's
// layer-norm kernels from 5.7 to 6.7 us (2026-12-04).
template <typename To, typename From>
__device__ __forceinline__ To cvt_plain(From x) { return cvt<To>(x); }
template <> __device__ __forceinline__ float cvt_plain<float, __half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ __half cvt_plain<__half, float>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 cvt_plain<__nv_bfloat16, float>(float x) {
  return __float2bfloat16_rn(x);
}

// ONNX's Cast from floating point to an integer type, in that type's compute type I, with its
// range [lo, hi]: NaN gives 0 and a value past the range its nearest end (ONNX leaves both
// undefined). PTX's float-to-integer cvt clamps to the range on the GPU, but a C++ conversion in
// the emulation layer gives the host's value (x86's integer indefinite), so both take this
// explicit path, and the reference interpreter does the same. A bound that float cannot hold
// exactly (2^63 - 1) rounds up, so `x >= hi` catches every value the conversion cannot hold.
template <typename I, typename F>
__device__ __forceinline__ I float_to_int(F x, I lo, I hi) {
  if (x != x) return I(0);
  if (x <= F(lo)) return lo;
  if (x >= F(hi)) return hi;
  return static_cast<I>(x);
}

// ---- run-time faults -------------------------------------------------------------------------
// An input the kernel cannot honour (an index out of range): the kernel goes on with a safe
// value, and records the fault in the session's fault word `f` (two 64-bit words: the fault's
// code, then the offending value) for the runtime to report after the run. The first fault of a
// run wins; the code names the node and the check in the artifact's schedule.json ("faults").
__device__ __forceinline__ void fault(unsigned long long* f, unsigned long long code, long long value) {
  if (atomicCAS(f, 0ull, code) == 0ull) f[1] = static_cast<unsigned long long>(value);
}
// Index `x` checked against [lo, hi] (the compiler's StitchIndexCheck, which stands for an
// indexing node a rewrite replaced): x itself inside; outside, a fault recorded and the nearest
// bound, so that what reads it stays inside its data (the compiler relies on those bounds).
template <typename I>
__device__ __forceinline__ I checked(unsigned long long* f, unsigned long long code, I x, long long lo,
                                     long long hi) {
  const long long v = static_cast<long long>(x);
  if (v >= lo && v <= hi) return x;
  fault(f, code, v);
  return static_cast<I>(v < lo ? lo : hi);
}
// Divisor `x` checked against 0 (a StitchIndexCheck with `nonzero`): x itself when not 0; 0, a
// fault recorded and 1, so that the division goes on without a trap.
template <typename I>
__device__ __forceinline__ I checked_nonzero(unsigned long long* f, unsigned long long code, I x) {
  if (x != 0) return x;
  fault(f, code, 0);
  return static_cast<I>(1);
}

// An integer to an integer power, exactly, wrapping as the type's products do (by squaring: pow
// through doubles rounds past 2^53 and is undefined past the type). A negative exponent gives
// 1 / a^b truncated: 1 for a base of 1, 1 or -1 for a signed base of -1, else 0.
template <typename T, typename E>
__device__ __forceinline__ T int_pow(T a, E b) {
  if (b < E(0)) {
    if (a == T(1)) return T(1);
    if (T(-1) < T(0) && a == T(-1)) return (b & E(1)) ? T(-1) : T(1);
    return T(0);
  }
  unsigned long long base = static_cast<unsigned long long>(a), r = 1ULL;
  for (unsigned long long e = static_cast<unsigned long long>(b); e != 0ULL; e >>= 1) {
    if (e & 1ULL) r *= base;
    base *= base;
  }
  return static_cast<T>(r);
}

// ---- warp and block reductions ---------------------------------------------------------------
struct Sum {
  template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct Prod {
  template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a * b; }
};
// Max and Min propagate NaN, as ONNX's reductions and numpy do.
struct Max {
  template <typename T> __device__ __forceinline__ T operator()(T a, T b) const {
    return (a != a || a > b) ? a : b;
  }
};
struct Min {
  template <typename T> __device__ __forceinline__ T operator()(T a, T b) const {
    return (a != a || a < b) ? a : b;
  }
};

// ONNX's Mod with fmod 0 on floating point (opset 28): fmod's remainder moved to the sign of b,
// a zero remainder too.
template <typename T>
__device__ __forceinline__ T floor_mod(T a, T b) {
  T r = fmod(a, b);
  if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
  return r == T(0) ? copysign(T(0), b) : r;
}

// The integer, as a float, that rintf(x / s) gives (round half to even of the correctly rounded
// quotient), given r = RN(1 / s) as a normal number (NaN sends every x to the division). The
// product q = RN(x r) is within |q| 2^-22 of RN(x / s): r and q each round once (relative 2^-24),
// and so does the quotient. So where q is farther than |q| 2^-21 from every half-integer, both lie
// strictly between the same two half-integers and round to the same integer. q - t is exact for
// |q| < 2^23, and |q| >= 2^22, infinities and NaN fail the test: the division decides those, and
// the few elements near a half-integer (about 2^-12 of them for an 8-bit quantization's range).
// __fmul_rn keeps q a rounded product; contracted into q - t it would not be.
__device__ __forceinline__ float round_quotient(float x, float s, float r) {
  const float q = __fmul_rn(x, r);
  const float t = rintf(q);
  if (fabsf(fabsf(q - t) - 0.5f) > fabsf(q) * 0x1p-21f) return t;
  return rintf(x / s);
}
// round_quotient's r for a divisor computed at run time: RN(1 / s) where that is a normal number,
// else NaN.
__device__ __forceinline__ float quotient_reciprocal(float s) {
  const float r = 1.0f / s;
  return fabsf(r) >= 0x1p-126f && fabsf(r) <= 0x1.fffffep127f ? r : __int_as_float(0x7fc00000);
}

// All 32 lanes of the warp must call it; every lane gets the result.
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// All threads of the block must call it (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. `scratch` holds 32 values in shared memory; the function leaves it
// free for the next call.
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_reduce(v, op);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < warps; ++w) r = op(r, scratch[w]);
  __syncthreads();
  return r;
}

// Tiled column reduction: a block of 256 threads holds 32 segments, thread t working on segment
// t % 32 with 7 others. Every thread gets its segment's result, combined in thread order (the
// same bits in all 8). `tile` holds blockDim.x values in shared memory; the function leaves it
// free for the next call. Every thread of the block must call it.
template <typename T, typename Op>
__device__ __forceinline__ T tile_column_reduce(T v, Op op, T* tile) {
  tile[threadIdx.x] = v;
  __syncthreads();
  const int column = threadIdx.x & 31;
  T r = tile[column];
  for (int k = column + 32; k < (int)blockDim.x; k += 32) r = op(r, tile[k]);
  __syncthreads();
  return r;
}

// Global stitching: a row split over `segs` blocks of a cooperative launch, in three parts.
// Thread 0 of each block publishes its block's partial (block_reduce's result) at slot[seg]; the
// grid waits at a grid-wide barrier (which orders those writes before the reads); every block
// combines the row's partials (`v` gives the result's type). `slot` is one reduction's row of
// partials in global memory; each reduction uses its own. A pass with several reductions (row ops
// whose inputs need nothing the others compute, such as a tensor's maximum and minimum) publishes
// all of them, then waits at one barrier for all.
template <typename T, typename W>
__device__ __forceinline__ void grid_row_publish(T v, W* slot, long long seg) {
  if (threadIdx.x == 0) slot[seg] = static_cast<W>(v);
}
__device__ __forceinline__ void grid_sync() { cooperative_groups::this_grid().sync(); }
// The combine is a tree over the block's threads: thread t reads partial t (and t + blockDim.x...
// where there are more partials than threads), each warp folds its lanes' partials with
// __shfl_down_sync, and the warps' results are folded in warp order through `scratch` (32 values
// in shared memory, left free for the next call). Every block folds in the same order, so every
// block of the row gets the same bits. The partials are read at once rather than one after
// another: one thread reading 128 partials from L2 in turn took about 5 us on an H200 (2026-12-04,
// bench/gpu/grid_barrier.cu). Every thread of the block must call it.
template <typename T, typename W, typename Op>
__device__ __forceinline__ T grid_row_combine(T v, Op op, const W* slot, long long segs, T* scratch) {
  (void)v;
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5, threads = blockDim.x;
  const int n = static_cast<int>(segs);
  T r = static_cast<T>(slot[t < n ? t : 0]);
  for (int s = t + threads; s < n; s += threads) r = op(r, static_cast<T>(slot[s]));
  const int held = n < threads ? n : threads;  // threads 0 .. held - 1 hold partials
  const int in_warp = held - warp * 32;        // lanes of this warp that do (all 32 when >= 32)
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const T other = __shfl_down_sync(0xffffffffu, r, o);
    if (lane + o < in_warp) r = op(r, other);  // lane + o holds partials only below in_warp
  }
  if (lane == 0 && in_warp > 0) scratch[warp] = r;
  __syncthreads();
  r = scratch[0];
  for (int w = 1; w < (held + 31) / 32; ++w) r = op(r, scratch[w]);
  __syncthreads();
  return r;
}

// A pass of one reduction: every thread of every block calls it with its block's partial.
template <typename T, typename W, typename Op>
__device__ __forceinline__ T grid_row_reduce(T v, Op op, W* slot, long long seg, long long segs, T* scratch) {
  grid_row_publish(v, slot, seg);
  grid_sync();
  return grid_row_combine(v, op, slot, segs, scratch);
}

}  // namespace stitch_dev
