// Tiled GEMMs with a stitched epilogue: the kernel shape a stitched group takes when its dominant
// op is a MatMul whose contraction is too long for a loop per output element (stitch.h's
// fine-grained GEMMs re-read both operands for every element; codegen::kMaxContraction).
//
// C[R, N] = A[R, K] x B[K, N], where A is the MatMul's first operand with its leading axes
// flattened into R rows and B a rank-2 operand (a linear layer's weight). Each block of 256
// threads owns a BM x BN tile of C (BM = BN = 16 x tm, tm 4 or 8) and walks K in steps of kstep:
// the block copies A's BM x kstep and B's kstep x BN slices into shared memory, and every thread
// accumulates its tm x tm outputs from registers. A thread's rows and columns come in runs of 4
// neighbours (tile_offset), so each step reads its operands from shared memory 16 bytes at a
// time: a quarter of the shared-memory instructions per multiply-add of a strided layout, which
// is what bounds a SIMT GEMM once its operands are in shared memory. The next step's global loads
// are issued into registers before the current step's arithmetic, so their latency overlaps it,
// and stored into the second of two shared buffers after it, so one barrier per step suffices.
// The step is 8 for 128-tiles (4 loads of each operand per thread, as for 64-tiles at 16): the
// 64 accumulators, the loads in flight, the operands of the current k and the epilogue then fit
// in the 128 registers a thread has when two blocks share an SM.
//
// The epilogue (the group's element-wise nodes after the MatMul: bias, GELU, residual, scale) then
// runs on each accumulator in registers and only the group's results are stored: the product
// never goes to global memory.
//
// SIMT fp32 math (no tensor cores, as the library calls, which are asked for CUBLAS_COMPUTE_32F
// without TF32); the emulator runs the same text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "codegen/cuda_writer.h"
#include "ir/graph.h"

namespace stitch::codegen {

inline constexpr int64_t kTileThreads = 256;    // 16 x 16 threads per block
inline constexpr int64_t kTileBlocksPerSm = 2;  // the kernel's __launch_bounds__ minimum

struct GemmTile {
  const Node* node = nullptr;  // the MatMul
  int64_t rows = 0, n = 0, k = 0;
  int64_t tm = 0;     // outputs per thread along each axis: a tile of 16 tm x 16 tm
  int64_t kstep = 0;  // the K step: one shared-memory slice of each operand
  int64_t bm() const { return 16 * tm; }
  int64_t steps() const { return (k + kstep - 1) / kstep; }
  // Elements of each operand's slice that each thread loads per step.
  int64_t loads() const { return bm() * kstep / kTileThreads; }
  int64_t blocks_m() const { return (rows + bm() - 1) / bm(); }
  int64_t blocks_n() const { return (n + bm() - 1) / bm(); }
  int64_t blocks() const { return blocks_m() * blocks_n(); }
  // The integer type of the kernel's offsets: int when the operands and the product have fewer
  // than 2^31 elements (fewer registers beside the accumulators), else long long.
  std::string index_type() const {
    const int64_t lim = int64_t{1} << 31;
    return rows * k < lim && k * n < lim && rows * n < lim ? "int" : "long long";
  }
  // Shared memory: two buffers of A's and B's slices, each row padded by 4 elements against bank
  // conflicts (and kept a multiple of 16 bytes for the vector reads).
  int64_t smem_bytes(int64_t elem) const { return 2 * 2 * kstep * (bm() + 4) * elem; }
};

// The tile row (or column) of accumulator i of thread coordinate t (ty or tx): 4 t + i % 4 + 64 (i / 4).
std::string tile_offset(const std::string& t, const std::string& i);

// The tile shape for MatMul `n` when it can be a tiled GEMM: static shapes, one floating-point
// type, B of rank 2, A of rank 2 or more, a contraction longer than kMaxContraction (shorter
// ones are fine-grained loops, stitch.h). Tiles of 128 x 128 (tm 8) when they still give at
// least `min_blocks` blocks (a wave of the device's SMs) and the type is not f64, else 64 x 64.
std::optional<GemmTile> gemm_tile(const Node& n, int64_t min_blocks = 132);

// Writes the tile loop into `w` inside an open kernel: it declares tx, ty, row0, col0 (of
// t.index_type()) and `acc[tm][tm]` (type `ct`) holding this thread's outputs at rows
// row0 + tile_offset(ty, i) and columns col0 + tile_offset(tx, j). `a` and `b` are the operands'
// parameter names, `st` their storage type (loaded through stitch_dev::cvt when it differs from
// `ct`).
void write_gemm_tile(CudaWriter& w, const GemmTile& t, const std::string& a, const std::string& b,
                     const std::string& st, const std::string& ct);

}  // namespace stitch::codegen
