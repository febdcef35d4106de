// Row kernels (stitch_frames.h): where each value computed from a row op's result lies in the
// domain, and which stored values hold the rows moved.
#include "codegen/stitch_frames.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

// Row kernels: where each value computed from a row op's result lies in the domain (its frame, a
// RowPiece per axis), so that a value pulled at coordinates of the current row reads that row only.
// Row ops' results are in the domain's frame. After them:
// - element-wise ops keep their inputs' frame; along a kept axis a value has the domain's extent or
//   1 (a broadcast of a per-row value), along a reduced one any extent (a per-row value scaling a
//   product wider than the row: RMSNorm moved past its GEMM); an axis that no input computed from
//   a row op holds (more than one element there) becomes the value's own (RowPiece::kOwn: each
//   expert's routing weight over its activations), not in column kernels, and stored only after
//   the kept axes (check_moved);
// - Slices, Splits and Concats move values along the row only (a rotary embedding's halves);
// - Reshapes split or merge the row's pieces (hidden into heads), and merge neighbouring kept axes
//   in their order (an MoE block's tokens, batch and sequence flattened) or split them again, never
//   a kept axis with a piece of the row;
// - Transposes reorder axes but keep the row's innermost piece innermost (a head transpose), so the
//   rows move and stay contiguous in pieces.
// A value outside the domain's frame is stored with each row's elements moved.
// Column kernels take element-wise ops only.
using Frame = std::vector<RowPiece>;
class RowFrames {
 public:
  explicit RowFrames(const StitchInfo& info) : info_(info), r_(static_cast<int64_t>(info.domain.size())) {
    for (int64_t k = 0; k < r_; ++k)
      if (!info.reduced[k]) kept_.push_back(info.domain[k]);
  }

  const Frame* find(const Value* v) const {
    auto it = frame_.find(v);
    return it == frame_.end() ? nullptr : &it->second;
  }
  // The domain's own frame (the kernel's full, wide and per-row values).
  bool in_domain(const Frame& f) const {
    if (static_cast<int64_t>(f.size()) != r_) return false;
    for (int64_t k = 0; k < r_; ++k)
      if ((f[k].axis != k && f[k].axis != -1) || f[k].div != 1 || f[k].span != 1) return false;
    return true;
  }

