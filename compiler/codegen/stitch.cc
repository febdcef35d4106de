// Stitched kernels (stitch.h): the pull-based code generator (stitcher.h), its element and tiled
// GEMM kernels and the entry points; an element's own loops (contractions, running scans) are
// stitch_loops.cc, row kernels stitch_rows.cc, index maps (flat indices, reshaped coordinates,
// Concat's select) stitch_index.cc, the analysis stitch_analysis.cc, row kernels' thread mappings
// row_mapping.cc.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "codegen/stitcher.h"

namespace stitch::codegen {
namespace detail {

StatusOr<Kernel> Stitcher::run() {
  scopes_.resize(2);
  if (info_.row) {
    RETURN_IF_ERROR(emit_rows());
  } else if (info_.tile) {
    RETURN_IF_ERROR(emit_tiled());
  } else {
    RETURN_IF_ERROR(emit_elements());
  }
  return std::move(k_);
}

void Stitcher::open_entry(CudaWriter& w, const std::string& scheme, int64_t block) {
  if (!part_) {
    w.raw_line(kernel_header(k_, scheme));
    open_kernel(w, k_, block);
    return;
  }
  // static: internal linkage, so its __shared__ arrays (thread_local statics on the emulator)
  // are not unique global symbols that would keep the emulation library from unloading.
  w.line("// {}: {}", k_.name, k_.mapping);
  w.open("static __device__ __forceinline__ void {}({}, const long long bid, const long long nblk)", k_.name,
         kernel_signature(k_));
}

StatusOr<SExpr> Stitcher::at(const Value* v, const Coords& c) {
  STITCH_CHECK(c.size() == dims(v).size(), "coordinates of rank {} for '{}' of rank {}", c.size(), v->name,
               dims(v).size());
  const std::string k = key(v, c);
  if (const SExpr* hit = find(k)) return *hit;
  auto pit = producer_.find(v);
  const std::string ct = compute_type(v->dtype);
  if (pit == producer_.end()) {  // read from outside the group
    if (cache_.count(v) && same(c, dom_) && cached_ready_.count(v))
      return bind(k, ct, fmt::format("{}[cache_row + j]", cache_.at(v)), 1, "cached by an earlier pass");
    const SExpr off = offset(v, c);
    const std::string p = param(v, false), st = storage_type(v->dtype);
    if (vec_ && is_word(v->dtype))
      if (auto comp = vector_component(v, c, p)) return bind(k, ct, fmt::format("({}){}", ct, *comp), 1);
    const std::string load =
        ct == st ? fmt::format("{}[{}]", p, off.s) : fmt::format("stitch_dev::cvt<{}>({}[{}])", ct, p, off.s);
    SExpr r = bind(k, ct, load, std::max(off.level, level_of(c)));
    maybe_cache(v, c, r);
    return r;
  }
  const Node& n = *pit->second;
  if (cache_.count(v) && same(c, dom_) && cached_ready_.count(v))
    return bind(k, ct, fmt::format("{}[cache_row + j]", cache_.at(v)), 1, "cached by an earlier pass");
  if (xtile_ > 0) {
    ASSIGN_OR_RETURN(std::optional<SExpr> x, from_lane(n, v, c, k));
    if (x) return *x;
  }
  if (stitch_role(n) != StitchRole::kView) {
    ++k_.evaluations;
    ++k_.node_evaluations[&n];
  }
  ASSIGN_OR_RETURN(SExpr r, compute(n, v, c, k));
  maybe_cache(v, c, r);
  return r;
}

StatusOr<std::optional<SExpr>> Stitcher::from_lane(const Node& n, const Value* v, const Coords& c,
                                                   const std::string& k) {
  const std::optional<SExpr> none;
  const StitchRole role = stitch_role(n);
  if (role == StitchRole::kView || role == StitchRole::kLayout || dims(v) != info_.domain || same(c, dom_) ||
      level_of(c) > 1)
    return none;
  if (!lane_exchangeable(v->dtype)) return none;
  const std::string ct = compute_type(v->dtype);
  for (size_t a = 0; a < xaxis_; ++a)
    if (c[a].s != dom_[a].s) return none;
  ASSIGN_OR_RETURN(SExpr own, at(v, dom_));
  if (own.level == 0) return std::optional<SExpr>(own);  // the same at every element
  // Lanes hold consecutive elements from a multiple of 32 (the loop's start and stride are), so
  // the tile's first lane is this lane with its place in the tile cleared.
  const SExpr place =
      flat_index(Coords(c.begin() + static_cast<std::ptrdiff_t>(xaxis_), c.end()),
                 Dims(info_.domain.begin() + static_cast<std::ptrdiff_t>(xaxis_), info_.domain.end()));
  const std::string src = fmt::format("(int)(threadIdx.x & {}u){}", 32 - xtile_,
                                      place.s.empty() ? "" : fmt::format(" + (int)({})", place.s));
  ++k_.lane_exchanges;
  return std::optional<SExpr>(bind(k, ct, fmt::format("__shfl_sync(live, {}, {})", own.s, src), 1,
                                   fmt::format("'{}' from the lane of that element", v->name)));
}

std::optional<SExpr> Stitcher::outside_load(const Value* v, Coords c) {
  for (auto pit = producer_.find(v); pit != producer_.end(); pit = producer_.find(v)) {
    const Node& n = *pit->second;
    if (stitch_role(n) != StitchRole::kView) return std::nullopt;
    c = reshape_coords(c, dims(v), dims(n.input(0)));
    v = n.input(0);
  }
  if (cache_.count(v)) return std::nullopt;  // a row cache may hold it: at() reads it there
  const std::string ct = compute_type(v->dtype), st = storage_type(v->dtype);
  const SExpr off = offset(v, c);
  const std::string p = param(v, false);
  const std::string load =
      ct == st ? fmt::format("{}[{}]", p, off.s) : fmt::format("stitch_dev::cvt<{}>({}[{}])", ct, p, off.s);
  return SExpr{load, std::max(off.level, level_of(c))};
}

StatusOr<SExpr> Stitcher::compute(const Node& n, const Value* v, const Coords& c, const std::string& k) {
  const std::string ct = compute_type(v->dtype);
  const std::string& op = n.op_type;
  const StitchRole role = stitch_role(n);
  const Dims& od = dims(v);
  if (role == StitchRole::kPointwise) {
    if (op == "Round") {
      ASSIGN_OR_RETURN(std::optional<SExpr> rq, round_quotient(n, c, k));
      if (rq) return *rq;
    }
    std::vector<std::string> args;
    std::vector<int> levels;
    int level = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value* in = n.input(i);
      levels.push_back(0);
      if (!reads_operand(n, i)) {
        args.emplace_back();
        continue;
      }
      Coords ci;
      if (op == "BatchNormalization" && i > 0) {
        ci = {c[1]};
      } else {
        ci = broadcast_coords(c, dims(in));
      }
      ASSIGN_OR_RETURN(SExpr a, at(in, ci));
      level = std::max(level, a.level);
      levels.back() = a.level;
      args.push_back(a.s);
    }
    // A float division inside a loop by a value fixed outside it (a row's statistic, a scalar
    // constant): the reciprocal once, a product per element. Only where the reciprocal is exact
    // in range (reciprocal_safe): the result is then within an ulp of the quotient, and the
    // special values (0, inf, NaN) come out as the division's. Not in a kernel that rounds.
    if (op == "Div" && !rounds_ && ct == "float" && compute_type(n.input(1)->dtype) == "float" &&
        levels[1] < level && reciprocal_safe(*n.input(1))) {
      const std::string rk = "reciprocal:" + args[1];
      const SExpr* r = find(rk);
      const SExpr rcp = r ? *r : bind(rk, ct, fmt::format("1.0f / {}", args[1]), levels[1], "reciprocal");
      return bind(k, ct, fmt::format("({} * {})", args[0], rcp.s), level,
                  fmt::format("Div '{}', as a product with the reciprocal", n.name));
    }
    ASSIGN_OR_RETURN(std::string expr, scalar_expr(n, args, &k_));
    return bind(k, ct, expr, level, fmt::format("{} '{}'", op, n.name));
  }
  if (role == StitchRole::kView) {
    const Value* in = n.input(0);
    return at(in, reshape_coords(c, od, dims(in)));
  }
  if (op == "Transpose") {
    ASSIGN_OR_RETURN(auto perm, ops::transpose_perm(n, static_cast<int64_t>(od.size())));
    Coords ci(od.size());
    for (size_t d = 0; d < perm.size(); ++d) ci[perm[d]] = c[d];
    return at(n.input(0), ci);
  }
  if (op == "Expand") return at(n.input(0), broadcast_coords(c, dims(n.input(0))));
  if (op == "Pad") {  // constant mode selects the fill where a padded coordinate is outside
    ASSIGN_OR_RETURN(PadCoords pc, pad_coords(n, c));
    ASSIGN_OR_RETURN(SExpr v, at(n.input(0), pc.coords));
    if (pc.inside.empty()) return v;
    return bind(k, ct, fmt::format("({} ? {} : {})", pc.inside, v.s, pad_fill(n, ct)),
                std::max(v.level, pc.level), fmt::format("Pad '{}'", n.name));
  }
  if (op == "Tile") return at(n.input(0), tile_coords(c, od, dims(n.input(0))));
  if (op == "Slice") {
    ASSIGN_OR_RETURN(ops::SliceSpec sp, stitch_slice(n));
    const Dims& id = dims(n.input(0));
    const Dims is = strides_of(id);
    int64_t rem = sp.base;
    Coords ci;
    for (size_t d = 0; d < id.size(); ++d) {
      const int64_t start = rem / is[d];
      rem %= is[d];
      const int64_t step = sp.strides[d] / is[d];
      if (id[d] == 1) {
        ci.push_back({"0", 0});
        continue;
      }
      if (start == 0 && step == 1) {  // the same coordinate, its digits kept
        ci.push_back(c[d]);
        continue;
      }
      std::string e = c[d].s;
      if (step != 1) e = fmt::format("{} * {}", e, lit(step));
      if (start != 0)
        e = fmt::format("({} + {})", lit(start), e);
      else if (step != 1)
        e = "(" + e + ")";
      ci.push_back({e, c[d].level});
    }
    return at(n.input(0), ci);
  }
  if (op == "Split") {  // output i starts where the outputs before it end along the axis
    ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(od.size())));
    int64_t start = 0;
    for (const Value* o : n.outputs) {
      if (o == v) break;
      start += dims(o)[axis];
    }
    Coords ci = c;
    if (start != 0) ci[axis] = {fmt::format("({} + {})", lit(start), c[axis].s), c[axis].level};
    return at(n.input(0), ci);
  }
  if (op == "Concat") return concat(n, c, k);
  if (op == "Gather") {
    const Value* data = n.input(0);
    const Value* ind = n.input(1);
    const Dims& dd = dims(data);
    const int64_t r = static_cast<int64_t>(dd.size()), q = static_cast<int64_t>(dims(ind).size());
    ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), r));
    Coords cq(c.begin() + axis, c.begin() + axis + q);
    ASSIGN_OR_RETURN(SExpr idx, at(ind, cq));
    Coords ci(c.begin(), c.begin() + axis);
    ci.push_back(data_index(idx, n, axis));
    ci.insert(ci.end(), c.begin() + axis + q, c.end());
    return at(data, ci);
  }
  if (op == "GatherElements") {  // the output's coordinates, the axis's replaced by the index there
    const Value* data = n.input(0);
    ASSIGN_OR_RETURN(int64_t axis,
                     ops::norm_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(dims(data).size())));
    ASSIGN_OR_RETURN(SExpr idx, at(n.input(1), c));
    Coords ci = c;
    ci[axis] = data_index(idx, n, axis);
    return at(data, ci);
  }
  if (op == "GatherND") {
    // Output [b..., i..., rest...] reads data [b..., indices[b..., i..., 0..last), rest...].
    const Value* data = n.input(0);
    const Value* ind = n.input(1);
    const Dims& id = dims(ind);
    const int64_t bd = n.attr_int("batch_dims", 0), q = static_cast<int64_t>(id.size()), last = id.back();
    Coords ci(c.begin(), c.begin() + bd);
    for (int64_t k = 0; k < last; ++k) {
      Coords cq(c.begin(), c.begin() + (q - 1));
      cq.push_back({lit(k), 0});
      ASSIGN_OR_RETURN(SExpr idx, at(ind, cq));
      ci.push_back(data_index(idx, n, bd + k, k));
    }
    ci.insert(ci.end(), c.begin() + (q - 1), c.end());
    return at(data, ci);
  }
  if (role == StitchRole::kRow) return row_value(n, c, k);
  if (role == StitchRole::kContraction) return contraction(n, c, k);
  if (role == StitchRole::kScan) return scan(n, c, k);
  if (role == StitchRole::kTiledGemm)  // emit_tiled binds its product at the kernel's coordinates
    return Status::internal(fmt::format("{} is read at coordinates other than its tile's", n.describe()));
  return Status::user(fmt::format("{} cannot be stitched", n.describe()));
}

