// MaxPool and AveragePool (their windowed forms; the global pools are segment kernels,
// lower_reduce.cc): one thread per output element, a grid-stride loop over the output, the
// window's loops unrolled by the compiler. Padding reads nothing; AveragePool divides by the
// positions read, or (count_include_pad) by those inside the explicit padding.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "codegen/scalar_ops.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {

StatusOr<Kernel> lower_pool(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const Value* y = n.output(0);
  if (n.output(1))
    return Status::user(fmt::format("{}: the Indices output is not supported by the back end", n.describe()));
  ASSIGN_OR_RETURN(ops::Window win, ops::pool_window(n, *x->dims));
  const bool is_max = n.op_type == "MaxPool";
  const bool include_pad = n.attr_int("count_include_pad", 0) != 0;
  const std::string ct = compute_type(x->dtype);
  // One thread per output element; the window loops are unrolled by the compiler.
  Kernel k;
  k.name = fmt::format("k{:03d}_map_{}", index, snake(n.op_type));
  k.nodes = {&n};
  k.params = {{"x0", x, false}, {"y0", y, true}};
  k.bytes_moved = (num_elements(*x->dims) + num_elements(*y->dims)) * dtype_size(x->dtype);
  const int64_t total = num_elements(*y->dims);
  k.block = {kMapBlock, 1, 1};
  k.grid = {std::clamp<int64_t>((total + kMapBlock - 1) / kMapBlock, 1, kMaxMapBlocks), 1, 1};
  k.mapping = fmt::format("grid-stride loop, one thread per output element of {}, window {}",
                          dims_to_string(*y->dims), dims_to_string(win.kernel));
  CudaWriter w;
  w.raw_line(kernel_header(k));
  const std::string st = storage_type(x->dtype);
  open_kernel(w, k, kMapBlock);
  const char* t = ix.type();
  auto lit = [&](int64_t v) { return ix.lit(v); };
  w.open(
      "for ({0} i = ({0})blockIdx.x * blockDim.x + threadIdx.x; i < {1}; i += ({0})gridDim.x * blockDim.x)",
      t, lit(total));
  const int64_t sp = win.spatial;
  const int64_t in_plane = num_elements(win.in), out_plane = num_elements(win.out);
  w.line("const {} plane = i / {};", t, lit(out_plane));
  w.line("{} t = i % {};", t, lit(out_plane));
  for (int64_t d = sp - 1; d >= 0; --d) {
    w.line("const {} o{} = t % {};", t, d, lit(win.out[d]));
    if (d > 0) w.line("t /= {};", lit(win.out[d]));
  }
  w.line("{} acc = {};", ct, is_max ? literal(-INFINITY, ct) : literal(0, ct));
  w.line("{} count = 0;", t);
  Dims is = ops::strides_of(win.in);
  for (int64_t d = 0; d < sp; ++d) {
    w.open("for ({0} k{1} = 0; k{1} < {2}; ++k{1})", t, d, lit(win.kernel[d]));
    w.line("const {0} p{1} = o{1} * {2} + k{1} * {3} - {4};", t, d, lit(win.strides[d]),
           lit(win.dilations[d]), lit(win.pad_begin[d]));
    if (include_pad && !is_max)
      w.line("if (p{} >= {}) continue;  // beyond the explicit padding (ceil_mode overhang)", d,
             lit(win.in[d] + win.pad_end[d]));
  }
  std::string inside, off;
  for (int64_t d = 0; d < sp; ++d) {
    inside += fmt::format("{0}p{1} >= 0 && p{1} < {2}", d ? " && " : "", d, lit(win.in[d]));
    off += fmt::format(" + p{} * {}", d, lit(is[d]));
  }
  if (include_pad && !is_max) w.line("++count;");
  w.open("if ({})", inside);
  const std::string v = st == "__half" || st == "__nv_bfloat16"
                            ? fmt::format("stitch_dev::cvt<float>(x0[plane * {}{}])", lit(in_plane), off)
                            : fmt::format("x0[plane * {}{}]", lit(in_plane), off);
  w.line("const {} v = {};", ct, v);
  if (is_max)
    w.line("acc = stitch_dev::Max()(acc, v);");
  else
    w.line("acc += v;");
  if (!(include_pad && !is_max)) w.line("++count;");
  w.close();
  for (int64_t d = 0; d < sp; ++d) w.close();
  std::string val = is_max ? "acc" : fmt::format("acc / ({})(count > 0 ? count : 1)", ct);
  if (st == "__half" || st == "__nv_bfloat16")
    w.line("y0[i] = stitch_dev::cvt<{}>({});", st, val);
  else
    w.line("y0[i] = {};", val);
  w.close();
  w.close();
  k.source = w.text();
  return k;
}

}  // namespace stitch::codegen