  Status add(const Node& n) {
    const StitchRole role = stitch_role(n);
    bool after = false;
    const Value* bare = nullptr;
    for (const Value* in : n.inputs) {
      if (!in) continue;
      if (bare_.count(in)) bare = in;
      after |= frame_.count(in) > 0;
    }
    if (bare) {
      // A row's result without keepdims holds the kept axes alone; element-wise ops at that shape,
      // reading no value of the rows' shape from the group, give per-row values of the same form
      // (the kernel pulls them at the row's kept coordinates).
      const Value* y = n.output(0);
      if (role != StitchRole::kPointwise || after || y == nullptr || dims(bare) != kept_ || dims(y) != kept_)
        return Status::user(fmt::format(
            "{} reads '{}', a reduction without keepdims, inside the group: in a row kernel only "
            "element-wise ops at its shape {} read one (with other such values and values from outside)",
            n.describe(), bare->name, dims_to_string(dims(bare))));
      bare_.insert(y);
      return Status::ok();
    }
    if (role == StitchRole::kRow) {
      bool moved = false;
      for (const Value* in : n.inputs)
        if (const Frame* f = in ? find(in) : nullptr) moved |= !in_domain(*f);
      if (moved)
        return Status::user(
            fmt::format("{} reduces a value computed from a row op through a Transpose or Reshape, or "
                        "broadcast over axes the rows lack: its rows are not the group's",
                        n.describe()));
      const Value* y = n.output(0);
      if (static_cast<int64_t>(dims(y).size()) == r_)
        frame_[y] = domain_frame();
      else
        bare_.insert(y);
      return Status::ok();
    }
    if (!after) return Status::ok();
    if (role == StitchRole::kContraction)
      return Status::user(
          fmt::format("{} multiplies a value computed from a row op in the group, which a row kernel "
                      "holds for the current row only",
                      n.describe()));
    const std::string changes =
        fmt::format("{} changes the layout of a value computed from a row op in the group", n.describe());
    const Value* data = n.input(0);
    const Dims& od = dims(n.output(0));
    Frame of;
    if (role == StitchRole::kPointwise || (role == StitchRole::kLayout && n.op_type == "Concat")) {
      if (info_.column && role != StitchRole::kPointwise) return Status::user(changes);
      ASSIGN_OR_RETURN(of, merged(n, od.size()));
      if (n.op_type == "Concat") RETURN_IF_ERROR(interleaved(n, of, changes));
      // An axis the row's values are broadcast over, which the domain lacks, is the value's own.
      if (!info_.column)
        for (size_t k = 0; k < od.size(); ++k)
          if (od[k] != 1 && of[k].axis == -1) of[k] = {RowPiece::kOwn, 1};
    } else if (info_.column || !frame_.count(data)) {
      return Status::user(changes);
    } else if (role == StitchRole::kView) {
      ASSIGN_OR_RETURN(of, reshaped(n, changes));
    } else if (n.op_type == "Transpose") {
      const Frame& f = frame_.at(data);
      ASSIGN_OR_RETURN(std::vector<int64_t> perm, ops::transpose_perm(n, static_cast<int64_t>(f.size())));
      for (int64_t p : perm) of.push_back(f[p]);
      // The row's innermost piece stays innermost: rows move in contiguous runs.
      const int64_t io = innermost(od);
      if (io >= 0 && perm[io] != innermost(dims(data)))
        return Status::user(fmt::format(
            "{} moves the innermost axis of a value computed from a row op: after a row op a Transpose may "
            "reorder rows and their pieces, not split them into strided elements",
            n.describe()));
    } else if (n.op_type == "Slice") {
      of = frame_.at(data);
      // Every kept axis whole: the slice stays inside the current row.
      ASSIGN_OR_RETURN(ops::SliceSpec spec, stitch_slice(n));
      const Dims& in = dims(data);
      const Dims st = ops::strides_of(in);
      for (size_t k = 0; k < in.size(); ++k)
        if (!reduced(of[k]) && of[k].axis != RowPiece::kOwn && in[k] != 1 &&
            (spec.out[k] != in[k] || spec.strides[k] != st[k] || (spec.base / st[k]) % in[k] != 0))
          return Status::user(changes + ": it slices across rows");
    } else if (n.op_type == "Split") {
      of = frame_.at(data);
      RETURN_IF_ERROR(along_row(n, of, changes));
    } else {
      return Status::user(changes);
    }
    for (const Value* o : n.outputs) {
      if (!o) continue;
      const Dims& d = dims(o);
      for (size_t k = 0; k < d.size(); ++k) {
        if (d[k] == 1 || (of[k].axis == RowPiece::kOwn && !info_.column)) continue;
        // Column kernels hold nothing wider or narrower than their columns.
        if (of[k].axis < 0 || ((!reduced(of[k]) || info_.column) && d[k] != extent(of[k])))
          return Status::user(
              fmt::format("{} makes {} from a row op's result, not a broadcast of the rows {}", n.describe(),
                          dims_to_string(d), dims_to_string(info_.domain)));
      }
      frame_[o] = of;
    }
    return Status::ok();
  }

