#include "codegen/library.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

// y = broadcast of c to y's shape (Gemm's C operand before the beta-accumulating call).
Kernel bias_fill_kernel(const Node& n, const Value* c, const Value* y, int index) {
  Kernel k;
  k.name = fmt::format("k{:03d}_map_{}_bias", index, snake(n.op_type));
  k.nodes = {&n};
  k.params = {{"x0", c, false}, {"y0", y, true}};
  const Dims& od = dims(y);
  const int64_t total = num_elements(od);
  k.bytes_moved = (num_elements(dims(c)) + total) * dtype_size(y->dtype);
  k.block = {kMapBlock, 1, 1};
  k.grid = {std::clamp<int64_t>((total + kMapBlock - 1) / kMapBlock, 1, kMaxMapBlocks), 1, 1};
  k.mapping = fmt::format("grid-stride loop, one thread per element of {}: C broadcast into Y before the GEMM",
                          dims_to_string(od));
  Dims s = ops::broadcast_strides(dims(c), od);
  std::string off;
  for (size_t d = 0; d < od.size(); ++d) {
    if (s[d] == 0 || od[d] == 1) continue;
    std::string cd = d + 1 == od.size() ? fmt::format("(i % {}LL)", od[d]) : fmt::format("(i / {}LL)", od[1]);
    if (!off.empty()) off += " + ";
    off += s[d] == 1 ? cd : fmt::format("{} * {}LL", cd, s[d]);
  }
  if (off.empty()) off.push_back('0');
  CudaWriter w;
  w.raw_line(kernel_header(k));
  open_kernel(w, k, kMapBlock);
  w.open("for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < {}LL; "
         "i += (long long)gridDim.x * blockDim.x)", total);
  w.line("y0[i] = x0[{}];", off);
  w.close();
  w.close();
  k.source = w.text();
  return k;
}

// One batch dim of a GEMM call: its size and the strides of A, B and C along it.
struct BatchDim {
  int64_t size, a, b, c;
};

// Per batch dim of `batch`, the sub-axes of an operand whose batch dims `od` (right-aligned) have
// the sub-axes `axes`: one of stride 0 where the operand broadcasts.
std::vector<SubAxes> aligned_batch_axes(const Dims& od, const std::vector<SubAxes>& axes, const Dims& batch) {
  std::vector<SubAxes> out(batch.size());
  const size_t off = batch.size() - od.size();
  for (size_t d = 0; d < batch.size(); ++d) {
    if (d >= off && od[d - off] != 1)
      out[d] = axes[d - off];
    else if (batch[d] != 1)
      out[d] = {{batch[d], 0}};
  }
  return out;
}

// One sub-axis per batch dim of `batch` with the given strides.
std::vector<SubAxes> plain_batch_axes(const Dims& batch, const Dims& strides) {
  std::vector<SubAxes> out(batch.size());
  for (size_t d = 0; d < batch.size(); ++d)
    if (batch[d] != 1) out[d] = {{batch[d], strides[d]}};
  return out;
}

