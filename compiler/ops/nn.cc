// Compute-heavy ops served by libraries on the GPU: MatMul, Gemm, Conv and
// ConvTranspose, with the windows they share with the pools (ops/pool.cc) and
// Col2Im. The reference implementations are plain loops with double accumulation.
#include <cmath>
#include <limits>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {
namespace {

Status require_float(const InferContext& ctx, size_t i) {
  if (!is_float(ctx.dtype(i)))
    return ctx.error(fmt::format("expects floating-point input {}, got {}", i, dtype_name(ctx.dtype(i))));
  return Status::ok();
}

// ---- MatMul -----------------------------------------------------------------------------

}  // namespace

StatusOr<MatMulShape> matmul_shape(const Node& node, const Dims& a0, const Dims& b0) {
  if (a0.empty() || b0.empty()) return node_error(node, "MatMul inputs must have rank 1 or more");
  Dims a = a0, b = b0;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  MatMulShape s;
  s.m = a[a.size() - 2];
  s.k = a.back();
  s.n = b.back();
  if (b[b.size() - 2] != s.k)
    return node_error(node, fmt::format("inner dimensions differ: {} and {} (shapes {} and {})", s.k,
                                        b[b.size() - 2], dims_to_string(a0), dims_to_string(b0)));
  s.a_batch.assign(a.begin(), a.end() - 2);
  s.b_batch.assign(b.begin(), b.end() - 2);
  auto bb = broadcast_dims(s.a_batch, s.b_batch);
  if (!bb) return node_error(node, fmt::format("batch dimensions of {} and {} do not broadcast",
                                               dims_to_string(a0), dims_to_string(b0)));
  s.batch = *bb;
  s.out = s.batch;
  if (a0.size() > 1) s.out.push_back(s.m);
  if (b0.size() > 1) s.out.push_back(s.n);
  return s;
}

namespace {

Status infer_matmul(InferContext& ctx) {
  if (ctx.dtype(0) != ctx.dtype(1)) return ctx.error("inputs must share one element type");
  if (ctx.dtype(0) == DType::kBool) return ctx.error("does not take bool inputs");
  ASSIGN_OR_RETURN(MatMulShape s, matmul_shape(ctx.node(), ctx.dims(0), ctx.dims(1)));
  ctx.set_output(0, ctx.dtype(0), s.out);
  return Status::ok();
}

// c[m,n] = sum_k a[m,k] * b[k,n] for row-major matrices.
void gemm_kernel(const double* a, const double* b, double* c, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    double* cr = c + i * n;
    for (int64_t j = 0; j < n; ++j) cr[j] = 0;
    for (int64_t p = 0; p < k; ++p) {
      double av = a[i * k + p];
      const double* br = b + p * n;
      for (int64_t j = 0; j < n; ++j) cr[j] += av * br[j];
    }
  }
}

// The integer product, wrapping as the kernels' 64-bit arithmetic does (through doubles, products
// and sums past 2^53 would be rounded); a narrower type keeps the low bits, which wrapping at every
// step would give too.
// c[m,n] = sum_k a[m,k] * b[k,n] wrapping in 64 bits, for row-major matrices.
void integer_gemm_kernel(const int64_t* a, const int64_t* b, int64_t* c, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      uint64_t acc = 0;
      for (int64_t l = 0; l < k; ++l)
        acc += static_cast<uint64_t>(a[i * k + l]) * static_cast<uint64_t>(b[l * n + j]);
      c[i * n + j] = static_cast<int64_t>(acc);
    }
}

Tensor integer_matmul(const MatMulShape& s, const Tensor& x, const Tensor& y) {
  const std::vector<int64_t> a = x.to_i64(), b = y.to_i64();
  std::vector<int64_t> c(static_cast<size_t>(num_elements(s.batch) * s.m * s.n));
  Dims sa = broadcast_strides(s.a_batch, s.batch), sb = broadcast_strides(s.b_batch, s.batch);
  BroadcastWalker(s.batch, {sa, sb}).run([&](int64_t bi, const std::vector<int64_t>& o) {
    integer_gemm_kernel(a.data() + o[0] * s.m * s.k, b.data() + o[1] * s.k * s.n, c.data() + bi * s.m * s.n,
                        s.m, s.k, s.n);
  });
  return Tensor::from_i64(x.dtype(), s.out, c);
}

