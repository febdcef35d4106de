// How many times a stitched kernel's code computes each node (stitch.h: coordinate_sets,
// element_evaluations): each value's coordinates followed from the stored values through the index
// maps the stitcher writes (stitch.cc, stitch_index.cc), as symbolic expressions, and the vector
// and exchange forms an element kernel takes.
#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>

#include "codegen/lower.h"
#include "codegen/stitch.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {

std::optional<size_t> vector_axis(const std::vector<const Node*>& nodes, const StitchInfo& info) {
  const Dims& d = info.domain;
  const int64_t n = num_elements(d);
  std::optional<size_t> inner;
  for (size_t k = d.size(); k-- > 0;)
    if (d[k] != 1) {
      inner = k;
      break;
    }
  if (!inner || n < 4 || n % 4 != 0 || d[*inner] % 4 != 0 || !info.scattered.empty()) return std::nullopt;
  for (const Value* v : info.stored)
    if (is_word(v->dtype)) return inner;
  std::set<const Value*> made;
  for (const Node* node : nodes) made.insert(node->outputs.begin(), node->outputs.end());
  for (const Node* node : nodes)
    for (const Value* v : node->inputs)
      if (v && !made.count(v) && dims(v) == d && is_word(v->dtype)) return inner;
  return std::nullopt;
}

bool lane_exchangeable(DType t) {
  const std::string ct = compute_type(t);
  return ct == "float" || ct == "double" || ct == "int" || ct == "long long";
}

