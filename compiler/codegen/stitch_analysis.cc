// Stitched kernels (stitch.h): whether a group of nodes makes one element or row kernel
// (analyze_stitch), what it stores and what its loops cost; each node's role is stitch_roles.cc.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "codegen/lower.h"
#include "codegen/node_facts.h"
#include "codegen/scalar_ops.h"
#include "codegen/stitch.h"
#include "codegen/stitch_frames.h"
#include "codegen/stitch_passes.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

// Gathers read their indices as well as their data (an index map through an index tensor).
bool is_gather(const Node& n) {
  return n.op_type == "Gather" || n.op_type == "GatherElements" || n.op_type == "GatherND";
}

// What one step of a fine-grained GEMM evaluates for operand `v`: views cost no operation; a
// layout op reads its data input only (its starts, shapes and sizes are compile-time constants),
// a Gather its indices too; a single-element value is loaded once, before the loop.
struct Cone {
  int64_t ops = 0, loads = 0;
  std::set<const Node*> nodes;
};
Cone operand_cone(const Value* v, const std::map<const Value*, const Node*>& producer) {
  Cone c;
  std::set<const Value*> seen;
  std::vector<const Value*> stack{v};
  while (!stack.empty()) {
    const Value* u = stack.back();
    stack.pop_back();
    if (u == nullptr || !seen.insert(u).second) continue;
    auto it = producer.find(u);
    if (it == producer.end()) {
      if (num_elements(dims(u)) > 1) ++c.loads;
      continue;
    }
    const Node& n = *it->second;
    c.nodes.insert(&n);
    const StitchRole role = stitch_role(n);
    if (role != StitchRole::kView) c.ops += op_instructions(n);
    const bool data_only =
        role == StitchRole::kView || (role == StitchRole::kLayout && n.op_type != "Concat" && !is_gather(n));
    for (size_t i = 0; i < (data_only ? 1 : n.inputs.size()); ++i) stack.push_back(n.input(i));
  }
  return c;
}

std::map<const Value*, const Node*> producers(const std::vector<const Node*>& nodes) {
  std::map<const Value*, const Node*> producer;
  for (const Node* n : nodes)
    for (const Value* v : n->outputs)
      if (v) producer[v] = n;
  return producer;
}

// Each fine-grained GEMM's loops: `evals` evaluations of its value (element kernels: the
// domain's elements, a smaller product being recomputed for each element it is broadcast to; row
// kernels: each element once per pass, counted by the cost model; a contraction inside another's
// operand: once per evaluation and step of the outer one). Each step also evaluates the operands'
// producers in the group (a head transpose's index arithmetic, a scaling, a rotary embedding) and
// loads the values they read from outside; an A operand whose row a row kernel caches
// (a_row_cached) once per row and step. A running sum or product (scan_info) counts the same way:
// (len + 1) / 2 steps an evaluation on average, each evaluating its input's producers in the group.
void count_contractions(const std::vector<const Node*>& nodes,
                        const std::map<const Value*, const Node*>& producer, int64_t domain,
                        StitchInfo& info) {
  const std::set<const Node*> a_cached(info.a_row_cached.begin(), info.a_row_cached.end());
  // Consumers first, so an outer contraction is counted before the ones in its operands.
  struct Outer {
    int64_t steps;  // evaluations x contraction length
    std::set<const Node*> inside;
  };
  std::vector<Outer> outers;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node* n = *it;
    const std::optional<int64_t> k = contraction_length(*n);
    const std::optional<ScanInfo> scan = stitch_role(*n) == StitchRole::kScan ? scan_info(*n) : std::nullopt;
    if (!k && !scan) continue;
    int64_t evals = std::max(num_elements(dims(n->output(0))), domain);
    for (const Outer& o : outers)
      if (o.inside.count(n)) evals = std::max(evals, o.steps);
    if (scan) {  // (len + 1) / 2 steps an element on average, each evaluating the input's cone
      Cone x = operand_cone(n->input(0), producer);
      const int64_t steps = evals * (scan->len + 1) / 2;
      info.contraction_macs += static_cast<double>(steps);
      info.contraction_ops += static_cast<double>(steps) * static_cast<double>(x.ops);
      info.contraction_reads += steps * dtype_size(n->input(0)->dtype) * x.loads;
      outers.push_back({steps, std::move(x.nodes)});
      continue;
    }
    Cone a = operand_cone(n->input(0), producer), b = operand_cone(n->input(1), producer);
    const int64_t es = dtype_size(n->input(0)->dtype);
    const double steps = static_cast<double>(evals) * static_cast<double>(*k);
    // A row cache evaluates A once per row of the product and step.
    const int64_t a_evals =
        a_cached.count(n) ? evals / std::max<int64_t>(dims(n->output(0)).back(), 1) : evals;
    info.contraction_macs += steps;
    info.contraction_ops += steps * static_cast<double>(b.ops) + static_cast<double>(a_evals) *
                                                                     static_cast<double>(*k) *
                                                                     static_cast<double>(a.ops);
    info.contraction_reads += evals * *k * es * b.loads + std::min(evals / 32, a_evals) * *k * es * a.loads;
    a.nodes.insert(b.nodes.begin(), b.nodes.end());
    outers.push_back({evals * *k, std::move(a.nodes)});
  }
}

