// Reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare},
// ArgMax/ArgMin, TopK, Softmax/LogSoftmax/Hardmax and CumSum. Accumulation is in
// double, but integer reductions other than LogSumExp, and CumSum, stay exact (wrapping as the
// kernels do), and integer ArgMax/ArgMin and TopK compare exactly (uint64 as unsigned).
#include <cmath>
#include <limits>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

std::vector<int64_t> output_offsets(const Dims& in, const ReduceAxes& r) {
  Dims out_full = in;
  for (size_t i = 0; i < in.size(); ++i)
    if (r.reduced[i]) out_full[i] = 1;
  Dims s = broadcast_strides(out_full, in);
  std::vector<int64_t> offs(static_cast<size_t>(num_elements(in)));
  BroadcastWalker(in, {s}).run([&](int64_t i, const std::vector<int64_t>& o) { offs[i] = o[0]; });
  return offs;
}

StatusOr<ReduceAxes> softmax_axes(const Node& n, int64_t rank) {
  const bool legacy = n.opset < 13;
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, n.attr_int("axis", legacy ? 1 : -1), rank));
  ReduceAxes r;
  r.reduced.assign(static_cast<size_t>(rank), false);
  for (int64_t d = axis; d < (legacy ? rank : axis + 1); ++d) r.reduced[static_cast<size_t>(d)] = true;
  return r;
}

namespace {

// Opset from which each Reduce op takes its axes as input 1 instead of an attribute.
int axes_input_since(const std::string& op) { return op == "ReduceSum" ? 13 : 18; }

}  // namespace

StatusOr<ReduceAxes> reduce_axes(const Node& n, std::optional<std::vector<int64_t>> axes,
                                 int64_t rank) {
  ReduceAxes r;
  r.reduced.assign(static_cast<size_t>(rank), false);
  if (!axes || axes->empty()) {
    if (n.attr_int("noop_with_empty_axes", 0)) r.identity = true;
    else r.reduced.assign(static_cast<size_t>(rank), true);
    return r;
  }
  for (int64_t a : *axes) {
    ASSIGN_OR_RETURN(int64_t ax, norm_axis(n, a, rank));
    if (r.reduced[ax]) return node_error(n, fmt::format("axis {} is listed twice", a));
    r.reduced[ax] = true;
  }
  return r;
}

StatusOr<ReduceAxes> constant_reduce_axes(const Node& n, int64_t rank) {
  std::optional<std::vector<int64_t>> axes;
  if (n.opset >= axes_input_since(n.op_type)) {
    if (const Value* a = n.input(1)) {
      if (!a->is_constant())
        return Status::user(fmt::format("{}: axes must be a compile-time constant for code generation", n.describe()));
      axes = a->constant->to_i64();
    }
  } else if (n.has_attr("axes")) {
    axes = n.attr_ints("axes");
  }
  return reduce_axes(n, axes, rank);
}

namespace {

Dims reduced_dims(const Dims& in, const ReduceAxes& r, bool keep) {
  if (r.identity) return in;
  Dims out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!r.reduced[i]) out.push_back(in[i]);
    else if (keep) out.push_back(1);
  }
  return out;
}

std::optional<std::vector<int64_t>> axes_of(const Node& n, std::span<const Tensor* const> in) {
  if (n.opset >= axes_input_since(n.op_type)) {
    if (in.size() > 1 && in[1]) return in[1]->to_i64();
    return std::nullopt;
  }
  if (n.has_attr("axes")) return n.attr_ints("axes");
  return std::nullopt;
}

