// Element-parallel kernels: one thread per element of an iteration domain (the output, or the
// input for Split), in a grid-stride loop. The flat index i is split into coordinates c0..cR-1
// only as far as some operand needs them; every operand offset is then an expression of those
// coordinates: affine (broadcast, transpose, slice, expand), modular (tile), guarded (pad), or
// read through an index tensor (gather). Elementwise ops compute their scalar expression
// (scalar_ops.h) on operands converted to the compute type; layout ops copy storage values as
// they are.
#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "codegen/map_builder.h"
#include "codegen/scalar_ops.h"
#include "ops/index_check.h"
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "support/check.h"

namespace stitch::codegen {

Status emit_chain(MapBuilder& b, const std::vector<const Node*>& nodes, std::map<const Value*, std::string>& reg,
                  const std::set<const Value*>& stored) {
  const Dims& domain = b.domain();
  int loads = 0;
  for (size_t j = 0; j < nodes.size(); ++j) {
    const Node& n = *nodes[j];
    const Value* out = n.output(0);
    STITCH_CHECK(*out->dims == domain, "chained node {} has shape {}, not the domain's {}", n.describe(),
                 dims_to_string(*out->dims), dims_to_string(domain));
    std::vector<std::string> args;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Value* v = n.input(k);
      if (!reads_operand(n, k)) {
        args.emplace_back();
        continue;
      }
      const bool per_channel = n.op_type == "BatchNormalization" && k > 0;
      if (!per_channel && reg.count(v)) {
        args.push_back(reg.at(v));
        continue;
      }
      Dims strides;
      if (per_channel) {  // per-channel parameters along axis 1
        strides.assign(domain.size(), 0);
        strides[1] = 1;
      } else {
        strides = ops::broadcast_strides(*v->dims, domain);
      }
      const std::string name = fmt::format("a{}", loads++);
      b.line(fmt::format("const {} {} = {};", compute_type(v->dtype), name, b.load(v, b.affine(0, strides))));
      if (!per_channel) reg[v] = name;
      args.push_back(name);
    }
    ASSIGN_OR_RETURN(std::string expr, scalar_expr(n, args, &b.kernel()));
    if (nodes.size() == 1 && stored.count(out)) {  // a single node: store the expression directly
      b.store(out, b.flat(), expr);
      continue;
    }
    const std::string t = fmt::format("t{}", j);
    b.line(fmt::format("const {} {} = {};  // {} '{}'", compute_type(out->dtype), t, expr, n.op_type, n.name));
    reg[out] = t;
    if (stored.count(out)) b.store(out, b.flat(), t);
  }
  return Status::ok();
}