// The batch dims that step A, B and C along their sub-axes at once: each dim of `batch` split
// where any of the three starts a new sub-axis (K/V heads repeated for grouped-query attention:
// the heads dim becomes kv-heads and repeats, B stepping 0 along the repeats).
StatusOr<std::vector<BatchDim>> refine_batch(const Node& n, const Dims& batch,
                                             const std::array<std::vector<SubAxes>, 3>& ax) {
  std::vector<BatchDim> out;
  for (size_t d = 0; d < batch.size(); ++d) {
    if (batch[d] == 1) continue;
    std::array<size_t, 3> pos{};
    std::array<int64_t, 3> rem{};
    for (size_t o = 0; o < 3; ++o) {
      int64_t total = 1;
      for (const auto& sub : ax[o][d]) total *= sub.first;
      if (ax[o][d].empty() || total != batch[d])
        return Status::internal(
            fmt::format("{}: operand layout does not cover batch dim {}", n.describe(), d));
      rem[o] = ax[o][d].front().first;
    }
    while (pos[0] < ax[0][d].size()) {
      const int64_t step = std::min({rem[0], rem[1], rem[2]});
      BatchDim bd{step, 0, 0, 0};
      int64_t* stride[3] = {&bd.a, &bd.b, &bd.c};
      for (size_t o = 0; o < 3; ++o) {
        if (rem[o] % step != 0)
          return Status::internal(
              fmt::format("{}: operand sub-axes do not nest in batch dim {}", n.describe(), d));
        *stride[o] = ax[o][d][pos[o]].second * (rem[o] / step);  // the outer part of the sub-axis
        rem[o] /= step;
        if (rem[o] == 1 && ++pos[o] < ax[o][d].size()) rem[o] = ax[o][d][pos[o]].first;
      }
      out.push_back(bd);
    }
  }
  return out;
}

// Fewer, larger GEMMs from the same batch (the result is the same element for element):
//  - a batch dim over which B is broadcast and along which A's and C's rows simply continue (A
//    steps m rows, C steps m rows) becomes more rows: a linear layer over [batch, seq, k] is one
//    [batch*seq, k] GEMM instead of a batch of seq-row GEMMs;
//  - adjacent batch dims whose strides compose in A, B and C become one;
//  - the largest dim left goes last: the runtime's strided-batched dim (the others are indexed
//    through pointer arrays, or looped where an epilogue needs cuBLASLt).
void canonicalize_batch(GemmParams& g, std::vector<BatchDim> ds) {
  const int64_t row_a = g.trans_a ? 1 : g.lda;  // how far apart A's rows are
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = ds.begin(); it != ds.end(); ++it) {
      const bool rows = it->b == 0 && it->a == g.m * row_a && it->c == g.m * g.ldc &&
                        (!g.trans_a || g.lda >= g.m * it->size);
      if (!rows) continue;
      g.m *= it->size;
      ds.erase(it);
      changed = true;
      break;
    }
  }
  std::vector<BatchDim> merged;
  for (const BatchDim& d : ds) {
    if (!merged.empty()) {
      BatchDim& o = merged.back();
      if (o.a == d.size * d.a && o.b == d.size * d.b && o.c == d.size * d.c) {
        o = {o.size * d.size, d.a, d.b, d.c};
        continue;
      }
    }
    merged.push_back(d);
  }
  if (!merged.empty()) {
    auto largest = std::max_element(merged.begin(), merged.end(),
                                    [](const BatchDim& x, const BatchDim& y) { return x.size < y.size; });
    std::rotate(largest, largest + 1, merged.end());
  }
  g.batch.clear(), g.stride_a.clear(), g.stride_b.clear(), g.stride_c.clear();
  for (const BatchDim& d : merged) {
    g.batch.push_back(d.size);
    g.stride_a.push_back(d.a);
    g.stride_b.push_back(d.b);
    g.stride_c.push_back(d.c);
  }
}

// The epilogue name with an activation after it: "" or "bias" followed by "gelu" (the tanh form)
// or "relu".
std::string with_activation(const std::string& epilogue, Activation a) {
  STITCH_CHECK(a == Activation::kGeluTanh || a == Activation::kRelu, "no cuBLASLt epilogue computes {}",
               activation_name(a));
  const std::string act = a == Activation::kRelu ? "relu" : "gelu";
  return epilogue.empty() ? act : epilogue + "_" + act;
}

