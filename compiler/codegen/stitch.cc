// Stitched kernels (stitch.h): the pull-based code generator (the analysis is stitch_analysis.cc).
#include "codegen/stitch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <regex>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "codegen/scalar_ops.h"
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "support/check.h"

namespace stitch::codegen {
namespace {

using ops::strides_of;

const Dims& dims(const Value* v) { return *v->dims; }

}  // namespace

// ---- the generator --------------------------------------------------------------------------

namespace {

// An expression and the loop level it depends on (0: the row or the whole kernel, 1: the loop).
struct SExpr {
  std::string s;
  int level = 0;
};
using Coords = std::vector<SExpr>;

std::string fnm(const std::string& ct, const char* name) { return ct == "float" ? std::string(name) + "f" : name; }

class Stitcher {
 public:
  // part_name empty: a whole kernel. Otherwise a part of a packed kernel (lower_packed): a
  // __device__ function of that name taking the block index and block count as bid and nblk.
  Stitcher(const std::vector<const Node*>& nodes, const StitchInfo& info, int index, bool cache,
           const std::string& part_name = "")
      : nodes_(nodes), info_(info), cache_allowed_(cache), part_(!part_name.empty()) {
    for (const Node* n : nodes)
      for (const Value* v : n->outputs)
        if (v) producer_[v] = n;
    k_.nodes = nodes;
    std::string first = snake(nodes.front()->op_type), last = snake(nodes.back()->op_type);
    k_.name =
        fmt::format("k{:03d}_{}_{}", index, info.row ? (info.column ? "cols" : "rows") : "fused", first);
    if (nodes.size() > 2) k_.name += "_to";
    if (nodes.size() > 1) k_.name += "_" + last;
    if (part_) k_.name = part_name;
    k_.scheme = info.row ? "regional" : "local";
  }