namespace {

// Symbolic coordinates (coordinate_sets): each axis's coordinate as a hash of the expression the
// stitcher would write for it, its lowest bit set when the expression depends on the domain's
// inner axis (so the vector form's lanes differ in it). 0 is the constant 0 of a unit axis.
using Sym = uint64_t;
using Coord = std::vector<Sym>;
constexpr Sym kInnerBit = 1;

Sym mix(uint64_t z) {  // splitmix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// An expression of `what` (the kind of index arithmetic, its constants) over coordinates `of`.
Sym expr(std::initializer_list<uint64_t> what, std::initializer_list<Sym> of) {
  uint64_t h = 0x51ed27u, bit = 0;
  for (uint64_t w : what) h = mix(h ^ w);
  for (Sym s : of) {
    h = mix(h ^ s);
    bit |= s & kInnerBit;
  }
  return (h & ~kInnerBit) | bit | 2;  // never 0
}
Sym expr_of_all(std::initializer_list<uint64_t> what, const Coord& c) {
  Sym s = expr(what, {});
  for (Sym x : c) s = expr({s}, {x});
  return s;
}
uint64_t tag_of(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// Each Slice's spec, computed once per analysis.
using SliceSpecs = std::unordered_map<const Node*, std::optional<ops::SliceSpec>>;

// The coordinates at which node `n` reads input `i` when its output `o` is read at `c`, as the
// stitcher's index maps compute them (Stitcher::compute and stitch_index.cc), into `ci`; false for
// an input whose coordinates the analysis does not follow (the operands of fine-grained GEMMs and
// scans, whose loops count_contractions counts).
bool input_coords(const Node& n, size_t i, size_t o, const Coord& c, Coord& ci, SliceSpecs& specs) {
  const Value* in = n.input(i);
  const Value* out = n.output(o);
  const Dims& id = dims(in);
  const Dims& od = dims(out);
  const StitchRole role = stitch_role(n);
  const std::string& op = n.op_type;
  auto broadcast = [&]() {  // right-aligned, a unit axis at 0
    ci.assign(id.size(), 0);
    const size_t off = od.size() - std::min(od.size(), id.size());
    for (size_t k = 0; k < id.size(); ++k)
      if (id[k] != 1 && k + off < c.size()) ci[k] = c[k + off];
    return true;
  };
  auto opaque = [&]() {  // every axis a function of all the output's coordinates
    ci.assign(id.size(), 0);
    for (size_t k = 0; k < id.size(); ++k)
      if (id[k] != 1) ci[k] = expr_of_all({tag_of(&n), i, k}, c);
    return true;
  };
  if (contraction_length(n) || role == StitchRole::kScan || role == StitchRole::kTiledGemm) return false;
  if (role == StitchRole::kRow) {  // row kernels: a norm or softmax reads its input where it is read
    if (!row_op_keeps_shape(n)) return false;  // a statistic: its passes read the input (roots)
    if (i == 0) {
      ci = c;
      return true;
    }
    return broadcast();
  }
  if (role == StitchRole::kPointwise || op == "Expand") return broadcast();
  if (role == StitchRole::kView) {
    // Blocks of axes whose extents multiply to the same on both sides: an input axis is a function
    // of its block's output coordinates (the digits of their flat index), the same coordinate where
    // a block is one axis on each side.
    std::vector<size_t> ipos, opos;
    for (size_t k = 0; k < id.size(); ++k)
      if (id[k] != 1) ipos.push_back(k);
    for (size_t k = 0; k < od.size(); ++k)
      if (od[k] != 1) opos.push_back(k);
    ci.assign(id.size(), 0);
    size_t a = 0, b = 0;
    while (a < ipos.size() && b < opos.size()) {
      std::vector<size_t> bi{ipos[a++]}, bo{opos[b++]};
      int64_t pi = id[bi[0]], po = od[bo[0]];
      while (pi != po) {
        if (pi < po && a < ipos.size()) {
          bi.push_back(ipos[a++]);
          pi *= id[bi.back()];
        } else if (po < pi && b < opos.size()) {
          bo.push_back(opos[b++]);
          po *= od[bo.back()];
        } else {
          break;
        }
      }
      if (bi.size() == 1 && bo.size() == 1) {
        ci[bi[0]] = c[bo[0]];
        continue;
      }
      Coord outs;
      uint64_t shape = 0x7e5a;
      for (size_t x : bo) outs.push_back(c[x]), shape = mix(shape ^ static_cast<uint64_t>(od[x]));
      shape = mix(shape ^ 0xb10c);
      for (size_t x : bi) shape = mix(shape ^ static_cast<uint64_t>(id[x]));
      for (size_t k = 0; k < bi.size(); ++k) ci[bi[k]] = expr_of_all({shape, k}, outs);
    }
    return true;
  }
  if (op == "Transpose") {
    StatusOr<std::vector<int64_t>> perm = ops::transpose_perm(n, static_cast<int64_t>(od.size()));
    if (!perm.is_ok()) return opaque();
    ci.assign(id.size(), 0);
    for (size_t d = 0; d < perm->size(); ++d)
      ci[static_cast<size_t>((*perm)[d])] = id[(*perm)[d]] == 1 ? 0 : c[d];
    return true;
  }
  if (op == "Slice") {
    auto found = specs.find(&n);
    if (found == specs.end()) {
      StatusOr<ops::SliceSpec> spec = stitch_slice(n);
      found = specs.emplace(&n, spec.is_ok() ? std::optional<ops::SliceSpec>(*spec) : std::nullopt).first;
    }
    const std::optional<ops::SliceSpec>& sp = found->second;
    if (!sp) return opaque();
    const Dims is = ops::strides_of(id);
    int64_t rem = sp->base;
    ci.assign(id.size(), 0);
    for (size_t d = 0; d < id.size(); ++d) {
      const int64_t start = rem / is[d];
      rem %= is[d];
      const int64_t step = sp->strides[d] / is[d];
      if (id[d] == 1) continue;
      ci[d] = start == 0 && step == 1
                  ? c[d]
                  : expr({0x511ce, static_cast<uint64_t>(start), static_cast<uint64_t>(step)}, {c[d]});
    }
    return true;
  }
  if (op == "Pad") {
    StatusOr<std::vector<int64_t>> p = stitch_pads(n);
    if (!p.is_ok()) return opaque();
    const uint64_t mode = std::hash<std::string>{}(n.attr_string("mode", "constant"));
    ci.assign(id.size(), 0);
    for (size_t d = 0; d < id.size(); ++d) {
      if (id[d] == 1) continue;
      const int64_t b = (*p)[d], e = (*p)[d + id.size()];
      ci[d] = b == 0 && e == 0
                  ? c[d]
                  : expr({0x9ad, mode, static_cast<uint64_t>(b), static_cast<uint64_t>(id[d])}, {c[d]});
    }
    return true;
  }
  if (op == "Tile") {
    ci.assign(id.size(), 0);
    for (size_t d = 0; d < id.size(); ++d)
      if (id[d] != 1) ci[d] = od[d] == id[d] ? c[d] : expr({0x7113, static_cast<uint64_t>(id[d])}, {c[d]});
    return true;
  }
  if (op == "Concat" || op == "Split") {
    StatusOr<int64_t> ax = ops::norm_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(od.size()));
    if (!ax.is_ok()) return opaque();
    const size_t a = static_cast<size_t>(*ax);
    int64_t start = 0;
    if (op == "Concat") {
      for (size_t k = 0; k < i; ++k) start += dims(n.input(k))[a];
    } else {
      for (size_t k = 0; k < o; ++k) start += dims(n.output(k))[a];
    }
    ci = c;
    ci.resize(id.size(), 0);
    if (id[a] == 1)
      ci[a] = 0;
    else if (op == "Concat" && !(start == 0 && id[a] == od[a]))
      ci[a] = expr(
          {0xc0c, static_cast<uint64_t>(start), static_cast<uint64_t>(id[a]), static_cast<uint64_t>(od[a])},
          {c[a]});
    else if (op == "Split" && start != 0)
      ci[a] = expr({0x5b1, static_cast<uint64_t>(start)}, {c[a]});
    return true;
  }
  if (op == "GatherElements") {
    StatusOr<int64_t> ax = ops::norm_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(od.size()));
    if (!ax.is_ok() || i != 0) {
      if (i != 1) return opaque();
      ci = c;
      return true;
    }
    ci = c;
    ci[static_cast<size_t>(*ax)] = expr_of_all({tag_of(&n), 0x6e}, c);  // the index read at c
    return true;
  }
  if (op == "Gather") {
    StatusOr<int64_t> ax = ops::norm_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(id.size()));
    const size_t q = dims(n.input(1)).size();
    if (!ax.is_ok() || c.size() != id.size() - 1 + q) return opaque();
    const size_t a = static_cast<size_t>(*ax);
    const Coord cq(c.begin() + static_cast<std::ptrdiff_t>(a),
                   c.begin() + static_cast<std::ptrdiff_t>(a + q));
    if (i == 1) {
      ci = cq;
      return true;
    }
    ci.assign(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(a));
    ci.push_back(id[a] == 1 ? 0 : expr_of_all({tag_of(&n), 0x6a}, cq));
    ci.insert(ci.end(), c.begin() + static_cast<std::ptrdiff_t>(a + q), c.end());
    return true;
  }
  return opaque();  // GatherND and the rest
}

}  // namespace