  // A stored value outside the domain's frame: each kept axis once, whole, and the pieces of each
  // reduced axis tiling a run of it (innermost first: divisors 1, then each the product of the
  // extents inside it). The run is the whole axis, so that the row's elements map one to one onto
  // the value's; or, where the row runs along one axis, a run of another length (a wide value
  // moved: the heads of a projection wider or narrower than the row, split and transposed).
  // An error unless `v`, in frame `f`, holds whole rows of the domain so moved
  // (StitchInfo::moved_width counts the elements it holds per row).
  Status check_moved(const Value& v, const Frame& f) const {
    const Dims& d = dims(&v);
    const std::string whole = fmt::format(
        "it would store '{}' ({}), computed from a row op through a Transpose or Reshape, other than as "
        "whole rows of {} moved",
        v.name, dims_to_string(d), dims_to_string(info_.domain));
    // Axes of its own after the row's kept axes only: each row's elements one contiguous run.
    bool inner = false, own = false;
    for (size_t k = 0; k < d.size(); ++k) own |= d[k] != 1 && f[k].axis == RowPiece::kOwn;
    for (size_t k = 0; k < d.size() && own; ++k) {
      if (d[k] == 1) continue;
      const bool kept = f[k].axis >= 0 && !info_.reduced[f[k].axis];
      if (!kept) inner = true;
      if (kept && inner)
        return Status::user(fmt::format(
            "it would store '{}' ({}), the row's values over axes of its own, with a kept axis of the rows "
            "inside them: each row's elements would not be one contiguous run",
            v.name, dims_to_string(d)));
    }
    int64_t reduced_axes = 0;
    for (int64_t a = 0; a < r_; ++a) reduced_axes += info_.reduced[a] && info_.domain[a] != 1;
    // Each kept axis of more than one element in exactly one of the value's axes (alone or merged
    // with its neighbours), whole.
    std::vector<int> covered(static_cast<size_t>(r_), 0);
    for (size_t k = 0; k < d.size(); ++k)
      if (d[k] != 1 && f[k].axis >= 0 && !info_.reduced[f[k].axis])
        for (int64_t a = f[k].axis; a < f[k].axis + f[k].span; ++a) ++covered[static_cast<size_t>(a)];
    for (int64_t a = 0; a < r_; ++a) {
      if (!info_.reduced[a]) {
        if (info_.domain[a] != 1 && covered[static_cast<size_t>(a)] != 1) return Status::user(whole);
        continue;
      }
      std::vector<std::pair<int64_t, int64_t>> pieces;  // (div, extent)
      for (size_t k = 0; k < d.size(); ++k)
        if (d[k] != 1 && f[k].axis == a) pieces.push_back({f[k].div, d[k]});
      std::sort(pieces.begin(), pieces.end());
      int64_t next = 1;
      for (const auto& [div, extent] : pieces) {
        if (div != next) return Status::user(whole);
        next *= extent;
      }
      if (next != info_.domain[a] && (reduced_axes != 1 || info_.domain[a] == 1)) return Status::user(whole);
    }
    return Status::ok();
  }