Status eval_matmul(const Node& node, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(MatMulShape s, matmul_shape(node, in[0]->dims(), in[1]->dims()));
  if (!is_float(in[0]->dtype())) {
    out[0] = integer_matmul(s, *in[0], *in[1]);
    return Status::ok();
  }
  std::vector<double> a = in[0]->to_f64(), b = in[1]->to_f64();
  std::vector<double> c(static_cast<size_t>(num_elements(s.batch) * s.m * s.n));
  Dims sa = broadcast_strides(s.a_batch, s.batch), sb = broadcast_strides(s.b_batch, s.batch);
  BroadcastWalker(s.batch, {sa, sb}).run([&](int64_t i, const std::vector<int64_t>& o) {
    gemm_kernel(a.data() + o[0] * s.m * s.k, b.data() + o[1] * s.k * s.n, c.data() + i * s.m * s.n,
                s.m, s.k, s.n);
  });
  out[0] = Tensor::from_f64(in[0]->dtype(), s.out, c);
  return Status::ok();
}

// ---- Gemm ---------------------------------------------------------------------------------

// Gemm of int32, int64, uint32 and uint64: computed exactly, wrapping as MatMul of
// integers does, and so only with alpha and beta of 1 (ONNX's reference scales the integer product
// by a float alpha and truncates, which is no integer arithmetic).
bool gemm_integer_type(DType t) {
  return t == DType::kI32 || t == DType::kI64 || t == DType::kU32 || t == DType::kU64;
}

Status infer_gemm(InferContext& ctx) {
  const Node& n = ctx.node();
  if (gemm_integer_type(ctx.dtype(0))) {
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (ctx.has_input(i) && ctx.dtype(i) != ctx.dtype(0))
        return ctx.error(fmt::format("input {} is {}, but A is {}: Gemm's inputs share one type", i,
                                     dtype_name(ctx.dtype(i)), dtype_name(ctx.dtype(0))));
    auto not_one = [&](const char* f) {
      return ctx.error(fmt::format(
          "{} is {} on {} inputs; stitch computes an integer Gemm exactly, which takes alpha and beta of 1: "
          "scale the inputs, or Cast them to a float type",
          f, n.attr_float(f, 1.0f), dtype_name(ctx.dtype(0))));
    };
    if (n.attr_float("alpha", 1.0f) != 1.0f) return not_one("alpha");
    if (ctx.has_input(2) && n.attr_float("beta", 1.0f) != 1.0f) return not_one("beta");  // beta scales C
  } else {
    RETURN_IF_ERROR(require_float(ctx, 0));
  }
  if (ctx.rank(0) != 2 || ctx.rank(1) != 2) return ctx.error("A and B must be matrices");
  bool ta = n.attr_int("transA", 0), tb = n.attr_int("transB", 0);
  int64_t m = ctx.dims(0)[ta ? 1 : 0], k = ctx.dims(0)[ta ? 0 : 1];
  int64_t k2 = ctx.dims(1)[tb ? 1 : 0], nn = ctx.dims(1)[tb ? 0 : 1];
  if (k != k2) return ctx.error(fmt::format("inner dimensions differ: {} and {}", k, k2));
  // The GEMM call carries alpha and beta as numbers; NaN and the infinities have no place there.
  for (const char* f : {"alpha", "beta"})
    if (!std::isfinite(n.attr_float(f, 1.0f)))
      return ctx.error(fmt::format("{} is {}; stitch takes only finite values", f, n.attr_float(f, 1.0f)));
  if (ctx.has_input(2)) {
    auto b = broadcast_dims(ctx.dims(2), {m, nn});
    if (!b || *b != Dims{m, nn})
      return ctx.error(fmt::format("C of shape {} does not broadcast to {}x{}", dims_to_string(ctx.dims(2)), m, nn));
  }
  ctx.set_output(0, ctx.dtype(0), {m, nn});
  return Status::ok();
}

template <typename T>
std::vector<T> transposed(const std::vector<T>& x, int64_t r, int64_t c) {
  std::vector<T> t(x.size());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) t[j * r + i] = x[i * c + j];
  return t;
}