std::optional<Coords> Stitcher::lane0_coords(const Coords& c, int kv, int64_t extent) const {
  const std::string& b0 = vec_base_;
  const std::string bl = lane_ == 0 ? b0 : fmt::format("({} + {})", b0, lit(lane_));
  auto replace_all = [](std::string x, const std::string& from, const std::string& to) {
    for (size_t at = x.find(from); at != std::string::npos; at = x.find(from, at + to.size()))
      x.replace(at, from.size(), to);
    return x;
  };
  if (kv < 0 || extent % 4 != 0) return std::nullopt;
  Coords c0 = c;
  for (SExpr& e : c0) {
    if (lane_ > 0) e.s = replace_all(e.s, bl, b0);
    e.digits.clear();  // lane 0's coordinates are the strings alone
  }
  // The inner coordinate: b0, or (S + b0) with S a multiple of 4; this lane's must be the same
  // expression of its own inner coordinate.
  const std::string& inner = c0[kv].s;
  int64_t start = 0;
  if (inner != b0) {
    const std::string tail = std::string(ll()) + " + " + b0 + ")";
    if (inner.size() <= tail.size() + 1 || inner.front() != '(' ||
        inner.compare(inner.size() - tail.size(), tail.size(), tail) != 0)
      return std::nullopt;
    const std::string digits = inner.substr(1, inner.size() - tail.size() - 1);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    start = std::stoll(digits);
    if (start % 4 != 0) return std::nullopt;
  }
  const std::string expect = start == 0 ? bl : fmt::format("({} + {})", lit(start), bl);
  if (c[kv].s != expect) return std::nullopt;
  for (int k = 0; k < static_cast<int>(c0.size()); ++k)
    if (k != kv && (c0[k].s.find(b0) != std::string::npos || c0[k].level > 1)) return std::nullopt;
  return c0;
}