CoordinateSets coordinate_sets(const std::vector<const Node*>& nodes, const std::vector<const Value*>& stored,
                               const Dims& domain, std::optional<size_t> vector_inner, bool exchange,
                               bool rows) {
  CoordinateSets r;
  r.sets.assign(nodes.size(), 0);
  r.per_element.assign(nodes.size(), 0.0);
  // Values by index: node k's output o is first_out[k] + o.
  std::vector<size_t> first_out(nodes.size() + 1, 0);
  for (size_t k = 0; k < nodes.size(); ++k) first_out[k + 1] = first_out[k] + nodes[k]->outputs.size();
  std::unordered_map<const Value*, size_t> vid;
  for (size_t k = 0; k < nodes.size(); ++k)
    for (size_t o = 0; o < nodes[k]->outputs.size(); ++o)
      if (nodes[k]->outputs[o]) vid[nodes[k]->outputs[o]] = first_out[k] + o;
  auto value_of = [&](const Value* v) {
    auto it = vid.find(v);
    return it == vid.end() ? SIZE_MAX : it->second;
  };
  // The domain's own coordinates; with exchange, the tile's axes (exchange_tile).
  Coord dom(domain.size(), 0);
  for (size_t k = 0; k < domain.size(); ++k)
    if (domain[k] != 1)
      dom[k] = (mix(k + 1) & ~kInnerBit) | 2 | (vector_inner && *vector_inner == k ? kInnerBit : 0);
  const ExchangeTile xt = exchange ? exchange_tile(domain) : ExchangeTile{};
  // Each value's coordinate sets, flat (rank entries each), and how many.
  std::vector<std::vector<Sym>> at(first_out.back());
  std::vector<size_t> count(first_out.back(), 0);
  // The roots: the stored values at the domain's coordinates; in a row kernel also each row op's
  // input, which its passes read there, and a value of the rows' rank broadcast from them.
  std::vector<const Value*> roots(stored.begin(), stored.end());
  if (rows)
    for (const Node* n : nodes)
      if (stitch_role(*n) == StitchRole::kRow && n->input(0)) roots.push_back(n->input(0));
  for (const Value* v : roots) {
    const size_t i = value_of(v);
    if (i == SIZE_MAX) continue;
    const Dims& vd = dims(v);
    if (vd == domain) {
      at[i].insert(at[i].end(), dom.begin(), dom.end());
    } else if (rows && vd.size() == domain.size()) {
      for (size_t k = 0; k < vd.size(); ++k) at[i].push_back(vd[k] == 1 ? 0 : dom[k]);
    } else {
      continue;
    }
    ++count[i];
  }
  Coord c, ci;  // reused for each read
  SliceSpecs specs;
  std::vector<std::pair<uint64_t, size_t>> keys;
  std::vector<Sym> uniq;
  // Consumers before producers (nodes are in topological order).
  for (size_t k = nodes.size(); k-- > 0;) {
    const Node& n = *nodes[k];
    const StitchRole role = stitch_role(n);
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const size_t vi = first_out[k] + o;
      if (count[vi] == 0) continue;
      const Value* v = n.output(o);
      const size_t rank = dims(v).size();
      std::vector<Sym>& cs = at[vi];
      // Distinct coordinates, at most kMaxCoordinateSets.
      keys.clear();
      for (size_t j = 0; j < count[vi]; ++j) {
        uint64_t h = rank;
        for (size_t x = 0; x < rank; ++x) h = mix(h ^ cs[j * rank + x]);
        keys.push_back({h, j});
      }
      std::sort(keys.begin(), keys.end());
      uniq.clear();
      size_t kept = 0;
      for (size_t j = 0; j < keys.size() && kept < kMaxCoordinateSets; ++j)
        if (j == 0 || keys[j].first != keys[j - 1].first) {
          uniq.insert(uniq.end(), cs.begin() + static_cast<std::ptrdiff_t>(keys[j].second * rank),
                      cs.begin() + static_cast<std::ptrdiff_t>((keys[j].second + 1) * rank));
          ++kept;
        }
      cs.swap(uniq);
      count[vi] = kept;
      // Exchange (Stitcher::from_lane): a computed value of the domain's shape read at another
      // element of the tile comes from the lane that computed it at its own.
      if (xt.elements > 0 && role != StitchRole::kView && role != StitchRole::kLayout && dims(v) == domain) {
        if (lane_exchangeable(v->dtype)) {
          uniq.clear();
          bool own = false, gone = false;
          for (size_t j = 0; j < count[vi]; ++j) {
            const Sym* x = cs.data() + j * rank;
            const bool is_own = std::equal(x, x + rank, dom.begin());
            own |= is_own;
            bool in_tile = !is_own;
            for (size_t a = 0; a < xt.axis && in_tile; ++a) in_tile = x[a] == dom[a];
            if (in_tile) {
              ++r.exchanges;
              gone = true;
            } else {
              uniq.insert(uniq.end(), x, x + rank);
            }
          }
          if (gone && !own) uniq.insert(uniq.end(), dom.begin(), dom.end());
          cs.swap(uniq);
          count[vi] = rank == 0 ? 1 : cs.size() / rank;
        }
      }
      if (role != StitchRole::kView) {
        r.sets[k] += static_cast<int64_t>(count[vi]);
        for (size_t j = 0; j < count[vi]; ++j) {
          const bool varies = std::any_of(cs.begin() + static_cast<std::ptrdiff_t>(j * rank),
                                          cs.begin() + static_cast<std::ptrdiff_t>((j + 1) * rank),
                                          [](Sym s) { return (s & kInnerBit) != 0; });
          r.per_element[k] += vector_inner && !varies ? 0.25 : 1.0;
        }
      }
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const size_t in = value_of(n.input(i));
        if (in == SIZE_MAX) continue;
        for (size_t j = 0; j < count[vi]; ++j) {
          c.assign(cs.begin() + static_cast<std::ptrdiff_t>(j * rank),
                   cs.begin() + static_cast<std::ptrdiff_t>((j + 1) * rank));
          if (!input_coords(n, i, o, c, ci, specs)) continue;
          at[in].insert(at[in].end(), ci.begin(), ci.end());
          ++count[in];
        }
      }
    }
  }
  return r;
}

