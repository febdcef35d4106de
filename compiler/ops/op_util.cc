#include "ops/op_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace stitch::ops {

std::optional<Dims> broadcast_dims(const Dims& a, const Dims& b) {
  size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else return std::nullopt;
  }
  return out;
}

Dims strides_of(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * dims[i + 1];
  return s;
}

Dims broadcast_strides(const Dims& in, const Dims& out) {
  Dims s(out.size(), 0);
  Dims own = strides_of(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : own[i];
  return s;
}

BroadcastWalker::BroadcastWalker(const Dims& out, std::vector<Dims> in_strides)
    : out_(out), strides_(std::move(in_strides)) {}

namespace {

// The graph input whose values (not only its shape: Shape and Size read that alone) `v` is
// computed from, or null; `via` gets the node reading it.
const Value* value_source(const Value* v, const Node*& via) {
  std::vector<const Value*> todo{v};
  std::set<const Value*> seen{v};
  while (!todo.empty()) {
    const Value* u = todo.back();
    todo.pop_back();
    const Node* p = u->producer;
    if (!p || p->op_type == "Shape" || p->op_type == "Size") continue;
    for (const Value* in : p->inputs) {
      if (!in || in->constant || !seen.insert(in).second) continue;
      if (!in->producer) {
        via = p;
        return in;
      }
      todo.push_back(in);
    }
  }
  return nullptr;
}

}  // namespace

Tensor copy_strided(const Tensor& src, const Dims& out_dims, int64_t base, const Dims& strides) {
  Tensor y(src.dtype(), out_dims);
  const int esz = dtype_size(src.dtype());
  const uint8_t* s = src.data();
  uint8_t* d = y.data();
  BroadcastWalker(out_dims, {strides}).run([&](int64_t i, const std::vector<int64_t>& o) {
    std::memcpy(d + i * esz, s + (base + o[0]) * esz, esz);
  });
  return y;
}

Status run_time_operand_error(const InferContext& ctx, size_t input, const char* what) {
  const Value* v = ctx.node().inputs[input];
  std::string why;
  const Node* via = nullptr;
  if (!v->producer)
    why = "it is a graph input: make it an initializer, a constant in the model";
  else if (const Value* src = value_source(v, via))
    why = fmt::format(
        "it follows the values of input '{}' (read by {}), so the shapes after it depend on the "
        "data, which stitch cannot compile ahead of time; export the model with sizes that do not "
        "depend on its inputs' values",
        src->name, via->describe());
  else
    why = "bind every dynamic dimension with --shape so it folds to a constant";
  return ctx.error(
      fmt::format("its {} (input {} '{}') is computed at run time; stitch needs it known at compile time "
                  "({})",
                  what, input, v->name, why));
}

StatusOr<std::vector<int64_t>> const_ints(const InferContext& ctx, size_t input,
                                          const char* what) {
  const Tensor* t = ctx.constant(input);
  if (!t) return run_time_operand_error(ctx, input, what);
  if (!is_int(t->dtype()))
    return ctx.error(fmt::format("its {} must be an integer tensor, got {}", what,
                                 dtype_name(t->dtype())));
  return t->to_i64();
}

StatusOr<std::optional<std::vector<int64_t>>> axes_operand(const InferContext& ctx,
                                                           size_t input, const char* attr) {
  if (ctx.node().has_attr(attr))
    return std::optional<std::vector<int64_t>>(ctx.node().attr_ints(attr));
  if (ctx.has_input(input)) {
    ASSIGN_OR_RETURN(auto v, const_ints(ctx, input, attr));
    return std::optional<std::vector<int64_t>>(std::move(v));
  }
  return std::optional<std::vector<int64_t>>();
}

std::optional<std::vector<int64_t>> axes_operand_eval(const Node& n,
                                                      std::span<const Tensor* const> in,
                                                      size_t input, const char* attr) {
  if (n.has_attr(attr)) return n.attr_ints(attr);
  if (input < in.size() && in[input]) return in[input]->to_i64();
  return std::nullopt;
}

bool same_type_as_input0(const Node& n) {
  const Value* in = n.input(0);
  const Value* out = n.output(0);
  return in && out && in->dtype == out->dtype && in->dims && out->dims && *in->dims == *out->dims;
}

Status same_as_input0(InferContext& ctx) {
  ctx.set_output(0, ctx.dtype(0), ctx.dims(0));
  return Status::ok();
}

bool tensor_scatter_in_place(const Graph& g, const Node& n) {
  const Value* past = n.input(0);
  if (n.op_type != "TensorScatter" || !past || !n.output(0) || g.is_graph_output(past)) return false;
  if (std::find(g.inputs.begin(), g.inputs.end(), past) == g.inputs.end()) return false;
  int reads = 0;  // n's own read among them
  for (const auto& node : g.nodes())
    for (const Value* v : node->inputs) reads += v == past;
  return reads == 1;
}

}  // namespace stitch::ops