// Row kernels: which fine-grained GEMMs cache their A operand's row (StitchInfo::a_row_cached).
void choose_a_row_caches(const std::vector<const Node*>& nodes,
                         const std::map<const Value*, const Node*>& producer, StitchInfo& info) {
  if (!info.row || info.column) return;
  const size_t r = info.domain.size();
  for (size_t d = 0; d < r; ++d)
    if (info.reduced[d] != (d + 1 == r)) return;
  std::set<const Node*> in_operands;  // nodes some product's operands are computed from
  for (const Node* n : nodes)
    if (contraction_length(*n))
      for (const Value* v : {n->input(0), n->input(1)})
        for (const Node* m : operand_cone(v, producer).nodes) in_operands.insert(m);
  const RowMapping m = row_mapping(info);
  int64_t bytes = 0;
  for (const Node* n : nodes) {
    const std::optional<int64_t> k = contraction_length(*n);
    if (!k || dims(n->output(0)) != info.domain || in_operands.count(n)) continue;
    if (!producer.count(n->input(0)) || operand_cone(n->input(0), producer).ops == 0) continue;
    bool own_coordinates = true;
    for (const Node* u : nodes)
      for (const Value* in : u->inputs)
        if (in == n->output(0) && stitch_role(*u) != StitchRole::kPointwise &&
            stitch_role(*u) != StitchRole::kRow)
          own_coordinates = false;
    if (!own_coordinates) continue;
    const int64_t b = a_row_cache_bytes(m, *k, n->input(0)->dtype);
    if (bytes + b > kARowCacheBudget) continue;
    bytes += b;
    info.a_row_cached.push_back(n);
  }
}