 private:
  Frame domain_frame() const {
    Frame f;
    for (int64_t k = 0; k < r_; ++k) f.push_back({k, 1});
    return f;
  }
  bool reduced(const RowPiece& p) const { return p.axis >= 0 && info_.reduced[p.axis]; }
  // The last axis of more than one element (-1: none).
  static int64_t innermost(const Dims& d) {
    for (int64_t k = static_cast<int64_t>(d.size()); k-- > 0;)
      if (d[k] != 1) return k;
    return -1;
  }
  Status along_row(const Node& n, const Frame& f, const std::string& changes) const {
    ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0),
                                                  static_cast<int64_t>(dims(n.output(0)).size())));
    if (!reduced(f[axis]) && f[axis].axis != RowPiece::kOwn)
      return Status::user(fmt::format("{} along axis {}, across rows", changes, axis));
    return Status::ok();
  }
  // A Concat along an axis its inputs hold one element of (Unsqueezed halves, as an interleaved
  // rotary embedding pairs them: [.., D/2, 1] twice into [.., D/2, 2], then a Reshape to [.., D])
  // makes that axis the innermost piece of the row piece just outside it: element (j, p) is the
  // row's (j E + p) d, for the outer piece's divisor d and the Concat's extent E. Only as the
  // innermost axis of more than one element. Any other Concat moves values along a piece of the
  // row (along_row).
  Status interleaved(const Node& n, Frame& of, const std::string& changes) const {
    const Dims& od = dims(n.output(0));
    const int64_t r = static_cast<int64_t>(od.size());
    ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), r));
    if (of[axis].axis >= 0 || of[axis].axis == RowPiece::kOwn || od[axis] == 1)
      return along_row(n, of, changes);
    int64_t outer = axis;
    while (--outer >= 0 && od[outer] == 1) {
    }
    bool innermost = true;
    for (int64_t k = axis + 1; k < r; ++k) innermost &= od[k] == 1;
    if (outer < 0 || !innermost || !reduced(of[outer]))
      return Status::user(fmt::format("{} along axis {}, across rows", changes, axis));
    of[axis] = of[outer];
    of[outer].div *= od[axis];
    return Status::ok();
  }
  // An element-wise op's (or a Concat's) frame from its inputs computed from a row op, aligned on
  // the right: an axis takes the place its inputs of more than one element there give it (they
  // must agree), else one an input of one element there kept (a per-row value's reduced axis).
  StatusOr<Frame> merged(const Node& n, size_t rank) const {
    Frame of(rank);
    for (size_t k = 0; k < rank; ++k) {
      std::optional<RowPiece> strong, weak;
      for (const Value* in : n.inputs) {
        auto it = in ? frame_.find(in) : frame_.end();
        if (it == frame_.end()) continue;
        const Dims& id = dims(in);
        if (id.size() + k < rank) continue;
        const size_t ki = k + id.size() - rank;
        const RowPiece& p = it->second[ki];
        if (id[ki] != 1) {
          if (strong && *strong != p)
            return Status::user(fmt::format(
                "{} reads values computed from a row op in two layouts (through a Transpose or Reshape)",
                n.describe()));
          strong = p;
        } else if (p.axis >= 0 && !weak) {
          weak = p;
        }
      }
      of[k] = strong ? *strong : weak ? *weak : RowPiece{};
    }
    return of;
  }
  // A Reshape: the input's and output's axes of more than one element in runs of equal products;
  // a run of kept axes must be one axis unchanged, a run of a reduced axis's pieces (each inside
  // the one before) is split again into pieces of the same axis.
  StatusOr<Frame> reshaped(const Node& n, const std::string& changes) const {
    const Value* in = n.input(0);
    const Dims &id = dims(in), &od = dims(n.output(0));
    const Frame& f = frame_.at(in);
    Frame of(od.size());
    std::vector<size_t> is, os;
    for (size_t k = 0; k < id.size(); ++k)
      if (id[k] != 1) is.push_back(k);
    for (size_t k = 0; k < od.size(); ++k)
      if (od[k] != 1) os.push_back(k);
    size_t i = 0, o = 0;
    while (i < is.size() || o < os.size()) {
      if (i >= is.size() || o >= os.size()) return Status::user(changes);
      std::vector<size_t> ib{is[i++]}, ob{os[o++]};
      int64_t pi = id[ib[0]], po = od[ob[0]];
      while (pi != po) {
        if (pi < po) {
          if (i >= is.size()) return Status::user(changes);
          ib.push_back(is[i++]);
          pi *= id[ib.back()];
        } else {
          if (o >= os.size()) return Status::user(changes);
          ob.push_back(os[o++]);
          po *= od[ob.back()];
        }
      }
      const RowPiece& last = f[ib.back()];
      if (!reduced(last)) {  // kept axes or one of the value's own
        if (ib.size() == 1 && ob.size() == 1 && last.axis != -1) {
          of[ob[0]] = last;  // unchanged
          continue;
        }
        ASSIGN_OR_RETURN(std::vector<RowPiece> out, rows_reshaped(f, ib, od, ob, changes));
        for (size_t t = 0; t < ob.size(); ++t) of[ob[t]] = out[t];
        continue;
      }
      for (size_t t = ib.size() - 1; t-- > 0;)
        if (f[ib[t]].axis != last.axis || f[ib[t]].div != f[ib[t + 1]].div * id[ib[t + 1]])
          return Status::user(changes + ": it merges axes that are not one run of the row");
      int64_t div = last.div;
      for (size_t t = ob.size(); t-- > 0;) {
        of[ob[t]] = {last.axis, div};
        div *= od[ob[t]];
      }
    }
    return of;
  }

  // The extent a kept piece covers: its domain axes' product.
  int64_t extent(const RowPiece& p) const {
    int64_t e = 1;
    for (int64_t a = p.axis; a < p.axis + p.span; ++a) e *= info_.domain[a];
    return e;
  }
  // A kept piece over domain axes [lo, hi), trimmed to its first and last of more than one element.
  RowPiece kept_piece(int64_t lo, int64_t hi) const {
    while (lo + 1 < hi && info_.domain[lo] == 1) ++lo;
    while (hi - 1 > lo && info_.domain[hi - 1] == 1) --hi;
    return {lo, 1, hi - lo};
  }
  // A Reshape's run over kept axes (input axes `ib`, output axes `ob` of extents `od`): the input's
  // pieces must be kept axes in the domain's order with nothing but axes of one element between
  // them (their rows flattened, or split again); each output axis then takes the domain axes
  // whose product is its extent, in order (a flattening of the batch and sequence axes, and its
  // inverse).
  StatusOr<std::vector<RowPiece>> rows_reshaped(const Frame& f, const std::vector<size_t>& ib, const Dims& od,
                                                const std::vector<size_t>& ob,
                                                const std::string& changes) const {
    const std::string across = changes + ": it merges or splits kept axes other than as the rows run";
    int64_t lo = -1, hi = -1;
    for (size_t t : ib) {
      const RowPiece& p = f[t];
      if (p.axis < 0 || reduced(p)) return Status::user(across);
      if (hi >= 0) {
        if (p.axis < hi) return Status::user(across);
        for (int64_t a = hi; a < p.axis; ++a)
          if (info_.domain[a] != 1) return Status::user(across);
      }
      if (lo < 0) lo = p.axis;
      hi = p.axis + p.span;
    }
    std::vector<RowPiece> out;
    int64_t a = lo;
    for (size_t t = 0; t < ob.size(); ++t) {
      const int64_t start = a;
      int64_t product = 1;
      while (product < od[ob[t]] && a < hi) product *= info_.domain[a++];
      if (product != od[ob[t]]) return Status::user(across);
      if (t + 1 == ob.size()) a = hi;  // axes of one element after the last piece
      out.push_back(kept_piece(start, a));
    }
    return out;
  }

  const StitchInfo& info_;
  int64_t r_;
  std::map<const Value*, Frame> frame_;
  std::set<const Value*> bare_;  // row ops' results without keepdims, and element-wise ops over them
  Dims kept_;                    // the domain's kept axes: the shape of those values
};

}  // namespace

