// expand_scatter_nd: a ScatterND whose indices are constant becomes a Gather of its updates and a
// Where, ops the stitcher fuses, instead of a kernel of its own.
//
// Exporters write index assignments (`mask[..., :n] = ...`, `cache[:, pos] = ...`) as ScatterND
// with indices built from shapes (Range, Expand, Concat), which are constants once shapes are
// bound. With k = the indices' last dimension, each index tuple names one position p of the
// data's first k axes, whose trailing slice the matching row of the updates replaces. Where no two
// tuples name the same position, position p receives update row map[p] or keeps the data, so
//   out = Where(written, Gather(Reshape(updates, [rows, slice...]), map, axis 0), data)
// with `written` (bool) and `map` (int64) constants over the first k axes, broadcast over the
// slice. A reduction (add, mul, max, min) combines the gathered rows with the data first. Written
// everywhere, the Where goes; written everywhere in order, the Gather goes too (a Reshape of the
// updates). ScatterND with run-time indices, with two tuples naming one position (their order is
// undefined for reduction none) or with k = 0 keeps its own kernel (codegen/lower_scatter.cc).
// Runs after fold_constants; an index out of range is the node's error, as when evaluated.
#include <fmt/format.h>

#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

// Constants over the first k axes larger than this stay a kernel's job (a cache written at run
// time positions is not this pass's case; this bounds what a constant may cost in the weights).
constexpr int64_t kMaxPositions = int64_t{1} << 20;

StatusOr<bool> expand(Graph& g, Node& n) {
  Value *data = n.input(0), *indices = n.input(1), *updates = n.input(2), *y = n.output(0);
  if (!data || !indices || !updates || !y || !indices->constant || !data->has_static_shape() ||
      !updates->has_static_shape())
    return false;
  const Tensor& ix = *indices->constant;
  const Dims dd = *data->dims;
  if (ix.rank() == 0) return false;
  const int64_t k = ix.dims().back();
  if (k <= 0 || k > static_cast<int64_t>(dd.size())) return false;
  const std::string red = n.attr_string("reduction", "none");
  static const std::map<std::string, std::string> kCombine = {
      {"add", "Add"}, {"mul", "Mul"}, {"max", "Max"}, {"min", "Min"}};
  if (red != "none" && (!kCombine.count(red) || data->dtype == DType::kBool)) return false;

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
      int64_t c = ix.get_i64(r * k + j);
      const int64_t dim = dd[static_cast<size_t>(j)];
      if (c < -dim || c >= dim)
        return Status::user(fmt::format(
            "{}: index {} (row {} of its indices) is out of range for axis {} of "
            "size {}; the indices are constants of the model, so it would write outside its data: "
            "check the exporter's indices",
            n.describe(), c, r, j, dim));
      p += (c < 0 ? c + dim : c) * strides[static_cast<size_t>(j)];
    }
    if (map[static_cast<size_t>(p)] >= 0) return false;  // two rows for one position
    map[static_cast<size_t>(p)] = r;
  }
  bool everywhere = true, in_order = rows == positions;
  for (int64_t p = 0; p < positions; ++p) {
    everywhere = everywhere && map[static_cast<size_t>(p)] >= 0;
    in_order = in_order && map[static_cast<size_t>(p)] == p;
  }

  NodeBuilder b{g, n};
  auto reshape = [&](Value* x, const Dims& to, const std::string& name) {
    Value* shape =
        b.constant(name + "_shape", Tensor::vector_i64(std::vector<int64_t>(to.begin(), to.end())));
    return b.node("Reshape", name, {x, shape}, x->dtype, to);
  };
  Value* out = nullptr;
  if (rows == 0) {  // nothing is written
    out = b.node("Identity", "unchanged", {data}, data->dtype, dd);
  } else {
    Value* moved;
    if (in_order) {
      moved = reshape(updates, dd, "updates");
    } else {
      Dims rd{rows};
      rd.insert(rd.end(), slice.begin(), slice.end());
      Value* flat = *updates->dims == rd ? updates : reshape(updates, rd, "update_rows");
      std::vector<int64_t> from(map);
      for (int64_t& f : from) f = std::max<int64_t>(f, 0);
      moved = b.node("Gather", "updates",
                     {flat, b.constant("update_row", Tensor::from_i64(DType::kI64, lead, from))}, data->dtype,
                     dd, {{"axis", int64_t{0}}});
    }
    if (red != "none") moved = b.node(kCombine.at(red), "combined", {data, moved}, data->dtype, dd);
    if (everywhere) {
      out = moved;
    } else {
      Dims md = lead;
      md.insert(md.end(), slice.size(), 1);
      std::vector<double> w(static_cast<size_t>(positions));
      for (int64_t p = 0; p < positions; ++p) w[static_cast<size_t>(p)] = map[static_cast<size_t>(p)] >= 0;
      out = b.node("Where", "written",
                   {b.constant("written_mask", Tensor::from_f64(DType::kBool, md, w)), moved, data},
                   data->dtype, dd);
    }
  }
  b.finish(out, y);
  return true;
}

}  // namespace

StatusOr<bool> expand_scatter_nd(Graph& g, PassContext&) { return expand_each(g, "ScatterND", expand); }

}  // namespace stitch