namespace {

using ops::strides_of;

StatusOr<std::vector<int64_t>> const_input(const Node& n, size_t i, const char* what) {
  const Value* v = n.input(i);
  if (v == nullptr || !v->is_constant())
    return Status::user(fmt::format("{}: {} must be a compile-time constant for code generation", n.describe(), what));
  return v->constant->to_i64();
}

// ---- elementwise and broadcast -------------------------------------------------------------

// The 128-bit path: every operand is either the output's shape (read as float4/int4) or a single
// element (read once); 4-byte types; a multiple of 4 elements. Buffers start 256-byte aligned.
bool can_vectorize(const Node& n) {
  const Value* out = n.output(0);
  if (n.op_type == "BatchNormalization" || n.op_type == "CastLike" || n.op_type == ops::kIndexCheck ||
      !is_word(out->dtype))
    return false;
  const int64_t total = num_elements(dims(out));
  if (total < 4 || total % 4 != 0) return false;
  for (const Value* v : n.inputs) {
    if (v == nullptr) continue;
    const int64_t e = num_elements(dims(v));
    if (e == 1) continue;
    if (e != total || !is_word(v->dtype)) return false;
  }
  return true;
}

StatusOr<Kernel> lower_scalar_vec4(const Node& n, int index, IndexWidth ix) {
  const Value* out = n.output(0);
  const int64_t total = num_elements(dims(out));
  Kernel k;
  k.name = fmt::format("k{:03d}_map_{}", index, snake(n.op_type));
  k.nodes = {&n};
  std::vector<std::string> loads, scalars;
  std::vector<std::pair<const Value*, std::string>> operand(n.inputs.size());
  int ins = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* v = n.input(i);
    if (!reads_operand(n, i)) continue;
    std::string name;
    for (const KernelParam& p : k.params)
      if (p.value == v) name = p.name;
    if (name.empty()) {
      name = fmt::format("x{}", ins++);
      k.params.push_back({name, v, false});
      k.bytes_moved += num_elements(dims(v)) * dtype_size(v->dtype);
    }
    operand[i] = {v, name};
  }
  k.params.push_back({"y0", out, true});
  k.bytes_moved += total * dtype_size(out->dtype);
  const int64_t vecs = total / 4;
  k.block = {kMapBlock, 1, 1};
  k.grid = {std::clamp<int64_t>((vecs + kMapBlock - 1) / kMapBlock, 1, kMaxMapBlocks), 1, 1};
  k.mapping = fmt::format("grid-stride loop, one thread per 4 elements of {} ({} elements) with 128-bit loads and stores",
                          dims_to_string(dims(out)), total);
  CudaWriter w;
  w.raw_line(kernel_header(k));
  open_kernel(w, k, kMapBlock);
  w.open(
      "for ({0} v = ({0})blockIdx.x * blockDim.x + threadIdx.x; v < {1}; v += ({0})gridDim.x * blockDim.x)",
      ix.type(), ix.lit(vecs));
  std::set<std::string> loaded;
  for (const auto& [v, name] : operand) {
    if (v == nullptr || loaded.count(name)) continue;
    loaded.insert(name);
    if (num_elements(dims(v)) == 1) w.line("const {} {}s = {}[0];", storage_type(v->dtype), name, name);
    else
      w.line("const {0} {1}v = reinterpret_cast<const {0}*>({1})[v];", vec4_type(v->dtype), name);
  }
  w.line("{} r;", vec4_type(out->dtype));
  for (const char* c : {"x", "y", "z", "w"}) {
    std::vector<std::string> args;
    std::string decl;
    for (size_t i = 0; i < operand.size(); ++i) {
      const auto& [v, name] = operand[i];
      if (v == nullptr) {
        args.emplace_back();
        continue;
      }
      const std::string src = num_elements(dims(v)) == 1 ? name + "s" : fmt::format("{}v.{}", name, c);
      const std::string a = fmt::format("a{}", i);
      decl += fmt::format("const {} {} = ({}){}; ", compute_type(v->dtype), a, compute_type(v->dtype), src);
      args.push_back(a);
    }
    ASSIGN_OR_RETURN(std::string expr, scalar_expr(n, args));
    w.line("{{ {}r.{} = ({})({}); }}", decl, c, storage_type(out->dtype), expr);
  }
  w.line("reinterpret_cast<{}*>(y0)[v] = r;", vec4_type(out->dtype));
  w.close();
  w.close();
  k.source = w.text();
  return k;
}

StatusOr<Kernel> lower_scalar(const Node& n, int index, IndexWidth ix) {
  if (can_vectorize(n)) return lower_scalar_vec4(n, index, ix);
  MapBuilder b(n, index, dims(n.output(0)), ix);
  std::map<const Value*, std::string> reg;
  RETURN_IF_ERROR(emit_chain(b, {&n}, reg, {n.output(0)}));
  return b.finish();
}

// Trilu: zero outside the kept triangle of the last two axes.
StatusOr<Kernel> lower_trilu(const Node& n, int index, IndexWidth ix) {
  const Value* out = n.output(0);
  const size_t r = dims(out).size();
  int64_t k = 0;
  if (n.input(1)) {
    ASSIGN_OR_RETURN(auto kv, const_input(n, 1, "k"));
    k = kv.at(0);
  }
  const bool upper = n.attr_int("upper", 1) != 0;
  // The coordinates' difference lies within +-kIndex32Limit, so k past it means the same as there.
  k = std::clamp(k, -kIndex32Limit, kIndex32Limit);
  MapBuilder b(n, index, dims(out), ix);
  std::string cond =
      fmt::format("{} - {} {} {}", b.coord(r - 1), b.coord(r - 2), upper ? ">=" : "<=", b.lit(k));
  std::string y = b.param(out, true), x = b.param(n.input(0), false);
  b.line(fmt::format("{}[i] = ({}) ? {}[i] : ({})0;", y, cond, x, storage_type(out->dtype)));
  return b.finish();
}

// ---- layout: one source element per output element ------------------------------------------

