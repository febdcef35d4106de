// Tiled GEMMs with a stitched epilogue (gemm_tile.h): the tile shape and the tile loop's text.
#include "codegen/gemm_tile.h"

#include <fmt/ranges.h>

#include <vector>

#include "codegen/stitch.h"

namespace stitch::codegen {

std::optional<GemmTile> gemm_tile(const Node& n, int64_t min_blocks) {
  if (!generatable_matmul(n)) return std::nullopt;
  const Dims &ad = *n.input(0)->dims, &bd = *n.input(1)->dims;
  if (bd.size() != 2 || ad.back() <= kMaxContraction) return std::nullopt;
  GemmTile t;
  t.node = &n;
  t.k = ad.back();
  t.n = bd[1];
  t.rows = num_elements(ad) / t.k;
  // 8 x 8 accumulators of doubles would need twice the registers and shared memory of floats.
  t.tm = 8;
  if (t.blocks() < min_blocks || n.output(0)->dtype == DType::kF64) t.tm = 4;
  t.kstep = t.tm == 8 ? 8 : 16;
  if (t.blocks_m() > 65535) return std::nullopt;  // gridDim.y
  return t;
}

std::string tile_offset(const std::string& t, const std::string& i) {
  return fmt::format("4 * {} + ({} & 3) + 64 * ({} >> 2)", t, i, i);
}

void write_gemm_tile(CudaWriter& w, const GemmTile& t, const std::string& a, const std::string& b,
                     const std::string& st, const std::string& ct) {
  const int64_t bm = t.bm(), tm = t.tm, ks = t.kstep, nl = t.loads(), pad = bm + 4;
  const bool vec = ct == "float";  // 16-byte shared-memory reads of 4 neighbouring values
  const std::string ix = t.index_type();
  auto load = [&](const std::string& p, const std::string& idx) {
    return ct == st ? fmt::format("{}[{}]", p, idx) : fmt::format("stitch_dev::cvt<{}>({}[{}])", ct, p, idx);
  };
  w.comment(
      fmt::format("MatMul: {} rows x {} columns, {} steps of {} along K = {}; this block's {} x {} tile",
                  t.rows, t.n, t.steps(), ks, t.k, bm, bm));
  // Two buffers: a step computes from one while the next step's slices are stored into the other,
  // so one barrier per step separates them.
  w.line("__shared__ __align__(16) {} ta[2][{}][{}];  // A's slices, [buffer][k][row]", ct, ks, pad);
  w.line("__shared__ __align__(16) {} tb[2][{}][{}];  // B's slices, [buffer][k][column]", ct, ks, pad);
  w.line("const int tx = (int)(threadIdx.x % 16), ty = (int)(threadIdx.x / 16);");
  w.line("const {0} row0 = ({0})blockIdx.y * {1}, col0 = ({0})blockIdx.x * {1};", ix, bm);
  w.line("{} acc[{}][{}];", ct, tm, tm);
  w.line("#pragma unroll");
  w.open("for (int i = 0; i < {}; ++i)", tm);
  w.line("#pragma unroll");
  w.line("for (int j = 0; j < {}; ++j) acc[i][j] = ({})0;", tm, ct);
  w.close();
  // Element e = threadIdx.x + 256 l of a slice: A's at row e / kstep and k e % kstep (each row's
  // kstep elements read by neighbouring threads), B's at k e / BN and column e % BN; so thread
  // threadIdx.x reads, at every l, A's k threadIdx.x % kstep of row threadIdx.x / kstep + (256 /
  // kstep) l and B's column threadIdx.x % BN of k threadIdx.x / BN + (256 / BN) l.
  //
  // Which loads need guards: a column of B past N or a row of A past R only feeds outputs that are
  // never stored, so those loads just need a valid address: B's column is clamped once (bc is
  // fixed per thread) and A's rows are guarded only when R is not a multiple of the tile. Past K
  // both operands must read 0 (a clamped value times 0 could still be NaN), needed only when K is
  // not a multiple of the step. Offsets are 32-bit where the operands allow it: fewer registers
  // beside the accumulators.
  const int64_t astep = kTileThreads / ks, bstep = kTileThreads / bm;
  const bool row_guard = t.rows % bm != 0, k_guard = t.k % ks != 0;
  w.line("const int ak = (int)(threadIdx.x % {}), bk = (int)(threadIdx.x / {});", ks, bm);
  w.line("const int ar = (int)row0 + (int)(threadIdx.x / {}), bc = (int)col0 + (int)(threadIdx.x % {});", ks,
         bm);
  w.line("const {}* pa0 = {} + ({})(ar < {} ? ar : 0) * {} + ak;  // row l at pa0 + {} l", st, a, ix, t.rows,
         t.k, astep * t.k);
  w.line("const {}* pb0 = {} + ({})bk * {} + (bc < {} ? bc : 0);  // k row l at pb0 + {} l", st, b, ix, t.n,
         t.n, bstep * t.n);
  w.line("{} pa[{}], pb[{}];  // the next step's elements, loaded while this step computes", ct, nl, nl);
  auto fetch = [&](const std::string& k0) {
    std::vector<std::string> ga, gb;
    if (row_guard) ga.push_back(fmt::format("ar + {} * l < {}", astep, t.rows));
    if (k_guard) {
      ga.push_back(fmt::format("{} + ak < {}", k0, t.k));
      gb.push_back(fmt::format("{} + bk + {} * l < {}", k0, bstep, t.k));
    }
    auto guarded = [&](const std::vector<std::string>& gs, const std::string& v) {
      return gs.empty() ? v : fmt::format("{} ? {} : ({})0", fmt::join(gs, " && "), v, ct);
    };
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < {}; ++l)", nl);
    w.line("pa[l] = {};", guarded(ga, load("pa0", fmt::format("({}){} * l + {}", ix, astep * t.k, k0))));
    w.line("pb[l] = {};",
           guarded(gb, load("pb0", fmt::format("({}){} * l + ({})({}) * {}", ix, bstep * t.n, ix, k0, t.n))));
    w.close();
  };
  auto put = [&](const std::string& buf) {
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < {}; ++l)", nl);
    w.line("ta[{}][ak][threadIdx.x / {} + {} * l] = pa[l];", buf, ks, astep);
    w.line("tb[{}][bk + {} * l][threadIdx.x % {}] = pb[l];", buf, bstep, bm);
    w.close();
  };
  fetch("0");
  put("0");
  w.line("__syncthreads();");
  w.line("int buf = 0;");
  w.open("for (int k0 = 0; k0 < {}; k0 += {})", t.k, ks);
  w.line("const bool more = k0 + {} < {};", ks, t.k);
  w.open("if (more)");
  fetch(fmt::format("(k0 + {})", ks));
  w.close();
  // Thread (tx, ty) owns rows 4 ty + i % 4 + 64 (i / 4) and columns 4 tx + j % 4 + 64 (j / 4) of
  // the tile: runs of 4 neighbours, read from shared memory 16 bytes at a time.
  w.line("#pragma unroll");
  w.open("for (int kk = 0; kk < {}; ++kk)", ks);
  w.line("{} fa[{}], fb[{}];", ct, tm, tm);
  if (vec) {
    w.line("#pragma unroll");
    w.open("for (int g = 0; g < {}; ++g)", tm / 4);
    w.line("const float4 a4 = *reinterpret_cast<const float4*>(&ta[buf][kk][4 * ty + 64 * g]);");
    w.line("const float4 b4 = *reinterpret_cast<const float4*>(&tb[buf][kk][4 * tx + 64 * g]);");
    w.line("fa[4 * g] = a4.x; fa[4 * g + 1] = a4.y; fa[4 * g + 2] = a4.z; fa[4 * g + 3] = a4.w;");
    w.line("fb[4 * g] = b4.x; fb[4 * g + 1] = b4.y; fb[4 * g + 2] = b4.z; fb[4 * g + 3] = b4.w;");
    w.close();
  } else {
    w.line("#pragma unroll");
    w.line("for (int i = 0; i < {}; ++i) fa[i] = ta[buf][kk][{}];", tm, tile_offset("ty", "i"));
    w.line("#pragma unroll");
    w.line("for (int j = 0; j < {}; ++j) fb[j] = tb[buf][kk][{}];", tm, tile_offset("tx", "j"));
  }
  w.line("#pragma unroll");
  w.open("for (int i = 0; i < {}; ++i)", tm);
  w.line("#pragma unroll");
  w.line("for (int j = 0; j < {}; ++j) acc[i][j] += fa[i] * fb[j];", tm);
  w.close();
  w.close();
  w.open("if (more)");
  put("buf ^ 1");
  w.close();
  // The other buffer is complete for the next step, and every thread is done reading this one
  // before the step after next overwrites it.
  w.line("__syncthreads();");
  w.line("buf ^= 1;");
  w.close();
}

}  // namespace stitch::codegen
