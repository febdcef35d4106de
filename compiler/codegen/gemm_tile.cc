// Tiled GEMMs with a stitched epilogue (gemm_tile.h): the tile shape and the tile loop's text.
#include "codegen/gemm_tile.h"

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
  t.tm = 8;
  if (t.blocks() < min_blocks) t.tm = 4;
  if (t.blocks_m() > 65535) return std::nullopt;  // gridDim.y
  return t;
}

void write_gemm_tile(CudaWriter& w, const GemmTile& t, const std::string& a, const std::string& b,
                     const std::string& st, const std::string& ct) {
  const int64_t bm = t.bm(), tm = t.tm, pad = bm + 4;
  auto load = [&](const std::string& p, const std::string& idx) {
    return ct == st ? fmt::format("{}[{}]", p, idx) : fmt::format("stitch_dev::cvt<{}>({}[{}])", ct, p, idx);
  };
  w.comment(
      fmt::format("MatMul: {} rows x {} columns, {} steps of {} along K = {}; this block's {} x {} tile",
                  t.rows, t.n, (t.k + kTileK - 1) / kTileK, kTileK, t.k, bm, bm));
  w.line("__shared__ {} ta[{}][{}];  // A's slice of the step, [k][row]", ct, kTileK, pad);
  w.line("__shared__ {} tb[{}][{}];  // B's slice of the step, [k][column]", ct, kTileK, pad);
  w.line("const int tx = (int)(threadIdx.x % 16), ty = (int)(threadIdx.x / 16);");
  w.line("const long long row0 = (long long)blockIdx.y * {}LL, col0 = (long long)blockIdx.x * {}LL;", bm, bm);
  w.line("{} acc[{}][{}];", ct, tm, tm);
  w.line("#pragma unroll");
  w.open("for (int i = 0; i < {}; ++i)", tm);
  w.line("#pragma unroll");
  w.line("for (int j = 0; j < {}; ++j) acc[i][j] = ({})0;", tm, ct);
  w.close();
  // Element e = threadIdx.x + 256 l of a slice: A's at row e / kTileK and k e % kTileK (each row's
  // kTileK elements read by neighbouring threads), B's at k e / BN and column e % BN; so thread
  // threadIdx.x reads, at every l, A's k threadIdx.x % kTileK of row threadIdx.x / kTileK + 16 l
  // and B's column threadIdx.x % BN of k threadIdx.x / BN + (256 / BN) l.
  const int64_t bstep = kTileThreads / bm;
  w.line("const int ak = (int)(threadIdx.x % {}), bk = (int)(threadIdx.x / {});", kTileK, bm);
  w.line("const long long ar = row0 + threadIdx.x / {}, bc = col0 + threadIdx.x % {};", kTileK, bm);
  w.line("const {}* pa0 = {} + (ar < {}LL ? ar : 0LL) * {}LL + ak;  // row l at pa0 + {} l", st, a, t.rows,
         t.k, 16 * t.k);
  w.line("const {}* pb0 = {} + (long long)bk * {}LL + (bc < {}LL ? bc : 0LL);  // k row l at pb0 + {} l", st,
         b, t.n, t.n, bstep * t.n);
  w.line("{} pa[{}], pb[{}];  // the next step's elements, loaded while this step computes", ct, tm, tm);
  auto fetch = [&](const std::string& k0) {
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < {}; ++l)", tm);
    w.line("pa[l] = ar + {} * l < {}LL && {} + ak < {}LL ? {} : ({})0;", 16, t.rows, k0, t.k,
           load("pa0", fmt::format("{}LL * l + {}", 16 * t.k, k0)), ct);
    w.line("pb[l] = bc < {}LL && {} + bk + {} * l < {}LL ? {} : ({})0;", t.n, k0, bstep, t.k,
           load("pb0", fmt::format("{}LL * l + ({}) * {}LL", bstep * t.n, k0, t.n)), ct);
    w.close();
  };
  fetch("0");
  w.open("for (long long k0 = 0; k0 < {}LL; k0 += {})", t.k, kTileK);
  w.line("#pragma unroll");
  w.open("for (int l = 0; l < {}; ++l)", tm);
  w.line("ta[ak][threadIdx.x / {} + 16 * l] = pa[l];", kTileK);
  w.line("tb[bk + {} * l][threadIdx.x % {}] = pb[l];", bstep, bm);
  w.close();
  w.line("__syncthreads();");
  w.open("if (k0 + {} < {}LL)", kTileK, t.k);
  fetch(fmt::format("(k0 + {})", kTileK));
  w.close();
  w.line("#pragma unroll");
  w.open("for (int kk = 0; kk < {}; ++kk)", kTileK);
  w.line("{} fa[{}], fb[{}];", ct, tm, tm);
  w.line("#pragma unroll");
  w.line("for (int i = 0; i < {}; ++i) fa[i] = ta[kk][ty + 16 * i];", tm);
  w.line("#pragma unroll");
  w.line("for (int j = 0; j < {}; ++j) fb[j] = tb[kk][tx + 16 * j];", tm);
  w.line("#pragma unroll");
  w.open("for (int i = 0; i < {}; ++i)", tm);
  w.line("#pragma unroll");
  w.line("for (int j = 0; j < {}; ++j) acc[i][j] += fa[i] * fb[j];", tm);
  w.close();
  w.close();
  w.line("__syncthreads();");
  w.close();
}

}  // namespace stitch::codegen