std::map<const Value*, std::vector<uint64_t>> domain_axes(const std::vector<const Node*>& nodes,
                                                          const StitchInfo& info) {
  std::map<const Value*, std::vector<uint64_t>> deps;
  const size_t r = info.domain.size();
  const uint64_t every = r >= 64 ? ~uint64_t{0} : (uint64_t{1} << r) - 1;
  auto mark = [&](const Value* v, const std::vector<uint64_t>& l) {
    if (!v || !v->dims) return;
    std::vector<uint64_t>& cur = deps[v];
    cur.resize(dims(v).size(), 0);
    for (size_t k = 0; k < l.size() && k < cur.size(); ++k)
      if (dims(v)[k] != 1) cur[k] |= l[k];
  };
  auto all = [&](const Value* v) { return std::vector<uint64_t>(dims(v).size(), every); };
  std::vector<uint64_t> own(r);  // the domain's own coordinates
  for (size_t k = 0; k < r; ++k) own[k] = uint64_t{1} << std::min<size_t>(k, 63);
  for (const Node* n : nodes)
    if (stitch_role(*n) == StitchRole::kRow && !info.is_outer(n)) mark(n->input(0), own);
  for (const Value* v : info.stored) {
    std::vector<uint64_t> l(dims(v).size(), 0);
    if (auto it = info.permuted.find(v); it != info.permuted.end()) {
      for (size_t k = 0; k < l.size(); ++k)
        for (int64_t a = it->second[k].axis; a >= 0 && a < it->second[k].axis + it->second[k].span; ++a)
          l[k] |= own[static_cast<size_t>(a)];
    } else if (dims(v).size() == r) {
      l = own;  // the rows' shape, a wide value or a per-row one (1 along the reduced axes)
    } else {
      l = all(v);  // a per-row value of the kept axes alone
    }
    mark(v, l);
  }
  // Input i of `n` read at the output's coordinates `lo`, aligned on the right.
  auto aligned = [&](const Node& n, size_t i, const std::vector<uint64_t>& lo) {
    const Value* in = n.input(i);
    if (!in || !in->dims) return;
    std::vector<uint64_t> l(dims(in).size(), 0);
    const int64_t ri = static_cast<int64_t>(l.size()), ro = static_cast<int64_t>(lo.size());
    for (int64_t k = 0; k < ri; ++k)
      if (k + ro - ri >= 0 && k + ro - ri < ro) l[k] = lo[k + ro - ri];
    mark(in, l);
  };
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node& n = **it;
    if (info.is_outer(&n)) continue;
    std::vector<uint64_t> lo;  // the union over the outputs (one, but for a Split)
    for (const Value* o : n.outputs)
      if (auto f = o ? deps.find(o) : deps.end(); f != deps.end()) {
        lo.resize(std::max(lo.size(), f->second.size()), 0);
        for (size_t k = 0; k < f->second.size(); ++k) lo[k] |= f->second[k];
      }
    if (lo.empty()) continue;
    const StitchRole role = stitch_role(n);
    const std::string& op = n.op_type;
    if (role == StitchRole::kPointwise || op == "Expand" ||
        (role == StitchRole::kRow && row_op_keeps_shape(n))) {
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (role == StitchRole::kRow && i > 0) {
          if (n.input(i)) mark(n.input(i), all(n.input(i)));  // a norm's scale and bias
          continue;
        }
        if (op == "Expand" && i > 0) continue;
        aligned(n, i, lo);
      }
    } else if (role == StitchRole::kRow) {
      continue;  // a reduction's result is a register of the row; its input is marked above
    } else if (op == "Transpose" && n.input(0)) {
      auto perm = ops::transpose_perm(n, static_cast<int64_t>(lo.size()));
      if (!perm.is_ok()) {
        mark(n.input(0), all(n.input(0)));
        continue;
      }
      std::vector<uint64_t> l(lo.size(), 0);
      for (size_t k = 0; k < lo.size(); ++k) l[static_cast<size_t>((*perm)[k])] = lo[k];
      mark(n.input(0), l);
    } else if ((op == "Slice" || op == "Pad" || op == "Tile" || op == "Split" || op == "Concat") &&
               n.input(0)) {
      for (size_t i = 0; i < (op == "Concat" ? n.inputs.size() : 1); ++i)
        if (n.input(i) && dims(n.input(i)).size() == lo.size()) mark(n.input(i), lo);
    } else if (role == StitchRole::kContraction && lo.size() >= 2) {
      // A fine-grained GEMM: A [.., M, K] read at the output's batch axes and M, B [.., K, N] at its
      // batch axes and N (aligned on the right); K is the contraction's loop, run for each output
      // element, so it changes along the row.
      uint64_t along = 0;
      for (size_t k = 0; k < r; ++k)
        if (info.reduced[k]) along |= own[k];
      const size_t ro = lo.size();
      for (size_t i = 0; i < 2; ++i) {
        const Value* in = n.input(i);
        if (!in || !in->dims) continue;
        const size_t ri = dims(in).size();
        if (ri < 2) {
          mark(in, all(in));
          continue;
        }
        std::vector<uint64_t> l(ri, 0);
        for (size_t k = 0; k + 2 < ri; ++k)
          if (k + ro >= ri) l[k] = lo[k + ro - ri];
        l[ri - 2] = i == 0 ? lo[ro - 2] : along;
        l[ri - 1] = i == 0 ? along : lo[ro - 1];
        mark(in, l);
      }
    } else if (role == StitchRole::kView && n.input(0)) {
      // Runs of axes of equal products: an input axis depends on what any output axis of its run does.
      const Dims &id = dims(n.input(0)), &od = dims(n.output(0));
      std::vector<uint64_t> l(id.size(), 0);
      size_t i = 0, o = 0;
      while (i < id.size() || o < od.size()) {
        const size_t i0 = i, o0 = o;
        int64_t pi = i < id.size() ? id[i++] : 1, po = o < od.size() ? od[o++] : 1;
        while (pi != po && (i < id.size() || o < od.size())) {
          if ((pi < po && i < id.size()) || o >= od.size())
            pi *= id[i++];
          else
            po *= od[o++];
        }
        uint64_t run = 0;
        for (size_t k = o0; k < o && k < lo.size(); ++k) run |= lo[k];
        for (size_t k = i0; k < i; ++k) l[k] = run;
      }
      mark(n.input(0), l);
    } else {
      for (const Value* in : n.inputs)
        if (in && in->dims) mark(in, all(in));
    }
  }
  return deps;
}