StatusOr<LibraryLowering> lower_matmul(const Node& n, const GemmFolds::Fold* fold) {
  const Value* a = n.input(0);
  const Value* b = n.input(1);
  const Value* y = n.output(0);
  if (fold && fold->bias_add) y = fold->bias_add->output(0);
  if (fold && fold->residual_add) y = fold->residual_add->output(0);
  if (fold && fold->out_transpose) y = fold->out_transpose->output(0);
  if (fold && fold->activation_out) y = fold->activation_out;
  const GemmFolds::Operand* fa = fold && fold->operand[0].root ? &fold->operand[0] : nullptr;
  const GemmFolds::Operand* fb = fold && fold->operand[1].root ? &fold->operand[1] : nullptr;
  Dims ad = dims(a), bd = dims(b);
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  LibraryLowering out;
  LibraryCall& c = out.call;
  c.kind = "gemm";
  c.node = &n;
  c.dtype = y->dtype;
  c.args = {fa ? fa->root : a, fb ? fb->root : b, y};
  GemmParams& g = c.gemm;
  g.m = ad[ad.size() - 2];
  g.k = ad.back();
  g.n = bd.back();
  g.lda = g.k;
  g.ldb = g.n;
  g.ldc = g.n;
  Dims abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
  auto batch = ops::broadcast_dims(abatch, bbatch);
  if (!batch) return Status::user(fmt::format("{}: batch dims do not broadcast", n.describe()));
  g.batch = *batch;
  Dims sa = ops::broadcast_strides(abatch, g.batch), sb = ops::broadcast_strides(bbatch, g.batch);
  Dims sc = ops::strides_of(g.batch);
  for (size_t d = 0; d < g.batch.size(); ++d) {
    g.stride_a.push_back(sa[d] * g.m * g.k);
    g.stride_b.push_back(sb[d] * g.k * g.n);
    g.stride_c.push_back(sc[d] * g.m * g.n);
  }
  if (fa) {
    g.trans_a = fa->trans;
    g.lda = fa->ld;
    g.offset_a = fa->offset;
  }
  if (fb) {
    g.trans_b = fb->trans;
    g.ldb = fb->ld;
    g.offset_b = fb->offset;
  }
  if (fold) g.alpha = fold->alpha;
  if (fold && fold->bias) {
    g.epilogue = "bias";
    c.args.push_back(fold->bias);
  }
  if (fold && fold->activation_out) g.epilogue = with_activation(g.epilogue, fold->activation);
  if (fold && fold->residual) {  // C's layout: the product's, so the batch canonicalizes alike
    STITCH_CHECK(!fold->activation_out && !fold->out_transpose,
                 "{}: a residual with an activation or a transpose", n.describe());
    g.epilogue = g.epilogue.empty() ? "residual" : "bias_residual";
    c.args.push_back(fold->residual);
  }
  if (fold && fold->out_transpose) {
    // Element (batch..., i, j) of the product lands where the Transpose puts it (find_gemm_folds
    // worked out the sub-axes of each product axis in its output; the columns step by 1).
    const std::vector<SubAxes>& oa = fold->out_axes;
    STITCH_CHECK(oa.size() == g.batch.size() + 2, "{}: not a foldable transpose",
                 fold->out_transpose->describe());
    const SubAxes& rows = oa[oa.size() - 2];
    g.ldc = rows.empty() ? g.n : rows.front().second;
  }
  c.flops = 2 * num_elements(g.batch) * g.m * g.n * g.k;
  std::array<std::vector<SubAxes>, 3> axes = {plain_batch_axes(g.batch, g.stride_a),
                                              plain_batch_axes(g.batch, g.stride_b),
                                              plain_batch_axes(g.batch, g.stride_c)};
  if (fa) axes[0] = aligned_batch_axes(abatch, fa->batch_axes, g.batch);
  if (fb) axes[1] = aligned_batch_axes(bbatch, fb->batch_axes, g.batch);
  if (fold && fold->out_transpose)
    axes[2] = aligned_batch_axes(g.batch, {fold->out_axes.begin(), fold->out_axes.end() - 2}, g.batch);
  ASSIGN_OR_RETURN(std::vector<BatchDim> refined, refine_batch(n, g.batch, axes));
  canonicalize_batch(g, std::move(refined));
  return out;
}