ElementEvaluations element_evaluations(const std::vector<const Node*>& nodes, const StitchInfo& info) {
  ElementEvaluations r;
  const bool tiled = std::any_of(nodes.begin(), nodes.end(),
                                 [](const Node* n) { return stitch_role(*n) == StitchRole::kTiledGemm; });
  const std::optional<size_t> inner = tiled ? std::nullopt : vector_axis(nodes, info);
  CoordinateSets plain = coordinate_sets(nodes, info.stored, info.domain, inner, false);
  // The exchange form where it computes less, as stitch_kernel chooses: a lane per element, its
  // other reads within the tile from other lanes.
  bool again = false;
  for (size_t j = 0; j < nodes.size(); ++j) again |= plain.sets[j] > 1;
  if (!tiled && again && exchange_tile(info.domain).elements > 0) {
    CoordinateSets x = coordinate_sets(nodes, info.stored, info.domain, std::nullopt, true);
    double p = 0, e = static_cast<double>(x.exchanges);
    for (size_t j = 0; j < nodes.size(); ++j) {
      p += plain.per_element[j];
      e += x.per_element[j];
    }
    if (x.exchanges > 0 && e < p) {
      r.per_element = std::move(x.per_element);
      r.exchange = true;
      return r;
    }
  }
  r.per_element = std::move(plain.per_element);
  return r;
}

}  // namespace stitch::codegen