// An integer Gemm (alpha and beta 1, infer_gemm): the product wrapping as integer_matmul's, plus C.
Tensor integer_gemm(const Node& n, std::span<const Tensor* const> in) {
  const bool ta = n.attr_int("transA", 0), tb = n.attr_int("transB", 0);
  const Dims &da = in[0]->dims(), &db = in[1]->dims();
  const int64_t m = ta ? da[1] : da[0], k = ta ? da[0] : da[1], nn = tb ? db[0] : db[1];
  std::vector<int64_t> a = in[0]->to_i64(), b = in[1]->to_i64();
  if (ta) a = transposed(a, da[0], da[1]);
  if (tb) b = transposed(b, db[0], db[1]);
  std::vector<int64_t> c(static_cast<size_t>(m * nn));
  integer_gemm_kernel(a.data(), b.data(), c.data(), m, k, nn);
  if (in.size() > 2 && in[2]) {
    const std::vector<int64_t> cv = in[2]->to_i64();
    BroadcastWalker({m, nn}, {broadcast_strides(in[2]->dims(), {m, nn})})
        .run([&](int64_t i, const std::vector<int64_t>& o) {
          c[static_cast<size_t>(i)] =
              static_cast<int64_t>(static_cast<uint64_t>(c[static_cast<size_t>(i)]) +
                                   static_cast<uint64_t>(cv[static_cast<size_t>(o[0])]));
        });
  }
  return Tensor::from_i64(in[0]->dtype(), {m, nn}, c);
}

Status eval_gemm(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  if (!is_float(in[0]->dtype())) {
    out[0] = integer_gemm(n, in);
    return Status::ok();
  }
  bool ta = n.attr_int("transA", 0), tb = n.attr_int("transB", 0);
  double alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
  std::vector<double> a = in[0]->to_f64(), b = in[1]->to_f64();
  const Dims &da = in[0]->dims(), &db = in[1]->dims();
  if (ta) a = transposed(a, da[0], da[1]);
  if (tb) b = transposed(b, db[0], db[1]);
  int64_t m = ta ? da[1] : da[0], k = ta ? da[0] : da[1], nn = tb ? db[0] : db[1];
  std::vector<double> c(static_cast<size_t>(m * nn));
  gemm_kernel(a.data(), b.data(), c.data(), m, k, nn);
  for (double& v : c) v *= alpha;
  if (in.size() > 2 && in[2]) {
    std::vector<double> cv = in[2]->to_f64();
    BroadcastWalker({m, nn}, {broadcast_strides(in[2]->dims(), {m, nn})})
        .run([&](int64_t i, const std::vector<int64_t>& o) { c[i] += beta * cv[o[0]]; });
  }
  out[0] = Tensor::from_f64(in[0]->dtype(), {m, nn}, c);
  return Status::ok();
}

// ---- Windows: shared by Conv, ConvTranspose and the pools -----------------------------------

// Reads the window attributes every op with a window shares (`w.spatial` and `w.kernel` set):
// strides, dilations and pads per spatial axis, checked for their counts before the pads are
// split and for their values (a positive kernel, stride and dilation, pads not negative), and
// auto_pad checked to be one the spec names.
Status read_window_attrs(const Node& n, Window& w) {
  w.strides = n.attr_ints("strides", Dims(w.spatial, 1));
  w.dilations = n.attr_ints("dilations", Dims(w.spatial, 1));
  const Dims pads = n.attr_ints("pads", Dims(2 * w.spatial, 0));
  if (static_cast<int64_t>(w.strides.size()) != w.spatial ||
      static_cast<int64_t>(w.dilations.size()) != w.spatial ||
      static_cast<int64_t>(pads.size()) != 2 * w.spatial)
    return node_error(
        n, fmt::format("strides, dilations and pads must match the {} spatial dimensions (pads twice)",
                       w.spatial));
  w.pad_begin.assign(pads.begin(), pads.begin() + w.spatial);
  w.pad_end.assign(pads.begin() + w.spatial, pads.end());
  for (int64_t i = 0; i < w.spatial; ++i) {
    if (w.kernel[i] <= 0)
      return node_error(n, fmt::format("the kernel's extent on spatial axis {} is {}; it must be positive", i,
                                       w.kernel[i]));
    if (w.strides[i] <= 0 || w.dilations[i] <= 0)
      return node_error(n, "strides and dilations must be positive");
    if (w.pad_begin[i] < 0 || w.pad_end[i] < 0)
      return node_error(n, fmt::format("pads must not be negative (spatial axis {} has {} and {})", i,
                                       w.pad_begin[i], w.pad_end[i]));
  }
  const std::string autopad = n.attr_string("auto_pad", "NOTSET");
  if (autopad != "NOTSET" && autopad != "SAME_UPPER" && autopad != "SAME_LOWER" && autopad != "VALID")
    return node_error(n, fmt::format("unknown auto_pad '{}'", autopad));
  return Status::ok();
}

}  // namespace