StatusOr<Kernel> copy_affine(const Node& n, int index, int64_t base, const Dims& strides, IndexWidth ix) {
  const Value* out = n.output(0);
  MapBuilder b(n, index, dims(out), ix);
  std::string src = b.param(n.input(0), false);
  std::string off = b.affine(base, strides);
  b.line(fmt::format("{}[i] = {}[{}];", b.param(out, true), src, off));
  return b.finish();
}

StatusOr<Kernel> lower_transpose(const Node& n, int index, IndexWidth ix) {
  const Dims& in = dims(n.input(0));
  ASSIGN_OR_RETURN(auto perm, ops::transpose_perm(n, static_cast<int64_t>(in.size())));
  if (auto tiled = lower_transpose_tiled(n, index, perm, ix)) return std::move(*tiled);
  Dims s = strides_of(in), strides;
  for (int64_t p : perm) strides.push_back(s[p]);
  return copy_affine(n, index, 0, strides, ix);
}

StatusOr<Kernel> lower_slice(const Node& n, int index, IndexWidth ix) {
  ASSIGN_OR_RETURN(auto starts, const_input(n, 1, "starts"));
  ASSIGN_OR_RETURN(auto ends, const_input(n, 2, "ends"));
  std::optional<std::vector<int64_t>> axes, steps;
  if (n.input(3)) { ASSIGN_OR_RETURN(axes, const_input(n, 3, "axes")); }
  if (n.input(4)) { ASSIGN_OR_RETURN(steps, const_input(n, 4, "steps")); }
  ASSIGN_OR_RETURN(ops::SliceSpec sp, ops::slice_spec(n, dims(n.input(0)), starts, ends, axes, steps));
  return copy_affine(n, index, sp.base, sp.strides, ix);
}

StatusOr<Kernel> lower_expand(const Node& n, int index, IndexWidth ix) {
  return copy_affine(n, index, 0, ops::broadcast_strides(dims(n.input(0)), dims(n.output(0))), ix);
}

StatusOr<Kernel> lower_tile(const Node& n, int index, IndexWidth ix) {
  const Value* out = n.output(0);
  const Dims& in = dims(n.input(0));
  Dims s = strides_of(in);
  MapBuilder b(n, index, dims(out), ix);
  std::string off;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 1) continue;
    std::string c = dims(out)[d] == in[d] ? b.coord(d) : fmt::format("({} % {})", b.coord(d), b.lit(in[d]));
    std::string term = s[d] == 1 ? c : fmt::format("{} * {}", c, b.lit(s[d]));
    if (!off.empty()) off += " + ";
    off += term;
  }
  if (off.empty()) off.push_back('0');
  b.line(fmt::format("{}[i] = {}[{}];", b.param(out, true), b.param(n.input(0), false), off));
  return b.finish();
}

StatusOr<Kernel> lower_pad(const Node& n, int index, IndexWidth ix) {
  const Value* out = n.output(0);
  const Dims& in = dims(n.input(0));
  const int64_t r = static_cast<int64_t>(in.size());
  ASSIGN_OR_RETURN(auto pads, const_input(n, 1, "pads"));
  std::optional<std::vector<int64_t>> axes;
  if (n.input(3)) { ASSIGN_OR_RETURN(axes, const_input(n, 3, "axes")); }
  ASSIGN_OR_RETURN(auto p, ops::full_pads(n, r, pads, axes));
  const std::string mode = n.attr_string("mode", "constant");
  const std::string st = storage_type(out->dtype);
  MapBuilder b(n, index, dims(out), ix);
  std::string y = b.param(out, true), x = b.param(n.input(0), false);
  std::string fill = fmt::format("({})0", st);
  if (mode == "constant" && n.input(2) && num_elements(dims(n.input(2))) > 0) {
    if (!n.input(2)->is_constant()) {
      fill = fmt::format("{}[0]", b.param(n.input(2), false));
    } else {
      const Tensor& t = *n.input(2)->constant;
      const std::string ct = compute_type(out->dtype);
      const std::string lit = first_literal(t, ct);
      fill = ct == st ? lit : fmt::format("stitch_dev::cvt<{}>({})", st, lit);
    }
  }
  Dims s = strides_of(in);
  const char* t = ix.type();
  b.line(fmt::format("{} off = 0;", t));
  b.line("bool inside = true;");
  for (int64_t d = 0; d < r; ++d) {
    if (p[d] == 0 && p[d + r] == 0) {
      if (in[d] > 1) b.line(fmt::format("off += {} * {};", b.coord(d), b.lit(s[d])));
      continue;
    }
    b.line(fmt::format("{{ {} j = {} - {};", t, b.coord(d), b.lit(p[d])));
    b.indent(1);
    const std::string dim = b.lit(in[d]);
    if (mode == "constant") {
      b.line(fmt::format("inside = inside && j >= 0 && j < {};", dim));
    } else if (mode == "edge") {
      b.line(fmt::format("j = j < 0 ? 0 : (j >= {0} ? {0} - 1 : j);", dim));
    } else if (mode == "wrap") {
      b.line(fmt::format("j = ((j % {0}) + {0}) % {0};", dim));
    } else {  // reflect, without repeating the edge
      const int64_t period = 2 * (in[d] - 1);
      if (period == 0) {
        b.line("j = 0;");
      } else {
        b.line(fmt::format("j = ((j % {0}) + {0}) % {0};", b.lit(period)));
        b.line(fmt::format("if (j >= {}) j = {} - j;", dim, b.lit(period)));
      }
    }
    b.line(fmt::format("off += j * {}; }}", b.lit(s[d])));
    b.indent(-1);
  }
  b.line(fmt::format("{}[i] = inside ? {}[off] : {};", y, x, fill));
  return b.finish(fmt::format(", {} padding", mode));
}