std::optional<std::string> Stitcher::vector_component(const Value* v, const Coords& c, const std::string& p) {
  const Dims& vd = dims(v);
  int kv = -1;
  for (int k = static_cast<int>(vd.size()); k-- > 0;)
    if (vd[k] != 1) {
      kv = k;
      break;
    }
  const std::optional<Coords> lane0 = lane0_coords(c, kv, kv < 0 ? 0 : vd[kv]);
  if (!lane0) return std::nullopt;
  const Coords& c0 = *lane0;
  std::string off0 = flat_index(c0, vd).s;
  if (off0.empty()) off0 = "0";
  if (vd == info_.domain && same(c0, vec_dom0_)) off0 = "i";
  const std::string key = p + "@" + off0;
  auto it = vec_loads_.find(key);
  if (it == vec_loads_.end()) {
    const std::string name = fmt::format("{}v{}", p, vec_loads_.size());
    line(1, fmt::format("const {0} {1} = reinterpret_cast<const {0}*>({2})[({3}) >> 2];", vec4_type(v->dtype),
                        name, p, off0));
    it = vec_loads_.emplace(key, name).first;
  }
  return fmt::format("{}.{}", it->second, "xyzw"[lane_]);
}

bool Stitcher::vectorizable() const { return !part_ && vector_axis(nodes_, info_).has_value(); }