// Fills strides, dilations and pads from attributes, resolving auto_pad.
// `kernel` and `in` must be set; computes `out` for the forward direction.
StatusOr<Window> forward_window(const Node& n, Dims in, Dims kernel, bool ceil_mode) {
  Window w;
  w.spatial = static_cast<int64_t>(in.size());
  w.in = in;
  w.kernel = kernel;
  RETURN_IF_ERROR(read_window_attrs(n, w));
  const std::string autopad = n.attr_string("auto_pad", "NOTSET");
  for (int64_t i = 0; i < w.spatial; ++i) {
    // The dilated window's extent and the padded input in 128 bits: a dilation or pad near 2^63
    // would wrap them, and a window that does not fit would pass for one that does.
    const __int128 wide_ek = static_cast<__int128>(w.dilations[i]) * (w.kernel[i] - 1) + 1;
    const __int128 wide_padded = static_cast<__int128>(in[i]) + w.pad_begin[i] + w.pad_end[i];
    constexpr __int128 kLargest = std::numeric_limits<int64_t>::max() / 4;
    if (wide_ek > kLargest || wide_padded > kLargest)
      return node_error(
          n, fmt::format("the window ({} with dilation {}) or the padding ({} and {}) on spatial "
                         "axis {} is out of range: check the exporter's kernel_shape, dilations and pads",
                         w.kernel[i], w.dilations[i], w.pad_begin[i], w.pad_end[i], i));
    int64_t ek = static_cast<int64_t>(wide_ek);
    if (autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
      int64_t o = (in[i] + w.strides[i] - 1) / w.strides[i];
      int64_t total = std::max<int64_t>(0, (o - 1) * w.strides[i] + ek - in[i]);
      int64_t small = total / 2, big = total - small;
      w.pad_begin[i] = autopad == "SAME_UPPER" ? small : big;
      w.pad_end[i] = autopad == "SAME_UPPER" ? big : small;
    } else if (autopad == "VALID") {
      w.pad_begin[i] = w.pad_end[i] = 0;
    }
    int64_t span = in[i] + w.pad_begin[i] + w.pad_end[i] - ek;
    if (span < 0)
      return node_error(n, fmt::format("the window ({} with dilation {}) is larger than the padded input ({}) on spatial axis {}",
                                       w.kernel[i], w.dilations[i], in[i] + w.pad_begin[i] + w.pad_end[i], i));
    int64_t o = (ceil_mode ? (span + w.strides[i] - 1) / w.strides[i] : span / w.strides[i]) + 1;
    if (ceil_mode && (o - 1) * w.strides[i] >= in[i] + w.pad_begin[i]) --o;
    w.out.push_back(o);
  }
  return w;
}

namespace {

// Calls f(out_linear, kernel_linear, in_linear or -1 when in padding) for every pair.
template <typename F>
void for_each_window(const Window& w, F f) {
  int64_t outs = num_elements(w.out), ks = num_elements(w.kernel);
  Dims is = strides_of(w.in);
  std::vector<int64_t> oi(w.spatial, 0), ki(w.spatial, 0);
  for (int64_t o = 0; o < outs; ++o) {
    std::fill(ki.begin(), ki.end(), 0);
    for (int64_t k = 0; k < ks; ++k) {
      int64_t off = 0;
      for (int64_t d = 0; d < w.spatial && off >= 0; ++d) {
        int64_t p = oi[d] * w.strides[d] + ki[d] * w.dilations[d] - w.pad_begin[d];
        off = (p < 0 || p >= w.in[d]) ? -1 : off + p * is[d];
      }
      f(o, k, off);
      for (int64_t d = w.spatial - 1; d >= 0; --d) {
        if (++ki[d] < w.kernel[d]) break;
        ki[d] = 0;
      }
    }
    for (int64_t d = w.spatial - 1; d >= 0; --d) {
      if (++oi[d] < w.out[d]) break;
      oi[d] = 0;
    }
  }
}

// ---- Conv ---------------------------------------------------------------------------------

}  // namespace

