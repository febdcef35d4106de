// Tiled GEMMs with a stitched epilogue: the kernel shape a stitched group takes when its dominant
// op is a MatMul whose contraction is too long for a loop per output element (stitch.h's
// fine-grained GEMMs re-read both operands for every element; codegen::kMaxContraction).
//
// C[R, N] = A[R, K] x B[K, N], where A is the MatMul's first operand with its leading axes
// flattened into R rows and B a rank-2 operand (a linear layer's weight). Each block of 256
// threads owns a BM x BN tile of C (BM = BN = 16 x tm, tm 4 or 8) and walks K in steps of
// kTileK: the block copies A's BM x kTileK and B's kTileK x BN slices into shared memory, every
// thread accumulates its tm x tm outputs (rows ty + 16i, columns tx + 16j of the tile, so a
// warp's stores of one output row are 16 neighbouring columns) from registers, and the next
// step's global loads are issued into registers before the current step's arithmetic, so their
// latency overlaps it. The epilogue (the group's element-wise nodes after the MatMul: bias,
// GELU, residual, scale) then runs on each accumulator in registers and only the group's
// results are stored: the product never goes to global memory.
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

inline constexpr int64_t kTileK = 16;         // the K step: one shared-memory slice of each operand
inline constexpr int64_t kTileThreads = 256;  // 16 x 16 threads per block

struct GemmTile {
  const Node* node = nullptr;  // the MatMul
  int64_t rows = 0, n = 0, k = 0;
  int64_t tm = 0;  // outputs per thread along each axis: a tile of 16 tm x 16 tm
  int64_t bm() const { return 16 * tm; }
  int64_t blocks_m() const { return (rows + bm() - 1) / bm(); }
  int64_t blocks_n() const { return (n + bm() - 1) / bm(); }
  int64_t blocks() const { return blocks_m() * blocks_n(); }
  // Shared memory: A's and B's slices, each row padded by 4 elements against bank conflicts.
  int64_t smem_bytes(int64_t elem) const { return 2 * kTileK * (bm() + 4) * elem; }
};

// The tile shape for MatMul `n` when it can be a tiled GEMM: static shapes, one floating-point
// type, B of rank 2, A of rank 2 or more, a contraction longer than kMaxContraction (shorter
// ones are fine-grained loops, stitch.h). Tiles of 128 x 128 (tm 8) when they still give at
// least `min_blocks` blocks (a wave of the device's SMs), else 64 x 64.
std::optional<GemmTile> gemm_tile(const Node& n, int64_t min_blocks = 132);

// Writes the tile loop into `w` inside an open kernel: it declares tx, ty, row0, col0 and
// `acc[tm][tm]` (type `ct`) holding this thread's outputs at rows row0 + ty + 16i and columns
// col0 + tx + 16j. `a` and `b` are the operands' parameter names, `st` their storage type (loaded
// through stitch_dev::cvt when it differs from `ct`).
void write_gemm_tile(CudaWriter& w, const GemmTile& t, const std::string& a, const std::string& b,
                     const std::string& st, const std::string& ct);

}  // namespace stitch::codegen