StatusOr<LibraryLowering> lower_gemm(const Node& n, int index, const GemmFolds::Fold* fold) {
  const Value* a = n.input(0);
  const Value* b = n.input(1);
  const Value* bias = n.input(2);
  const Value* y = n.output(0);
  const bool act = fold && fold->activation_out;
  LibraryLowering out;
  LibraryCall& c = out.call;
  c.kind = "gemm";
  c.node = &n;
  c.dtype = y->dtype;
  c.args = {a, b, act ? fold->activation_out : y};
  GemmParams& g = c.gemm;
  g.trans_a = n.attr_int("transA", 0) != 0;
  g.trans_b = n.attr_int("transB", 0) != 0;
  g.m = dims(y)[0];
  g.n = dims(y)[1];
  g.k = g.trans_a ? dims(a)[0] : dims(a)[1];
  g.lda = dims(a)[1];
  g.ldb = dims(b)[1];
  g.ldc = g.n;
  g.alpha = n.attr_float("alpha", 1.0f);
  g.beta = 0;
  if (bias != nullptr && n.attr_float("beta", 1.0f) != 0.0f) {
    if (gemm_bias_epilogue(n)) {
      g.epilogue = "bias";
      c.args.push_back(bias);
    } else {
      STITCH_CHECK(!act, "{}: an activation epilogue with a C that is not a bias vector", n.describe());
      g.beta = n.attr_float("beta", 1.0f);
      out.kernels.push_back(bias_fill_kernel(n, bias, y, index));
    }
  }
  if (act) g.epilogue = with_activation(g.epilogue, fold->activation);
  if (fold && fold->residual) {
    STITCH_CHECK(!act && g.beta == 0, "{}: a residual with an activation or a C of its own", n.describe());
    g.epilogue = g.epilogue.empty() ? "residual" : "bias_residual";
    c.args.push_back(fold->residual);
    c.args[2] = fold->residual_add->output(0);
  }
  c.flops = 2 * g.m * g.n * g.k;
  return out;
}

// A convolution call of `kind` on X `x`, W `wt` and Y `y` over window `w` (the op's pads at the
// begin, one per axis), `m` output channels.
LibraryLowering conv_call(const std::string& kind, const Node& n, const Value* x, const Value* wt,
                          const Value* y, int64_t m, const ops::Window& w) {
  LibraryLowering out;
  LibraryCall& c = out.call;
  c.kind = kind;
  c.node = &n;
  c.dtype = y->dtype;
  c.args = {x, wt, y};
  ConvParams& p = c.conv;
  p.n = dims(x)[0];
  p.c = dims(x)[1];
  p.m = m;
  p.group = n.attr_int("group", 1);
  p.in = w.in;
  p.kernel = w.kernel;
  p.out = w.out;
  p.strides = w.strides;
  p.dilations = w.dilations;
  p.pads = w.pad_begin;
  return out;
}

StatusOr<LibraryLowering> lower_conv(const Node& n, const GemmFolds::Fold* fold) {
  const Value* x = n.input(0);
  const Value* wt = n.input(1);
  const Value* bias = n.input(2);
  const Value* y = n.output(0);
  if (fold && fold->residual_add) y = fold->residual_add->output(0);
  if (fold && fold->activation_out) y = fold->activation_out;
  ASSIGN_OR_RETURN(ops::Window w, ops::conv_window(n, dims(x), dims(wt)));
  if (w.pad_begin != w.pad_end)
    return Status::user(
        fmt::format("{}: asymmetric padding ({} before, {} after) is not supported by the back end; "
                    "pad explicitly with a Pad node",
                    n.describe(), dims_to_string(w.pad_begin), dims_to_string(w.pad_end)));
  LibraryLowering out = conv_call("conv", n, x, wt, y, dims(wt)[0], w);
  LibraryCall& c = out.call;
  ConvParams& p = c.conv;
  if (bias) {
    p.has_bias = true;
    c.args.push_back(bias);
  }
  if (fold && fold->residual) {
    p.epilogue = "residual";
    c.args.push_back(fold->residual);
  }
  if (fold && fold->activation_out) {
    STITCH_CHECK(fold->activation == Activation::kRelu, "{}: cuDNN's fused call computes no {}", n.describe(),
                 activation_name(fold->activation));
    p.epilogue = p.epilogue.empty() ? "relu" : "residual_relu";
  }
  c.flops = 2 * num_elements(dims(y)) * (p.c / p.group) * num_elements(p.kernel);
  return out;
}

