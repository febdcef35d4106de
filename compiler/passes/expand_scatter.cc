// expand_scatter_nd, expand_scatter_elements: a ScatterND or ScatterElements whose indices are
// constant becomes a Gather of its updates and a Where, ops the stitcher fuses, instead of a
// kernel of its own.
//
// Exporters write index assignments (`mask[..., :n] = ...`, `out[:, t] = h` in an unrolled scan)
// as scatters with indices built from shapes (Range, Expand, Concat), which are constants once
// shapes are bound. Where no two indices name the same output position, each position receives
// one update element or keeps the data, so
//   out = Where(written, Gather(updates, map), data)
// with `written` (bool) and `map` (int64) constants. A reduction (add, mul, max, min) combines the
// gathered updates with the data first. Written everywhere, the Where goes; written everywhere in
// order, the Gather goes too (a Reshape of the updates).
//   ScatterND (k = the indices' last dimension): each index tuple names a position of the data's
//     first k axes, whose trailing slice an update row replaces; map and written span those k axes
//     and broadcast over the slice.
//   ScatterElements (along `axis`): an update element lands at its own coordinates with the axis
//     coordinate replaced by its index. When the index depends on the axis coordinate alone and
//     the updates span the data's other axes (PyTorch's select_scatter and slice_scatter), map and
//     written run along the axis only; otherwise they span the data, at most kMaxPositions.
// A scatter with run-time indices, with two indices naming one position (their order is undefined
// for reduction none), a bool reduction or ScatterND's k = 0 keeps its own kernel
// (codegen/lower_scatter.cc). Runs after fold_constants; an index out of range is the node's
// error, as when evaluated.
#include <fmt/format.h>

#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

// Constants larger than this stay a kernel's job: they would cost the weights as much as the data.
constexpr int64_t kMaxPositions = int64_t{1} << 20;

const std::map<std::string, std::string>& combine_ops() {
  static const std::map<std::string, std::string> ops = {
      {"add", "Add"}, {"mul", "Mul"}, {"max", "Max"}, {"min", "Min"}};
  return ops;
}

// Whether the pass takes scatter `n`: its indices constant, static shapes, and a reduction that is
// an op over (data, update).
bool applies(const Node& n) {
  const Value *data = n.input(0), *indices = n.input(1), *updates = n.input(2);
  if (!data || !indices || !updates || !n.output(0) || !indices->constant || !data->has_static_shape() ||
      !updates->has_static_shape())
    return false;
  const std::string red = n.attr_string("reduction", "none");
  return red == "none" || (combine_ops().count(red) && data->dtype != DType::kBool);
}

// The index `c` on an axis of size `dim`, from the end where negative; an error naming the node
// when out of range.
StatusOr<int64_t> wrap(const Node& n, int64_t c, int64_t dim, int64_t axis, int64_t at) {
  if (c < -dim || c >= dim)
    return Status::user(fmt::format(
        "{}: index {} (element {} of its indices) is out of range for axis {} of size {}; the indices are "
        "constants of the model, so it would write outside its data: check the exporter's indices",
        n.describe(), c, at, axis, dim));
  return c < 0 ? c + dim : c;
}

// `x` as `to`: itself where it has that shape already, else a Reshape.
Value* reshape(NodeBuilder& b, Value* x, const Dims& to, const std::string& name) {
  return *x->dims == to ? x : b.reshape(x, to, name);
}

// Writes the scatter's output from the updates gathered to the data's shape (`moved`; null when
// nothing is written): combined with the data by the reduction, then kept where `map` (shaped
// `md`, broadcasting to the data) wrote. The last node writes the scatter's own output value.
void assemble(NodeBuilder& b, const Node& n, Value* moved, const std::vector<int64_t>& map, const Dims& md) {
  Value *data = n.input(0), *updates = n.input(2);
  const std::string red = n.attr_string("reduction", "none");
  const Dims dd = *data->dims;
  Value* out = nullptr;
  if (!moved) {
    out = b.node("Identity", "unchanged", {data}, data->dtype, dd);
  } else {
    if (red != "none") moved = b.node(combine_ops().at(red), "combined", {data, moved}, data->dtype, dd);
    out = moved;
    if (!std::all_of(map.begin(), map.end(), [](int64_t r) { return r >= 0; })) {
      std::vector<double> w(map.size());
      for (size_t p = 0; p < map.size(); ++p) w[p] = map[p] >= 0;
      out = b.node("Where", "written",
                   {b.constant("written_mask", Tensor::from_f64(DType::kBool, md, w)), moved, data},
                   data->dtype, dd);
    }
    if (out == updates) out = b.node("Identity", "copy", {updates}, data->dtype, dd);
  }
  b.finish(out, n.output(0));
}

// `map` with positions nothing writes pointing at update 0 (the Where keeps the data there).
Tensor gather_index(std::vector<int64_t> map, const Dims& d) {
  for (int64_t& f : map) f = std::max<int64_t>(f, 0);
  return Tensor::from_i64(DType::kI64, d, map);
}

bool in_order(const std::vector<int64_t>& map, int64_t updates) {
  if (static_cast<int64_t>(map.size()) != updates) return false;
  for (size_t p = 0; p < map.size(); ++p)
    if (map[p] != static_cast<int64_t>(p)) return false;
  return true;
}