StatusOr<Kernel> lower_concat(const Node& n, int index, IndexWidth ix) {
  const Value* out = n.output(0);
  const int64_t r = static_cast<int64_t>(dims(out).size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), r));
  MapBuilder b(n, index, dims(out), ix);
  std::string y = b.param(out, true);
  int64_t start = 0;
  bool first = true;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const Value* v = n.input(k);
    const int64_t len = dims(v)[axis];
    if (len == 0) continue;
    Dims s = strides_of(dims(v));
    const int64_t base = -start * s[axis];
    std::string off = b.affine(base, s);
    std::string cond = fmt::format("{} < {}", b.coord(axis), b.lit(start + len));
    const bool last = start + len == dims(out)[axis];
    if (last) b.line(first ? "{" : "} else {");
    else b.line(fmt::format("{}if ({}) {{", first ? "" : "} else ", cond));
    b.indent(1);
    b.line(fmt::format("{}[i] = {}[{}];", y, b.param(v, false), off));
    b.indent(-1);
    first = false;
    start += len;
  }
  if (!first) b.line("}");
  return b.finish(fmt::format(", {} inputs along axis {}", n.inputs.size(), axis));
}

// Split iterates over the input and writes each element to the output that owns it.
StatusOr<Kernel> lower_split(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const int64_t r = static_cast<int64_t>(dims(x).size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), r));
  std::optional<std::vector<int64_t>> split;
  if (n.input(1)) { ASSIGN_OR_RETURN(split, const_input(n, 1, "split")); }
  else if (n.has_attr("split")) split = n.attr_ints("split");
  ASSIGN_OR_RETURN(auto sizes, ops::split_sizes(n, dims(x)[axis], n.outputs.size(), split));
  MapBuilder b(n, index, dims(x), ix);
  std::string src = b.param(x, false);
  int64_t start = 0;
  bool first = true;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const Value* v = n.output(k);
    const int64_t len = sizes[k];
    if (v == nullptr || len == 0) {
      if (v != nullptr) b.param(v, true);  // empty output: a parameter, never written
      start += len;
      continue;
    }
    Dims s = strides_of(dims(v)), full(r, 0);
    for (int64_t d = 0; d < r; ++d) full[d] = s[d];
    std::string off = b.affine(-start * s[axis], full);
    b.line(fmt::format("{}if ({} >= {} && {} < {}) {{", first ? "" : "} else ", b.coord(axis), b.lit(start),
                       b.coord(axis), b.lit(start + len)));
    b.indent(1);
    b.line(fmt::format("{}[{}] = {}[i];", b.param(v, true), off, src));
    b.indent(-1);
    first = false;
    start += len;
  }
  if (!first) b.line("}");
  return b.finish(fmt::format(", split into {} outputs along axis {}", n.outputs.size(), axis));
}