StatusOr<LibraryLowering> lower_conv_transpose(const Node& n) {
  if (Status s = conv_transpose_call(n); !s.is_ok())
    return Status::user(fmt::format("{}: {}", n.describe(), s.message()));
  const Value* x = n.input(0);
  const Value* wt = n.input(1);
  const Value* y = n.output(0);
  STITCH_CHECK(n.input(2) == nullptr, "{}: a bias expand_conv_transpose did not move to an Add",
               n.describe());
  ASSIGN_OR_RETURN(ops::Window w, ops::convt_window(n, dims(x), dims(wt)));
  LibraryLowering out = conv_call("conv_transpose", n, x, wt, y, dims(y)[1], w);
  const ConvParams& p = out.call.conv;
  // every input value times every weight of its group's output channels
  out.call.flops = 2 * num_elements(dims(x)) * (p.m / p.group) * num_elements(p.kernel);
  return out;
}

}  // namespace

Status conv_transpose_call(const Node& n) {
  const Value* x = n.input(0);
  const Value* wt = n.input(1);
  if (!x || !wt || !n.output(0) || !x->has_static_shape() || !wt->has_static_shape())
    return Status::user("its input and weights need static shapes");
  ASSIGN_OR_RETURN(ops::Window w, ops::convt_window(n, dims(x), dims(wt)));
  for (int64_t i = 0; i < w.spatial; ++i) {
    const int64_t r = conv_transpose_excess(w, i);
    if (!conv_transpose_pad_fits(w, i) || r < 0 || r >= w.strides[i])
      return Status::user(fmt::format(
          "on spatial axis {} its pads ({} before, {} after) and output extent {} are not a backward-data "
          "convolution's (one pad from 0 to {} at both ends, output_padding below the stride)",
          i, w.pad_begin[i], w.pad_end[i], w.out[i], w.dilations[i] * (w.kernel[i] - 1)));
  }
  return Status::ok();
}

int64_t conv_transpose_excess(const ops::Window& w, int64_t i) {
  return w.out[i] + 2 * w.pad_begin[i] - w.dilations[i] * (w.kernel[i] - 1) - 1 -
         w.strides[i] * (w.in[i] - 1);
}

bool conv_transpose_pad_fits(const ops::Window& w, int64_t i) {
  return w.pad_begin[i] >= 0 && w.pad_begin[i] <= w.dilations[i] * (w.kernel[i] - 1);
}

bool gemm_bias_epilogue(const Node& n) {
  const Value* c = n.input(2);
  if (n.op_type != "Gemm" || c == nullptr || n.attr_float("beta", 1.0f) != 1.0f || !n.output(0)) return false;
  const Dims& cd = dims(c);
  const int64_t cols = dims(n.output(0))[1];
  return cols > 1 && !cd.empty() && cd.back() == cols && num_elements(cd) == cols;
}

StatusOr<LibraryLowering> lower_library(const Node& n, int first_kernel_index, const GemmFolds::Fold* fold) {
  if (n.op_type == "MatMul") return lower_matmul(n, fold);
  if (n.op_type == "Gemm") return lower_gemm(n, first_kernel_index, fold);
  if (n.op_type == "Conv") return lower_conv(n, fold);
  if (n.op_type == "ConvTranspose") return lower_conv_transpose(n);
  return Status::internal(fmt::format("{}: no library lowering", n.describe()));
}

}  // namespace stitch::codegen