Status infer_reduce(InferContext& ctx) {
  const Node& n = ctx.node();
  std::optional<std::vector<int64_t>> axes;
  if (n.opset >= axes_input_since(n.op_type)) {
    // From that opset an 'axes' attribute is not part of the op (onnx.checker refuses it); read
    // as nothing, it would reduce every axis where the exporter meant its own.
    if (n.has_attr("axes"))
      return ctx.error(fmt::format(
          "has an 'axes' attribute, but from opset {} its axes are input 1 (this model is at opset {}): "
          "pass the axes as a constant second input or lower the model's opset",
          axes_input_since(n.op_type), n.opset));
    if (ctx.has_input(1)) {
      ASSIGN_OR_RETURN(auto v, const_ints(ctx, 1, "axes"));
      axes = v;
    }
  } else {
    // Before its axes became input 1, the op has one input; a second would be silently ignored
    // (every axis reduced) where the exporter meant it as the axes.
    if (ctx.num_inputs() > 1)
      return ctx.error(
          fmt::format("has {} inputs, but at opset {} it takes one (its axes are an attribute; input 1 "
                      "holds them from opset {}): move the axes into the 'axes' attribute or raise the "
                      "model's opset",
                      ctx.num_inputs(), n.opset, axes_input_since(n.op_type)));
    if (n.has_attr("axes")) axes = n.attr_ints("axes");
  }
  if (ctx.dtype(0) == DType::kBool) {
    // ReduceMax and ReduceMin of bool (any and all) from opset 20.
    const bool extreme = n.op_type == "ReduceMax" || n.op_type == "ReduceMin";
    if (!extreme) return ctx.error("does not take bool inputs");
    if (n.opset < 20)
      return ctx.error(
          fmt::format("takes bool inputs from opset 20 (the model's is {}): raise the model's opset or cast "
                      "them to uint8",
                      n.opset));
  }
  ASSIGN_OR_RETURN(ReduceAxes r, reduce_axes(n, axes, ctx.rank(0)));
  ctx.set_output(0, ctx.dtype(0), reduced_dims(ctx.dims(0), r, n.attr_int("keepdims", 1) != 0));
  return Status::ok();
}

Status eval_reduce(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(ReduceAxes r, reduce_axes(n, axes_of(n, in), x.rank()));
  if (r.identity) {
    out[0] = x;
    return Status::ok();
  }
  Dims od = reduced_dims(x.dims(), r, n.attr_int("keepdims", 1) != 0);
  Tensor y(x.dtype(), od);
  const std::string& op = n.op_type;
  std::vector<int64_t> offs = output_offsets(x.dims(), r);
  const size_t m = static_cast<size_t>(y.size());
  if (x.dtype() == DType::kBool) {  // ReduceMax: any; ReduceMin: all (true over no elements)
    const bool any = op == "ReduceMax";
    std::vector<int64_t> acc(m, any ? 0 : 1);
    for (int64_t i = 0; i < x.size(); ++i) {
      int64_t& a = acc[offs[i]];
      a = any ? (a | (x.get_i64(i) != 0)) : (a & (x.get_i64(i) != 0));
    }
    for (size_t i = 0; i < m; ++i) y.set_i64(static_cast<int64_t>(i), acc[i]);
    out[0] = std::move(y);
    return Status::ok();
  }
  if (is_int(x.dtype()) && op != "ReduceLogSumExp") {
    // Integers reduce exactly, as the kernels do: sums (of elements, magnitudes or squares) and
    // products wrap (in unsigned arithmetic, which has the same bits); uint64's maximum and minimum
    // compare as unsigned. A mean is the sum divided by the count in the type (toward zero); a log
    // or square root is taken of the sum in double and stored as a float is.
    const bool u64 = x.dtype() == DType::kU64;
    std::vector<uint64_t> acc(m, op == "ReduceProd"  ? 1
                                 : op == "ReduceMax" ? (u64 ? 0 : uint64_t{1} << 63)
                                 : op == "ReduceMin" ? (u64 ? ~uint64_t{0} : ~(uint64_t{1} << 63))
                                                     : 0);
    auto less = [u64](uint64_t a, uint64_t b) {
      return u64 ? a < b : static_cast<int64_t>(a) < static_cast<int64_t>(b);
    };
    for (int64_t i = 0; i < x.size(); ++i) {
      const uint64_t v = static_cast<uint64_t>(x.get_i64(i));
      uint64_t& a = acc[offs[i]];
      if (op == "ReduceProd")
        a *= v;
      else if (op == "ReduceMax")
        a = less(a, v) ? v : a;
      else if (op == "ReduceMin")
        a = less(v, a) ? v : a;
      else if (op == "ReduceL1")
        a += u64 || static_cast<int64_t>(v) >= 0 ? v : 0 - v;
      else if (op == "ReduceL2" || op == "ReduceSumSquare")
        a += v * v;
      else
        a += v;  // ReduceSum, ReduceMean, ReduceLogSum
    }
    const uint64_t count = m == 0 ? 0 : static_cast<uint64_t>(x.size()) / m;
    for (size_t i = 0; i < m; ++i) {
      const uint64_t a = acc[i];
      const double real = u64 ? static_cast<double>(a) : static_cast<double>(static_cast<int64_t>(a));
      if (op == "ReduceMean" && count == 0)
        y.set_f64(static_cast<int64_t>(i), NAN);  // nothing to average: 0
      else if (op == "ReduceMean")
        y.set_i64(static_cast<int64_t>(i), u64 ? static_cast<int64_t>(a / count)
                                               : static_cast<int64_t>(a) / static_cast<int64_t>(count));
      else if (op == "ReduceL2")
        y.set_f64(static_cast<int64_t>(i), std::sqrt(real));
      else if (op == "ReduceLogSum")
        y.set_f64(static_cast<int64_t>(i), std::log(real));
      else
        y.set_i64(static_cast<int64_t>(i), static_cast<int64_t>(a));
    }
    out[0] = std::move(y);
    return Status::ok();
  }
  std::vector<double> xv = x.to_f64();
  std::vector<double> acc(m, 0.0);
  std::vector<int64_t> count(m, 0);
  std::vector<double> mx(m, -INFINITY);
  if (op == "ReduceLogSumExp")
    for (size_t i = 0; i < xv.size(); ++i) mx[offs[i]] = std::max(mx[offs[i]], xv[i]);
  if (op == "ReduceProd") acc.assign(m, 1.0);
  if (op == "ReduceMax") acc.assign(m, -INFINITY);
  if (op == "ReduceMin") acc.assign(m, INFINITY);
  for (size_t i = 0; i < xv.size(); ++i) {
    double v = xv[i];
    double& a = acc[offs[i]];
    ++count[offs[i]];
    if (op == "ReduceSum" || op == "ReduceMean" || op == "ReduceLogSum") a += v;
    else if (op == "ReduceProd") a *= v;
    else if (op == "ReduceMax") a = (std::isnan(v) || std::isnan(a)) ? NAN : std::max(a, v);
    else if (op == "ReduceMin") a = (std::isnan(v) || std::isnan(a)) ? NAN : std::min(a, v);
    else if (op == "ReduceL1") a += std::fabs(v);
    else if (op == "ReduceL2" || op == "ReduceSumSquare") a += v * v;
    else if (op == "ReduceLogSumExp") a += std::isinf(mx[offs[i]]) ? std::exp(v) : std::exp(v - mx[offs[i]]);
    else STITCH_UNREACHABLE("reduce {}", op);
  }
  for (size_t i = 0; i < m; ++i) {
    double a = acc[i];
    if (op == "ReduceMean") a = count[i] ? a / double(count[i]) : NAN;
    else if (op == "ReduceL2") a = std::sqrt(a);
    else if (op == "ReduceLogSum") a = std::log(a);
    else if (op == "ReduceLogSumExp") a = std::log(a) + (std::isinf(mx[i]) ? 0.0 : mx[i]);
    y.set_f64(static_cast<int64_t>(i), a);
  }
  out[0] = std::move(y);
  return Status::ok();
}