StatusOr<bool> expand_nd(Graph& g, Node& n) {
  if (!applies(n)) return false;
  Value *data = n.input(0), *updates = n.input(2);
  const Tensor& ix = *n.input(1)->constant;
  const Dims dd = *data->dims;
  if (ix.rank() == 0) return false;
  const int64_t k = ix.dims().back();
  if (k <= 0 || k > static_cast<int64_t>(dd.size())) return false;
  const Dims lead(dd.begin(), dd.begin() + k), slice(dd.begin() + k, dd.end());
  const int64_t positions = num_elements(lead);
  if (positions > kMaxPositions) return false;
  const int64_t rows = ix.size() / k;
  std::vector<int64_t> map(static_cast<size_t>(positions), -1);
  Dims strides(lead.size(), 1);
  for (size_t j = lead.size(); j-- > 1;) strides[j - 1] = strides[j] * lead[j];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t p = 0;
    for (int64_t j = 0; j < k; ++j) {
      ASSIGN_OR_RETURN(int64_t c, wrap(n, ix.get_i64(r * k + j), dd[static_cast<size_t>(j)], j, r * k + j));
      p += c * strides[static_cast<size_t>(j)];
    }
    if (map[static_cast<size_t>(p)] >= 0) return false;  // two rows for one position
    map[static_cast<size_t>(p)] = r;
  }
  NodeBuilder b{g, n};
  if (rows == 0) {  // nothing is written
    assemble(b, n, nullptr, {}, {});
    return true;
  }
  Value* moved;
  if (in_order(map, rows)) {
    moved = reshape(b, updates, dd, "updates");
  } else {
    Dims rd{rows};
    rd.insert(rd.end(), slice.begin(), slice.end());
    moved =
        b.node("Gather", "updates",
               {reshape(b, updates, rd, "update_rows"), b.constant("update_row", gather_index(map, lead))},
               data->dtype, dd, {{"axis", int64_t{0}}});
  }
  Dims md = lead;
  md.insert(md.end(), slice.size(), 1);
  assemble(b, n, moved, map, md);
  return true;
}

StatusOr<bool> expand_elements(Graph& g, Node& n) {
  if (!applies(n)) return false;
  Value *data = n.input(0), *updates = n.input(2);
  const Tensor& ix = *n.input(1)->constant;
  const Dims dd = *data->dims, ud = ix.dims();
  const int64_t r = static_cast<int64_t>(dd.size());
  if (r == 0 || static_cast<int64_t>(ud.size()) != r) return false;
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return false;
  const int64_t len = dd[static_cast<size_t>(axis)], count = ix.size();
  // Each index, wrapped, and whether it depends on its axis coordinate alone with the updates
  // spanning the data's other axes.
  std::vector<int64_t> at(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(at[static_cast<size_t>(i)], wrap(n, ix.get_i64(i), len, axis, i));
  }
  Dims us(ud.size(), 1);  // the indices' (and updates') strides
  for (size_t j = ud.size(); j-- > 1;) us[j - 1] = us[j] * ud[j];
  bool along = true;
  for (int64_t j = 0; j < r && along; ++j)
    along = j == axis || ud[static_cast<size_t>(j)] == dd[static_cast<size_t>(j)];
  for (int64_t i = 0; i < count && along; ++i) {
    const int64_t a = i / us[static_cast<size_t>(axis)] % ud[static_cast<size_t>(axis)];
    along = at[static_cast<size_t>(i)] == at[static_cast<size_t>(a * us[static_cast<size_t>(axis)])];
  }
  NodeBuilder b{g, n};
  if (count == 0) {  // nothing is written
    assemble(b, n, nullptr, {}, {});
    return true;
  }
  std::vector<int64_t> map;
  Dims md;
  Value* moved;
  if (along) {
    // Position t of the axis receives update slice map[t].
    map.assign(static_cast<size_t>(len), -1);
    for (int64_t a = 0; a < ud[static_cast<size_t>(axis)]; ++a) {
      int64_t& m = map[static_cast<size_t>(at[static_cast<size_t>(a * us[static_cast<size_t>(axis)])])];
      if (m >= 0) return false;  // two slices for one position
      m = a;
    }
    md.assign(static_cast<size_t>(r), 1);
    md[static_cast<size_t>(axis)] = len;
    moved = in_order(map, ud[static_cast<size_t>(axis)])
                ? updates
                : b.node("Gather", "updates", {updates, b.constant("update_index", gather_index(map, {len}))},
                         data->dtype, dd, {{"axis", axis}});
  } else {
    const int64_t positions = num_elements(dd);
    if (positions > kMaxPositions) return false;
    Dims ds(dd.size(), 1);
    for (size_t j = dd.size(); j-- > 1;) ds[j - 1] = ds[j] * dd[j];
    map.assign(static_cast<size_t>(positions), -1);
    for (int64_t i = 0; i < count; ++i) {
      int64_t p = 0;
      for (int64_t j = 0; j < r; ++j) {
        const int64_t c = j == axis ? at[static_cast<size_t>(i)]
                                    : i / us[static_cast<size_t>(j)] % ud[static_cast<size_t>(j)];
        p += c * ds[static_cast<size_t>(j)];
      }
      if (map[static_cast<size_t>(p)] >= 0) return false;  // two elements for one position
      map[static_cast<size_t>(p)] = i;
    }
    md = dd;
    moved = in_order(map, count) ? reshape(b, updates, dd, "updates")
                                 : b.node("Gather", "updates",
                                          {reshape(b, updates, {count}, "update_elements"),
                                           b.constant("update_index", gather_index(map, dd))},
                                          data->dtype, dd, {{"axis", int64_t{0}}});
  }
  assemble(b, n, moved, map, md);
  return true;
}

}  // namespace

StatusOr<bool> expand_scatter_nd(Graph& g, PassContext&) { return expand_each(g, "ScatterND", expand_nd); }
StatusOr<bool> expand_scatter_elements(Graph& g, PassContext&) {
  return expand_each(g, "ScatterElements", expand_elements);
}

}  // namespace stitch