// Gather: out[pre, idx..., post] = data[pre, indices[idx...], post].
StatusOr<Kernel> lower_gather(const Node& n, int index, IndexWidth ix) {
  const Value* data = n.input(0);
  const Value* ind = n.input(1);
  const Value* out = n.output(0);
  const Dims& dd = dims(data);
  const int64_t r = static_cast<int64_t>(dd.size()), q = static_cast<int64_t>(dims(ind).size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), r));
  MapBuilder b(n, index, dims(out), ix);
  Dims ds = strides_of(dd), is = strides_of(dims(ind));
  // Index tensor offset from output coordinates axis..axis+q-1.
  Dims istr(dims(out).size(), 0);
  for (int64_t j = 0; j < q; ++j) istr[axis + j] = is[j];
  b.line(fmt::format("long long j = (long long){}[{}];", b.param(ind, false), b.affine(0, istr)));
  b.check_index(n, "j", axis);
  Dims dstr(dims(out).size(), 0);
  for (int64_t d = 0; d < axis; ++d) dstr[d] = ds[d];
  for (int64_t d = axis + 1; d < r; ++d) dstr[d + q - 1] = ds[d];
  std::string off = b.affine(0, dstr);
  b.line(fmt::format("{}[i] = {}[{} + {} * {}];", b.param(out, true), b.param(data, false), off,
                     narrow(ix, "j"), b.lit(ds[axis])));
  return b.finish(fmt::format(", indices along axis {}", axis));
}

StatusOr<Kernel> lower_gather_elements(const Node& n, int index, IndexWidth ix) {
  const Value* data = n.input(0);
  const Value* ind = n.input(1);
  const Value* out = n.output(0);
  const Dims& dd = dims(data);
  const int64_t r = static_cast<int64_t>(dd.size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), r));
  MapBuilder b(n, index, dims(out), ix);
  Dims ds = strides_of(dd);
  b.line(fmt::format("long long j = (long long){}[i];", b.param(ind, false)));
  b.check_index(n, "j", axis);
  Dims dstr = ds;
  dstr[axis] = 0;
  std::string off = b.affine(0, dstr);
  b.line(fmt::format("{}[i] = {}[{} + {} * {}];", b.param(out, true), b.param(data, false), off,
                     narrow(ix, "j"), b.lit(ds[axis])));
  return b.finish(fmt::format(", indices along axis {}", axis));
}

// GatherND: out[b..., i...] = data[b..., indices[b..., i..., :], rest...].
StatusOr<Kernel> lower_gather_nd(const Node& n, int index, IndexWidth ix) {
  const Value* data = n.input(0);
  const Value* ind = n.input(1);
  const Value* out = n.output(0);
  const Dims& dd = dims(data);
  const Dims& id = dims(ind);
  const int64_t bd = n.attr_int("batch_dims", 0), q = static_cast<int64_t>(id.size());
  const int64_t last = id.back();
  MapBuilder b(n, index, dims(out), ix);
  Dims ds = strides_of(dd), is = strides_of(id);
  // Output coordinates: [0, q-1) follow indices' leading dims, then data dims bd+last...
  Dims istr(dims(out).size(), 0);
  for (int64_t d = 0; d < q - 1; ++d) istr[d] = is[d];
  b.line(fmt::format("const {} ib = {};", ix.type(), b.affine(0, istr)));
  Dims dstr(dims(out).size(), 0);
  for (int64_t d = 0; d < bd; ++d) dstr[d] = ds[d];
  for (int64_t d = bd + last; d < static_cast<int64_t>(dd.size()); ++d) dstr[q - 1 + d - bd - last] = ds[d];
  b.line(fmt::format("{} off = {};", ix.type(), b.affine(0, dstr)));
  const std::string ip = b.param(ind, false);
  for (int64_t k = 0; k < last; ++k) {
    b.line(fmt::format("{{ long long j = (long long){}[ib + {}];", ip, b.lit(k)));
    b.indent(1);
    b.check_index(n, "j", bd + k, k);
    b.line(fmt::format("off += {} * {}; }}", narrow(ix, "j"), b.lit(ds[bd + k])));
    b.indent(-1);
  }
  b.line(fmt::format("{}[i] = {}[off];", b.param(out, true), b.param(data, false)));
  return b.finish(fmt::format(", {} index components, {} batch dims", last, bd));
}