size_t Stitcher::domain_coords(const Dims& d, const std::string& flat) {
  const int64_t n = num_elements(d);
  const Dims s = strides_of(d);
  size_t inner_axis = d.size();
  for (size_t k = 0; k < d.size(); ++k) {
    if (d[k] == 1) {
      dom_.push_back({"0", 0});
      continue;
    }
    dom_.push_back(index_piece(flat, 1, n, s[k], d[k], ll()));
    inner_axis = k;
  }
  return inner_axis;
}

Status Stitcher::emit_elements() {
  const Dims& d = info_.domain;
  const int64_t n = num_elements(d);
  const size_t inner_axis = domain_coords(d);
  vec_ = xtile_ == 0 && vectorizable();  // exchange: a lane per element
  const int lanes = vec_ ? 4 : 1;
  const Coords base = dom_;
  if (vec_) {
    vec_base_ = base[inner_axis].s;
    vec_dom0_ = base;
  }
  // Lane L computes element i + L: the inner coordinate and the flat index shift by L.
  std::map<const Value*, std::vector<std::string>> values;
  for (int lane = 0; lane < lanes; ++lane) {
    lane_ = lane;
    dom_ = base;
    flat_ = {"i", 1};
    if (lane > 0) {
      dom_[inner_axis] = {fmt::format("({} + {})", base[inner_axis].s, lit(lane)), 1};
      flat_ = {fmt::format("(i + {})", lit(lane)), 1};
    }
    for (const Value* v : info_.stored) {
      ASSIGN_OR_RETURN(SExpr val, at(v, dom_));
      values[v].push_back(val.s);
    }
  }
  int vec_stores = 0;
  for (const Value* v : info_.stored) {
    const std::vector<std::string>& x = values.at(v);
    if (vec_ && is_word(v->dtype)) {
      store4(v, "i", x, 1);
      ++vec_stores;
      continue;
    }
    if (info_.scattered.count(v)) {  // not vectorised (vectorizable): one lane at the domain's coordinates
      RETURN_IF_ERROR(store_at(v, dom_, "i", x[0], 1));
      continue;
    }
    for (int lane = 0; lane < lanes; ++lane)
      store(v, lane == 0 ? "i" : fmt::format("(i + {})", lit(lane)), x[lane], 1);
  }
  const int64_t items = n / lanes;
  k_.block = {kMapBlock, 1, 1};
  k_.grid = {std::clamp<int64_t>((items + kMapBlock - 1) / kMapBlock, 1, kMaxMapBlocks), 1, 1};
  const std::string how =
      vec_ ? fmt::format(
                 "one thread per 4 elements of {} ({} elements), 128-bit loads of {} operands and stores "
                 "of {} "
                 "values",
                 dims_to_string(d), n, vec_loads_.size(), vec_stores)
           : fmt::format("one thread per element of {} ({} elements)", dims_to_string(d), n);
  const std::string exchanged =
      k_.lane_exchanges == 0 ? ""
                             : fmt::format(
                                   "; {} values of other elements of each tile of {} (axes {} on) read from "
                                   "the lanes that computed them (warp shuffles)",
                                   k_.lane_exchanges, xtile_, xaxis_);
  k_.mapping = fmt::format(
      "grid-stride loop, {}; {} nodes stitched, values pulled through registers and index maps "
      "(local stitching){}",
      how, nodes_.size(), exchanged);
  CudaWriter w;
  open_entry(w, "//   scheme: element kernel (local stitching)\n", kMapBlock);
  for (const std::string& l : scopes_[0].lines) w.line("{}", l);
  w.line("const {} n = {};", ix(), lit(n));
  if (vec_)
    w.open("for ({} i = 4 * ({} * blockDim.x + threadIdx.x); i < n; i += 4 * {} * blockDim.x)", ix(),
           block_index(), block_count());
  else
    w.open("for ({} i = {} * blockDim.x + threadIdx.x; i < n; i += {} * blockDim.x)", ix(), block_index(),
           block_count());
  if (k_.lane_exchanges > 0) {
    // The lanes of this warp still in the loop: tiles are whole (n is a multiple of a tile, which
    // divides 32), so every lane a shuffle reads from is among them.
    w.line("const {} warp0 = i - (threadIdx.x & 31u);", ix());
    w.line("const unsigned live = n - warp0 >= 32 ? 0xffffffffu : (1u << (int)(n - warp0)) - 1u;");
  }
  for (const std::string& l : scopes_[1].lines) w.line("{}", l);
  w.close();
  w.close();
  k_.source = w.text();
  return Status::ok();
}