// ---- ArgMax / ArgMin ----------------------------------------------------------

Status infer_arg(InferContext& ctx) {
  const Node& n = ctx.node();
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, n.attr_int("axis", 0), ctx.rank(0)));
  Dims d = ctx.dims(0);
  if (d.empty()) return ctx.error("needs an input of rank 1 or more");
  if (d[axis] == 0) return ctx.error("cannot take an arg-extreme over an empty axis");
  if (n.attr_int("keepdims", 1)) d[axis] = 1;
  else d.erase(d.begin() + axis);
  ctx.set_output(0, DType::kI64, d);
  return Status::ok();
}

// View of a tensor as [outer, len, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
  AxisView(const Dims& d, int64_t axis, bool flatten_tail = false) {
    for (int64_t i = 0; i < axis; ++i) outer *= d[i];
    if (flatten_tail) {
      for (size_t i = axis; i < d.size(); ++i) len *= d[i];
    } else {
      len = d[axis];
      for (size_t i = axis + 1; i < d.size(); ++i) inner *= d[i];
    }
  }
  int64_t at(int64_t o, int64_t k, int64_t i) const { return (o * len + k) * inner + i; }
};

// Whether element `a` of integer tensor `x` is below element `b`, exactly: uint64 as unsigned, the
// others as int64. A double holds an integer past 2^53 only to its nearest even multiple of a power
// of 2, so two such values could compare equal.
bool int_below(const Tensor& x, int64_t a, int64_t b) {
  const int64_t p = x.get_i64(a), q = x.get_i64(b);
  return x.dtype() == DType::kU64 ? static_cast<uint64_t>(p) < static_cast<uint64_t>(q) : p < q;
}

