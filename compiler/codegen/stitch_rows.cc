// Stitched kernels (stitch.h): row kernels (regional stitching; global when a row is split over
// blocks): their mapping, shared-memory caches, row ops' values and store loops (the passes and
// statistics are in stitch_stats.cc).
#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "codegen/stitcher.h"

namespace stitch::codegen::detail {

bool Stitcher::wide_vectorizable(const std::vector<const Value*>& vs, int64_t width) const {
  const int64_t r = static_cast<int64_t>(info_.domain.size());
  if (part_ || r == 0 || !info_.reduced[r - 1] || width % 4 != 0 || wide_chunk(map_, width) % 4 != 0)
    return false;
  for (const Node* n : nodes_) {
    const StitchRole role = stitch_role(*n);
    if (role == StitchRole::kContraction || role == StitchRole::kTiledGemm) return false;
  }
  for (const Value* v : vs) {
    const Dims& vd = dims(v);
    if (info_.permuted.count(v)) return false;   // moved: its lanes' elements are not neighbours
    if (info_.scattered.count(v)) return false;  // written into a cache one element at a time
    if (!is_word(v->dtype) || vd != dims(vs.front()) || vd.size() != static_cast<size_t>(r) ||
        vd.back() % 4 != 0)
      return false;
  }
  return true;
}

StatusOr<SExpr> Stitcher::row_value(const Node& n, const Coords& c, const std::string& k) {
  if (info_.is_outer(&n)) return outer_value(n, c, k);
  STITCH_CHECK(stats_.count(&n), "row op {} read before its passes", n.describe());
  const Stats& st = stats_.at(&n);
  const std::string ct = compute_type(n.output(0)->dtype);
  const std::string& op = n.op_type;
  if (!row_op_keeps_shape(n)) return SExpr{st.a, 0};
  ASSIGN_OR_RETURN(SExpr x, at(n.input(0), c));
  if (op == "Softmax")
    return bind(k, ct, fmt::format("{}({} - {}) * {}", fnm(ct, "exp"), x.s, st.a, st.b), x.level,
                "Softmax '" + n.name + "'");
  if (op == "LogSoftmax")
    return bind(k, ct, fmt::format("{} - {}", x.s, st.b), x.level, "LogSoftmax '" + n.name + "'");
  std::string e = fmt::format("({} - {}) * {}", x.s, st.a, st.b);
  int level = x.level;
  for (size_t i = 1; i <= 2; ++i) {
    const Value* p = n.input(i);
    if (p == nullptr) continue;
    // LayerNormalization's scale and bias broadcast to the normalized axes; InstanceNormalization's
    // are one per channel (axis 1).
    const Dims& pd = dims(p);
    Coords cp;
    if (op == "InstanceNormalization") {
      cp.push_back(pd.size() == 1 && pd[0] != 1 ? c[1] : SExpr{"0", 0});
    } else {
      const size_t off = c.size() - pd.size();
      for (size_t d = 0; d < pd.size(); ++d) cp.push_back(pd[d] == 1 ? SExpr{"0", 0} : c[d + off]);
    }
    ASSIGN_OR_RETURN(SExpr pv, at(p, cp));
    level = std::max(level, pv.level);
    e = i == 1 ? fmt::format("{} * {}", e, pv.s) : fmt::format("{} + {}", e, pv.s);
  }
  return bind(k, ct, e, level, op + " '" + n.name + "'");
}

Status Stitcher::emit_rows() {
  const Dims& d = info_.domain;
  const int64_t r = static_cast<int64_t>(d.size());
  map_ = row_mapping(info_, !part_);
  // A split kernel's partials: double if a pass reduces doubles; 64-bit integers if the passes
  // reduce integers (then all do: StitchInfo::mixed_partials).
  for (const Node* n : nodes_)
    if (stitch_role(*n) == StitchRole::kRow && !info_.is_outer(n) && !is_float(n->input(0)->dtype))
      ws_type_ = "long long";
    else if (stitch_role(*n) == StitchRole::kRow && compute_type(n->input(0)->dtype) == "double")
      ws_type_ = "double";
  // Row coordinates from `row` (the kept axes in order), in-row coordinates from `j` (the
  // reduced axes in order).
  int64_t inner_row = 1, inner_col = 1;
  dom_.assign(r, SExpr{"0", 0});
  std::vector<int64_t> col_stride(r, 1);  // a reduced axis's stride in the row
  std::vector<int64_t> row_stride(r, 1);  // a kept axis's stride in the row index
  // A kept piece's coordinate: the domain's along one kept axis, or the row index's digit that
  // several neighbouring kept axes make together (RowPiece::span).
  auto kept_coord = [&](const RowPiece& p) {
    if (p.span == 1) return dom_[p.axis];
    int64_t extent = 1;
    for (int64_t a = p.axis; a < p.axis + p.span; ++a) extent *= d[a];
    return index_piece("row", 0, info_.rows, row_stride[p.axis + p.span - 1], extent, ll());
  };
  // A moved value's coordinates (StitchInfo::permuted) at the row's element j of `extent` (the row,
  // or a moved wide value's own width): kept axes the row's, pieces of the row from j.
  auto moved_coords = [&](const Value* v, int64_t extent) {
    const Dims& vd = dims(v);
    const std::vector<RowPiece>& pieces = info_.permuted.at(v);
    Coords c(vd.size(), SExpr{"0", 0});
    for (size_t k = 0; k < vd.size(); ++k) {
      const RowPiece& p = pieces[k];
      if (vd[k] == 1) continue;
      c[k] = info_.reduced[p.axis] ? index_piece("j", 1, extent, col_stride[p.axis] * p.div, vd[k], ll())
                                   : kept_coord(p);
    }
    return c;
  };
  // A value with axes of its own (RowPiece::kOwn) at element j of its `width` per row: kept axes
  // the row's, every other axis (its own, and pieces of the row) a digit of j in its own order, so
  // that neighbouring j store neighbouring elements.
  auto own_coords = [&](const Value* v, int64_t width) {
    const Dims& vd = dims(v);
    const std::vector<RowPiece>& pieces = info_.permuted.at(v);
    Coords c(vd.size(), SExpr{"0", 0});
    int64_t inner = 1;
    for (size_t k = vd.size(); k-- > 0;) {
      if (vd[k] == 1) continue;
      const RowPiece& p = pieces[k];
      if (p.axis >= 0 && !info_.reduced[p.axis]) {
        c[k] = kept_coord(p);
        continue;
      }
      c[k] = index_piece("j", 1, width, inner, vd[k], ll());
      inner *= vd[k];
    }
    return c;
  };
  for (int64_t k = r; k-- > 0;) {
    const bool red = info_.reduced[k];
    int64_t& inner = red ? inner_col : inner_row;
    col_stride[k] = inner_col;
    row_stride[k] = inner_row;
    if (d[k] != 1) {
      dom_[k] = index_piece(red ? "j" : "row", red ? 1 : 0, red ? info_.cols : info_.rows, inner, d[k], ll());
    }
    inner *= d[k];
  }
  // A row's elements follow `base + j` in memory; a column's are strided (the full index).
  flat_ = {"base + j", 1};
  if (map_.column) flat_ = {flat_index(dom_, d).s, 1};
  // Shared-memory cache of a row op's input when two or more passes read it per element (its own
  // passes, later row ops' passes whose input is computed from it, the store pass). In node
  // order, so the choice is deterministic.
  std::vector<std::pair<const Value*, int>> readers;
  auto pulls = [&](const Value* v, const Value* x) {  // v's per-element value reads x's
    std::vector<const Value*> stack{v};
    std::set<const Value*> seen;
    while (!stack.empty()) {
      const Value* u = stack.back();
      stack.pop_back();
      if (u == x) return true;
      if (!seen.insert(u).second || !producer_.count(u)) continue;
      const Node& n = *producer_.at(u);
      if (stitch_role(n) == StitchRole::kRow && !row_op_keeps_shape(n))
        continue;  // a reduction's result is a per-row register
      for (const Value* in : n.inputs)
        if (in) stack.push_back(in);
    }
    return false;
  };
  for (const Node* n : nodes_) {
    if (stitch_role(*n) != StitchRole::kRow || info_.is_outer(n)) continue;
    const Value* x = n->input(0);
    if (std::any_of(readers.begin(), readers.end(), [&](const auto& r) { return r.first == x; })) continue;
    int count = 0;
    std::set<const Node*> counted;  // passes counted (a shared pass once, by the row op that leads it)
    for (const Node* m : nodes_)
      if (stitch_role(*m) == StitchRole::kRow && !info_.is_outer(m) && pulls(m->input(0), x)) {
        auto shared = info_.shared_pass.find(m);
        if (!counted.insert(shared == info_.shared_pass.end() ? m : shared->second).second) continue;
        ASSIGN_OR_RETURN(RowOpInfo ri, row_op_info(*m));
        count += ri.passes;
      }
    for (const Value* v : info_.stored)
      if (info_.full_row(v) && pulls(v, x)) {
        ++count;
        break;
      }
    readers.push_back({x, count});
  }
  int64_t smem = 0;
  for (const auto& [x, count] : readers) {
    const int64_t bytes = row_cache_bytes(map_, info_.cols, compute_bytes(compute_type(x->dtype)));
    if (!cache_allowed_ || count < 2 || bytes == 0 || smem + bytes > kRowCacheBudget) continue;
    const std::string name = fmt::format("cache{}", cache_.size());
    cache_[x] = name;
    cache_decl_.push_back(fmt::format("__shared__ {} {}[{}];", compute_type(x->dtype), name,
                                      (map_.split() ? map_.segment : info_.cols) * map_.rows_per_block));
    smem += bytes;
    k_.static_smem_bytes += bytes;
  }
  for (const Node* n : nodes_)
    if (stitch_role(*n) == StitchRole::kRow && !info_.is_outer(n)) RETURN_IF_ERROR(emit_row_op(*n));
  // Store pass for values of the rows' shape, then for wide values (analyze_stitch: the rows'
  // kept extents, longer along the reduced axes), one pass per width, then one value per row.
  std::vector<const Value*> full, one;
  std::map<int64_t, std::vector<const Value*>> wide;  // by width
  for (const Value* v : info_.stored) {
    if (info_.full_row(v)) {
      full.push_back(v);
      continue;
    }
    int64_t width = 1;
    if (info_.permuted.count(v))
      width = info_.moved_width(v);
    else if (dims(v).size() == d.size())
      for (int64_t k = 0; k < r; ++k)
        if (info_.reduced[k]) width *= dims(v)[static_cast<size_t>(k)];
    if (width > 1)
      wide[width].push_back(v);
    else
      one.push_back(v);
  }
  if (!full.empty()) {
    scopes_[1] = Scope{};
    for (const Value* v : full) {
      // A value whose rows a Transpose reordered: the element of this row's at its own axes.
      Coords c = dom_;
      std::string off = flat_.s;
      if (info_.permuted.count(v)) {
        c = moved_coords(v, info_.cols);
        off = offset(v, c).s;
      }
      ASSIGN_OR_RETURN(SExpr val, at(v, c));
      if (map_.column) line(1, "if (live) {");  // threads past the last column store nothing
      RETURN_IF_ERROR(store_at(v, c, off, val.s, 1));
      if (map_.column) line(1, "}");
    }
    std::vector<std::string> body = std::move(scopes_[1].lines);
    scopes_[1] = Scope{};
    line(0, map_.replicas > 1 ? share_loop(info_.cols) : row_loop());
    for (const std::string& l : body) line(0, "  " + l);
    line(0, "}");
    ++passes_;
  }
  for (const auto& [width, vs] : wide) {
    STITCH_CHECK(!map_.split() && !map_.column, "wide values in a split or column row kernel");
    scopes_[1] = Scope{};
    // Vectorised: lane L of the 4 computes element j + L, as an element kernel's lanes do; the
    // operands read at the lanes' neighbouring elements load once as a float4 (vector_component).
    const bool vec = wide_vectorizable(vs, width);
    const int lanes = vec ? 4 : 1;
    vec_ = vec;
    vec_loads_.clear();
    vec_dom0_.clear();
    std::map<const Value*, Coords> first;
    std::map<const Value*, std::vector<std::string>> values;
    for (int lane = 0; lane < lanes; ++lane) {
      lane_ = lane;
      for (const Value* v : vs) {
        // The kept axes as the domain's; the reduced ones from j over this value's extents (a
        // moved value's pieces of the row from j).
        Coords c;
        if (info_.has_own_axes(v)) {
          c = own_coords(v, width);
        } else if (info_.permuted.count(v)) {
          c = moved_coords(v, width);
        } else {
          const Dims& vd = dims(v);
          c = dom_;
          int64_t inner = 1;
          for (int64_t k = r; k-- > 0;) {
            if (!info_.reduced[k]) continue;
            c[k] = {"0", 0};
            if (vd[k] != 1) c[k] = index_piece("j", 1, width, inner, vd[k], ll());
            inner *= vd[k];
          }
        }
        if (lane == 0) {
          first[v] = c;
          if (vec) vec_base_ = c[r - 1].s;  // (vectorised values have the domain's rank; a moved one may not)
        } else {
          c[r - 1] = {fmt::format("({} + {})", c[r - 1].s, lit(lane)), 1};
        }
        ASSIGN_OR_RETURN(SExpr val, at(v, c));
        values[v].push_back(val.s);
      }
    }
    for (const Value* v : vs) {
      const std::vector<std::string>& x = values.at(v);
      const std::string off = offset(v, first.at(v)).s;
      if (!vec) {
        RETURN_IF_ERROR(store_at(v, first.at(v), off, x[0], 1));
        continue;
      }
      store4(v, "(" + off + ")", x, 1);
    }
    vec_ = false;
    lane_ = 0;
    std::vector<std::string> body = std::move(scopes_[1].lines);
    scopes_[1] = Scope{};
    line(0, share_loop(width, lanes) + fmt::format("  // wide values, {} per row{}", width,
                                                   vec ? ", 4 per thread a step (128-bit)" : ""));
    for (const std::string& l : body) line(0, "  " + l);
    line(0, "}");
    ++passes_;
    wide_vec_ = wide_vec_ || vec;
  }
  for (const Value* v : one) {
    Coords c;
    if (info_.permuted.count(v)) {
      c = moved_coords(v, 1);  // (one element per row: its axes of the row are all of one element)
    } else if (dims(v).size() == d.size()) {
      c = dom_;
      for (int64_t k = 0; k < r; ++k)
        if (info_.reduced[k]) c[k] = {"0", 0};
    } else {
      for (int64_t k = 0; k < r; ++k)
        if (!info_.reduced[k]) c.push_back(dom_[k]);
    }
    ASSIGN_OR_RETURN(SExpr val, at(v, c));
    STITCH_CHECK(val.level == 0, "per-row value '{}' depends on the loop", v->name);
    const std::string first = map_.split()        ? "lane == 0 && seg == 0"
                              : map_.column       ? "lane == 0 && live"
                              : map_.replicas > 1 ? "lane == 0 && rep == 0"
                                                  : "lane == 0";
    if (info_.scattered.count(v)) {  // a cache's update of one element per row
      line(0, fmt::format("if ({}) {{", first));
      RETURN_IF_ERROR(store_at(v, c, "row", val.s, 0));
      line(0, "}");
      continue;
    }
    const std::string p = param(v, true), ct = compute_type(v->dtype), stt = storage_type(v->dtype);
    line(0, ct == stt ? fmt::format("if ({}) {}[row] = {};", first, p, val.s)
                      : fmt::format("if ({}) {}[row] = stitch_dev::cvt<{}>({});", first, p, stt, val.s));
  }
  k_.block = {map_.block, 1, 1};
  k_.grid = {
      std::max<int64_t>(1, (info_.rows + map_.rows_per_block - 1) / map_.rows_per_block) * map_.replicas, 1,
      1};
  if (map_.split()) {
    k_.grid = {info_.rows * map_.segments, 1, 1};
    k_.cooperative = true;
    k_.scheme = "global";
    // One partial per pass, row and segment; every slot is written before the barrier that
    // precedes its reads, so the buffer needs no initialisation and no reuse between passes.
    auto ws = std::make_shared<Value>();
    ws->name = k_.name + "/grid_partials";
    ws->dtype = ws_type_ == "double" ? DType::kF64 : ws_type_ == "long long" ? DType::kI64 : DType::kF32;
    ws->dims = Dims{split_passes_ * info_.rows * map_.segments};
    k_.params.push_back({"ws", ws.get(), true});
    k_.bytes_moved += 2 * num_elements(*ws->dims) * dtype_size(ws->dtype);
    k_.workspace = std::move(ws);
  }
  std::string cached;
  for (const auto& [x, count] : readers)
    if (cache_.count(x)) cached += (cached.empty() ? "" : ", ") + fmt::format("'{}'", x->name);
  std::string over = fmt::format("the trailing {} axes", info_.axes);
  if (info_.column) {
    over = "axes ";
    for (int64_t k = 0; k < r; ++k)
      if (info_.reduced[k]) over += fmt::format("{}{}", over.size() > 5 ? "," : "", k);
  }
  k_.mapping = fmt::format(
      "{}: {} {} of {} over {} of {}; {} pass{} per {}, {} nodes stitched "
      "({} stitching){}",
      row_mapping_text(map_), info_.rows, info_.column ? "columns" : "rows", info_.cols, over,
      dims_to_string(d), passes_, passes_ == 1 ? "" : "es", info_.column ? "column" : "row", nodes_.size(),
      map_.split() ? "global: partials through global memory and a grid barrier per pass" : "regional",
      cached.empty() ? "" : fmt::format("; {} cached in shared memory", cached));
  if (wide_vec_) k_.mapping += "; wide values 4 per thread a step, as 128-bit loads and stores";
  for (const Node* n : nodes_)
    if (auto it = info_.shared_pass.find(n); it != info_.shared_pass.end())
      k_.mapping += fmt::format("; {} reduced in the pass of {}{}", n->describe(), it->second->describe(),
                                map_.split() ? ", at its grid barrier" : "");
  for (const StitchInfo::Outer& o : info_.outer)
    k_.mapping += fmt::format("; {} over rows of {} of its own, each row's in the row (an outer reduction{})",
                              o.node->describe(), o.cols,
                              o.group > 1 ? fmt::format(", by {} warps together", o.group) : "");
  // By name, not by address: the kernel's text must not depend on where the values were allocated.
  std::map<std::string, const Value*> moved;
  for (const auto& [v, f] : info_.permuted) moved[v->name] = v;
  for (const auto& [name, v] : moved)
    k_.mapping += fmt::format("; '{}' stored {} ({})", name, dims_to_string(dims(v)),
                              info_.has_own_axes(v) ? "the row's values over axes of its own"
                                                    : "the rows moved by a Transpose or Reshape");
  for (const std::string& ct : scratch_)
    k_.static_smem_bytes += (map_.column ? map_.block : 32) * compute_bytes(ct);
  CudaWriter w;
  open_entry(w,
             map_.split()
                 ? "//   scheme: row kernel split over blocks (global stitching; cooperative launch)\n"
             : map_.column ? "//   scheme: column kernel, tiled (regional stitching)\n"
                           : "//   scheme: row kernel (regional stitching)\n",
             map_.block);
  for (const std::string& ct : scratch_) {
    if (map_.column)
      w.line("__shared__ {} tile_{}[{}];", ct, type_tag(ct), map_.block);
    else
      w.line("__shared__ {} scratch_{}[32];", ct, type_tag(ct));
  }
  for (const std::string& l : cache_decl_) w.line("{}", l);
  for (const std::string& ct : outer_scratch_) {
    w.line("__shared__ {} outer_{}[{}];", ct, type_tag(ct), map_.rows_per_block);
    k_.static_smem_bytes += map_.rows_per_block * compute_bytes(ct);
  }
  if (map_.column) {
    open_tile(w, block_index(), "row", info_.rows, ix());
  } else if (map_.split()) {
    w.line("const {} row = {} / {};", ix(), block_index(), lit(map_.segments));
    w.line("const {} seg = {} % {};", ix(), block_index(), lit(map_.segments));
    w.line("const {} jbeg = seg * {};", ix(), lit(map_.segment));
    w.line("const {0} jend = jbeg + {1} < {2} ? jbeg + {1} : {2};", ix(), lit(map_.segment), lit(info_.cols));
    w.line("const int lane = threadIdx.x;");
    w.line("const int step = {};", map_.block);
    if (!cache_.empty()) w.line("const {} cache_row = -jbeg;  // the cache holds this block's segment", ix());
  } else if (map_.warp_per_row) {
    w.line("const {} row = {} * {} + (threadIdx.x >> 5);", ix(), row_block(w), map_.rows_per_block);
    w.line("const int lane = threadIdx.x & 31;");
    w.line("const int step = 32;");
    if (!cache_.empty())
      w.line("const {0} cache_row = ({0})(threadIdx.x >> 5) * {1};", ix(), lit(info_.cols));
    w.line("if (row >= {}) return;  // uniform per warp", lit(info_.rows));
  } else {
    w.line("const {} row = {};", ix(), row_block(w));
    w.line("const int lane = threadIdx.x;");
    w.line("const int step = {};", map_.block);
    if (!cache_.empty()) w.line("const {} cache_row = 0;", ix());
  }
  static const std::regex uses_base(R"(\bbase\b)");
  if (std::any_of(scopes_[0].lines.begin(), scopes_[0].lines.end(),
                  [](const std::string& l) { return std::regex_search(l, uses_base); }))
    w.line("const {} base = row * {};", ix(), lit(info_.cols));
  for (const std::string& l : scopes_[0].lines) w.line("{}", l);
  w.close();
  k_.source = w.text();
  return Status::ok();
}

}  // namespace stitch::codegen::detail