// The inner axis of an element kernel's vector form (Stitcher::vectorizable: 4 elements of the
// domain's last axis of more than one element a thread, 128-bit access to a 4-byte value of the
// domain's shape stored or read from outside), or nullopt where the kernel has a lane per element.
// A packed part has a lane per element as well, which the analysis of a group cannot tell.
std::optional<size_t> vector_axis(const std::vector<const Node*>& nodes, const StitchInfo& info,
                                  const std::set<const Value*>& made) {
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
  for (const Node* node : nodes)
    for (const Value* v : node->inputs)
      if (v && !made.count(v) && dims(v) == d && is_word(v->dtype)) return inner;
  return std::nullopt;
}

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
        const std::string ct = compute_type(v->dtype);
        if (ct == "float" || ct == "double" || ct == "int" || ct == "long long") {
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
  std::set<const Value*> made;
  bool tiled = false;
  for (const Node* n : nodes) {
    for (const Value* v : n->outputs) made.insert(v);
    tiled |= stitch_role(*n) == StitchRole::kTiledGemm;
  }
  const std::optional<size_t> inner = tiled ? std::nullopt : vector_axis(nodes, info, made);
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

// ---- analysis -------------------------------------------------------------------------------

bool is_gemm_kernel(const Kernel& k) {
  bool gemm = false;
  for (const Node* n : k.nodes) {
    switch (stitch_role(*n)) {
      case StitchRole::kContraction:
      case StitchRole::kTiledGemm:
        gemm = true;
        break;
      case StitchRole::kPointwise:
      case StitchRole::kLayout:
      case StitchRole::kView:
        break;
      default:
        return false;
    }
  }
  return gemm;
}

std::set<const Value*> group_outputs(const Graph& g,
                                     const std::unordered_map<const Value*, std::vector<Node*>>& users,
                                     const std::vector<const Node*>& nodes) {
  const std::set<const Node*> members(nodes.begin(), nodes.end());
  std::set<const Value*> out;
  for (const Node* x : nodes)
    for (const Value* v : x->outputs) {
      if (!v) continue;
      bool outside = g.is_graph_output(v);
      if (auto it = users.find(v); it != users.end())
        for (const Node* u : it->second) outside |= !members.count(u);
      if (outside) out.insert(v);
    }
  return out;
}

namespace {

// A tiled GEMM's group (gemm_tile.h): the MatMul reads its operands from outside the group and its
// product has the kernel's shape, and everything computed from the product is element-wise at
// that shape (the epilogue runs on each accumulator where its thread holds it). Other nodes only
// feed the epilogue (a bias, a scale, a residual read at broadcast coordinates).
Status check_tiled(const std::vector<const Node*>& nodes, const std::set<const Value*>& made,
                   StitchInfo& info) {
  const Node* mm = nullptr;
  for (const Node* n : nodes) {
    if (stitch_role(*n) != StitchRole::kTiledGemm) continue;
    if (mm)
      return Status::user(
          fmt::format("{} and {} are both tiled GEMMs: a kernel runs one (its epilogue is the rest)",
                      mm->describe(), n->describe()));
    mm = n;
  }
  for (const Value* in : mm->inputs)
    if (made.count(in))
      return Status::user(
          fmt::format("{} would tile '{}', computed in the group: a tiled GEMM reads its operands "
                      "from memory",
                      mm->describe(), in->name));
  if (dims(mm->output(0)) != info.domain)
    return Status::user(
        fmt::format("{} makes {}, the kernel stores {}: a tiled GEMM's kernel stores its product's shape",
                    mm->describe(), dims_to_string(dims(mm->output(0))), dims_to_string(info.domain)));
  std::set<const Value*> after{mm->output(0)};
  for (const Node* n : nodes) {
    bool reads = false;
    for (const Value* in : n->inputs) reads |= in && after.count(in);
    if (!reads) continue;
    if (stitch_role(*n) != StitchRole::kPointwise || dims(n->output(0)) != info.domain)
      return Status::user(
          fmt::format("{} reads the product of tiled GEMM {} but is not element-wise at its shape {}",
                      n->describe(), mm->describe(), dims_to_string(info.domain)));
    after.insert(n->output(0));
  }
  info.tile = gemm_tile(*mm);
  return Status::ok();
}

StatusOr<StitchInfo> row_kernel(const std::vector<const Node*>& nodes, const std::vector<const Node*>& rows,
                                const Node* main, StitchInfo info);

}  // namespace

StatusOr<StitchInfo> analyze_members(const std::vector<const Node*>& nodes,
                                     const std::set<const Value*>& stored,
                                     const std::map<const Value*, const Node*>& scattered) {
  StitchInfo info;
  bool tiled = false;
  std::set<const Value*> made;
  std::vector<const Node*> rows;
  for (const Node* n : nodes) {
    const StitchRole role = stitch_role(*n);
    if (role == StitchRole::kNone) return Status::user(fmt::format("{} cannot be stitched with other ops", n->describe()));
    // A view's result is stored into a cache (an update pulled through the view's index map), or
    // as a tensor of its own in the view's shape: only of a value the kernel computes (else it would
    // be a copy) for readers in the kernel too (a router's scores flattened for its top k, which the
    // next kernel gathers from). A view read outside alone stays a view group of its own, of the
    // value the kernel stores, without a kernel.
    if (role == StitchRole::kView && stored.count(n->output(0)) && !scattered.count(n->output(0))) {
      const bool read_inside = std::any_of(nodes.begin(), nodes.end(), [&](const Node* m) {
        return std::find(m->inputs.begin(), m->inputs.end(), n->output(0)) != m->inputs.end();
      });
      if (!made.count(n->input(0)) || !read_inside)
        return Status::user(fmt::format(
            "{} is a view whose result is read outside the group: a kernel stores one only of a value it "
            "computes and reads in the view's shape itself",
            n->describe()));
    }
    if (role == StitchRole::kRow) rows.push_back(n);
    tiled |= role == StitchRole::kTiledGemm;
    for (const Value* v : n->outputs) made.insert(v);
  }
  for (const Value* v : stored) {
    if (!made.count(v)) return Status::user(fmt::format("'{}' is not computed by the group", v->name));
    info.stored.push_back(v);
  }
  std::sort(info.stored.begin(), info.stored.end(), [](const Value* a, const Value* b) { return a->name < b->name; });
  if (info.stored.empty()) return Status::user("the group stores nothing");
  if (rows.empty()) {
    info.domain = dims(info.stored.front());
    for (const Value* v : info.stored)
      if (dims(v) != info.domain)
        return Status::user(fmt::format("it would store '{}' ({}) and '{}' ({}): one element kernel stores one shape",
                                        info.stored.front()->name, dims_to_string(info.domain), v->name,
                                        dims_to_string(dims(v))));
    // Each value is evaluated once per element of the domain and coordinate set it is read at
    // (element_evaluations).
    const ElementEvaluations ev = element_evaluations(nodes, info);
    const double d = static_cast<double>(num_elements(info.domain));
    for (size_t j = 0; j < nodes.size(); ++j) {
      const Node* n = nodes[j];
      if (stitch_role(*n) == StitchRole::kView || stitch_role(*n) == StitchRole::kLayout) continue;  // no arithmetic
      // A node the kernel's coordinates do not reach (an operand of a loop) once per element.
      const double pe = ev.per_element[j] > 0 ? ev.per_element[j] : 1.0;
      const int64_t evals = static_cast<int64_t>(pe * d);
      const int64_t e = num_elements(dims(n->output(0)));
      if (e < evals) info.recompute_elements += (evals - e) * op_instructions(*n);
    }
    if (tiled) RETURN_IF_ERROR(check_tiled(nodes, made, info));
    count_contractions(nodes, producers(nodes), num_elements(info.domain), info);
    return info;
  }
  if (tiled)
    return Status::user(
        fmt::format("{} would join a row kernel: a tiled GEMM's epilogue is element-wise only",
                    rows.front()->describe()));
  for (const Node* n : nodes)
    if (stitch_role(*n) == StitchRole::kScan)
      return Status::user(
          fmt::format("{} would join a row kernel: a running sum or product runs in element kernels only",
                      n->describe()));
  info.row = true;
  // The kernel's rows are the first row op's; a row op over other rows may be an outer reduction
  // (StitchInfo::outer). When one is not, the last row op's rows are tried (an RMSNorm's
  // statistics before the per-head norms of Q or K).
  StatusOr<StitchInfo> by_first = row_kernel(nodes, rows, rows.front(), info);
  if (!by_first.is_ok() && rows.back() != rows.front()) {
    StatusOr<StitchInfo> by_last = row_kernel(nodes, rows, rows.back(), info);
    if (by_last.is_ok()) by_first = std::move(by_last);
  }
  if (!by_first.is_ok()) return by_first;
  // Each pass evaluates the element-wise nodes once per element of the rows and set of
  // coordinates they are read at (coordinate_sets): those beyond one per element of a node's value
  // are recomputation, which the cost model charges per pass like the rest. A value wider than the
  // rows (a Split's input) is spread over its sets; one smaller than the rows is computed once per
  // row or element of its own and set (a lower bound where it is broadcast as well).
  const CoordinateSets cs =
      coordinate_sets(nodes, by_first->stored, by_first->domain, std::nullopt, false, /*rows=*/true);
  const int64_t d = num_elements(by_first->domain);
  for (size_t j = 0; j < nodes.size(); ++j) {
    const StitchRole role = stitch_role(*nodes[j]);
    if (cs.sets[j] <= 1 || role == StitchRole::kView || role == StitchRole::kLayout ||
        role == StitchRole::kRow)
      continue;
    const int64_t e = num_elements(dims(nodes[j]->output(0)));
    const int64_t extra = e < d ? (cs.sets[j] - 1) * e : std::max<int64_t>(cs.sets[j] * d - e, 0);
    by_first->recompute_elements += extra * op_instructions(*nodes[j]);
  }
  return by_first;
}

namespace {

// analyze_stitch's row kernels, whose rows are those of row op `main`.
StatusOr<StitchInfo> row_kernel(const std::vector<const Node*>& nodes, const std::vector<const Node*>& rows,
                                const Node* main, StitchInfo info) {
  ASSIGN_OR_RETURN(RowOpInfo first, row_op_info(*main));
  info.domain = first.in;
  info.axes = first.axes;
  info.column = first.column;
  info.reduced = first.reduced;
  info.rows = first.rows;
  info.cols = first.cols;
  const int64_t r = static_cast<int64_t>(info.domain.size());
  info.passes = 0;
  auto axes_text = [](const std::vector<bool>& red) {
    std::string t;
    for (size_t d = 0; d < red.size(); ++d)
      if (red[d]) t += (t.empty() ? "" : ",") + std::to_string(d);
    return "[" + t + "]";
  };
  const std::map<const Value*, const Node*> producer = producers(nodes);
  std::vector<std::string> other_rows;  // the message for each row op over other rows
  bool ints = false, floats = false;
  for (const Node* n : rows) {
    ASSIGN_OR_RETURN(RowOpInfo ri, row_op_info(*n));
    if (ri.in != info.domain || ri.reduced != info.reduced) {
      const std::string why = fmt::format("{} reduces {} over axes {}, the group's rows are {} over axes {}",
                                          n->describe(), dims_to_string(ri.in), axes_text(ri.reduced),
                                          dims_to_string(info.domain), axes_text(info.reduced));
      if (!outer_candidate(*n, ri, info, producer)) return Status::user(why);
      info.outer.push_back({n, ri.rows, ri.cols, ri.passes});
      other_rows.push_back(why);
      continue;
    }
    info.passes += ri.passes;
    (is_float(n->input(0)->dtype) ? floats : ints) = true;
  }
  info.mixed_partials = ints && floats;
  Dims kept;
  for (int64_t k = 0; k < r; ++k)
    if (!info.reduced[k]) kept.push_back(info.domain[k]);
  auto per_row = [&](const Dims& d) {
    if (d == kept) return true;
    if (d.size() != info.domain.size()) return false;
    for (int64_t k = 0; k < r; ++k)
      if (d[k] != (info.reduced[k] ? 1 : info.domain[k])) return false;
    return true;
  };
  // Wide values: computed at the current row with the rows' kept extents but other extents
  // along the reduced axes (a row scale applied to a GEMM product wider than the row it was
  // reduced over: RMSNorm moved past its GEMM, fusion/hoist_scales.h). A store pass of their own
  // loops over each; not in column kernels. A row kernel with wide values never splits its rows
  // over blocks (it replicates them instead: row_mapping).
  const bool wide_ok = !info.column;
  auto wide = [&](const Dims& v) {
    if (!wide_ok || v.size() != info.domain.size() || v == info.domain) return false;
    bool longer = false;
    for (int64_t k = 0; k < r; ++k) {
      if (!info.reduced[k] && v[k] != info.domain[k]) return false;
      longer |= info.reduced[k] && v[k] != 1;
    }
    return longer;
  };
  // Values computed from a row op's result are read at the current row only (stitch_frames.h).
  ASSIGN_OR_RETURN(info.permuted, moved_rows(nodes, info));
  bool full = false;
  std::set<int64_t> widths;  // one store pass per width of wide values
  for (const Value* v : info.stored) {
    if (info.permuted.count(v)) {
      const int64_t width = info.moved_width(v);
      if (info.full_row(v)) {
        full = true;
      } else {
        if (info.column)
          return Status::user(fmt::format("it would store '{}' moved in a column kernel", v->name));
        widths.insert(width);
      }
      continue;
    }
    if (dims(v) == info.domain) {
      full = true;
      continue;
    }
    if (wide(dims(v)) && !per_row(dims(v))) {
      int64_t width = 1;
      for (int64_t k = 0; k < r; ++k)
        if (info.reduced[k]) width *= dims(v)[static_cast<size_t>(k)];
      widths.insert(width);
      continue;
    }
    if (!per_row(dims(v)))
      return Status::user(fmt::format("it would store '{}' ({}), neither the rows' shape {} nor one value per row",
                                      v->name, dims_to_string(dims(v)), dims_to_string(info.domain)));
  }
  if (full) ++info.passes;
  info.wide_widths.assign(widths.begin(), widths.end());
  // A value with axes of its own reads the row's values it broadcasts once per element of its own:
  // its wide loop evaluates them again for each (a routing weight per activation of its expert).
  for (const Value* v : info.stored) {
    if (!info.has_own_axes(v)) continue;
    const int64_t e = num_elements(dims(v));
    std::set<const Value*> seen;
    std::vector<const Value*> stack{v};
    while (!stack.empty()) {
      const Value* u = stack.back();
      stack.pop_back();
      auto it = producer.find(u);
      if (it == producer.end() || !seen.insert(u).second || info.is_outer(it->second)) continue;
      const Node& p = *it->second;
      const StitchRole role = stitch_role(p);
      if (role == StitchRole::kRow && !row_op_keeps_shape(p)) continue;  // a register of the row
      const int64_t pe = num_elements(dims(p.output(0)));
      if (role != StitchRole::kView && role != StitchRole::kLayout && pe < e)
        info.recompute_elements += (e - pe) * op_instructions(p);
      for (const Value* in : p.inputs)
        if (in) stack.push_back(in);
    }
  }
  for (const Node* n : nodes) {  // row kernels evaluate each value once per element and pass
    if (!contraction_length(*n)) continue;
    const int64_t e = num_elements(dims(n->output(0)));
    if (e < num_elements(info.domain))
      return Status::user(
          fmt::format("{} would be broadcast into the rows {}: its loop would run again for every "
                      "element it is broadcast to",
                      n->describe(), dims_to_string(info.domain)));
  }
  RETURN_IF_ERROR(outer_reductions(nodes, other_rows, info));
  share_passes(rows, producer, info);
  choose_a_row_caches(nodes, producer, info);
  count_contractions(nodes, producer, 0, info);
  return info;
}

}  // namespace

}  // namespace stitch::codegen
