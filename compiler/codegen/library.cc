#include "codegen/library.h"

#include <fmt/format.h>

#include <algorithm>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

const Dims& dims(const Value* v) { return *v->dims; }

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

// Per batch dim of `batch`, the stride of an operand whose batch dims `od` (right-aligned) have
// strides `st`: 0 where the operand broadcasts.
Dims aligned_batch_strides(const Dims& od, const Dims& st, const Dims& batch) {
  Dims out(batch.size(), 0);
  const size_t off = batch.size() - od.size();
  for (size_t d = 0; d < od.size(); ++d)
    if (od[d] != 1) out[d + off] = st[d];
  return out;
}

StatusOr<LibraryLowering> lower_matmul(const Node& n, const GemmFolds::Fold* fold) {
  const Value* a = n.input(0);
  const Value* b = n.input(1);
  const Value* y = n.output(0);
  if (fold && fold->bias_add) y = fold->bias_add->output(0);
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
    g.stride_a = aligned_batch_strides(abatch, fa->batch_strides, g.batch);
  }
  if (fb) {
    g.trans_b = fb->trans;
    g.ldb = fb->ld;
    g.offset_b = fb->offset;
    g.stride_b = aligned_batch_strides(bbatch, fb->batch_strides, g.batch);
  }
  if (fold) g.alpha = fold->alpha;
  if (fold && fold->bias) {
    g.epilogue = "bias";
    c.args.push_back(fold->bias);
  }
  if (fold && fold->activation_out) g.epilogue = g.epilogue.empty() ? "gelu" : "bias_gelu";
  if (fold && fold->out_transpose) {
    // Element (batch..., i, j) of the product lands where the Transpose puts it: the stride of
    // each product axis in the Transpose's (contiguous) output.
    const Node* t = fold->out_transpose;
    const Dims& pd = dims(n.output(0));
    ASSIGN_OR_RETURN(std::vector<int64_t> perm, ops::transpose_perm(*t, static_cast<int64_t>(pd.size())));
    const Dims st = ops::strides_of(dims(y));
    Dims along(pd.size());
    for (size_t i = 0; i < perm.size(); ++i) along[static_cast<size_t>(perm[i])] = st[i];
    STITCH_CHECK(along.back() == 1 && pd.size() == g.batch.size() + 2, "{}: not a foldable transpose", t->describe());
    g.ldc = along[pd.size() - 2];
    for (size_t d = 0; d < g.batch.size(); ++d) g.stride_c[d] = along[d];
  }
  c.flops = 2 * num_elements(g.batch) * g.m * g.n * g.k;
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
  if (act) g.epilogue = g.epilogue.empty() ? "gelu" : "bias_gelu";
  c.flops = 2 * g.m * g.n * g.k;
  return out;
}

StatusOr<LibraryLowering> lower_conv(const Node& n) {
  const Value* x = n.input(0);
  const Value* wt = n.input(1);
  const Value* bias = n.input(2);
  const Value* y = n.output(0);
  ASSIGN_OR_RETURN(ops::Window w, ops::conv_window(n, dims(x), dims(wt)));
  if (w.pad_begin != w.pad_end)
    return Status::user(fmt::format("{}: asymmetric padding ({} before, {} after) is not supported by the back end; "
                                    "pad explicitly with a Pad node", n.describe(), dims_to_string(w.pad_begin),
                                    dims_to_string(w.pad_end)));
  LibraryLowering out;
  LibraryCall& c = out.call;
  c.kind = "conv";
  c.node = &n;
  c.dtype = y->dtype;
  c.args = {x, wt, y};
  ConvParams& p = c.conv;
  p.n = dims(x)[0];
  p.c = dims(x)[1];
  p.m = dims(wt)[0];
  p.group = n.attr_int("group", 1);
  p.in = w.in;
  p.kernel = w.kernel;
  p.out = w.out;
  p.strides = w.strides;
  p.dilations = w.dilations;
  p.pads = w.pad_begin;
  if (bias) {
    p.has_bias = true;
    c.args.push_back(bias);
  }
  c.flops = 2 * num_elements(dims(y)) * (p.c / p.group) * num_elements(p.kernel);
  return out;
}

}  // namespace

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
  if (n.op_type == "Conv") return lower_conv(n);
  return Status::internal(fmt::format("{}: no library lowering", n.describe()));
}

}  // namespace stitch::codegen