Status eval_arg(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  int64_t axis = *norm_axis(n, n.attr_int("axis", 0), x.rank());
  bool last = n.attr_int("select_last_index", 0) != 0;
  bool is_max = n.op_type == "ArgMax";
  Dims d = x.dims();
  if (n.attr_int("keepdims", 1)) d[axis] = 1;
  else d.erase(d.begin() + axis);
  Tensor y(DType::kI64, d);
  AxisView v(x.dims(), axis);
  const bool exact = !is_float(x.dtype());
  const std::vector<double> xv = exact ? std::vector<double>{} : x.to_f64();
  int64_t* yp = y.data_as<int64_t>();
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < v.len; ++k) {
        const int64_t c = v.at(o, k, i), b = v.at(o, best, i);
        // c above (below) the best so far, or level with it and the last one wanted.
        const bool above = exact ? int_below(x, b, c) : xv[c] > xv[b];
        const bool below = exact ? int_below(x, c, b) : xv[c] < xv[b];
        const bool level = !above && !below && (exact || xv[c] == xv[b]);
        if (is_max ? above || (last && level) : below || (last && level)) best = k;
      }
      yp[o * v.inner + i] = best;
    }
  out[0] = std::move(y);
  return Status::ok();
}

// ---- TopK -----------------------------------------------------------------------------

Status infer_topk(InferContext& ctx) {
  const Node& n = ctx.node();
  if (ctx.rank(0) == 0) return ctx.error("needs an input of rank 1 or more");
  ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, n.attr_int("axis", -1), ctx.rank(0)));
  ASSIGN_OR_RETURN(auto k, const_ints(ctx, 1, "K"));
  if (k.size() != 1) return ctx.error(fmt::format("K must hold one value, not {}", k.size()));
  Dims d = ctx.dims(0);
  if (k[0] < 0 || (d[axis] >= 0 && k[0] > d[axis]))
    return ctx.error(
        fmt::format("K is {}, but axis {} has {} elements; K must be from 0 to that", k[0], axis, d[axis]));
  d[axis] = k[0];
  ctx.set_output(0, ctx.dtype(0), d);
  if (n.outputs.size() > 1) ctx.set_output(1, DType::kI64, d);
  return Status::ok();
}

// The k largest (or smallest) elements along the axis, in that order, ties to the lower index
// and NaN above every number (the order ONNX's reference implementation gives; with sorted = 0
// any order is allowed, and this one is used too).
Status eval_topk(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const int64_t axis = *norm_axis(n, n.attr_int("axis", -1), x.rank());
  const int64_t k = in[1]->get_i64(0);
  const bool largest = n.attr_int("largest", 1) != 0;
  Dims d = x.dims();
  d[axis] = k;
  Tensor values(x.dtype(), d), indices(DType::kI64, d);
  const AxisView v(x.dims(), axis);
  std::vector<int64_t> order(static_cast<size_t>(v.len));
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      for (int64_t r = 0; r < v.len; ++r) order[r] = r;
      auto above = [](double p, double q) { return (std::isnan(p) && !std::isnan(q)) || p > q; };
      auto before = [&](int64_t a, int64_t b) {
        const int64_t at_a = v.at(o, a, i), at_b = v.at(o, b, i);
        if (!is_float(x.dtype())) return largest ? int_below(x, at_b, at_a) : int_below(x, at_a, at_b);
        const double xa = x.get_f64(at_a), xb = x.get_f64(at_b);
        return largest ? above(xa, xb) : above(xb, xa);
      };
      std::stable_sort(order.begin(), order.end(), before);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (o * k + j) * v.inner + i, from = v.at(o, order[j], i);
        if (is_float(x.dtype()))
          values.set_f64(at, x.get_f64(from));
        else
          values.set_i64(at, x.get_i64(from));
        indices.set_i64(at, order[j]);
      }
    }
  out[0] = std::move(values);
  if (out.size() > 1) out[1] = std::move(indices);
  return Status::ok();
}

// ---- Softmax family -------------------------------------------------------------

// Opsets before 13 flatten the input to 2-D at `axis` (default 1); 13+ use one axis (default -1).
AxisView softmax_view(const Node& n, const Dims& d) {
  bool legacy = n.opset < 13;
  int64_t axis = *norm_axis(n, n.attr_int("axis", legacy ? 1 : -1), static_cast<int64_t>(d.size()));
  return AxisView(d, axis, legacy);
}