// Dropout in inference mode with its mask requested: a copy, and a mask of all true.
StatusOr<Kernel> lower_dropout_mask(const Node& n, int index, IndexWidth ix) {
  const Value* out = n.output(0);
  MapBuilder b(n, index, dims(out), ix);
  b.line(fmt::format("{}[i] = {}[i];", b.param(out, true), b.param(n.input(0), false)));
  b.line(fmt::format("{}[i] = true;", b.param(n.output(1), true)));
  return b.finish(", inference Dropout: copy and an all-true mask");
}

}  // namespace

// Col2Im: each output element [n, c, image position] sums the block elements that land on it: for
// each block offset, the block position it came from along each axis (when the position minus the
// offset is a whole number of strides inside the block grid).
StatusOr<Kernel> lower_col2im(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const Value* out = n.output(0);
  ASSIGN_OR_RETURN(auto image, const_input(n, 1, "image_shape"));
  ASSIGN_OR_RETURN(auto block, const_input(n, 2, "block_shape"));
  ASSIGN_OR_RETURN(ops::Window w, ops::col2im_window(n, dims(x), Dims(image.begin(), image.end()),
                                                     Dims(block.begin(), block.end())));
  const size_t sp = image.size();
  const int64_t k = num_elements(w.kernel), blocks = num_elements(w.out), c = dims(out)[1];
  const Dims ks = strides_of(w.kernel), ls = strides_of(w.out);
  MapBuilder b(n, index, dims(out), ix);
  const char* t = ix.type();
  const std::string ct = compute_type(out->dtype);
  b.line(fmt::format("{} acc = 0;", ct));
  b.line(fmt::format("const {} row = ({} * {} + {}) * {};", t, b.coord(0), b.lit(c), b.coord(1), b.lit(k)));
  b.line(fmt::format("for ({0} kk = 0; kk < {1}; ++kk) {{", t, b.lit(k)));
  b.indent(1);
  b.line(fmt::format("{} at = 0;", t));
  b.line("bool in = true;");
  for (size_t d = 0; d < sp; ++d) {
    b.line(fmt::format("const {} p{} = {} + {} - (kk / {} % {}) * {};", t, d, b.coord(2 + d),
                       b.lit(w.pad_begin[d]), b.lit(ks[d]), b.lit(w.kernel[d]), b.lit(w.dilations[d])));
    b.line(fmt::format("in = in && p{0} >= 0 && p{0} % {1} == 0 && p{0} / {1} < {2};", d, b.lit(w.strides[d]),
                       b.lit(w.out[d])));
    b.line(fmt::format("at += p{} / {} * {};", d, b.lit(w.strides[d]), b.lit(ls[d])));
  }
  b.line(fmt::format("if (in) acc += {};", b.load(x, fmt::format("(row + kk) * {} + at", b.lit(blocks)))));
  b.indent(-1);
  b.line("}");
  b.store(out, "i", "acc");
  return b.finish(fmt::format(", each summing its {} block offsets", k));
}

StatusOr<Kernel> lower_map(const Node& n, int index, IndexWidth ix) {
  const std::string& op = n.op_type;
  if (has_scalar_expr(n)) return lower_scalar(n, index, ix);
  if (op == "Trilu") return lower_trilu(n, index, ix);
  if (op == "Dropout") return lower_dropout_mask(n, index, ix);
  if (op == "ScatterElements" || op == "ScatterND") return lower_scatter(n, index, ix);
  if (op == "TensorScatter") return lower_tensor_scatter(n, index, ix, false);
  if (op == "Transpose") return lower_transpose(n, index, ix);
  if (op == "Slice") return lower_slice(n, index, ix);
  if (op == "Expand") return lower_expand(n, index, ix);
  if (op == "Tile") return lower_tile(n, index, ix);
  if (op == "Pad") return lower_pad(n, index, ix);
  if (op == "Concat") return lower_concat(n, index, ix);
  if (op == "Split") return lower_split(n, index, ix);
  if (op == "Gather") return lower_gather(n, index, ix);
  if (op == "GatherElements") return lower_gather_elements(n, index, ix);
  if (op == "GatherND") return lower_gather_nd(n, index, ix);
  if (op == "Col2Im") return lower_col2im(n, index, ix);
  return Status::internal(fmt::format("{}: lower_map has no rule", n.describe()));
}

}  // namespace stitch::codegen