Status Stitcher::emit_tiled() {
  const GemmTile& t = *info_.tile;
  const Node& mm = *t.node;
  const Value* y = mm.output(0);
  const std::string a = param(mm.input(0), false), b = param(mm.input(1), false);
  // The domain's coordinates from the tile's row r (its leading axes) and column c: a bias reads
  // [c], not [i % N].
  const Dims& d = info_.domain;
  domain_coords(Dims(d.begin(), d.end() - 1), "r");
  dom_.push_back(d.back() == 1 ? SExpr{"0", 0} : SExpr{"c", 1});
  flat_ = {"i", 1};
  scopes_[1].memo[key(y, dom_)] = {"acc[ti][tj]", 1};
  for (const Value* v : info_.stored) {
    ASSIGN_OR_RETURN(SExpr val, at(v, dom_));
    store(v, "i", val.s, 1);
  }
  const std::string ct = compute_type(y->dtype), st = storage_type(y->dtype);
  k_.block = {kTileThreads, 1, 1};
  k_.grid = {t.blocks_n(), t.blocks_m(), 1};
  k_.static_smem_bytes = t.smem_bytes(ct == "double" ? 8 : 4);
  k_.min_blocks_per_sm = kTileBlocksPerSm;
  k_.mapping = fmt::format(
      "tiled GEMM: a block of {} threads per {} x {} tile of the {} x {} product ({} x {} blocks), {} x {} "
      "accumulators per thread over K = {} in shared-memory steps of {}; {} epilogue nodes on the "
      "accumulators (local stitching)",
      kTileThreads, t.bm(), t.bm(), t.rows, t.n, t.blocks_m(), t.blocks_n(), t.tm, t.tm, t.k, t.kstep,
      nodes_.size() - 1);
  CudaWriter w;
  open_entry(w, "//   scheme: tiled GEMM with a stitched epilogue (local stitching)\n", kTileThreads);
  for (const std::string& l : scopes_[0].lines) w.line("{}", l);
  write_gemm_tile(w, t, a, b, st, ct);
  w.comment("epilogue: this thread's outputs, the product in registers");
  w.line("#pragma unroll");
  w.open("for (int ti = 0; ti < {}; ++ti)", t.tm);
  const std::string ix = t.index_type(), ll = ix == "int" ? "" : "LL";
  w.line("const {} r = row0 + {};", ix, tile_offset("ty", "ti"));
  w.line("#pragma unroll");
  w.open("for (int tj = 0; tj < {}; ++tj)", t.tm);
  w.line("const {} c = col0 + {};", ix, tile_offset("tx", "tj"));
  // A guard, not a break: the loops unroll and acc stays in registers.
  w.open("if (r < {1}{0} && c < {2}{0})", ll, t.rows, t.n);
  w.line("const {} i = r * {}{} + c;", ix, t.n, ll);
  for (const std::string& l : scopes_[1].lines) w.line("{}", l);
  w.close();
  w.close();
  w.close();
  w.close();
  k_.source = w.text();
  return Status::ok();
}

}  // namespace detail

