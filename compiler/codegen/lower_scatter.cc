// Scatter kernels: ScatterElements and ScatterND (one block: the copy, then the updates), and
// TensorScatter (a KV cache written whole or, in place, only its update).
#include <fmt/format.h>

#include <limits>

#include "codegen/lower.h"
#include "codegen/map_builder.h"
#include "ops/index_check.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

using ops::strides_of;

}  // namespace

// ScatterElements / ScatterND: one block copies the data into the output, synchronises, then
// applies the updates: in parallel when reduction is "none" (ONNX leaves duplicate indices
// undefined), else by one thread in update order, so add/mul/max/min are exact and repeatable.
// One block keeps the copy-then-scatter order inside a single launch; it is slow on large
// tensors, which inference graphs rarely scatter into. An update whose index is out of range
// after wrapping a negative one is skipped, since its write would land outside the output, in
// another buffer of the arena, and reported as a fault of the node (the reference interpreter
// refuses it).
StatusOr<Kernel> lower_scatter(const Node& n, int index, IndexWidth ix) {
  const Value* data = n.input(0);
  const Value* ind = n.input(1);
  const Value* upd = n.input(2);
  const Value* out = n.output(0);
  const Dims& dd = dims(data);
  const std::string red = n.attr_string("reduction", "none");
  const bool nd = n.op_type == "ScatterND";
  Kernel k;
  k.name = fmt::format("k{:03d}_map_{}", index, snake(n.op_type));
  k.nodes = {&n};
  k.params = {{"x0", data, false}, {"x1", ind, false}, {"x2", upd, false}, {"y0", out, true}};
  k.bytes_moved = 2 * num_elements(dd) * dtype_size(out->dtype) +
                  num_elements(dims(ind)) * dtype_size(ind->dtype) +
                  num_elements(dims(upd)) * dtype_size(upd->dtype);
  k.block = {kMapBlock, 1, 1};
  k.grid = {1, 1, 1};
  k.mapping = fmt::format("one block: copy {} elements, barrier, then {} updates {}", num_elements(dd),
                          num_elements(dims(upd)),
                          red == "none" ? "in parallel" : "in order by one thread (" + red + ")");
  const std::string st = storage_type(out->dtype), ct = compute_type(out->dtype);
  const Dims ds = strides_of(dd);
  const int64_t r = static_cast<int64_t>(dd.size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), r));
  // An index outside its axis: the update skipped, and a fault reported (none where the indices are
  // known at compile time to be inside: known_in_range). Element `offset` of every `stride` of the
  // indices indexes axis d.
  auto skip = [&](int64_t d, const std::string& component, int64_t stride, int64_t offset) {
    if (known_in_range(ind, dd[d], stride, offset)) return fmt::format("if (j < 0) j += {}LL;", dd[d]);
    const std::string report = fault_call(
        k, n,
        fmt::format("index {{value}} of '{}'{}, along axis {} of '{}', is outside [-{}, {}): its update "
                    "was not written",
                    ind->name, component, d, data->name, dd[d], dd[d]),
        "j");
    return fmt::format("if (j < -{0}LL || j >= {0}LL) {{ {1} continue; }} if (j < 0) j += {0}LL;", dd[d],
                       report);
  };
  std::vector<std::string> checks;
  if (nd)
    for (int64_t c = 0, kk = dims(ind).back(); c < kk; ++c)
      checks.push_back(skip(c, fmt::format(" (component {} of a tuple)", c), kk, c));
  else
    checks.push_back(skip(axis, "", 1, 0));
  CudaWriter w;
  w.raw_line(kernel_header(k));
  open_kernel(w, k, kMapBlock);
  const char* t = ix.type();
  w.line("for ({} i = threadIdx.x; i < {}; i += blockDim.x) y0[i] = x0[i];", t, ix.lit(num_elements(dd)));
  w.line("__syncthreads();");
  const std::string updates = ix.lit(num_elements(dims(upd)));
  if (red == "none")
    w.open("for ({} u = threadIdx.x; u < {}; u += blockDim.x)", t, updates);
  else
    w.open("if (threadIdx.x == 0) for ({} u = 0; u < {}; ++u)", t, updates);
  w.line("{} off = 0;", t);
  const std::string j = narrow(ix, "j");
  if (nd) {
    const int64_t kk = dims(ind).back();
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(kk); d < dd.size(); ++d) inner *= dd[d];
    w.line("const {} pos = u / {};", t, ix.lit(inner));
    for (int64_t c = 0; c < kk; ++c)
      w.line("{{ long long j = (long long)x1[pos * {} + {}]; {} off += {} * {}; }}", ix.lit(kk), ix.lit(c),
             checks[static_cast<size_t>(c)], j, ix.lit(ds[c]));
    w.line("off += u % {};", ix.lit(inner));
  } else {
    const Dims& id = dims(ind);
    w.line("{} t = u;", t);
    for (int64_t d = r - 1; d >= 0; --d) {
      if (d == axis) {
        w.line("{{ long long j = (long long)x1[u]; {} off += {} * {}; }}", checks.front(), j, ix.lit(ds[d]));
      } else {
        w.line("off += (t % {}) * {};", ix.lit(id[d]), ix.lit(ds[d]));
      }
      if (d > 0) w.line("t /= {};", ix.lit(id[d]));
    }
  }
  const bool half = st == "__half" || st == "__nv_bfloat16";
  auto ld = [&](const std::string& e) {
    return half ? fmt::format("stitch_dev::cvt<float>({})", e) : fmt::format("({}){}", ct, e);
  };
  auto sto = [&](const std::string& e) {
    return half ? fmt::format("stitch_dev::cvt<{}>({})", st, e) : fmt::format("({})({})", st, e);
  };
  if (red == "none") {
    w.line("y0[off] = x2[u];");
  } else {
    const std::string a = ld("y0[off]"), b = ld("x2[u]");
    const std::string e = red == "add"   ? fmt::format("{} + {}", a, b)
                          : red == "mul" ? fmt::format("{} * {}", a, b)
                          : red == "max" ? fmt::format("stitch_dev::Max()({}, {})", a, b)
                                         : fmt::format("stitch_dev::Min()({}, {})", a, b);
    w.line("y0[off] = {};", sto(e));
  }
  w.close();
  w.close();
  k.source = w.text();
  return k;
}

