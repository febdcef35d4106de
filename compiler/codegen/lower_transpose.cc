// Tiled transposes: a Transpose that moves the inner axis, copied through shared memory so that
// both its reads and its writes are coalesced (lower.h, lower_transpose_tiled).
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

using ops::strides_of;

// A Transpose that moves the input's innermost axis away from the output's innermost position
// reads (or writes) with a stride: in a grid-stride copy, neighbouring threads touch addresses far
// apart. Tiled instead: a block of 256 threads copies a 32 x 32 tile of the plane those two axes
// span, reading rows of the input's inner axis into shared memory and writing rows of the
// output's inner axis from it, both coalesced. The tile has 33 columns so that reading a column
// touches 32 different banks. Elements are copied as raw bits (an unsigned type of their size).
// The other output axes index the planes; tiles of all planes are one grid-stride loop.
constexpr int64_t kTransposeTile = 32;
// Both axes of the plane must be at least this long; shorter ones leave most of a tile idle.
constexpr int64_t kTransposeMinSide = 16;

}  // namespace

std::optional<Kernel> lower_transpose_tiled(const Node& n, int index, const std::vector<int64_t>& perm,
                                            IndexWidth ix) {
  const Value* x = n.input(0);
  const Value* y = n.output(0);
  const Dims& in = dims(x);
  const Dims& out = dims(y);
  const int64_t r = static_cast<int64_t>(in.size());
  const Dims in_strides = strides_of(in), out_strides = strides_of(out);
  // The output's innermost axis of more than one element (p: the rows of the tile as read), and
  // the output axis holding the input's innermost axis of more than one element (q).
  int64_t kp = -1, ai = -1, kq = -1;
  for (int64_t k = r - 1; k >= 0 && kp < 0; --k)
    if (out[k] > 1) kp = k;
  for (int64_t a = r - 1; a >= 0 && ai < 0; --a)
    if (in[a] > 1) ai = a;
  if (kp < 0 || ai < 0 || perm[kp] == ai) return std::nullopt;  // the inner axis stays inner: coalesced
  for (int64_t k = 0; k < r; ++k)
    if (perm[k] == ai) kq = k;
  const int64_t P = out[kp], I = out[kq], sp = in_strides[perm[kp]], so = out_strides[kq];
  if (P < kTransposeMinSide || I < kTransposeMinSide) return std::nullopt;
  int64_t planes = 1;
  for (int64_t k = 0; k < r; ++k)
    if (k != kp && k != kq) planes *= out[k];
  const int64_t tp = (P + kTransposeTile - 1) / kTransposeTile,
                ti = (I + kTransposeTile - 1) / kTransposeTile;
  const int64_t tiles = planes * tp * ti;
  const char* bits = dtype_size(x->dtype) == 8   ? "unsigned long long"
                     : dtype_size(x->dtype) == 4 ? "unsigned int"
                     : dtype_size(x->dtype) == 2 ? "unsigned short"
                                                 : "unsigned char";
  Kernel k;
  k.name = fmt::format("k{:03d}_map_transpose", index);
  k.nodes = {&n};
  k.params = {{"x0", x, false}, {"y0", y, true}};
  k.bytes_moved = 2 * num_elements(in) * dtype_size(x->dtype);
  k.block = {kMapBlock, 1, 1};
  k.grid = {std::clamp<int64_t>(tiles, 1, kMaxMapBlocks), 1, 1};
  k.static_smem_bytes = kTransposeTile * (kTransposeTile + 1) * dtype_size(x->dtype);
  k.mapping = fmt::format(
      "tiled transpose: {} planes of {} x {} through {}x{} shared-memory tiles (padded to {} "
      "columns), {} tiles in a grid-stride loop, 256 threads each",
      planes, I, P, kTransposeTile, kTransposeTile, kTransposeTile + 1, tiles);
  CudaWriter w;
  w.raw_line(kernel_header(k));
  open_kernel(w, k, kMapBlock);
  w.line("__shared__ {} tile[{}][{}];", bits, kTransposeTile, kTransposeTile + 1);
  w.line("const {0}* __restrict__ src = reinterpret_cast<const {0}*>(x0);", bits);
  w.line("{0}* __restrict__ dst = reinterpret_cast<{0}*>(y0);", bits);
  w.line("const int tx = threadIdx.x % {0}, ty = threadIdx.x / {0};", kTransposeTile);
  const char* t = ix.type();
  auto lit = [&](int64_t v) { return ix.lit(v); };
  w.open("for ({0} t = blockIdx.x; t < {1}; t += gridDim.x)", t, lit(tiles));
  w.line("const {} i0 = (t % {}) * {};", t, lit(ti), lit(kTransposeTile));
  w.line("const {} p0 = ((t / {}) % {}) * {};", t, lit(ti), lit(tp), lit(kTransposeTile));
  w.line("{} plane = t / {};", t, lit(ti * tp));
  // The plane's offsets in the input and the output, from its coordinates (output order).
  std::string in_base = lit(0), out_base = lit(0);
  for (int64_t d = r - 1; d >= 0; --d) {
    if (d == kp || d == kq || out[d] == 1) continue;
    w.line("const {} c{} = plane % {};", t, d, lit(out[d]));
    w.line("plane /= {};", lit(out[d]));
    in_base += fmt::format(" + c{} * {}", d, lit(in_strides[perm[d]]));
    out_base += fmt::format(" + c{} * {}", d, lit(out_strides[d]));
  }
  w.line("const {} in_base = {};", t, in_base);
  w.line("const {} out_base = {};", t, out_base);
  w.comment("read: rows of the input's inner axis (i), one row per p");
  w.open("for (int k = ty; k < {}; k += {})", kTransposeTile, kMapBlock / kTransposeTile);
  w.line("const {} p = p0 + k, i = i0 + tx;", t);
  w.line("if (p < {} && i < {}) tile[k][tx] = src[in_base + p * {} + i];", lit(P), lit(I), lit(sp));
  w.close();
  w.line("__syncthreads();");
  w.comment("write: rows of the output's inner axis (p), one row per i");
  w.open("for (int k = ty; k < {}; k += {})", kTransposeTile, kMapBlock / kTransposeTile);
  w.line("const {} i = i0 + k, p = p0 + tx;", t);
  w.line("if (p < {} && i < {}) dst[out_base + i * {} + p] = tile[tx][k];", lit(P), lit(I), lit(so));
  w.close();
  w.line("__syncthreads();  // the tile is read before the next one overwrites it");
  w.close();
  w.close();
  k.source = w.text();
  return k;
}

}  // namespace stitch::codegen
