// Index maps of stitched kernels (stitcher.h): a gather's index checked, the coordinates of a
// Tile's and a Pad's input, a Concat's select over its inputs, and flat indices and the
// coordinates of a view's input as sums of digits (an expression in a known range times a
// weight) taken apart and joined again without dividing where the layouts line up.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "codegen/stitcher.h"

namespace stitch::codegen::detail {

namespace {

// A coordinate `s` in [0, extent) as a digit of the given weight.
Digit atom(const std::string& s, int level, int64_t weight, int64_t extent) {
  return {s, level, weight, extent, 1, extent};
}

// x / m (x's weight kept): the division moves into the digit's own where its remainder allows.
// `ll`: the kernel's literal suffix (Digit::text).
Digit divided(Digit x, int64_t m, const char* ll) {
  if (!x.wraps()) {
    x.div *= m;
    x.extent = (x.base_extent + x.div - 1) / x.div;
  } else if (x.extent % m == 0) {  // (b / d) % (m k) / m = (b / (d m)) % k
    x.div *= m;
    x.extent /= m;
  } else {
    const int64_t e = x.extent;
    x = atom(x.text(ll), x.level, x.weight, e);
    x.div = m;
    x.extent = (e + m - 1) / m;
  }
  return x;
}

// x % m for m below x's extent.
Digit wrapped(Digit x, int64_t m, const char* ll) {
  if (x.wraps() && x.extent % m != 0) x = atom(x.text(ll), x.level, x.weight, x.extent);
  x.extent = m;
  return x;
}

// Largest weight first, with neighbouring pieces of one base joined again: p = (b / (d e)) % f at
// weight w e and q = (b / d) % e at weight w are (b / d) % (e f) at weight w.
std::vector<Digit> joined(std::vector<Digit> ds) {
  std::stable_sort(ds.begin(), ds.end(), [](const Digit& a, const Digit& b) { return a.weight > b.weight; });
  for (size_t i = 0; i + 1 < ds.size();) {
    const Digit &p = ds[i], &q = ds[i + 1];
    if (p.base != q.base || p.base_extent != q.base_extent || p.div != q.div * q.extent ||
        p.weight != q.weight * q.extent) {
      ++i;
      continue;
    }
    Digit j = q;
    j.level = std::max(p.level, q.level);
    j.extent = p.extent * q.extent;
    if (!j.wraps()) j.extent = (j.base_extent + j.div - 1) / j.div;
    ds[i] = std::move(j);
    ds.erase(ds.begin() + static_cast<long>(i) + 1);
    if (i > 0) --i;
  }
  return ds;
}

// The sum of `ds` as an expression (atomic or parenthesised), keeping them as its digits.
SExpr digit_sum(std::vector<Digit> ds, const char* ll) {
  ds = joined(std::move(ds));
  if (ds.empty()) return {"0", 0};
  SExpr r;
  for (const Digit& x : ds) {
    const std::string t = x.text(ll);
    const std::string term = x.weight == 1 ? t : fmt::format("{} * {}{}", t, x.weight, ll);
    r.s = r.s.empty() ? term : r.s + " + " + term;
    r.level = std::max(r.level, x.level);
  }
  if (ds.size() > 1 || ds[0].weight != 1) r.s = "(" + r.s + ")";
  r.digits = std::move(ds);
  return r;
}

// The flat index of coordinates `c` over the contiguous layout of `d` as digits: each coordinate
// times its stride, a coordinate that keeps digits as those digits scaled by it.
std::vector<Digit> flat_digits(const Coords& c, const Dims& d) {
  const Dims s = strides_of(d);
  std::vector<Digit> ds;
  for (size_t k = 0; k < d.size(); ++k) {
    if (d[k] == 1 || c[k].s == "0") continue;
    if (c[k].digits.empty()) {
      ds.push_back(atom(c[k].s, c[k].level, s[k], d[k]));
      continue;
    }
    for (Digit x : c[k].digits) {
      x.weight *= s[k];
      ds.push_back(std::move(x));
    }
  }
  return ds;
}

// The largest value a sum of digits takes.
int64_t digit_max(const std::vector<Digit>& ds) {
  int64_t m = 0;
  for (const Digit& x : ds) m += x.weight * (x.extent - 1);
  return m;
}

}  // namespace

SExpr Stitcher::flat_index(const Coords& c, const Dims& d) const {
  std::vector<Digit> ds = flat_digits(c, d);
  if (ds.empty()) return {"", 0};
  SExpr e = digit_sum(std::move(ds), ll());
  e.digits.clear();
  return e;
}

Coords Stitcher::tile_coords(const Coords& c, const Dims& od, const Dims& id) const {
  Coords ci;
  for (size_t d = 0; d < id.size(); ++d) {
    if (id[d] == 1)
      ci.push_back({"0", 0});
    else if (od[d] == id[d])
      ci.push_back(c[d]);
    else
      ci.push_back({fmt::format("({} % {})", c[d].s, lit(id[d])), c[d].level});
  }
  return ci;
}

StatusOr<Stitcher::PadCoords> Stitcher::pad_coords(const Node& n, const Coords& c) const {
  ASSIGN_OR_RETURN(std::vector<int64_t> p, stitch_pads(n));
  const std::string mode = n.attr_string("mode", "constant");
  const Dims& id = *n.input(0)->dims;
  const size_t r = id.size();
  PadCoords out{c, "", 0};
  std::vector<std::string> inside;
  for (size_t d = 0; d < r; ++d) {
    if (p[d] == 0 && p[d + r] == 0) continue;
    const std::string j = p[d] > 0   ? fmt::format("({} - {})", c[d].s, lit(p[d]))
                          : p[d] < 0 ? fmt::format("({} + {})", c[d].s, lit(-p[d]))
                                     : c[d].s;
    std::string e;
    if (mode == "constant" || mode == "edge") {
      if (mode == "constant") {
        inside.push_back(fmt::format("({0} >= {1} && {0} < {2})", j, lit(0), lit(id[d])));
        out.level = std::max(out.level, c[d].level);
      }
      e = id[d] == 1 ? "0"
                     : fmt::format("({0} < {1} ? {1} : ({0} > {2} ? {2} : {0}))", j, lit(0), lit(id[d] - 1));
    } else if (mode == "wrap") {
      e = id[d] == 1 ? "0" : fmt::format("((({0} % {1}) + {1}) % {1})", j, lit(id[d]));
    } else {  // reflect
      const int64_t period = 2 * (id[d] - 1);
      const std::string m = fmt::format("((({0} % {1}) + {1}) % {1})", j, lit(period));
      e = period == 0 ? "0" : fmt::format("({0} >= {1} ? {2} - {0} : {0})", m, lit(id[d]), lit(period));
    }
    out.coords[d] = {e, c[d].level};
  }
  for (size_t i = 0; i < inside.size(); ++i) out.inside += (i ? " && " : "") + inside[i];
  return out;
}

std::string Stitcher::pad_fill(const Node& n, const std::string& ct) {
  const Value* v = n.input(2);
  if (!v || !v->constant || v->constant->size() == 0) return literal(0.0, ct);
  return first_literal(*v->constant, ct);
}

Coords Stitcher::reshape_coords(const Coords& c, const Dims& od, const Dims& id) {
  Dims on, in;
  std::vector<size_t> opos, ipos;
  for (size_t d = 0; d < od.size(); ++d)
    if (od[d] != 1) {
      on.push_back(od[d]);
      opos.push_back(d);
    }
  for (size_t d = 0; d < id.size(); ++d)
    if (id[d] != 1) {
      in.push_back(id[d]);
      ipos.push_back(d);
    }
  Coords ci(id.size(), SExpr{"0", 0});
  if (on == in) {
    for (size_t k = 0; k < ipos.size(); ++k) ci[ipos[k]] = c[opos[k]];
    return ci;
  }
  const Dims is = strides_of(id);
  const std::vector<Digit> ds = joined(flat_digits(c, od));
  std::map<std::string, std::string> flats;
  for (size_t d = 0; d < id.size(); ++d)
    if (id[d] != 1) ci[d] = split_digits(ds, is[d], id[d], flats);
  return ci;
}

SExpr Stitcher::split_digits(const std::vector<Digit>& ds, int64_t s, int64_t e,
                             std::map<std::string, std::string>& flats) {
  std::vector<Digit> keep, q, low;
  for (const Digit& x : ds)
    if (x.weight % (s * e) != 0) keep.push_back(x);
  for (const Digit& x : keep) {
    if (x.weight % s != 0) {
      low.push_back(x);
      continue;
    }
    q.push_back(x);
    q.back().weight /= s;
  }
  // Below s: at most one digit x of weight w dividing s with the rest under w, whose quotient is
  // x / (s / w); the rest adds nothing to the quotient. (low is sorted, largest weight first.)
  bool exact = digit_max(low) < s;
  if (!exact && s % low.front().weight == 0 &&
      digit_max(std::vector<Digit>(low.begin() + 1, low.end())) < low.front().weight) {
    const int64_t m = s / low.front().weight;
    if (low.front().extent > m) {
      q.push_back(divided(low.front(), m, ll()));
      q.back().weight = 1;
    }
    exact = true;
  }
  if (exact) {
    // Modulo e: digits of weights that are multiples of e drop out, a digit of weight w dividing e
    // wraps at e / w.
    std::vector<Digit> r;
    for (const Digit& x : q) {
      if (x.weight % e == 0) continue;
      if (e % x.weight == 0 && x.weight * (x.extent - 1) >= e)
        r.push_back(wrapped(x, e / x.weight, ll()));
      else
        r.push_back(x);
    }
    const bool wrap = digit_max(r) >= e;
    SExpr v = digit_sum(std::move(r), ll());
    if (!wrap) return v;
    return {fmt::format("({} % {})", v.s, lit(e)), v.level};
  }
  // The digits below s carry into each other: divide their sum with the others.
  const SExpr f = digit_sum(keep, ll());
  auto it = flats.find(f.s);
  if (it == flats.end()) {
    const std::string name = fresh("f");
    line(f.level, fmt::format("const {} {} = {};", ix(), name, f.s));
    it = flats.emplace(f.s, name).first;
  }
  std::string x = s == 1 ? it->second : fmt::format("({} / {})", it->second, lit(s));
  if (digit_max(keep) >= s * e) x = fmt::format("({} % {})", x, lit(e));
  return {x, f.level};
}

// A Concat's value at c: each input at c shifted along the axis (clamped into it, so every branch
// reads in bounds) and a select of the one c falls in.
StatusOr<SExpr> Stitcher::concat(const Node& n, const Coords& c, const std::string& k) {
  const Value* v = n.output(0);
  const std::string ct = compute_type(v->dtype);
  const Dims& od = dims(v);
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(od.size())));
  std::vector<std::pair<int64_t, SExpr>> parts;  // (end along the axis, value)
  constexpr size_t kEagerConcat = 4;
  const bool lazy_loads = std::count_if(n.inputs.begin(), n.inputs.end(), [&](const Value* in) {
                            return dims(in)[axis] > 0;
                          }) > static_cast<std::ptrdiff_t>(kEagerConcat);
  int64_t start = 0;
  int level = c[axis].level;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* in = n.input(i);
    const int64_t len = dims(in)[axis];
    if (len == 0) continue;
    Coords ci = c;
    // Clamped into this input so every branch reads in bounds; the select keeps the right one.
    std::string x = start == 0 ? c[axis].s : fmt::format("({} - {})", c[axis].s, lit(start));
    if (start > 0) x = fmt::format("({0} < {1} ? {1} : {0})", x, lit(0));
    if (start + len < od[axis]) x = fmt::format("({0} > {1} ? {1} : {0})", x, lit(len - 1));
    ci[axis] = {len == 1 ? "0" : x, c[axis].level};
    // With more than kEagerConcat inputs, one read from outside the group (through views) is
    // loaded inside the select, so only the branch taken loads: a Concat of a recurrence's 32
    // stored steps loaded all 32 for each element (and its kernel took 174 registers). With a
    // few, each input's vector load serves four elements and the select picks per lane.
    if (lazy_loads) {
      if (std::optional<SExpr> load = outside_load(in, ci)) {
        level = std::max(level, load->level);
        parts.push_back({start + len, *load});
        start += len;
        continue;
      }
    }
    ASSIGN_OR_RETURN(SExpr a, at(in, ci));
    level = std::max(level, a.level);
    parts.push_back({start + len, a});
    start += len;
  }
  std::string e = parts.back().second.s;
  for (size_t i = parts.size() - 1; i-- > 0;)
    e = fmt::format("({} < {} ? {} : {})", c[axis].s, lit(parts[i].first), parts[i].second.s, e);
  return bind(k, ct, e, level, fmt::format("Concat '{}'", n.name));
}

SExpr Stitcher::data_index(const SExpr& idx, const Node& n, int64_t data_axis, int64_t component) {
  std::string j = fresh("g");
  line(idx.level, fmt::format("long long {} = (long long){};", j, idx.s));
  line(idx.level, index_check(k_, n, j, data_axis, component));
  const int64_t extent = dims(n.input(0))[static_cast<size_t>(data_axis)];
  if (width_.narrow && extent > 1) {  // an axis of extent 1 takes no index term: nothing reads it
    line(idx.level, fmt::format("const int {0}i = (int){0};", j));
    j += "i";
  }
  return {j, idx.level};
}

}  // namespace stitch::codegen::detail