// TensorScatter. In place (its present_cache shares past_cache's storage: schedule.cc), one thread
// per update element writes it at cache position (write index + s), modulo the cache length when
// circular; a linear write past the cache's end is dropped. Otherwise one thread per cache element
// takes the update at (c - write index) where that is inside the update, else the past value.
// A write index the reference interpreter refuses (negative, or in linear mode one that puts
// updates past the end) is reported as a fault (tensor_scatter_check).
std::pair<std::string, std::string> tensor_scatter_check(const Node& n, const std::string& first, int64_t len,
                                                         int64_t count) {
  const ops::IndexBounds b = ops::tensor_scatter_bounds(n, len, count);
  const bool circular = b.max == std::numeric_limits<int64_t>::max();
  if (const Value* w = n.input(2); w->is_constant() && !b.first_refused(w->constant->to_i64()))
    return {};  // known at compile time: checked only if bad
  return {b.message, circular ? fmt::format("{} < {}", first, b.min)
                              : fmt::format("{0} < {1}LL || {0} > {2}LL", first, b.min, b.max)};
}

StatusOr<Kernel> lower_tensor_scatter(const Node& n, int index, IndexWidth ix, bool in_place,
                                      const std::string& part_name) {
  const Value *past = n.input(0), *update = n.input(1), *start = n.inputs.size() > 2 ? n.input(2) : nullptr,
              *out = n.output(0);
  const Dims &pd = dims(past), &ud = dims(update);
  const int64_t r = static_cast<int64_t>(pd.size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", -2), r));
  const bool circular = n.attr_string("mode", "linear") == "circular";
  const int64_t len = pd[axis], count = ud[axis];
  const Dims ps = strides_of(pd), us = strides_of(ud);
  MapBuilder b(n, index, in_place ? ud : pd, ix);
  Dims along(pd.size(), 0), across = in_place ? ps : us;
  along[axis] = 1;
  across[axis] = 0;
  const std::string pos = b.affine(0, along);  // s (in place) or c
  const std::string first = start ? fmt::format("(long long){}[c0]", b.param(start, false)) : "0LL";
  if (start) b.coord(0);
  const std::string rest = b.affine(0, across);
  if (start)
    if (const auto [message, bad] = tensor_scatter_check(n, first, len, count); !bad.empty())
      b.line(fmt::format("if ({}) {}", bad, b.fault(n, message, first)));
  if (in_place) {
    b.line(fmt::format("long long c = (long long)({}) + {};", pos, first));
    if (circular)
      b.line(fmt::format("c %= {0}LL; if (c < 0) c += {0}LL;", len));
    else
      b.line(fmt::format("if (c < 0 || c >= {}LL) continue;  // past the cache: dropped", len));
    const std::string x = b.param(update, false);
    b.line(fmt::format("{}[{} + {} * {}] = {}[i];", b.param(out, true), rest, narrow(ix, "c"),
                       b.lit(ps[axis]), x));
    Kernel k =
        b.finish(fmt::format(", the update written in place along axis {} of a {}-position cache", axis, len),
                 part_name);
    k.bytes_moved = 2 * num_elements(ud) * dtype_size(update->dtype) + (start ? dims(start)[0] * 8 : 0);
    return k;
  }
  b.line(fmt::format("long long s = (long long)({}) - {};", pos, first));
  if (circular) b.line(fmt::format("s %= {0}LL; if (s < 0) s += {0}LL;", len));
  const std::string x = b.param(update, false), p = b.param(past, false), y = b.param(out, true);
  b.line(fmt::format("{}[i] = (s >= 0 && s < {}LL) ? {}[{} + {} * {}] : {}[i];", y, count, x, rest,
                     narrow(ix, "s"), b.lit(us[axis]), p));
  return b.finish(fmt::format(", the update gathered along axis {}", axis), part_name);
}

StatusOr<Kernel> lower_tensor_scatter(const Node& n, int index, bool in_place, int64_t index32_limit) {
  return lower_tensor_scatter(n, index, index_width({&n}, index32_limit), in_place);
}

}  // namespace stitch::codegen
