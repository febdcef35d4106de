// The segments of a segment kernel and their offsets (codegen/segment_kernel.h).
#include "codegen/segment_kernel.h"

#include "ops/op_params.h"

namespace stitch::codegen::segments {

using ops::strides_of;

Segments make_segments(const Dims& in, std::vector<bool> reduced) {
  Segments s{in, std::move(reduced), 1, 1};
  for (size_t d = 0; d < in.size(); ++d) (s.reduced[d] ? s.len : s.count) *= in[d];
  return s;
}

Segments merged(const Segments& s) {
  Segments m{{}, {}, s.count, s.len};
  for (size_t d = 0; d < s.in.size(); ++d) {
    if (s.in[d] == 1) continue;
    if (!m.in.empty() && m.reduced.back() == s.reduced[d]) {
      m.in.back() *= s.in[d];
    } else {
      m.in.push_back(s.in[d]);
      m.reduced.push_back(s.reduced[d]);
    }
  }
  return m;
}

std::string offset_of(const Segments& original, bool pick, const std::string& var, const IndexWidth& ix) {
  const Segments s = merged(original);
  Dims st = strides_of(s.in);
  std::vector<size_t> axes;
  for (size_t d = 0; d < s.in.size(); ++d)
    if (s.reduced[d] == pick && s.in[d] > 1) axes.push_back(d);
  if (axes.empty()) return ix.lit(0);
  std::string expr;
  int64_t inner = 1;
  for (size_t k = axes.size(); k-- > 0;) {
    const size_t d = axes[k];
    std::string c = var;
    if (inner > 1) c = fmt::format("({} / {})", c, ix.lit(inner));
    if (k > 0) c = fmt::format("({} % {})", c, ix.lit(s.in[d]));
    std::string term = st[d] == 1 ? c : fmt::format("{} * {}", c, ix.lit(st[d]));
    expr = expr.empty() ? term : term + " + " + expr;
    inner *= s.in[d];
  }
  return expr;
}

Mapping choose_mapping(const Segments& s) {
  const Segments m = merged(s);
  const bool inner_reduced = !m.in.empty() && m.reduced.back();
  if (!inner_reduced) return column_tiled(s.count, s.len) ? Mapping::kTile : Mapping::kThread;
  if (s.len <= 1) return Mapping::kThread;
  return s.len >= 1024 ? Mapping::kBlock : Mapping::kWarp;
}

int64_t block_size(Mapping m, const Segments& s) {
  if (m == Mapping::kBlock) return s.len >= 4096 ? 512 : 256;
  return m == Mapping::kTile ? kTileBlock : kMapBlock;
}

StatusOr<Segments> softmax_segments(const Node& n) {
  const Dims& d = dims(n.input(0));
  const int64_t r = static_cast<int64_t>(d.size());
  ASSIGN_OR_RETURN(ops::ReduceAxes axes, ops::softmax_axes(n, r));
  return make_segments(d, axes.reduced);
}

}  // namespace stitch::codegen::segments