namespace {

// The kernel of `nodes`. An element kernel that computes a value more than once per element (each
// element of a small matrix per token reading the whole matrix through Slices: a row's sum as
// Adds) is generated again with its tile's values exchanged between lanes (Stitcher's exchange),
// and that form is kept when its evaluations and shuffles are fewer than the other's evaluations
// per element.
StatusOr<Kernel> stitch_kernel(const std::vector<const Node*>& nodes, const StitchInfo& info, int index,
                               bool cache, const std::string& part_name, int64_t index32_limit) {
  detail::Stitcher s(nodes, info, index, cache, part_name, index32_limit);
  ASSIGN_OR_RETURN(Kernel k, s.run());
  if (info.row || info.tile || exchange_tile(info.domain).elements == 0) return k;
  bool again = false;
  for (const auto& [n, e] : k.node_evaluations) again = again || e > s.lanes();
  if (!again) return k;
  detail::Stitcher x(nodes, info, index, cache, part_name, index32_limit, /*exchange=*/true);
  ASSIGN_OR_RETURN(Kernel kx, x.run());
  if (kx.lane_exchanges == 0 || kx.evaluations + kx.lane_exchanges >= k.evaluations / s.lanes()) return k;
  return kx;
}

}  // namespace

StatusOr<Kernel> lower_stitched(const std::vector<const Node*>& nodes, const std::set<const Value*>& stored,
                                int index, bool cache, int64_t index32_limit) {
  ASSIGN_OR_RETURN(StitchInfo info, analyze_stitch(nodes, stored));
  return stitch_kernel(nodes, info, index, cache, "", index32_limit);
}

StatusOr<Kernel> lower_stitched_part(const std::vector<const Node*>& nodes, const StitchInfo& info, int index,
                                     bool cache, const std::string& part_name) {
  return stitch_kernel(nodes, info, index, cache, part_name, kIndex32Limit);
}

}  // namespace stitch::codegen
