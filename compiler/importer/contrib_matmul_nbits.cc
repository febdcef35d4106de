// onnxruntime's MatMulNBits (contrib_ops.h): a MatMul whose constant weight is stored as 2-, 4- or
// 8-bit integers in blocks along K, each block with its scale and zero point. The weight is
// dequantized here, at compile time, into a constant of A's type, (q - zero point) * scale, and
// the node becomes a MatMul (and the Add of its bias): the GEMM runs in A's type, at least the
// accuracy any accuracy_level asks for. The weight then takes 32 / bits times its packed bytes.
#include <fmt/format.h>

#include "importer/contrib_writer.h"

namespace stitch::contrib {
namespace {

// Value j (0-based) of a row of `bits`-bit values packed into bytes, low bits first.
int packed_value(const uint8_t* row, int64_t j, int64_t bits) {
  const int64_t bit = j * bits;
  return (row[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
}

}  // namespace

Status matmul_nbits(Writer& w, const Node& c) {
  Value *a = c.input(0), *b = c.input(1), *scales = c.input(2), *zp = c.input(3), *bias = c.input(5);
  if (!a || !b || !scales) return refuse(c, "needs A, B and scales (inputs 0 to 2)");
  if (c.input(4)) return refuse(c, "g_idx (input 4, deprecated) is not read");
  if (c.attr_int("weight_prepacked", 0) != 0)
    return refuse(c, "weight_prepacked (a GPU kernel's layout) is not read; quantize without prepacking");
  const int64_t K = c.attr_int("K", 0), N = c.attr_int("N", 0), bits = c.attr_int("bits", 4),
                block = c.attr_int("block_size", 0);
  if (K < 1 || N < 1 || block < 16 || (block & (block - 1)) != 0)
    return refuse(c, "needs K and N positive and block_size a power of two of at least 16");
  if (bits != 2 && bits != 4 && bits != 8) return refuse(c, fmt::format("bits={} is not 2, 4 or 8", bits));
  if (!b->constant || !scales->constant || (zp && !zp->constant))
    return refuse(c,
                  "its B, scales and zero_points must be initializers: stitch dequantizes the weight at "
                  "compile time");
  const Tensor &q = *b->constant, &s = *scales->constant;
  const int64_t blocks = (K + block - 1) / block, blob = block * bits / 8;
  if (q.dtype() != DType::kU8 || q.dims() != Dims{N, blocks, blob})
    return refuse(c, fmt::format("its B '{}' is {} {}, not uint8 [{}, {}, {}] for K={}, N={}, block_size={}, "
                                 "bits={}",
                                 b->name, dtype_name(q.dtype()), dims_to_string(q.dims()), N, blocks, blob, K,
                                 N, block, bits));
  if (!is_float(s.dtype()) || s.size() != N * blocks)
    return refuse(c, fmt::format("its scales '{}' must be {} floats, one per block of each column",
                                 scales->name, N * blocks));
  const std::vector<double> sv = s.to_f64();
  // Zero points: none (the middle value, 2^(bits-1)), packed uint8 [N, ceil(blocks * bits / 8)],
  // or one float per block.
  const int64_t zp_row = (blocks * bits + 7) / 8;
  std::vector<double> zv(static_cast<size_t>(N * blocks), static_cast<double>(int64_t{1} << (bits - 1)));
  if (zp) {
    const Tensor& z = *zp->constant;
    if (z.dtype() == DType::kU8 && z.size() == N * zp_row) {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < blocks; ++k)
          zv[static_cast<size_t>(n * blocks + k)] = packed_value(z.data() + n * zp_row, k, bits);
    } else if (is_float(z.dtype()) && z.size() == N * blocks) {
      zv = z.to_f64();
    } else {
      return refuse(
          c, fmt::format("its zero_points '{}' are {} {}, neither packed uint8 [{}, {}] nor {} floats",
                         zp->name, dtype_name(z.dtype()), dims_to_string(z.dims()), N, zp_row, N * blocks));
    }
  }
  // W [K, N]: column n is row n of B, block by block.
  std::vector<double> wv(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t kb = k / block, i = n * blocks + kb;
      const int v = packed_value(q.data() + (n * blocks + kb) * blob, k % block, bits);
      wv[static_cast<size_t>(k * N + n)] = (v - zv[static_cast<size_t>(i)]) * sv[static_cast<size_t>(i)];
    }
  Value* weight = w.constant("dequantized_weight", Tensor::from_f64(s.dtype(), {K, N}, wv));
  if (!bias) {
    w.op("MatMul", "", {a, weight}, {}, c.output(0));
    return Status::ok();
  }
  Value* product = w.op("MatMul", "", {a, weight}, {}, w.fresh("product"));
  w.op("Add", "bias", {product, bias}, {}, c.output(0));
  return Status::ok();
}

}  // namespace stitch::contrib
