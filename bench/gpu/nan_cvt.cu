// Do the GPU's own 16-bit conversion instructions keep a NaN's sign and payload as
// stitch_dev::cvt does by its bits (runtime/device/include/stitch/device/stitch_device.cuh)?
// Every float16 and bfloat16 bit pattern is converted to float, and 2 x 65536 float NaNs (both
// signs, payloads spread over all 23 bits) to float16 and bfloat16, by __half2float,
// __bfloat162float, __float2half_rn and __float2bfloat16_rn; each result is compared with the bits
// the rule gives. Prints, per conversion, how many NaNs differ and the first few.
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/gpu/nan_cvt.cu -o nan_cvt && ./nan_cvt
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_check.h"

constexpr int kN = 65536;

__global__ void widen(const unsigned short* bits, unsigned* from_half, unsigned* from_bf16) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kN) return;
  from_half[i] = __float_as_uint(__half2float(__ushort_as_half(bits[i])));
  from_bf16[i] = __float_as_uint(__bfloat162float(__ushort_as_bfloat16(bits[i])));
}

__global__ void narrow(const unsigned* bits, unsigned short* to_half, unsigned short* to_bf16) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 2 * kN) return;
  const float x = __uint_as_float(bits[i]);
  to_half[i] = __half_as_ushort(__float2half_rn(x));
  to_bf16[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// The rule, as stitch_dev::cvt and ir/dtype.cc apply it.
unsigned rule_half_to_float(unsigned b) { return ((b & 0x8000u) << 16) | 0x7f800000u | ((b & 0x3ffu) << 13); }
unsigned short rule_float_to_half(unsigned u) {
  const unsigned m = (u >> 13) & 0x3ffu;
  return static_cast<unsigned short>(((u >> 16) & 0x8000u) | 0x7c00u | (m ? m : 0x200u));
}
unsigned short rule_float_to_bf16(unsigned u) {
  const unsigned h = u >> 16;
  return static_cast<unsigned short>(h & 0x7fu ? h : h | 0x40u);
}

int main() {
  std::vector<unsigned short> b16(kN);
  for (int i = 0; i < kN; ++i) b16[i] = static_cast<unsigned short>(i);
  std::vector<unsigned> b32(2 * kN);
  for (int i = 0; i < kN; ++i) {  // payloads: i's bits spread over the 23 (never 0: those are infinities)
    unsigned p = (static_cast<unsigned>(i) << 7) ^ (static_cast<unsigned>(i) * 2654435761u >> 9);
    p &= 0x7fffffu;
    if (!p) p = 1;
    b32[i] = 0x7f800000u | p;
    b32[kN + i] = 0xff800000u | p;
  }
  unsigned short *d16, *dh, *db;
  unsigned *d32, *wh, *wb;
  CHECK(cudaMalloc(&d16, kN * 2));
  CHECK(cudaMalloc(&d32, 2 * kN * 4));
  CHECK(cudaMalloc(&wh, kN * 4));
  CHECK(cudaMalloc(&wb, kN * 4));
  CHECK(cudaMalloc(&dh, 2 * kN * 2));
  CHECK(cudaMalloc(&db, 2 * kN * 2));
  CHECK(cudaMemcpy(d16, b16.data(), kN * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d32, b32.data(), 2 * kN * 4, cudaMemcpyHostToDevice));
  widen<<<kN / 256, 256>>>(d16, wh, wb);
  CHECK(cudaGetLastError());
  narrow<<<2 * kN / 256, 256>>>(d32, dh, db);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<unsigned> got_h(kN), got_b(kN);
  std::vector<unsigned short> got_fh(2 * kN), got_fb(2 * kN);
  CHECK(cudaMemcpy(got_h.data(), wh, kN * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got_b.data(), wb, kN * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got_fh.data(), dh, 2 * kN * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got_fb.data(), db, 2 * kN * 2, cudaMemcpyDeviceToHost));

  int nan_h = 0, bad_h = 0, nan_b = 0, bad_b = 0, bad_fh = 0, bad_fb = 0;
  for (int i = 0; i < kN; ++i) {
    if ((i & 0x7fff) > 0x7c00) {  // a float16 NaN
      ++nan_h;
      if (got_h[i] != rule_half_to_float(i) && bad_h++ < 4)
        std::printf("__half2float(0x%04x) = 0x%08x, the rule 0x%08x\n", i, got_h[i], rule_half_to_float(i));
    }
    if ((i & 0x7fff) > 0x7f80) {  // a bfloat16 NaN
      ++nan_b;
      if (got_b[i] != (static_cast<unsigned>(i) << 16) && bad_b++ < 4)
        std::printf("__bfloat162float(0x%04x) = 0x%08x, the rule 0x%08x\n", i, got_b[i], unsigned(i) << 16);
    }
  }
  for (int i = 0; i < 2 * kN; ++i) {
    if (got_fh[i] != rule_float_to_half(b32[i]) && bad_fh++ < 4)
      std::printf("__float2half_rn(0x%08x) = 0x%04x, the rule 0x%04x\n", b32[i], got_fh[i],
                  rule_float_to_half(b32[i]));
    if (got_fb[i] != rule_float_to_bf16(b32[i]) && bad_fb++ < 4)
      std::printf("__float2bfloat16_rn(0x%08x) = 0x%04x, the rule 0x%04x\n", b32[i], got_fb[i],
                  rule_float_to_bf16(b32[i]));
  }
  std::printf("| conversion | NaNs converted | differ from the rule |\n|---|---|---|\n");
  std::printf("| __half2float | %d | %d |\n", nan_h, bad_h);
  std::printf("| __bfloat162float | %d | %d |\n", nan_b, bad_b);
  std::printf("| __float2half_rn | %d | %d |\n", 2 * kN, bad_fh);
  std::printf("| __float2bfloat16_rn | %d | %d |\n", 2 * kN, bad_fb);
  return 0;
}
