// find_gemm_folds: the work next to a MatMul that its GEMM call can do instead of a kernel (see
// gemm_folds.h). Operand layouts are followed as (dims, strides, offset) over a contiguous root:
// Transposes permute strides, Splits add an offset, views restride when no copy is needed.
#include "codegen/gemm_folds.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "codegen/lower.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

const Dims& dims(const Value* v) { return *v->dims; }

bool only_reader(const Graph& g, const UsersMap& users, const Value* v, const Node* reader) {
  if (v == nullptr || g.is_graph_output(v)) return false;
  auto it = users.find(v);
  return it != users.end() && it->second.size() == 1 && it->second.front() == reader;
}

std::optional<double> scalar_constant(const Value* v) {
  if (v == nullptr || !v->is_constant() || !is_float(v->dtype) || v->constant->size() != 1)
    return std::nullopt;
  return v->constant->get_f64(0);
}

// Strides of a view with dims `nd` of a layout (d, st), or nullopt when the view needs a copy:
// each run of old axes that a run of new axes regroups must be one strided block.
std::optional<Dims> restride(const Dims& d, const Dims& st, const Dims& nd) {
  std::vector<std::pair<int64_t, int64_t>> old;  // (size, stride), size-1 axes dropped
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] != 1) old.push_back({d[i], st[i]});
  Dims ns(nd.size(), 0);
  size_t oi = 0, ni = 0;
  while (ni < nd.size() || oi < old.size()) {
    if (ni < nd.size() && nd[ni] == 1) {
      ++ni;
      continue;
    }
    if (oi >= old.size() || ni >= nd.size()) return std::nullopt;
    size_t oj = oi + 1, nj = ni + 1;
    int64_t po = old[oi].first, pn = nd[ni];
    while (po != pn) {
      if (po < pn) {
        if (oj >= old.size()) return std::nullopt;
        po *= old[oj++].first;
      } else {
        if (nj >= nd.size()) return std::nullopt;
        pn *= nd[nj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (old[k].second != old[k + 1].second * old[k + 1].first) return std::nullopt;
    int64_t s = old[oj - 1].second;
    for (size_t k = nj; k-- > ni;) {
      ns[k] = s;
      s *= nd[k];
    }
    oi = oj;
    ni = nj;
  }
  for (size_t k = nd.size(); k-- > 0;)  // size-1 axes: any stride; the contiguous one keeps checks simple
    if (nd[k] == 1) ns[k] = k + 1 < nd.size() ? ns[k + 1] * nd[k + 1] : 1;
  return ns;
}

// One step of an operand chain: the node and the value it hands on (a Split has several).
using ChainStep = std::pair<const Node*, const Value*>;

// The operand layout after `chain` (root side first) applied to the contiguous `root`.
std::optional<GemmFolds::Operand> operand_layout(const Value* root, const std::vector<ChainStep>& chain) {
  Dims d = dims(root), st = ops::strides_of(d);
  int64_t offset = 0;
  for (const auto& [x, out] : chain) {
    if (x->op_type == "Transpose") {
      auto perm = ops::transpose_perm(*x, static_cast<int64_t>(d.size()));
      if (!perm.is_ok() || perm->size() != d.size()) return std::nullopt;
      Dims nd(d.size()), ns(d.size());
      for (size_t i = 0; i < perm->size(); ++i) {
        nd[i] = d[static_cast<size_t>((*perm)[i])];
        ns[i] = st[static_cast<size_t>((*perm)[i])];
      }
      d = nd;
      st = ns;
    } else if (x->op_type == "Split") {
      auto axis = ops::norm_axis(*x, x->attr_int("axis", 0), static_cast<int64_t>(d.size()));
      if (!axis.is_ok()) return std::nullopt;
      int64_t start = 0;
      for (const Value* o : x->outputs) {
        if (o == out) break;
        start += dims(o)[static_cast<size_t>(*axis)];
      }
      offset += start * st[static_cast<size_t>(*axis)];
      d = dims(out);
    } else if (x->op_type != "Mul") {  // a view
      auto ns = restride(d, st, dims(out));
      if (!ns) return std::nullopt;
      d = dims(out);
      st = *ns;
    }
  }
  const size_t r = d.size();
  if (r < 2) return std::nullopt;
  for (size_t k = r - 2; k < r; ++k)  // a size-1 row or column: its stride is never used
    if (d[k] == 1) st[k] = 1;
  GemmFolds::Operand o;
  o.root = root;
  o.offset = offset;
  if (st[r - 1] == 1 && st[r - 2] >= d[r - 1]) {
    o.ld = std::max<int64_t>(st[r - 2], 1);
  } else if (st[r - 2] == 1 && st[r - 1] >= d[r - 2]) {
    o.trans = true;
    o.ld = std::max<int64_t>(st[r - 1], 1);
  } else {
    return std::nullopt;
  }
  o.batch_strides.assign(st.begin(), st.end() - 2);
  return o;
}

// One pass of find_gemm_folds: Splits in `splits` may be taken over; `split_uses` receives the
// Split outputs the chosen operand chains start from.
GemmFolds fold_pass(const Graph& g, const UsersMap& users, const std::set<const Node*>& exclude,
                    const std::set<const Node*>& splits,
                    std::map<const Node*, std::set<const Value*>>& split_uses) {
  GemmFolds out;
  auto free = [&](const Node* x) { return !exclude.count(x) && (!out.folded.count(x) || splits.count(x)); };
  for (const auto& np : g.nodes()) {
    const Node& mm = *np;
    if (mm.op_type != "MatMul" || exclude.count(&mm) || classify_node(mm) != NodeLowering::kLibrary) continue;
    if (!mm.input(0) || !mm.input(1) || dims(mm.input(0)).size() < 2 || dims(mm.input(1)).size() < 2)
      continue;
    GemmFolds::Fold f;
    std::map<const Node*, std::string> why;
    // Output side: bias, then a transpose keeping the last axis last.
    const Value* y = mm.output(0);
    const int64_t cols = dims(y).back();
    if (auto it = users.find(y); it != users.end() && only_reader(g, users, y, it->second.front())) {
      const Node& add = *it->second.front();
      const Value* other = add.input(0) == y ? add.input(1) : add.input(0);
      if (add.op_type == "Add" && free(&add) && add.inputs.size() == 2 && add.input(0) != add.input(1) &&
          other && other->producer == nullptr && other->has_static_shape() && other->dtype == y->dtype &&
          !dims(other).empty() && dims(other).back() == cols && num_elements(dims(other)) == cols &&
          cols > 1 && add.output(0) && dims(add.output(0)) == dims(y)) {
        f.bias_add = &add;
        f.bias = other;
        why[&add] = fmt::format("added by {} in its epilogue (bias)", mm.describe());
        y = add.output(0);
      }
    }
    if (auto it = users.find(y); it != users.end() && only_reader(g, users, y, it->second.front())) {
      const Node& t = *it->second.front();
      if (t.op_type == "Transpose" && free(&t) && classify_node(t) == NodeLowering::kKernel && t.output(0)) {
        auto perm = ops::transpose_perm(t, static_cast<int64_t>(dims(y).size()));
        if (perm.is_ok() && !perm->empty() && perm->back() == static_cast<int64_t>(perm->size()) - 1) {
          f.out_transpose = &t;
          why[&t] =
              fmt::format("written by {} in this layout (row and batch strides of the call)", mm.describe());
        }
      }
    }
    // Operands: the longest chain of views, Transposes, scalar Muls and Splits that gives a GEMM layout.
    for (int i = 0; i < 2; ++i) {
      std::vector<ChainStep> chain;     // consumer side first
      std::vector<const Value*> roots;  // roots[k]: the value before chain[k]
      const Value* v = mm.input(i);
      const Node* reader = &mm;
      while (v->producer && free(v->producer) && only_reader(g, users, v, reader)) {
        const Node& p = *v->producer;
        const Value* next = nullptr;
        if (p.op_type == "Mul" && classify_node(p) == NodeLowering::kKernel && p.inputs.size() == 2) {
          for (int s = 0; s < 2; ++s)
            if (scalar_constant(p.input(s)) && p.input(1 - s) && dims(p.input(1 - s)) == dims(v) &&
                p.input(1 - s)->dtype == v->dtype)
              next = p.input(1 - s);
        } else if (p.op_type == "Transpose" && classify_node(p) == NodeLowering::kKernel) {
          next = p.input(0);
        } else if (p.op_type == "Split" && splits.count(&p)) {
          next = p.input(0);
        } else if (classify_node(p) == NodeLowering::kView && p.input(0) && p.input(0)->dtype == v->dtype) {
          next = p.input(0);
        }
        if (next == nullptr || !next->has_static_shape()) break;
        chain.push_back({&p, v});
        roots.push_back(next);
        reader = &p;
        v = next;
      }
      for (size_t len = chain.size(); len > 0; --len) {
        std::vector<ChainStep> fwd(chain.rbegin() + static_cast<std::ptrdiff_t>(chain.size() - len),
                                   chain.rend());
        const bool useful = std::any_of(fwd.begin(), fwd.end(), [](const ChainStep& x) {
          return classify_node(*x.first) != NodeLowering::kView;
        });
        if (!useful) break;
        auto o = operand_layout(roots[len - 1], fwd);
        if (!o) continue;
        f.operand[i] = *o;
        for (const auto& [x, val] : fwd) {
          if (x->op_type == "Mul") {
            f.alpha *= *scalar_constant(scalar_constant(x->input(0)) ? x->input(0) : x->input(1));
            why[x] = fmt::format("folded into the alpha of {}", mm.describe());
          } else if (x->op_type == "Split") {
            split_uses[x].insert(val);
            why[x] = "read in place by the GEMM calls its outputs feed (an offset and strides each)";
          } else if (classify_node(*x) !=
                     NodeLowering::kView) {  // views stay views: free, and the root of others
            why[x] =
                fmt::format("read by {} through its operand {}'s strides", mm.describe(), i == 0 ? "A" : "B");
          }
        }
        break;
      }
    }
    if (why.empty()) continue;
    for (auto& [x, w] : why) out.folded[x] = w;
    out.by_matmul[&mm] = f;
  }
  return out;
}

}  // namespace

GemmFolds find_gemm_folds(const Graph& g, const std::set<const Node*>& exclude) {
  const UsersMap users = g.users();
  // A Split is taken over only when every output of it is; start with every candidate and drop
  // those some output of which stays a value of its own, until nothing changes.
  std::set<const Node*> splits;
  for (const auto& np : g.nodes())
    if (np->op_type == "Split" && !exclude.count(np.get()) && classify_node(*np) == NodeLowering::kKernel &&
        std::all_of(np->outputs.begin(), np->outputs.end(), [](const Value* v) { return v != nullptr; }))
      splits.insert(np.get());
  for (;;) {
    std::map<const Node*, std::set<const Value*>> uses;
    GemmFolds out = fold_pass(g, users, exclude, splits, uses);
    std::set<const Node*> kept;
    for (const Node* sp : splits)
      if (uses[sp].size() == sp->outputs.size()) kept.insert(sp);
    if (kept == splits) return out;
    splits = std::move(kept);
  }
}

}  // namespace stitch::codegen