  StatusOr<Kernel> run() {
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

 private:
  struct Scope {
    std::vector<std::string> lines;
    std::map<std::string, SExpr> memo;
  };

  // ---- entry ----
  void open_entry(CudaWriter& w, const std::string& scheme, int64_t block) {
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
  std::string block_index() const { return part_ ? "bid" : "(long long)blockIdx.x"; }
  std::string block_count() const { return part_ ? "nblk" : "(long long)gridDim.x"; }

  // ---- parameters, loads, stores ----
  std::string param(const Value* v, bool output) {
    for (const KernelParam& p : k_.params)
      if (p.value == v && p.output == output) return p.name;
    std::string name = fmt::format("{}{}", output ? "y" : "x", output ? outs_++ : ins_++);
    k_.params.push_back({name, v, output});
    k_.bytes_moved += num_elements(dims(v)) * dtype_size(v->dtype);
    return name;
  }
  void line(int level, const std::string& s) { scopes_[level].lines.push_back(s); }
  std::string fresh(const char* prefix) { return fmt::format("{}{}", prefix, counter_++); }

  // The offset of `v` at `c`: the flat index when c are the domain's own coordinates.
  SExpr offset(const Value* v, const Coords& c) {
    const Dims& d = dims(v);
    if (d == info_.domain && same(c, dom_)) return flat_;
    SExpr e = flat_index(c, d);
    if (e.s.empty()) e.s = "0";
    return e;
  }
  // sum of c[k] * stride[k] over the contiguous layout of `d` ("" when every term is zero), and
  // the loop level it depends on.
  static SExpr flat_index(const Coords& c, const Dims& d) {
    const Dims s = strides_of(d);
    SExpr e{"", 0};
    for (size_t k = 0; k < d.size(); ++k) {
      if (d[k] == 1 || c[k].s == "0") continue;
      e.level = std::max(e.level, c[k].level);
      std::string term = s[k] == 1 ? c[k].s : fmt::format("{} * {}LL", c[k].s, s[k]);
      e.s = e.s.empty() ? term : e.s + " + " + term;
    }
    return e;
  }
  static bool same(const Coords& a, const Coords& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (a[k].s != b[k].s) return false;
    return true;
  }
  static int level_of(const Coords& c) {
    int l = 0;
    for (const SExpr& e : c) l = std::max(l, e.level);
    return l;
  }
  std::string key(const Value* v, const Coords& c) {
    std::string k = fmt::format("{}@", static_cast<const void*>(v));
    for (const SExpr& e : c) k += e.s + ",";
    return k;
  }
  const SExpr* find(const std::string& k) {
    for (const Scope& s : scopes_)
      if (auto it = s.memo.find(k); it != s.memo.end()) return &it->second;
    return nullptr;
  }
  SExpr bind(const std::string& k, const std::string& type, const std::string& expr, int level, const std::string& note = "") {
    const std::string name = fresh("v");
    line(level, fmt::format("const {} {} = {};{}", type, name, expr, note.empty() ? "" : "  // " + note));
    SExpr r{name, level};
    scopes_[level].memo[k] = r;
    return r;
  }
  void store(const Value* v, const std::string& off, const std::string& val, int level) {
    const std::string p = param(v, true), ct = compute_type(v->dtype), st = storage_type(v->dtype);
    if (ct == st) line(level, fmt::format("{}[{}] = {};", p, off, val));
    else line(level, fmt::format("{}[{}] = stitch_dev::cvt<{}>({});", p, off, st, val));
  }

  // ---- pulling values ----
  StatusOr<SExpr> at(const Value* v, const Coords& c) {
    STITCH_CHECK(c.size() == dims(v).size(), "coordinates of rank {} for '{}' of rank {}", c.size(), v->name, dims(v).size());
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
      const std::string load = ct == st ? fmt::format("{}[{}]", p, off.s) : fmt::format("stitch_dev::cvt<{}>({}[{}])", ct, p, off.s);
      SExpr r = bind(k, ct, load, std::max(off.level, level_of(c)));
      maybe_cache(v, c, r);
      return r;
    }
    const Node& n = *pit->second;
    if (cache_.count(v) && same(c, dom_) && cached_ready_.count(v))
      return bind(k, ct, fmt::format("{}[cache_row + j]", cache_.at(v)), 1, "cached by an earlier pass");
    ASSIGN_OR_RETURN(SExpr r, compute(n, v, c, k));
    maybe_cache(v, c, r);
    return r;
  }
  void maybe_cache(const Value* v, const Coords& c, const SExpr& r) {
    if (!cache_.count(v) || !same(c, dom_) || cached_ready_.count(v) || r.level != 1) return;
    line(1, fmt::format("{}[cache_row + j] = {};", cache_.at(v), r.s));
    cached_ready_.insert(v);
  }

  StatusOr<SExpr> compute(const Node& n, const Value* v, const Coords& c, const std::string& k) {
    const std::string ct = compute_type(v->dtype);
    const std::string& op = n.op_type;
    const StitchRole role = stitch_role(n);
    const Dims& od = dims(v);
    if (role == StitchRole::kPointwise) {
      std::vector<std::string> args;
      int level = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const Value* in = n.input(i);
        if (!reads_operand(n, i)) {
          args.emplace_back();
          continue;
        }
        Coords ci;
        if (op == "BatchNormalization" && i > 0) {
          ci = {c[1]};
        } else {
          const Dims& id = dims(in);
          const size_t off = od.size() - id.size();
          for (size_t d = 0; d < id.size(); ++d) ci.push_back(id[d] == 1 ? SExpr{"0", 0} : c[d + off]);
        }
        ASSIGN_OR_RETURN(SExpr a, at(in, ci));
        level = std::max(level, a.level);
        args.push_back(a.s);
      }
      ASSIGN_OR_RETURN(std::string expr, scalar_expr(n, args));
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
    if (op == "Expand") {
      const Dims& id = dims(n.input(0));
      const size_t off = od.size() - id.size();
      Coords ci;
      for (size_t d = 0; d < id.size(); ++d) ci.push_back(id[d] == 1 ? SExpr{"0", 0} : c[d + off]);
      return at(n.input(0), ci);
    }
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
        std::string e = c[d].s;
        if (step != 1) e = fmt::format("{} * {}LL", e, step);
        if (start != 0) e = fmt::format("({}LL + {})", start, e);
        else if (step != 1) e = "(" + e + ")";
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
      if (start != 0) ci[axis] = {fmt::format("({}LL + {})", start, c[axis].s), c[axis].level};
      return at(n.input(0), ci);
    }
    if (op == "Concat") {
      ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(od.size())));
      std::vector<std::pair<int64_t, SExpr>> parts;  // (end along the axis, value)
      int64_t start = 0;
      int level = c[axis].level;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const Value* in = n.input(i);
        const int64_t len = dims(in)[axis];
        if (len == 0) continue;
        Coords ci = c;
        // Clamped into this input so every branch reads in bounds; the select keeps the right one.
        std::string x = start == 0 ? c[axis].s : fmt::format("({} - {}LL)", c[axis].s, start);
        if (start > 0) x = fmt::format("({0} < 0LL ? 0LL : {0})", x);
        if (start + len < od[axis]) x = fmt::format("({0} > {1}LL ? {1}LL : {0})", x, len - 1);
        ci[axis] = {len == 1 ? "0" : x, c[axis].level};
        ASSIGN_OR_RETURN(SExpr a, at(in, ci));
        level = std::max(level, a.level);
        parts.push_back({start + len, a});
        start += len;
      }
      std::string e = parts.back().second.s;
      for (size_t i = parts.size() - 1; i-- > 0;)
        e = fmt::format("({} < {}LL ? {} : {})", c[axis].s, parts[i].first, parts[i].second.s, e);
      return bind(k, ct, e, level, fmt::format("Concat '{}'", n.name));
    }
    if (op == "Gather") {
      const Value* data = n.input(0);
      const Value* ind = n.input(1);
      const Dims& dd = dims(data);
      const int64_t r = static_cast<int64_t>(dd.size()), q = static_cast<int64_t>(dims(ind).size());
      ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), r));
      Coords cq(c.begin() + axis, c.begin() + axis + q);
      ASSIGN_OR_RETURN(SExpr idx, at(ind, cq));
      const std::string j = fresh("g");
      line(idx.level, fmt::format("long long {} = (long long){};", j, idx.s));
      line(idx.level, fmt::format("if ({0} < 0) {0} += {1}LL;", j, dd[axis]));
      line(idx.level, fmt::format("if ({0} < 0 || {0} >= {1}LL) {0} = 0;  // out of range: ONNX leaves it undefined", j, dd[axis]));
      Coords ci(c.begin(), c.begin() + axis);
      ci.push_back({j, idx.level});
      ci.insert(ci.end(), c.begin() + axis + q, c.end());
      return at(data, ci);
    }
    if (role == StitchRole::kRow) return row_value(n, c, k);
    if (role == StitchRole::kContraction) return contraction(n, c, k);
    if (role == StitchRole::kTiledGemm)  // emit_tiled binds its product at the kernel's coordinates
      return Status::internal(fmt::format("{} is read at coordinates other than its tile's", n.describe()));
    return Status::user(fmt::format("{} cannot be stitched", n.describe()));
  }

  // A fine-grained GEMM's value at c: a loop over the contraction axis, pulling A at (batch, row,
  // step) and B at (batch, step, column) with numpy broadcasting of the batch axes. Values that
  // depend on the step are computed in a scope of their own one level deeper (the loop body);
  // those that do not are hoisted to the level where they belong, before the loop.
  StatusOr<SExpr> contraction(const Node& n, const Coords& c, const std::string& k) {
    const Value *a = n.input(0), *b = n.input(1);
    const Dims &ad = dims(a), &bd = dims(b), &od = dims(n.output(0));
    const int64_t len = ad.back();
    const std::string ct = compute_type(n.output(0)->dtype);
    const int level = static_cast<int>(scopes_.size());
    const std::string step = fresh("kk");
    const SExpr kk{step, level};
    auto operand = [&](const Dims& d, bool is_a) {
      Coords co(d.size(), SExpr{"0", 0});
      const size_t r = d.size(), off = od.size() - r;
      for (size_t x = 0; x + 2 < r; ++x) co[x] = d[x] == 1 ? SExpr{"0", 0} : c[x + off];
      co[r - 2] = is_a ? (d[r - 2] == 1 ? SExpr{"0", 0} : c[od.size() - 2]) : kk;
      co[r - 1] = is_a ? kk : (d[r - 1] == 1 ? SExpr{"0", 0} : c[od.size() - 1]);
      return co;
    };
    scopes_.emplace_back();
    auto ea = at(a, operand(ad, true));
    auto eb = ea.is_ok() ? at(b, operand(bd, false)) : ea;
    std::vector<std::string> body = std::move(scopes_.back().lines);
    scopes_.pop_back();
    if (!ea.is_ok()) return ea.status();
    if (!eb.is_ok()) return eb.status();
    // The loop sits at the level of the output coordinates or of a hoisted operand, whichever is
    // deeper.
    int outer = level_of(c);
    for (const SExpr* e : {&*ea, &*eb})
      if (e->level < level) outer = std::max(outer, e->level);
    const std::string acc = fresh("dot");
    line(outer, fmt::format("{} {} = ({})0;  // MatMul '{}': {} steps", ct, acc, ct, n.name, len));
    line(outer, fmt::format("for (long long {0} = 0; {0} < {1}LL; ++{0}) {{", step, len));
    for (const std::string& l : body) line(outer, "  " + l);
    line(outer, fmt::format("  {} += {} * {};", acc, ea->s, eb->s));
    line(outer, "}");
    return bind(k, ct, acc, outer, fmt::format("MatMul '{}'", n.name));
  }

  // Coordinates of a view's input from its output's: the same non-1 dims in order need no
  // arithmetic; anything else goes through the flat index.
  Coords reshape_coords(const Coords& c, const Dims& od, const Dims& id) {
    Dims on, in;
    std::vector<size_t> opos, ipos;
    for (size_t d = 0; d < od.size(); ++d)
      if (od[d] != 1) { on.push_back(od[d]); opos.push_back(d); }
    for (size_t d = 0; d < id.size(); ++d)
      if (id[d] != 1) { in.push_back(id[d]); ipos.push_back(d); }
    Coords ci(id.size(), SExpr{"0", 0});
    if (on == in) {
      for (size_t k = 0; k < ipos.size(); ++k) ci[ipos[k]] = c[opos[k]];
      return ci;
    }
    const Dims is = strides_of(id);
    const auto [f, level] = flat_index(c, od);
    if (f.empty()) return ci;
    const std::string name = fresh("f");
    line(level, fmt::format("const long long {} = {};", name, f));
    const int64_t total = num_elements(id);
    for (size_t d = 0; d < id.size(); ++d) {
      if (id[d] == 1) continue;
      std::string e = name;
      if (is[d] > 1) e = fmt::format("({} / {}LL)", e, is[d]);
      if (is[d] * id[d] < total) e = fmt::format("({} % {}LL)", e, id[d]);
      ci[d] = {e, level};
    }
    return ci;
  }

  // ---- element kernels ----
  // Vectorized element kernels: the component of a 128-bit load that holds `v` at `c` for this
  // lane, when the 4 lanes read 4 consecutive elements of `v` starting at a multiple of 4: v's
  // innermost axis of more than one element is read at the domain's inner coordinate, maybe
  // shifted by a constant multiple of 4 (a Slice), its extent is a multiple of 4, and no other
  // axis depends on the inner coordinate. (The domain's inner coordinate is a multiple of 4 at
  // lane 0 and every outer stride of v a multiple of its inner extent, so the start is aligned.)
  // Lanes 1-3 map their coordinates back to lane 0's to find the same load.
  std::optional<std::string> vector_component(const Value* v, const Coords& c, const std::string& p) {
    const std::string& b0 = vec_base_;
    const std::string bl = lane_ == 0 ? b0 : fmt::format("({} + {}LL)", b0, lane_);
    auto replace_all = [](std::string x, const std::string& from, const std::string& to) {
      for (size_t at = x.find(from); at != std::string::npos; at = x.find(from, at + to.size()))
        x.replace(at, from.size(), to);
      return x;
    };
    const Dims& vd = dims(v);
    int kv = -1;
    for (int k = static_cast<int>(vd.size()); k-- > 0;)
      if (vd[k] != 1) {
        kv = k;
        break;
      }
    if (kv < 0 || vd[kv] % 4 != 0) return std::nullopt;
    Coords c0 = c;
    for (SExpr& e : c0)
      if (lane_ > 0) e.s = replace_all(e.s, bl, b0);
    // The inner coordinate: b0, or (S + b0) with S a multiple of 4; this lane's must be the same
    // expression of its own inner coordinate.
    const std::string& inner = c0[kv].s;
    int64_t start = 0;
    if (inner != b0) {
      const std::string tail = "LL + " + b0 + ")";
      if (inner.size() <= tail.size() + 1 || inner.front() != '(' ||
          inner.compare(inner.size() - tail.size(), tail.size(), tail) != 0)
        return std::nullopt;
      const std::string digits = inner.substr(1, inner.size() - tail.size() - 1);
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
      start = std::stoll(digits);
      if (start % 4 != 0) return std::nullopt;
    }
    const std::string expect = start == 0 ? bl : fmt::format("({}LL + {})", start, bl);
    if (c[kv].s != expect) return std::nullopt;
    for (int k = 0; k < static_cast<int>(c0.size()); ++k)
      if (k != kv && (c0[k].s.find(b0) != std::string::npos || c0[k].level > 1)) return std::nullopt;
    std::string off0 = flat_index(c0, vd).s;
    if (off0.empty()) off0 = "0";
    if (vd == info_.domain && same(c0, vec_dom0_)) off0 = "i";
    const std::string key = p + "@" + off0;
    auto it = vec_loads_.find(key);
    if (it == vec_loads_.end()) {
      const std::string name = fmt::format("{}v{}", p, vec_loads_.size());
      line(1, fmt::format("const {0} {1} = reinterpret_cast<const {0}*>({2})[({3}) >> 2];",
                          vec4_type(v->dtype), name, p, off0));
      it = vec_loads_.emplace(key, name).first;
    }
    return fmt::format("{}.{}", it->second, "xyzw"[lane_]);
  }

  // Whether an element kernel over `d` moves 4 elements per thread with 128-bit accesses: a
  // whole kernel (not a packed part) whose innermost extent is a multiple of 4 (so the 4 elements
  // share every outer coordinate and stay inside one 16-byte-aligned vector of each operand of
  // the domain's shape; buffers start 256-byte aligned), and with at least one such operand or
  // stored value of a 4-byte type.
  bool vectorizable(const Dims& d) const {
    const int64_t n = num_elements(d);
    int64_t inner = 1;
    for (size_t k = d.size(); k-- > 0;)
      if (d[k] != 1) {
        inner = d[k];
        break;
      }
    if (part_ || n < 4 || n % 4 != 0 || inner % 4 != 0) return false;
    for (const Value* v : info_.stored)
      if (is_word(v->dtype)) return true;
    for (const Node* node : nodes_)
      for (const Value* v : node->inputs)
        if (v && !producer_.count(v) && dims(v) == d && is_word(v->dtype)) return true;
    return false;
  }

  // ---- element kernels ----
  // dom_: the coordinates of flat index `i` in `d` (a size-1 axis at 0). Returns the innermost
  // axis of more than one element (d.size() when there is none).
  size_t domain_coords(const Dims& d) {
    const int64_t n = num_elements(d);
    const Dims s = strides_of(d);
    size_t inner_axis = d.size();
    for (size_t k = 0; k < d.size(); ++k) {
      if (d[k] == 1) {
        dom_.push_back({"0", 0});
        continue;
      }
      std::string e = "i";
      if (s[k] > 1) e = fmt::format("(i / {}LL)", s[k]);
      if (s[k] * d[k] < n) e = fmt::format("({} % {}LL)", e, d[k]);
      dom_.push_back({e, 1});
      inner_axis = k;
    }
    return inner_axis;
  }

  Status emit_elements() {
    const Dims& d = info_.domain;
    const int64_t n = num_elements(d);
    const size_t inner_axis = domain_coords(d);
    vec_ = vectorizable(d);
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
        dom_[inner_axis] = {fmt::format("({} + {}LL)", base[inner_axis].s, lane), 1};
        flat_ = {fmt::format("(i + {}LL)", lane), 1};
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
        const std::string st = storage_type(v->dtype);
        line(1, fmt::format("reinterpret_cast<{}*>({})[i >> 2] = make_{}(({}){}, ({}){}, ({}){}, ({}){});",
                            vec4_type(v->dtype), param(v, true), vec4_type(v->dtype), st, x[0], st, x[1], st,
                            x[2], st, x[3]));
        ++vec_stores;
        continue;
      }
      for (int lane = 0; lane < lanes; ++lane)
        store(v, lane == 0 ? "i" : fmt::format("(i + {}LL)", lane), x[lane], 1);
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
    k_.mapping = fmt::format(
        "grid-stride loop, {}; {} nodes stitched, values pulled through registers and index maps "
        "(local stitching)",
        how, nodes_.size());
    CudaWriter w;
    open_entry(w, "//   scheme: element kernel (local stitching)\n", kMapBlock);
    for (const std::string& l : scopes_[0].lines) w.line("{}", l);
    w.line("const long long n = {}LL;", n);
    if (vec_)
      w.open("for (long long i = 4 * ({} * blockDim.x + threadIdx.x); i < n; i += 4 * {} * blockDim.x)",
             block_index(), block_count());
    else
      w.open("for (long long i = {} * blockDim.x + threadIdx.x; i < n; i += {} * blockDim.x)", block_index(),
             block_count());
    for (const std::string& l : scopes_[1].lines) w.line("{}", l);
    w.close();
    w.close();
    k_.source = w.text();
    return Status::ok();
  }

  // ---- tiled GEMMs ----
  // A block per output tile (gemm_tile.h); then, for each of the thread's accumulators inside the
  // product, the group's values at that element with the product bound to the accumulator.
  Status emit_tiled() {
    const GemmTile& t = *info_.tile;
    const Node& mm = *t.node;
    const Value* y = mm.output(0);
    const std::string a = param(mm.input(0), false), b = param(mm.input(1), false);
    domain_coords(info_.domain);
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
    k_.min_blocks_per_sm = 2;
    k_.mapping = fmt::format(
        "tiled GEMM: a block of {} threads per {} x {} tile of the {} x {} product ({} x {} blocks), {} x {} "
        "accumulators per thread over K = {} in shared-memory steps of {}; {} epilogue nodes on the "
        "accumulators (local stitching)",
        kTileThreads, t.bm(), t.bm(), t.rows, t.n, t.blocks_m(), t.blocks_n(), t.tm, t.tm, t.k, kTileK,
        nodes_.size() - 1);
    CudaWriter w;
    open_entry(w, "//   scheme: tiled GEMM with a stitched epilogue (local stitching)\n", kTileThreads);
    for (const std::string& l : scopes_[0].lines) w.line("{}", l);
    write_gemm_tile(w, t, a, b, st, ct);
    w.comment("epilogue: this thread's outputs, the product in registers");
    w.line("#pragma unroll");
    w.open("for (int ti = 0; ti < {}; ++ti)", t.tm);
    w.line("const long long r = row0 + ty + 16 * ti;");
    w.line("#pragma unroll");
    w.open("for (int tj = 0; tj < {}; ++tj)", t.tm);
    w.line("const long long c = col0 + tx + 16 * tj;");
    // A guard, not a break: the loops unroll and acc stays in registers.
    w.open("if (r < {}LL && c < {}LL)", t.rows, t.n);
    w.line("const long long i = r * {}LL + c;", t.n);
    for (const std::string& l : scopes_[1].lines) w.line("{}", l);
    w.close();
    w.close();
    w.close();
    w.close();
    k_.source = w.text();
    return Status::ok();
  }

  // ---- row kernels ----
  // The strided loop over this thread's elements of the row (of its block's segment when split).
  std::string row_loop() const {
    if (map_.split()) return "for (long long j = jbeg + lane; j < jend; j += step) {";
    return fmt::format("for (long long j = lane; j < {}LL; j += step) {{", info_.cols);
  }
  // A replica's share of a row `width` long (RowMapping::replicas): the loop over this thread's
  // elements of it. In 32 bits where the row allows: with a 64-bit counter and bound, ptxas
  // spilled a register around the division's slow path in LLaMA's gate kernel.
  std::string share_loop(int64_t width) const {
    if (map_.replicas == 1) return fmt::format("for (long long j = lane; j < {}LL; j += step) {{", width);
    const int64_t chunk = wide_chunk(map_, width);
    if (chunk * map_.replicas < INT32_MAX)
      return fmt::format("for (int j = rep * {0} + lane; j < (rep + 1) * {0} && j < {1}; j += step) {{",
                         chunk, width);
    return fmt::format(
        "for (long long j = rep * {0}LL + lane; j < (rep + 1) * {0}LL && j < {1}LL; j += step) {{", chunk,
        width);
  }
  // The index of this block's rows; with replicas, also `rep`, which of them this block is
  // (replicas of the same rows are neighbours, so the row they all read is in L2 at once).
  std::string row_block(CudaWriter& w) const {
    if (map_.replicas == 1) return block_index();
    w.line("const int rep = (int)({} % {}LL);", block_index(), map_.replicas);
    return fmt::format("({} / {}LL)", block_index(), map_.replicas);
  }
  // Pass over the row: acc = op(acc, elem(j)) then a warp or block tree.
  StatusOr<std::string> pass(const std::string& ct, const std::string& init, const std::string& op,
                             const std::function<StatusOr<std::string>()>& elem) {
    scopes_[1] = Scope{};
    ASSIGN_OR_RETURN(std::string e, elem());
    const std::string acc = fresh("acc");
    std::vector<std::string> body = std::move(scopes_[1].lines);
    scopes_[1] = Scope{};
    line(0, fmt::format("{} {} = {};", ct, acc, init));
    line(0, row_loop());
    for (const std::string& l : body) line(0, "  " + l);
    line(0, fmt::format("  {0} = {1}({0}, {2});", acc, op, e));
    line(0, "}");
    if (map_.column) {
      const std::string tag = ct == "double" ? "d" : "f";
      scratch_.insert(ct);
      line(0, fmt::format("{0} = stitch_dev::tile_column_reduce({0}, {1}, tile_{2});", acc, op, tag));
    } else if (map_.warp_per_row) {
      line(0, fmt::format("{0} = stitch_dev::warp_reduce({0}, {1});", acc, op));
    } else {
      const std::string tag = ct == "double" ? "d" : "f";
      scratch_.insert(ct);
      line(0, fmt::format("{0} = stitch_dev::block_reduce({0}, {1}, scratch_{2});", acc, op, tag));
    }
    if (map_.split()) {  // global stitching: this pass's partials of every row, then a grid barrier
      line(0,
           fmt::format("{0} = stitch_dev::grid_row_reduce({0}, {1}, ws + {2}LL + row * {3}LL, seg, {3}LL);",
                       acc, op, split_passes_ * info_.rows * map_.segments, map_.segments));
      ++split_passes_;
    }
    ++passes_;
    return acc;
  }

  Status emit_row_op(const Node& n) {
    const Value* x = n.input(0);
    const std::string ct = compute_type(x->dtype);
    const std::string& op = n.op_type;
    auto xv = [&]() -> StatusOr<std::string> {
      ASSIGN_OR_RETURN(SExpr e, at(x, dom_));
      return e.s;
    };
    auto xf = [&](std::function<std::string(const std::string&)> f) {
      return [&, f]() -> StatusOr<std::string> {
        ASSIGN_OR_RETURN(std::string e, xv());
        return f(e);
      };
    };
    const std::string len = fmt::format("({}){}", ct, info_.cols);
    Stats st;
    if (op == "Softmax" || op == "LogSoftmax") {
      ASSIGN_OR_RETURN(st.a, pass(ct, literal(-INFINITY, ct), "stitch_dev::Max()", xv));
      const std::string mx = st.a;
      ASSIGN_OR_RETURN(std::string sum, pass(ct, literal(0, ct), "stitch_dev::Sum()",
                                             xf([&, mx](const std::string& e) { return fmt::format("{}({} - {})", fnm(ct, "exp"), e, mx); })));
      st.b = fresh("s");
      if (op == "LogSoftmax") line(0, fmt::format("const {} {} = {} + {}({});", ct, st.b, mx, fnm(ct, "log"), sum));
      else line(0, fmt::format("const {0} {1} = ({0})1 / {2};", ct, st.b, sum));
    } else if (op == "LayerNormalization") {
      ASSIGN_OR_RETURN(std::string sum, pass(ct, literal(0, ct), "stitch_dev::Sum()", xv));
      st.a = fresh("mean");
      line(0, fmt::format("const {} {} = {} / {};", ct, st.a, sum, len));
      const std::string mean = st.a;
      ASSIGN_OR_RETURN(std::string sq, pass(ct, literal(0, ct), "stitch_dev::Sum()",
                                            xf([mean](const std::string& e) { return fmt::format("({0} - {1}) * ({0} - {1})", e, mean); })));
      st.b = fresh("rstd");
      line(0, fmt::format("const {0} {1} = {2}(({0})1 / ({3} / {4} + {5}));", ct, st.b, fnm(ct, "sqrt"), sq, len,
                          literal(n.attr_float("epsilon", 1e-5f), ct)));
    } else {  // Reduce*
      std::string result;
      if (op == "ReduceMax" || op == "ReduceMin" || op == "GlobalMaxPool") {
        const bool mx = op != "ReduceMin";
        ASSIGN_OR_RETURN(result, pass(ct, literal(mx ? -INFINITY : INFINITY, ct), mx ? "stitch_dev::Max()" : "stitch_dev::Min()", xv));
      } else if (op == "ReduceProd") {
        ASSIGN_OR_RETURN(result, pass(ct, literal(1, ct), "stitch_dev::Prod()", xv));
      } else if (op == "ReduceLogSumExp") {
        ASSIGN_OR_RETURN(std::string mx, pass(ct, literal(-INFINITY, ct), "stitch_dev::Max()", xv));
        const std::string shift = fresh("shift");
        line(0, fmt::format("const {0} {1} = isinf({2}) ? ({0})0 : {2};", ct, shift, mx));
        ASSIGN_OR_RETURN(std::string sum, pass(ct, literal(0, ct), "stitch_dev::Sum()",
                                               xf([&, shift](const std::string& e) { return fmt::format("{}({} - {})", fnm(ct, "exp"), e, shift); })));
        result = fmt::format("{}({}) + {}", fnm(ct, "log"), sum, shift);
      } else {
        std::function<std::string(const std::string&)> f = [](const std::string& e) { return e; };
        if (op == "ReduceL1") f = [ct](const std::string& e) { return fmt::format("{}({})", fnm(ct, "fabs"), e); };
        if (op == "ReduceL2" || op == "ReduceSumSquare") f = [](const std::string& e) { return fmt::format("{0} * {0}", e); };
        ASSIGN_OR_RETURN(std::string sum, pass(ct, literal(0, ct), "stitch_dev::Sum()", xf(f)));
        result = sum;
        if (op == "ReduceMean" || op == "GlobalAveragePool") result = fmt::format("{} / {}", sum, len);
        if (op == "ReduceL2") result = fmt::format("{}({})", fnm(ct, "sqrt"), sum);
        if (op == "ReduceLogSum") result = fmt::format("{}({})", fnm(ct, "log"), sum);
      }
      st.a = fresh("r");
      line(0, fmt::format("const {} {} = {};  // {} '{}'", compute_type(n.output(0)->dtype), st.a, result, op, n.name));
    }
    stats_[&n] = st;
    return Status::ok();
  }

  // A row op's output at c (the current row; D coordinates for Softmax and LayerNormalization).
  StatusOr<SExpr> row_value(const Node& n, const Coords& c, const std::string& k) {
    STITCH_CHECK(stats_.count(&n), "row op {} read before its passes", n.describe());
    const Stats& st = stats_.at(&n);
    const std::string ct = compute_type(n.output(0)->dtype);
    const std::string& op = n.op_type;
    if (op != "Softmax" && op != "LogSoftmax" && op != "LayerNormalization") return SExpr{st.a, 0};
    ASSIGN_OR_RETURN(SExpr x, at(n.input(0), c));
    if (op == "Softmax") return bind(k, ct, fmt::format("{}({} - {}) * {}", fnm(ct, "exp"), x.s, st.a, st.b), x.level, "Softmax '" + n.name + "'");
    if (op == "LogSoftmax") return bind(k, ct, fmt::format("{} - {}", x.s, st.b), x.level, "LogSoftmax '" + n.name + "'");
    std::string e = fmt::format("({} - {}) * {}", x.s, st.a, st.b);
    int level = x.level;
    for (size_t i = 1; i <= 2; ++i) {
      const Value* p = n.input(i);
      if (p == nullptr) continue;
      const Dims& pd = dims(p);
      const size_t off = c.size() - pd.size();
      Coords cp;
      for (size_t d = 0; d < pd.size(); ++d) cp.push_back(pd[d] == 1 ? SExpr{"0", 0} : c[d + off]);
      ASSIGN_OR_RETURN(SExpr pv, at(p, cp));
      level = std::max(level, pv.level);
      e = i == 1 ? fmt::format("{} * {}", e, pv.s) : fmt::format("{} + {}", e, pv.s);
    }
    return bind(k, ct, e, level, "LayerNormalization '" + n.name + "'");
  }

  Status emit_rows() {
    const Dims& d = info_.domain;
    const int64_t r = static_cast<int64_t>(d.size());
    map_ = row_mapping(info_, !part_);
    for (const Node* n : nodes_)
      if (stitch_role(*n) == StitchRole::kRow && compute_type(n->input(0)->dtype) == "double")
        ws_type_ = "double";
    // Row coordinates from `row` (the kept axes in order), in-row coordinates from `j` (the
    // reduced axes in order).
    int64_t inner_row = 1, inner_col = 1;
    dom_.assign(r, SExpr{"0", 0});
    for (int64_t k = r; k-- > 0;) {
      const bool red = info_.reduced[k];
      int64_t& inner = red ? inner_col : inner_row;
      if (d[k] != 1) {
        const char* var = red ? "j" : "row";
        std::string e = var;
        if (inner > 1) e = fmt::format("({} / {}LL)", var, inner);
        if (inner * d[k] < (red ? info_.cols : info_.rows)) e = fmt::format("({} % {}LL)", e, d[k]);
        dom_[k] = {e, red ? 1 : 0};
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
        if (stitch_role(n) == StitchRole::kRow && n.op_type != "Softmax" && n.op_type != "LogSoftmax" &&
            n.op_type != "LayerNormalization")
          continue;  // a reduction's result is a per-row register
        for (const Value* in : n.inputs)
          if (in) stack.push_back(in);
      }
      return false;
    };
    for (const Node* n : nodes_) {
      if (stitch_role(*n) != StitchRole::kRow) continue;
      const Value* x = n->input(0);
      if (std::any_of(readers.begin(), readers.end(), [&](const auto& r) { return r.first == x; })) continue;
      int count = 0;
      for (const Node* m : nodes_)
        if (stitch_role(*m) == StitchRole::kRow && pulls(m->input(0), x)) {
          ASSIGN_OR_RETURN(RowOpInfo ri, row_op_info(*m));
          count += ri.passes;
        }
      for (const Value* v : info_.stored)
        if (dims(v) == d && pulls(v, x)) {
          ++count;
          break;
        }
      readers.push_back({x, count});
    }
    int64_t smem = 0;
    for (const auto& [x, count] : readers) {
      const int64_t bytes =
          row_cache_bytes(map_, info_.cols, static_cast<int64_t>(compute_type(x->dtype) == "double" ? 8 : 4));
      if (!cache_allowed_ || count < 2 || bytes == 0 || smem + bytes > kRowCacheBudget) continue;
      const std::string name = fmt::format("cache{}", cache_.size());
      cache_[x] = name;
      cache_decl_.push_back(fmt::format("__shared__ {} {}[{}];", compute_type(x->dtype), name,
                                        (map_.split() ? map_.segment : info_.cols) * map_.rows_per_block));
      smem += bytes;
      k_.static_smem_bytes += bytes;
    }
    for (const Node* n : nodes_)
      if (stitch_role(*n) == StitchRole::kRow) RETURN_IF_ERROR(emit_row_op(*n));
    // Store pass for values of the rows' shape, then for wide values (analyze_stitch: the rows'
    // kept extents, longer along the reduced axes), one pass per width, then one value per row.
    std::vector<const Value*> full, one;
    std::map<int64_t, std::vector<const Value*>> wide;  // by width
    for (const Value* v : info_.stored) {
      if (dims(v) == d) {
        full.push_back(v);
        continue;
      }
      int64_t width = 1;
      if (dims(v).size() == d.size())
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
        ASSIGN_OR_RETURN(SExpr val, at(v, dom_));
        if (map_.column) line(1, "if (live) {");  // threads past the last column store nothing
        store(v, flat_.s, val.s, 1);
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
      for (const Value* v : vs) {
        // The kept axes as the domain's; the reduced ones from j over this value's extents.
        const Dims& vd = dims(v);
        Coords c = dom_;
        int64_t inner = 1;
        for (int64_t k = r; k-- > 0;) {
          if (!info_.reduced[k]) continue;
          c[k] = {"0", 0};
          if (vd[k] != 1) {
            std::string e = "j";
            if (inner > 1) e = fmt::format("(j / {}LL)", inner);
            if (inner * vd[k] < width) e = fmt::format("({} % {}LL)", e, vd[k]);
            c[k] = {e, 1};
          }
          inner *= vd[k];
        }
        ASSIGN_OR_RETURN(SExpr val, at(v, c));
        store(v, offset(v, c).s, val.s, 1);
      }
      std::vector<std::string> body = std::move(scopes_[1].lines);
      scopes_[1] = Scope{};
      line(0, share_loop(width) + fmt::format("  // wide values, {} per row", width));
      for (const std::string& l : body) line(0, "  " + l);
      line(0, "}");
      ++passes_;
    }
    for (const Value* v : one) {
      Coords c;
      if (dims(v).size() == d.size()) {
        c = dom_;
        for (int64_t k = 0; k < r; ++k)
          if (info_.reduced[k]) c[k] = {"0", 0};
      } else {
        for (int64_t k = 0; k < r; ++k)
          if (!info_.reduced[k]) c.push_back(dom_[k]);
      }
      ASSIGN_OR_RETURN(SExpr val, at(v, c));
      STITCH_CHECK(val.level == 0, "per-row value '{}' depends on the loop", v->name);
      const std::string p = param(v, true), ct = compute_type(v->dtype), stt = storage_type(v->dtype);
      const std::string first = map_.split()        ? "lane == 0 && seg == 0"
                                : map_.column       ? "lane == 0 && live"
                                : map_.replicas > 1 ? "lane == 0 && rep == 0"
                                                    : "lane == 0";
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
      ws->dtype = ws_type_ == "double" ? DType::kF64 : DType::kF32;
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
        "{}: {} {} of {} over {} of {}; {} passes per {}, {} nodes stitched "
        "({} stitching){}",
        row_mapping_text(map_), info_.rows, info_.column ? "columns" : "rows", info_.cols, over,
        dims_to_string(d), passes_, info_.column ? "column" : "row", nodes_.size(),
        map_.split() ? "global: partials through global memory and a grid barrier per pass" : "regional",
        cached.empty() ? "" : fmt::format("; {} cached in shared memory", cached));
    for (const std::string& ct : scratch_)
      k_.static_smem_bytes += (map_.column ? map_.block : 32) * (ct == "double" ? 8 : 4);
    CudaWriter w;
    open_entry(w,
               map_.split()
                   ? "//   scheme: row kernel split over blocks (global stitching; cooperative launch)\n"
               : map_.column ? "//   scheme: column kernel, tiled (regional stitching)\n"
                             : "//   scheme: row kernel (regional stitching)\n",
               map_.block);
    for (const std::string& ct : scratch_) {
      if (map_.column)
        w.line("__shared__ {} tile_{}[{}];", ct, ct == "double" ? "d" : "f", map_.block);
      else
        w.line("__shared__ {} scratch_{}[32];", ct, ct == "double" ? "d" : "f");
    }
    for (const std::string& l : cache_decl_) w.line("{}", l);
    if (map_.column) {
      open_tile(w, block_index(), "row", info_.rows);
    } else if (map_.split()) {
      w.line("const long long row = {} / {}LL;", block_index(), map_.segments);
      w.line("const long long seg = {} % {}LL;", block_index(), map_.segments);
      w.line("const long long jbeg = seg * {}LL;", map_.segment);
      w.line("const long long jend = jbeg + {0}LL < {1}LL ? jbeg + {0}LL : {1}LL;", map_.segment, info_.cols);
      w.line("const int lane = threadIdx.x;");
      w.line("const int step = {};", map_.block);
      if (!cache_.empty())
        w.line("const long long cache_row = -jbeg;  // the cache holds this block's segment");
    } else if (map_.warp_per_row) {
      w.line("const long long row = {} * {} + (threadIdx.x >> 5);", row_block(w), map_.rows_per_block);
      w.line("const int lane = threadIdx.x & 31;");
      w.line("const int step = 32;");
      if (!cache_.empty()) w.line("const long long cache_row = (long long)(threadIdx.x >> 5) * {}LL;", info_.cols);
      w.line("if (row >= {}LL) return;  // uniform per warp", info_.rows);
    } else {
      w.line("const long long row = {};", row_block(w));
      w.line("const int lane = threadIdx.x;");
      w.line("const int step = {};", map_.block);
      if (!cache_.empty()) w.line("const long long cache_row = 0;");
    }
    static const std::regex uses_base(R"(\bbase\b)");
    if (std::any_of(scopes_[0].lines.begin(), scopes_[0].lines.end(),
                    [](const std::string& l) { return std::regex_search(l, uses_base); }))
      w.line("const long long base = row * {}LL;", info_.cols);
    for (const std::string& l : scopes_[0].lines) w.line("{}", l);
    w.close();
    k_.source = w.text();
    return Status::ok();
  }

  struct Stats {
    std::string a, b;  // max and 1/sum (softmax), max and lse (log-softmax), mean and rstd (norm), result (reduce)
  };

  const std::vector<const Node*>& nodes_;
  const StitchInfo& info_;
  bool cache_allowed_;
  bool part_;
  std::map<const Value*, const Node*> producer_;
  Kernel k_;
  int ins_ = 0, outs_ = 0, counter_ = 0, passes_ = 0;
  std::vector<Scope> scopes_;
  Coords dom_;
  SExpr flat_;
  RowMapping map_;
  std::map<const Node*, Stats> stats_;
  std::set<std::string> scratch_;
  bool vec_ = false;  // element kernel moving 4 elements per thread (128-bit accesses)
  int lane_ = 0;      // which of the 4 the pull is computing
  std::string vec_base_;                          // the domain's inner coordinate at lane 0
  Coords vec_dom0_;                               // the domain's coordinates at lane 0
  std::map<std::string, std::string> vec_loads_;  // "param@offset at lane 0" -> its float4/int4
  std::string ws_type_ = "float";  // element type of a split kernel's partials
  int64_t split_passes_ = 0;
  std::map<const Value*, std::string> cache_;
  std::set<const Value*> cached_ready_;
  std::vector<std::string> cache_decl_;
};

}  // namespace

StatusOr<Kernel> lower_stitched(const std::vector<const Node*>& nodes, const std::set<const Value*>& stored, int index,
                                bool cache) {
  ASSIGN_OR_RETURN(StitchInfo info, analyze_stitch(nodes, stored));
  Stitcher s(nodes, info, index, cache);
  return s.run();
}

StatusOr<Kernel> lower_stitched_part(const std::vector<const Node*>& nodes, const StitchInfo& info, int index,
                                     bool cache, const std::string& part_name) {
  Stitcher s(nodes, info, index, cache, part_name);
  return s.run();
}

}  // namespace stitch::codegen