StatusOr<Window> conv_window(const Node& n, const Dims& x, const Dims& wt) {
  if (x.size() < 3 || wt.size() != x.size())
    return node_error(n, fmt::format("expects X of shape N x C x D1... and W of the same rank, got {} and {}",
                                     dims_to_string(x), dims_to_string(wt)));
  int64_t group = n.attr_int("group", 1);
  if (group <= 0 || x[1] % group != 0 || wt[0] % group != 0 || wt[1] * group != x[1])
    return node_error(n, fmt::format("channels do not fit group={}: X has {} channels, W has shape {}",
                                     group, x[1], dims_to_string(wt)));
  Dims kernel(wt.begin() + 2, wt.end());
  if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != kernel)
    return node_error(n, "kernel_shape does not match W");
  return forward_window(n, Dims(x.begin() + 2, x.end()), kernel, false);
}

namespace {

Status infer_conv(InferContext& ctx) {
  RETURN_IF_ERROR(require_float(ctx, 0));
  ASSIGN_OR_RETURN(Window w, conv_window(ctx.node(), ctx.dims(0), ctx.dims(1)));
  if (ctx.has_input(2) && ctx.dims(2) != Dims{ctx.dims(1)[0]})
    return ctx.error(fmt::format("B must have shape [{}]", ctx.dims(1)[0]));
  Dims d{ctx.dims(0)[0], ctx.dims(1)[0]};
  d.insert(d.end(), w.out.begin(), w.out.end());
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_conv(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Dims& xd = in[0]->dims();
  const Dims& wd = in[1]->dims();
  ASSIGN_OR_RETURN(Window w, conv_window(n, xd, wd));
  int64_t group = n.attr_int("group", 1), N = xd[0], C = xd[1], M = wd[0], cg = C / group, mg = M / group;
  int64_t isz = num_elements(w.in), osz = num_elements(w.out), ksz = num_elements(w.kernel);
  std::vector<double> x = in[0]->to_f64(), wt = in[1]->to_f64();
  std::vector<double> bias = in.size() > 2 && in[2] ? in[2]->to_f64() : std::vector<double>(M, 0.0);
  // Precompute the (out, kernel) -> input offset table once; it is shared by every channel.
  std::vector<int64_t> table(static_cast<size_t>(osz * ksz));
  for_each_window(w, [&](int64_t o, int64_t k, int64_t off) { table[o * ksz + k] = off; });
  std::vector<double> y(static_cast<size_t>(N * M * osz));
  for (int64_t b = 0; b < N; ++b)
    for (int64_t m = 0; m < M; ++m) {
      int64_t g = m / mg;
      double* yo = y.data() + (b * M + m) * osz;
      for (int64_t o = 0; o < osz; ++o) yo[o] = bias[m];
      for (int64_t c = 0; c < cg; ++c) {
        const double* xc = x.data() + (b * C + g * cg + c) * isz;
        const double* wk = wt.data() + (m * cg + c) * ksz;
        for (int64_t o = 0; o < osz; ++o) {
          const int64_t* t = table.data() + o * ksz;
          double acc = 0;
          for (int64_t k = 0; k < ksz; ++k)
            if (t[k] >= 0) acc += xc[t[k]] * wk[k];
          yo[o] += acc;
        }
      }
    }
  Dims od{N, M};
  od.insert(od.end(), w.out.begin(), w.out.end());
  out[0] = Tensor::from_f64(in[0]->dtype(), od, y);
  return Status::ok();
}

// ---- ConvTranspose ---------------------------------------------------------------------------

}  // namespace

StatusOr<Window> convt_window(const Node& n, const Dims& x, const Dims& wt) {
  if (x.size() < 3 || wt.size() != x.size())
    return node_error(n, "expects X of shape N x C x D1... and W of the same rank");
  int64_t group = n.attr_int("group", 1);
  if (group <= 0 || wt[0] != x[1] || x[1] % group != 0)
    return node_error(n, fmt::format("W's first dimension ({}) must equal X's channels ({})", wt[0], x[1]));
  Window w;
  w.spatial = static_cast<int64_t>(x.size()) - 2;
  w.in.assign(x.begin() + 2, x.end());
  w.kernel.assign(wt.begin() + 2, wt.end());
  RETURN_IF_ERROR(read_window_attrs(n, w));
  const Dims outpad = n.attr_ints("output_padding", Dims(w.spatial, 0));
  Dims oshape = n.attr_ints("output_shape");
  const std::string autopad = n.attr_string("auto_pad", "NOTSET");
  if (static_cast<int64_t>(outpad.size()) != w.spatial)
    return node_error(n, "output_padding must match the spatial dimensions");
  if (!oshape.empty() && static_cast<int64_t>(oshape.size()) == w.spatial + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
  if (!oshape.empty() && static_cast<int64_t>(oshape.size()) != w.spatial)
    return node_error(n, fmt::format("output_shape has {} values; it must give the {} spatial extents",
                                     oshape.size(), w.spatial));
  for (int64_t i = 0; i < w.spatial; ++i) {
    if (outpad[i] < 0)
      return node_error(
          n, fmt::format("output_padding {} on spatial axis {} must not be negative", outpad[i], i));
    int64_t full = w.strides[i] * (w.in[i] - 1) + outpad[i] + (w.kernel[i] - 1) * w.dilations[i] + 1;
    if (!oshape.empty() || autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
      // ONNX: total padding may be negative (the output grows); split with floor division.
      int64_t target = oshape.empty() ? w.in[i] * w.strides[i] : oshape[i];
      int64_t total = full - target;
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      bool upper = autopad == "SAME_UPPER";
      w.pad_begin[i] = upper ? half : total - half;
      w.pad_end[i] = total - w.pad_begin[i];
    } else if (autopad == "VALID") {
      w.pad_begin[i] = w.pad_end[i] = 0;
    }
    int64_t o = full - w.pad_begin[i] - w.pad_end[i];
    if (o <= 0) return node_error(n, "the output would be empty");
    w.out.push_back(o);
  }
  return w;
}

namespace {

Status infer_convt(InferContext& ctx) {
  RETURN_IF_ERROR(require_float(ctx, 0));
  ASSIGN_OR_RETURN(Window w, convt_window(ctx.node(), ctx.dims(0), ctx.dims(1)));
  int64_t m = ctx.dims(1)[1] * ctx.node().attr_int("group", 1);
  if (ctx.has_input(2) && ctx.dims(2) != Dims{m}) return ctx.error(fmt::format("B must have shape [{}]", m));
  Dims d{ctx.dims(0)[0], m};
  d.insert(d.end(), w.out.begin(), w.out.end());
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_convt(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Dims& xd = in[0]->dims();
  const Dims& wd = in[1]->dims();
  ASSIGN_OR_RETURN(Window w, convt_window(n, xd, wd));
  int64_t group = n.attr_int("group", 1), N = xd[0], C = xd[1], mg = wd[1], M = mg * group, cg = C / group;
  int64_t isz = num_elements(w.in), osz = num_elements(w.out), ksz = num_elements(w.kernel);
  std::vector<double> x = in[0]->to_f64(), wt = in[1]->to_f64();
  std::vector<double> y(static_cast<size_t>(N * M * osz), 0.0);
  Dims os = strides_of(w.out);
  std::vector<int64_t> ii(w.spatial), ki(w.spatial);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c) {
      int64_t g = c / cg;
      for (int64_t i = 0; i < isz; ++i) {
        for (int64_t d = w.spatial - 1, r = i; d >= 0; --d) ii[d] = r % w.in[d], r /= w.in[d];
        double xv = x[(b * C + c) * isz + i];
        for (int64_t k = 0; k < ksz; ++k) {
          for (int64_t d = w.spatial - 1, r = k; d >= 0; --d) ki[d] = r % w.kernel[d], r /= w.kernel[d];
          int64_t off = 0;
          for (int64_t d = 0; d < w.spatial && off >= 0; ++d) {
            int64_t p = ii[d] * w.strides[d] + ki[d] * w.dilations[d] - w.pad_begin[d];
            off = (p < 0 || p >= w.out[d]) ? -1 : off + p * os[d];
          }
          if (off < 0) continue;
          for (int64_t m = 0; m < mg; ++m)
            y[(b * M + g * mg + m) * osz + off] += xv * wt[(c * mg + m) * ksz + k];
        }
      }
    }
  if (in.size() > 2 && in[2]) {
    std::vector<double> bias = in[2]->to_f64();
    for (int64_t i = 0; i < N * M; ++i)
      for (int64_t o = 0; o < osz; ++o) y[i * osz + o] += bias[i % M];
  }
  Dims od{N, M};
  od.insert(od.end(), w.out.begin(), w.out.end());
  out[0] = Tensor::from_f64(in[0]->dtype(), od, y);
  return Status::ok();
}

// ---- Col2Im ----------------------------------------------------------------------------------

Status infer_col2im(InferContext& ctx) {
  const Node& n = ctx.node();
  ASSIGN_OR_RETURN(auto image, const_ints(ctx, 1, "image_shape"));
  ASSIGN_OR_RETURN(auto block, const_ints(ctx, 2, "block_shape"));
  ASSIGN_OR_RETURN(Window w, col2im_window(n, ctx.dims(0), Dims(image.begin(), image.end()),
                                           Dims(block.begin(), block.end())));
  Dims out = {ctx.dims(0)[0], ctx.dims(0)[1] < 0 ? -1 : ctx.dims(0)[1] / num_elements(w.kernel)};
  out.insert(out.end(), image.begin(), image.end());
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::ok();
}

// Each block element adds into the image position it came from; positions in the padding drop out.
Status eval_col2im(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const std::vector<int64_t> image = in[1]->to_i64(), block = in[2]->to_i64();
  ASSIGN_OR_RETURN(Window w, col2im_window(n, x.dims(), Dims(image.begin(), image.end()),
                                           Dims(block.begin(), block.end())));
  const int64_t batch = x.dims()[0], k = num_elements(w.kernel), c = x.dims()[1] / k;
  const int64_t blocks = num_elements(w.out), plane = num_elements(w.in);
  Dims od = {batch, c};
  od.insert(od.end(), image.begin(), image.end());
  const std::vector<double> xv = x.to_f64();
  std::vector<double> y(static_cast<size_t>(batch * c * plane), 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for_each_window(w, [&](int64_t o, int64_t kk, int64_t off) {
        if (off >= 0) y[(b * c + ch) * plane + off] += xv[((b * c + ch) * k + kk) * blocks + o];
      });
  out[0] = Tensor::from_f64(x.dtype(), od, y);
  return Status::ok();
}

}  // namespace

StatusOr<Window> col2im_window(const Node& n, const Dims& x, const Dims& image, const Dims& block) {
  if (x.size() != 3)
    return node_error(n, fmt::format("its input has rank {}; Col2Im takes [N, C x block, L]", x.size()));
  if (image.empty() || image.size() != block.size())
    return node_error(n, fmt::format("image_shape has {} values and block_shape {}; they must give the same "
                                     "spatial axes",
                                     image.size(), block.size()));
  for (size_t i = 0; i < image.size(); ++i)
    if (image[i] <= 0 || block[i] <= 0)
      return node_error(n, fmt::format("image_shape {} and block_shape {} must be positive",
                                       dims_to_string(image), dims_to_string(block)));
  ASSIGN_OR_RETURN(Window w, forward_window(n, image, block, false));
  const int64_t k = num_elements(block), blocks = num_elements(w.out);
  if (x[1] >= 0 && x[1] % k != 0)
    return node_error(
        n, fmt::format("its input has {} rows, not a multiple of the block's {} elements", x[1], k));
  if (x[2] >= 0 && x[2] != blocks)
    return node_error(n, fmt::format("its input has {} block positions, but image {} in blocks {} has {}",
                                     x[2], dims_to_string(image), dims_to_string(block), blocks));
  return w;
}

void register_nn(std::vector<OpDef>& t) {
  t.push_back({"MatMul", kMinOpset, kMaxOpset, OpCategory::kLibrary, infer_matmul, eval_matmul});
  t.push_back({"Gemm", kMinOpset, kMaxOpset, OpCategory::kLibrary, infer_gemm, eval_gemm});
  t.push_back({"Conv", kMinOpset, kMaxOpset, OpCategory::kLibrary, infer_conv, eval_conv});
  t.push_back({"ConvTranspose", kMinOpset, kMaxOpset, OpCategory::kLibrary, infer_convt, eval_convt});
  t.push_back({"Col2Im", 18, kMaxOpset, OpCategory::kLayout, infer_col2im, eval_col2im});
}

}  // namespace stitch::ops
