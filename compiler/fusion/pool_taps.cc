#include "fusion/pool_taps.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fusion/graph_edit.h"
#include "ops/op_params.h"

namespace stitch::fusion {
namespace {

// The value padding a MaxPool's input of type `t`: below or equal to every value, so that a padded
// position never wins (float: -infinity; integers: the type's lowest).
double lowest(DType t) {
  if (is_float(t)) return -std::numeric_limits<double>::infinity();
  if (is_signed_int(t)) return -std::ldexp(1.0, 8 * dtype_size(t) - 1);
  return 0;
}

// What one pool's window reads, per spatial axis d: the input padded by pad[d] before and
// pad_after[d] after (enough for the last window, ceil_mode's overhang included), and how many of a
// window's positions the average divides by at each output position (count_include_pad: those
// inside the input or its explicit padding; else those inside the input), as the reference does.
struct Taps {
  std::vector<int64_t> pad_after;
  std::vector<std::vector<int64_t>> counts;  // [axis][output position]
};

Taps taps_of(const ops::Window& w, bool include_pad) {
  Taps t;
  for (int64_t d = 0; d < w.spatial; ++d) {
    const int64_t in = w.in[d], k = w.kernel[d], s = w.strides[d], dil = w.dilations[d], pb = w.pad_begin[d];
    const int64_t reach = (w.out[d] - 1) * s + (k - 1) * dil - pb;  // the last position read, unpadded
    t.pad_after.push_back(std::max<int64_t>(0, reach - (in - 1)));
    std::vector<int64_t> c;
    for (int64_t o = 0; o < w.out[d]; ++o) {
      const int64_t start = o * s - pb;
      int64_t n = 0;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t p = start + j * dil;
        n += include_pad ? (p <= in - 1 + w.pad_end[d]) : (p >= 0 && p < in);
      }
      c.push_back(n);
    }
    t.counts.push_back(std::move(c));
  }
  return t;
}

// "2 x 2", "3", "2 x 2 x 2": a window's extents.
std::string extents(const Dims& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += fmt::format("{}{}", i ? " x " : "", d[i]);
  return s;
}

// Whether pool `n` is one the taps take; its window when it is.
std::optional<ops::Window> tap_window(const Graph& g,
                                      const std::unordered_map<const Value*, std::vector<Node*>>& users,
                                      const Node& n, int64_t max_taps) {
  if ((n.op_type != "MaxPool" && n.op_type != "AveragePool") || !n.domain.empty()) return std::nullopt;
  const Value* x = n.input(0);
  const Value* y = n.output(0);
  if (x == nullptr || y == nullptr || !x->has_static_shape() || !y->has_static_shape() ||
      num_elements(*x->dims) == 0 || num_elements(*y->dims) == 0)
    return std::nullopt;
  const bool max = n.op_type == "MaxPool";
  if (!(is_float(x->dtype) || (max && is_int(x->dtype)))) return std::nullopt;
  if (n.outputs.size() > 1 && is_read(g, users, n.output(1))) return std::nullopt;  // MaxPool's Indices
  auto w = ops::pool_window(n, *x->dims);
  if (!w.is_ok()) return std::nullopt;
  // pool_window has checked the window: positive extents, strides and dilations, pads not
  // negative, and the dilated window and the padded input far inside 64 bits.
  int64_t taps = 1;
  for (int64_t k : w->kernel) {
    if (k > max_taps / taps) return std::nullopt;
    taps *= k;
  }
  Dims out{(*x->dims)[0], (*x->dims)[1]};
  out.insert(out.end(), w->out.begin(), w->out.end());
  if (out != *y->dims) return std::nullopt;
  return *w;
}

// Pool `n` (tap_window) written as taps; its line.
std::string write_taps(Graph& g, Node& n, const ops::Window& w) {
  Value* x = n.input(0);
  Value* y = n.output(0);
  const bool max = n.op_type == "MaxPool";
  const bool include_pad = n.attr_int("count_include_pad", 0) != 0;
  const bool half = !max && (x->dtype == DType::kF16 || x->dtype == DType::kBF16);
  const DType t = half ? DType::kF32 : x->dtype;
  const std::string h = n.name + "/taps";
  const Taps taps = taps_of(w, include_pad);
  const int64_t rank = static_cast<int64_t>(x->dims->size());
  Value* src = half ? add_cast(g, h + "_f32", x, t) : x;
  bool padded = false;
  for (int64_t d = 0; d < w.spatial; ++d) padded |= w.pad_begin[d] > 0 || taps.pad_after[d] > 0;
  if (padded) {
    Dims pads(static_cast<size_t>(2 * rank), 0);
    Dims pd = *x->dims;
    for (int64_t d = 0; d < w.spatial; ++d) {
      pads[static_cast<size_t>(2 + d)] = w.pad_begin[d];
      pads[static_cast<size_t>(rank + 2 + d)] = taps.pad_after[d];
      pd[static_cast<size_t>(2 + d)] += w.pad_begin[d] + taps.pad_after[d];
    }
    Value* p = add_op(g, "Pad", h + "_padded",
                      {src, add_shape_constant(g, h + "_pads", pads),
                       add_constant(g, h + "_pad_value", t, {}, {max ? lowest(t) : 0.0})},
                      t, pd);
    p->producer->attrs["mode"] = std::string("constant");
    src = p;
  }
  // The count per output position: one number when every window counts the same.
  bool uniform = true;
  int64_t uniform_count = 1;
  for (const auto& c : taps.counts) {
    uniform &= std::all_of(c.begin(), c.end(), [&](int64_t v) { return v == c[0]; });
    uniform_count *= c[0];
  }
  uniform_count = std::max<int64_t>(uniform_count, 1);
  const bool divide = !max && !(uniform && uniform_count == 1);
  const bool cast_back = half;
  const bool combined_is_y = !divide && !cast_back;  // the last Slice or Max/Add writes the output
  const Dims part = *y->dims;
  Dims axes;
  for (int64_t d = 0; d < w.spatial; ++d) axes.push_back(2 + d);
  Value* spatial_axes = add_shape_constant(g, h + "_axes", axes);
  Value* steps = add_shape_constant(g, h + "_steps", w.strides);
  int64_t count = 1;
  for (int64_t k : w.kernel) count *= k;
  Value* acc = nullptr;
  std::vector<int64_t> at(static_cast<size_t>(w.spatial), 0);
  for (int64_t tap = 0; tap < count; ++tap) {
    Dims starts, ends;
    for (int64_t d = 0; d < w.spatial; ++d) {
      starts.push_back(at[static_cast<size_t>(d)] * w.dilations[d]);
      ends.push_back(starts.back() + (w.out[d] - 1) * w.strides[d] + 1);
    }
    const bool last = tap + 1 == count;
    const std::string name = g.unique_name(fmt::format("{}_{}", h, tap));
    Node* sl = add_op_node(g, "Slice", name);
    sl->inputs = {src, add_shape_constant(g, name + "_starts", starts),
                  add_shape_constant(g, name + "_ends", ends), spatial_axes, steps};
    Value* e = (last && acc == nullptr && combined_is_y) ? y : add_typed_value(g, name, t, part);
    sl->outputs = {e};
    e->producer = sl;
    if (acc == nullptr) {
      acc = e;
    } else if (last && combined_is_y) {
      add_op_writing(g, max ? "Max" : "Add", h + "_combined", {acc, e}, y);
      acc = y;
    } else {
      acc = add_op(g, max ? "Max" : "Add", fmt::format("{}_to_{}", h, tap), {acc, e}, t, part);
    }
    for (int64_t d = w.spatial - 1; d >= 0; --d) {
      if (++at[static_cast<size_t>(d)] < w.kernel[d]) break;
      at[static_cast<size_t>(d)] = 0;
    }
  }
  std::string divisor;
  if (divide) {
    Value* c = nullptr;
    if (uniform) {
      c = add_constant(g, h + "_count", t, {}, {static_cast<double>(uniform_count)});
      divisor = fmt::format("then a Div by {}", uniform_count);
    } else {
      // The counts over the output's spatial axes, broadcast over the batch and channels.
      std::vector<double> v;
      const Dims sp(w.out.begin(), w.out.end());
      std::vector<int64_t> o(static_cast<size_t>(w.spatial), 0);
      for (int64_t i = 0; i < num_elements(sp); ++i) {
        int64_t n_in = 1;
        for (int64_t d = 0; d < w.spatial; ++d) n_in *= taps.counts[d][o[d]];
        v.push_back(static_cast<double>(std::max<int64_t>(n_in, 1)));
        for (int64_t d = w.spatial - 1; d >= 0; --d) {
          if (++o[d] < sp[d]) break;
          o[d] = 0;
        }
      }
      c = add_constant(g, h + "_counts", t, sp, v);
      divisor = fmt::format("then a Div by the count of each window ({})",
                            include_pad ? "fewer past the padding" : "fewer outside the input");
    }
    if (cast_back)
      acc = add_op(g, "Div", h + "_mean", {acc, c}, t, part);
    else
      add_op_writing(g, "Div", h + "_mean", {acc, c}, y);
  }
  if (cast_back)
    add_op_writing(g, "Cast", h + "_back", {acc}, y)->attrs["to"] =
        static_cast<int64_t>(dtype_to_onnx(y->dtype));
  n.outputs = {nullptr};
  const std::string combined = count > 1 ? fmt::format(" combined by {} {}{}", count - 1, max ? "Max" : "Add",
                                                       count > 2 ? (max ? "es" : "s") : "")
                                         : "";
  return fmt::format("{}: a {} window as {} strided Slice{}{}{}{}{}", n.describe(), extents(w.kernel), count,
                     count > 1 ? "s" : "", padded ? " of a Pad" : "", combined,
                     divisor.empty() ? "" : ", " + divisor, half ? ", in float32" : "");
}

}  // namespace

StatusOr<std::vector<std::string>> pools_as_taps(Graph& g, const std::set<std::string>& keep,
                                                 int64_t max_taps) {
  std::vector<std::string> log;
  const auto users = g.users();
  std::vector<std::pair<Node*, ops::Window>> pools;  // collected first: the rewrite adds nodes
  for (const auto& np : g.nodes()) {
    if (keep.count(np->name)) continue;
    if (auto w = tap_window(g, users, *np, max_taps)) pools.emplace_back(np.get(), *w);
  }
  if (pools.empty()) return log;
  std::vector<Node*> dead;
  for (auto& [n, w] : pools) {
    log.push_back(write_taps(g, *n, w));
    dead.push_back(n);
  }
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

StatusOr<RewriteResult> pools_as_taps_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                 const std::optional<Cost>& before) {
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return pools_as_taps(c, o.no_fuse); }, "--no-pool-taps", /*strict=*/true, before);
}

}  // namespace stitch::fusion