Status infer_softmax(InferContext& ctx) {
  const Node& n = ctx.node();
  if (!is_float(ctx.dtype(0))) return ctx.error("expects a floating-point input");
  if (ctx.rank(0) == 0) return ctx.error("needs an input of rank 1 or more");
  RETURN_IF_ERROR(norm_axis(n, n.attr_int("axis", n.opset < 13 ? 1 : -1), ctx.rank(0)).status());
  ctx.set_output(0, ctx.dtype(0), ctx.dims(0));
  return Status::ok();
}

Status eval_softmax(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  AxisView v = softmax_view(n, x.dims());
  std::vector<double> xv = x.to_f64(), yv(xv.size());
  const std::string& op = n.op_type;
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      double mx = -INFINITY;
      int64_t arg = 0;
      for (int64_t k = 0; k < v.len; ++k) {
        double c = xv[v.at(o, k, i)];
        if (c > mx) mx = c, arg = k;
      }
      if (op == "Hardmax") {
        for (int64_t k = 0; k < v.len; ++k) yv[v.at(o, k, i)] = k == arg ? 1.0 : 0.0;
        continue;
      }
      double sum = 0;
      for (int64_t k = 0; k < v.len; ++k) sum += std::exp(xv[v.at(o, k, i)] - mx);
      for (int64_t k = 0; k < v.len; ++k) {
        double z = xv[v.at(o, k, i)] - mx;
        yv[v.at(o, k, i)] = op == "LogSoftmax" ? z - std::log(sum) : std::exp(z) / sum;
      }
    }
  out[0] = Tensor::from_f64(x.dtype(), x.dims(), yv);
  return Status::ok();
}

// ---- CumSum -------------------------------------------------------------------------

Status infer_cumsum(InferContext& ctx) {
  ASSIGN_OR_RETURN(auto axis, const_ints(ctx, 1, "axis"));
  if (axis.size() != 1) return ctx.error("axis must be a scalar");
  RETURN_IF_ERROR(norm_axis(ctx.node(), axis[0], ctx.rank(0)).status());
  return same_as_input0(ctx);
}

// CumSum and CumProd (opset 26): a running sum or product along the axis.
Status eval_cumsum(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  int64_t axis = *norm_axis(n, in[1]->get_i64(0), x.rank());
  bool excl = n.attr_int("exclusive", 0), rev = n.attr_int("reverse", 0);
  const bool prod = n.op_type == "CumProd";
  AxisView v(x.dims(), axis);
  Tensor y(x.dtype(), x.dims());
  bool fl = is_float(x.dtype());
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      double fs = prod ? 1 : 0;
      int64_t is = prod ? 1 : 0;
      for (int64_t s = 0; s < v.len; ++s) {
        int64_t k = rev ? v.len - 1 - s : s;
        int64_t at = v.at(o, k, i);
        if (excl) { fl ? y.set_f64(at, fs) : y.set_i64(at, is); }
        if (fl)
          fs = prod ? fs * x.get_f64(at) : fs + x.get_f64(at);
        else
          is = static_cast<int64_t>(prod ? static_cast<uint64_t>(is) * static_cast<uint64_t>(x.get_i64(at))
                                         : static_cast<uint64_t>(is) + static_cast<uint64_t>(x.get_i64(at)));
        if (!excl) { fl ? y.set_f64(at, fs) : y.set_i64(at, is); }
      }
    }
  out[0] = std::move(y);
  return Status::ok();
}

}  // namespace

void register_reduce(std::vector<OpDef>& t) {
  for (const char* r : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                        "ReduceSumSquare"})
    t.push_back({r, kMinOpset, kMaxOpset, OpCategory::kReduction, infer_reduce, eval_reduce});
  for (const char* r : {"ArgMax", "ArgMin"})
    t.push_back({r, kMinOpset, kMaxOpset, OpCategory::kReduction, infer_arg, eval_arg});
  for (const char* r : {"Softmax", "LogSoftmax", "Hardmax"})
    t.push_back({r, kMinOpset, kMaxOpset, OpCategory::kReduction, infer_softmax, eval_softmax});
  t.push_back({"TopK", kMinOpset, kMaxOpset, OpCategory::kReduction, infer_topk, eval_topk});
  t.push_back({"CumSum", kMinOpset, kMaxOpset, OpCategory::kReduction, infer_cumsum, eval_cumsum});
  t.push_back({"CumProd", 26, kMaxOpset, OpCategory::kReduction, infer_cumsum, eval_cumsum});
}

}  // namespace stitch::ops