// Whether row op `n` (info `ri`), over rows other than the kernel's (`info`), may be an outer
// reduction of it (StitchInfo::outer): a reduction keeping its axes, in a kernel over whole rows (not
// columns), whose input is computed from outside values without another row op or a fine-grained
// GEMM. Where its result is read is checked once the kernel's stored values are known.
bool outer_candidate(const Node& n, const RowOpInfo& ri, const StitchInfo& info,
                     const std::map<const Value*, const Node*>& producer) {
  if (info.column || ri.column || row_op_keeps_shape(n) || n.output(0) == nullptr ||
      dims(n.output(0)).size() != ri.in.size())
    return false;
  std::set<const Value*> seen;
  std::vector<const Value*> stack{n.input(0)};
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    auto it = v ? producer.find(v) : producer.end();
    if (it == producer.end() || !seen.insert(v).second) continue;
    const StitchRole role = stitch_role(*it->second);
    if (role == StitchRole::kRow || role == StitchRole::kContraction) return false;
    for (const Value* in : it->second->inputs) stack.push_back(in);
  }
  return true;
}

Status outer_reductions(const std::vector<const Node*>& nodes, const std::vector<std::string>& why,
                        StitchInfo& info) {
  if (info.outer.empty()) return Status::ok();
  const int64_t r = static_cast<int64_t>(info.domain.size());
  // Each outer reduction's result is read at coordinates of the row alone, and each row is whole in
  // one block (a row split over blocks runs its passes over segments).
  const RowMapping m = row_mapping(info);
  if (m.split()) return Status::user(why.front() + ", and the group's rows are split over blocks");
  const std::map<const Value*, std::vector<uint64_t>> deps = domain_axes(nodes, info);
  uint64_t along = 0;
  for (int64_t k = 0; k < r; ++k)
    if (info.reduced[k]) along |= uint64_t{1} << std::min<int64_t>(k, 63);
  for (size_t i = 0; i < info.outer.size(); ++i) {
    uint64_t read = 0;
    if (auto it = deps.find(info.outer[i].node->output(0)); it != deps.end())
      for (uint64_t a : it->second) read |= a;
    if (read & along) return Status::user(why[i] + ", and its result is read along the group's rows");
    // Neighbouring rows differing only along the innermost kept axes its result does not read
    // share its outer row: up to a block's warps of them reduce it together.
    int64_t fan = 1;
    for (int64_t k = r; k-- > 0;) {
      if (info.reduced[k]) continue;
      if (read & (uint64_t{1} << std::min<int64_t>(k, 63))) break;
      fan *= info.domain[k];
    }
    if (m.warp_per_row && m.replicas == 1 && info.rows % m.rows_per_block == 0)
      for (int64_t g = m.rows_per_block; g > 1; g /= 2)
        if (fan % g == 0) {
          info.outer[i].group = g;
          break;
        }
  }
  return Status::ok();
}

StatusOr<std::map<const Value*, std::vector<RowPiece>>> moved_rows(const std::vector<const Node*>& nodes,
                                                                   const StitchInfo& info) {
  RowFrames frames(info);
  for (const Node* n : nodes)
    if (!info.is_outer(n)) RETURN_IF_ERROR(frames.add(*n));  // outer results: per row, in no frame
  std::map<const Value*, std::vector<RowPiece>> moved;
  for (const Value* v : info.stored)
    if (const Frame* f = frames.find(v); f && !frames.in_domain(*f)) {
      RETURN_IF_ERROR(frames.check_moved(*v, *f));
      moved[v] = *f;
    }
  return moved;
}

}  // namespace stitch::codegen
