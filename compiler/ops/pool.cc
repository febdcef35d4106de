// MaxPool, AveragePool and the global pools: the reference's loops, with double accumulation. On
// the GPU MaxPool and AveragePool are library calls and the global pools are reductions.
#include <algorithm>
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

StatusOr<Window> pool_window(const Node& n, const Dims& x) {
  if (x.size() < 3) return node_error(n, "expects an input of shape N x C x D1...");
  Dims kernel = n.attr_ints("kernel_shape");
  if (kernel.size() != x.size() - 2) return node_error(n, "kernel_shape must match the spatial dimensions");
  return forward_window(n, Dims(x.begin() + 2, x.end()), kernel, n.attr_int("ceil_mode", 0) != 0);
}

namespace {

Status infer_pool(InferContext& ctx) {
  ASSIGN_OR_RETURN(Window w, pool_window(ctx.node(), ctx.dims(0)));
  Dims d{ctx.dims(0)[0], ctx.dims(0)[1]};
  d.insert(d.end(), w.out.begin(), w.out.end());
  ctx.set_output(0, ctx.dtype(0), d);
  ctx.set_output(1, DType::kI64, d);
  return Status::ok();
}

Status eval_pool(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& xt = *in[0];
  ASSIGN_OR_RETURN(Window w, pool_window(n, xt.dims()));
  bool is_max = n.op_type == "MaxPool";
  bool include_pad = n.attr_int("count_include_pad", 0) != 0;
  bool col_major = n.attr_int("storage_order", 0) != 0;  // Indices output in column-major order
  Dims row_strides = strides_of(w.in), col_strides(w.spatial, 1);
  for (int64_t d = 1; d < w.spatial; ++d) col_strides[d] = col_strides[d - 1] * w.in[d - 1];
  auto index_of = [&](int64_t off) {
    if (!col_major) return off;
    int64_t r = 0;
    for (int64_t d = 0; d < w.spatial; ++d) r += (off / row_strides[d] % w.in[d]) * col_strides[d];
    return r;
  };
  int64_t planes = xt.dims()[0] * xt.dims()[1], isz = num_elements(w.in), osz = num_elements(w.out);
  std::vector<double> x = xt.to_f64(), y(static_cast<size_t>(planes * osz));
  std::vector<int64_t> arg(y.size(), 0);
  // Per output position, only the window's positions inside the input are visited (a window of
  // 1000 x 1000 over a 32 x 32 input touches at most 1024 of them): on each axis the kernel
  // indices [lo, hi) that land inside, and `padded` of them inside the input or its explicit
  // padding (not the ceil_mode overhang), which count_include_pad divides by. Kernel positions in
  // row-major order, as the window is laid out: MaxPool's first maximum wins a tie, its first NaN
  // any comparison (as the Max op, PyTorch's pool and the generated pool kernel have it).
  std::vector<int64_t> oi(w.spatial, 0), lo(w.spatial), hi(w.spatial), ki(w.spatial), offs;
  for (int64_t o = 0; o < osz; ++o) {
    int64_t inside = 1, padded = 1;
    for (int64_t d = 0; d < w.spatial; ++d) {
      const int64_t start = oi[d] * w.strides[d] - w.pad_begin[d], dil = w.dilations[d];
      lo[d] = start >= 0 ? 0 : (-start + dil - 1) / dil;
      hi[d] = start >= w.in[d] ? 0 : std::min(w.kernel[d], (w.in[d] - 1 - start) / dil + 1);
      hi[d] = std::max(hi[d], lo[d]);
      const int64_t last = w.in[d] + w.pad_end[d] - 1 - start;
      padded *= last < 0 ? 0 : std::min(w.kernel[d], last / dil + 1);
      inside *= hi[d] - lo[d];
    }
    offs.clear();
    for (ki = lo; inside > 0;) {
      int64_t off = 0;
      for (int64_t d = 0; d < w.spatial; ++d)
        off += (oi[d] * w.strides[d] + ki[d] * w.dilations[d] - w.pad_begin[d]) * row_strides[d];
      offs.push_back(off);
      int64_t d = w.spatial - 1;
      for (; d >= 0; --d) {
        if (++ki[d] < hi[d]) break;
        ki[d] = lo[d];
      }
      if (d < 0) break;
    }
    const double count = static_cast<double>(std::max<int64_t>(include_pad ? padded : inside, 1));
    for (int64_t p = 0; p < planes; ++p) {
      const double* xp = x.data() + p * isz;
      double acc = is_max ? -INFINITY : 0.0;
      int64_t best = 0;
      for (int64_t off : offs) {
        if (!is_max)
          acc += xp[off];
        else if (xp[off] > acc || (std::isnan(xp[off]) && !std::isnan(acc)))  // a NaN wins, as in Max
          acc = xp[off], best = p * isz + index_of(off);
      }
      y[p * osz + o] = is_max ? acc : acc / count;
      arg[p * osz + o] = best;
    }
    for (int64_t d = w.spatial - 1; d >= 0; --d) {
      if (++oi[d] < w.out[d]) break;
      oi[d] = 0;
    }
  }
  Dims od{xt.dims()[0], xt.dims()[1]};
  od.insert(od.end(), w.out.begin(), w.out.end());
  out[0] = Tensor::from_f64(xt.dtype(), od, y);
  if (out.size() > 1 && n.output(1)) out[1] = Tensor::from_i64(DType::kI64, od, arg);
  return Status::ok();
}

Status infer_global_pool(InferContext& ctx) {
  if (ctx.rank(0) < 3) return ctx.error("expects an input of shape N x C x D1...");
  Dims d = ctx.dims(0);
  for (size_t i = 2; i < d.size(); ++i) d[i] = 1;
  ctx.set_output(0, ctx.dtype(0), d);
  return Status::ok();
}

Status eval_global_pool(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  Dims d = x.dims();
  int64_t planes = d[0] * d[1], sz = x.size() / std::max<int64_t>(planes, 1);
  for (size_t i = 2; i < d.size(); ++i) d[i] = 1;
  bool is_max = n.op_type == "GlobalMaxPool";
  std::vector<double> xv = x.to_f64(), y(static_cast<size_t>(planes));
  for (int64_t p = 0; p < planes; ++p) {
    double acc = is_max ? -INFINITY : 0.0;
    for (int64_t i = 0; i < sz; ++i) acc = is_max ? std::max(acc, xv[p * sz + i]) : acc + xv[p * sz + i];
    y[p] = is_max ? acc : acc / double(sz);
  }
  out[0] = Tensor::from_f64(x.dtype(), d, y);
  return Status::ok();
}

}  // namespace

void register_pool(std::vector<OpDef>& t) {
  for (const char* p : {"MaxPool", "AveragePool"})
    t.push_back({p, kMinOpset, kMaxOpset, OpCategory::kLibrary, infer_pool, eval_pool});
  for (const char* p : {"GlobalAveragePool", "GlobalMaxPool"})
    t.push_back({p, kMinOpset, kMaxOpset, OpCategory::kReduction, infer_global_pool, eval_global_pool});
}

}  // namespace stitch::ops
