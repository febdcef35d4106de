// find_gemm_folds: the work next to a MatMul that its GEMM call can do instead of a kernel (see
// gemm_folds.h). Operand layouts are followed as (dims, strides, offset) over a contiguous root:
// Transposes permute strides, Splits add an offset, views restride when no copy is needed.
#include "codegen/gemm_folds.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "codegen/library.h"
#include "codegen/lower.h"
#include "codegen/stitch.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

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

// A layout over a buffer: each axis is a list of strided sub-axes (SubAxes); a size-1 axis has
// none. An axis with one sub-axis has a plain stride; a view that merges axes no single stride
// describes keeps their sub-axes, so a later view that splits them back (torch.export writes
// [b,h,s,d] -> [b*h,s,d] -> ... -> [b,h,d,s]) still has plain strides.
std::vector<SubAxes> contiguous_layout(const Dims& d) {
  const Dims st = ops::strides_of(d);
  std::vector<SubAxes> axes(d.size());
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] != 1) axes[i] = {{d[i], st[i]}};
  return axes;
}

// Adjacent sub-axes that form one strided block become one.
void simplify(SubAxes& a) {
  SubAxes out;
  for (const auto& s : a) {
    if (!out.empty() && out.back().second == s.first * s.second)
      out.back() = {out.back().first * s.first, s.second};
    else
      out.push_back(s);
  }
  a = std::move(out);
}

// The layout of a view with dims `nd`: the sub-axes in order, regrouped (a sub-axis split when a
// new axis takes part of it); nullopt when the sizes do not divide or the view is empty.
std::optional<std::vector<SubAxes>> view_layout(const std::vector<SubAxes>& axes, const Dims& nd) {
  SubAxes flat;
  for (const auto& a : axes) flat.insert(flat.end(), a.begin(), a.end());
  if (std::any_of(nd.begin(), nd.end(), [](int64_t d) { return d <= 0; }) ||
      std::any_of(flat.begin(), flat.end(), [](const auto& s) { return s.first <= 0; }))
    return std::nullopt;
  std::vector<SubAxes> out(nd.size());
  size_t f = 0;
  for (size_t j = 0; j < nd.size(); ++j) {
    int64_t need = nd[j];
    while (need > 1) {
      if (f >= flat.size()) return std::nullopt;
      auto& [size, stride] = flat[f];
      if (size <= need) {
        if (need % size != 0) return std::nullopt;
        out[j].push_back(flat[f++]);
        need /= size;
      } else {
        if (size % need != 0) return std::nullopt;
        out[j].push_back({need, stride * (size / need)});  // the outer part of the sub-axis
        size /= need;
        need = 1;
      }
    }
    simplify(out[j]);
  }
  if (f != flat.size()) return std::nullopt;
  return out;
}

// A Slice with constant bounds and steps of 1 over a static input: an offset and smaller dims.
bool unit_step_slice(const Node& n) {
  if (!n.input(0) || !n.input(0)->has_static_shape() || !n.output(0) || !n.output(0)->has_static_shape())
    return false;
  auto spec = stitch_slice(n);
  return spec.is_ok() && spec->strides == ops::strides_of(dims(n.input(0)));
}

// One step of an operand chain: the node and the value it hands on (a Split has several).
using ChainStep = std::pair<const Node*, const Value*>;

// The operand layout after `chain` (root side first) applied to the contiguous `root`.
std::optional<GemmFolds::Operand> operand_layout(const Value* root, const std::vector<ChainStep>& chain) {
  std::vector<SubAxes> axes = contiguous_layout(dims(root));
  int64_t offset = 0;
  for (const auto& [x, out] : chain) {
    if (x->op_type == "Transpose") {
      auto perm = ops::transpose_perm(*x, static_cast<int64_t>(axes.size()));
      if (!perm.is_ok() || perm->size() != axes.size()) return std::nullopt;
      std::vector<SubAxes> next(axes.size());
      for (size_t i = 0; i < perm->size(); ++i) next[i] = axes[static_cast<size_t>((*perm)[i])];
      axes = std::move(next);
    } else if (x->op_type == "Split") {
      auto axis = ops::norm_axis(*x, x->attr_int("axis", 0), static_cast<int64_t>(axes.size()));
      if (!axis.is_ok()) return std::nullopt;
      SubAxes& a = axes[static_cast<size_t>(*axis)];
      if (a.size() != 1) return std::nullopt;  // slicing a merged axis: not one offset
      int64_t start = 0;
      for (const Value* o : x->outputs) {
        if (o == out) break;
        start += dims(o)[static_cast<size_t>(*axis)];
      }
      offset += start * a.front().second;
      const int64_t len = dims(out)[static_cast<size_t>(*axis)];
      if (len == 1)
        a.clear();
      else
        a.front().first = len;
    } else if (x->op_type == "Slice") {  // steps of 1 (checked when the chain was built)
      auto spec = stitch_slice(*x);
      if (!spec.is_ok()) return std::nullopt;
      const Dims& in = dims(x->input(0));
      const Dims st = ops::strides_of(in);
      for (size_t k = 0; k < in.size() && k < axes.size(); ++k) {
        const int64_t start = (spec->base / st[k]) % in[k], len = spec->out[k];
        if (start == 0 && len == in[k]) continue;
        SubAxes& a = axes[k];
        if (a.size() != 1) return std::nullopt;  // slicing a merged axis: not one offset
        offset += start * a.front().second;
        if (len == 1)
          a.clear();
        else
          a.front().first = len;
      }
    } else if (x->op_type == "Expand") {  // a broadcast: stride 0 along each repeated axis
      const Dims& od = dims(out);
      const Dims& id = dims(x->input(0));
      if (od.size() < axes.size() || id.size() != axes.size()) return std::nullopt;
      const size_t lead = od.size() - axes.size();
      std::vector<SubAxes> next(od.size());
      for (size_t k = 0; k < od.size(); ++k) {
        if (k >= lead && id[k - lead] == od[k])
          next[k] = axes[k - lead];
        else if (k < lead || id[k - lead] == 1)
          next[k] = od[k] == 1 ? SubAxes{} : SubAxes{{od[k], 0}};
        else
          return std::nullopt;
      }
      axes = std::move(next);
    } else if (x->op_type != "Mul") {  // a view
      auto next = view_layout(axes, dims(out));
      if (!next) return std::nullopt;
      axes = std::move(*next);
    }
  }
  const size_t r = axes.size();
  if (r < 2) return std::nullopt;
  const Dims& d = dims(chain.back().second);
  Dims st(r, 0);
  for (size_t k = r - 2; k < r; ++k) {
    if (axes[k].size() > 1) return std::nullopt;  // rows or columns with no single stride
    st[k] = axes[k].empty() ? 0 : axes[k].front().second;
  }
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
  o.batch_axes.assign(axes.begin(), axes.end() - 2);
  return o;
}

// Whether two splittings of one batch dim into sub-axes nest: walking both from the outermost,
// each sub-axis boundary of one falls on a boundary of the other or inside a sub-axis of it that
// its size divides (lower_matmul then steps both along one refinement). An empty list (a size-1
// dim) or a single sub-axis nests with anything.
bool sub_axes_nest(const SubAxes& x, const SubAxes& y) {
  if (x.size() < 2 || y.size() < 2) return true;
  size_t i = 0, j = 0;
  int64_t rx = x[0].first, ry = y[0].first;
  while (i < x.size() && j < y.size()) {
    const int64_t step = std::min(rx, ry);
    if (rx % step != 0 || ry % step != 0) return false;
    rx /= step, ry /= step;
    if (rx == 1 && ++i < x.size()) rx = x[i].first;
    if (ry == 1 && ++j < y.size()) ry = y[j].first;
  }
  return i == x.size() && j == y.size();
}

// sub_axes_nest for every batch dim two layouts share, right-aligned as broadcasting aligns them.
bool batches_nest(const std::vector<SubAxes>& x, const std::vector<SubAxes>& y) {
  const size_t n = std::min(x.size(), y.size());
  for (size_t k = 1; k <= n; ++k)
    if (!sub_axes_nest(x[x.size() - k], y[y.size() - k])) return false;
  return true;
}

// Where a product of dims `pd`, read through views and then the Transpose `t` (keeping the last
// axis last), puts its elements in the Transpose's contiguous output: the sub-axes of each product
// axis there. Views keep the element order, so the product is a view of the Transpose's input,
// whose axes step as the output's permuted strides. Nullopt unless the columns step by 1 and the
// rows by one stride of at least a row (the call's ldc).
std::optional<std::vector<SubAxes>> written_layout(const Dims& pd, const Node& t) {
  const Dims& in = dims(t.input(0));
  auto perm = ops::transpose_perm(t, static_cast<int64_t>(in.size()));
  if (!perm.is_ok() || perm->size() != in.size() || pd.size() < 2) return std::nullopt;
  const std::vector<SubAxes> out = contiguous_layout(dims(t.output(0)));
  std::vector<SubAxes> along(in.size());
  for (size_t i = 0; i < perm->size(); ++i) along[static_cast<size_t>((*perm)[i])] = out[i];
  auto axes = view_layout(along, pd);
  if (!axes) return std::nullopt;
  const size_t r = pd.size();
  const SubAxes &rows = (*axes)[r - 2], &cols = (*axes)[r - 1];
  if (rows.size() > 1 || cols.size() > 1) return std::nullopt;
  if (!cols.empty() && cols.front().second != 1) return std::nullopt;
  if (!rows.empty() && rows.front().second < pd[r - 1]) return std::nullopt;
  return axes;
}

// The residual Add of `tail` for a call of `call`: the one reader of `tail`, an Add of a
// same-shaped value of its type written before the call runs (its producer comes first in graph
// order, so no path leads from the call back to it). {Add, that value}, or nulls.
std::pair<const Node*, const Value*> residual_add(const Graph& g, const UsersMap& users,
                                                  const std::map<const Node*, size_t>& position,
                                                  const Value* tail, const Node& call,
                                                  const std::function<bool(const Node*)>& free) {
  auto it = users.find(tail);
  const Node* add =
      it != users.end() && only_reader(g, users, tail, it->second.front()) ? it->second.front() : nullptr;
  const Value* other =
      add && add->inputs.size() == 2 ? (add->input(0) == tail ? add->input(1) : add->input(0)) : nullptr;
  if (add && other && add->op_type == "Add" && free(add) && add->input(0) != add->input(1) &&
      other->has_static_shape() && other->dtype == tail->dtype && dims(other) == dims(tail) &&
      add->output(0) && dims(add->output(0)) == dims(tail) &&
      (other->producer == nullptr || position.at(other->producer) < position.at(&call)))
    return {add, other};
  return {nullptr, nullptr};
}

// A Conv's fold: a residual Add and then ReLU, which cuDNN's fused call computes after the
// convolution and its bias (y = relu(conv(x) + bias + z)); ResNet's second convolution of a block,
// its Add and ReLU are one call. Only f32 and f16, the types of cuDNN's fused call with a float
// accumulator that stitch lowers convolutions to.
void fold_conv(const Graph& g, const UsersMap& users, const std::map<const Node*, size_t>& position,
               const Node& conv, const std::function<bool(const Node*)>& free, GemmFolds& out) {
  const Value* tail = conv.output(0);
  if (tail->dtype != DType::kF32 && tail->dtype != DType::kF16) return;
  GemmFolds::Fold f;
  std::map<const Node*, std::string> why;
  if (auto [add, other] = residual_add(g, users, position, tail, conv, free); add) {
    f.residual_add = add;
    f.residual = other;
    why[add] = fmt::format("added by {} in cuDNN's fused call (its z input)", conv.describe());
    tail = add->output(0);
  }
  auto act = match_activation(g, users, tail, free);
  if (act && act->kind == Activation::kRelu) {
    f.activation = act->kind;
    f.activation_out = act->out;
    for (const Node* n : act->nodes)
      why[n] = fmt::format("computed by {} in cuDNN's fused call (ReLU)", conv.describe());
  }
  if (why.empty()) return;
  for (auto& [x, w] : why) out.folded[x] = w;
  out.by_matmul[&conv] = f;
}

// One pass of find_gemm_folds: Splits in `splits` may be taken over; `split_uses` receives the
// Split outputs the chosen operand chains start from.
GemmFolds fold_pass(const Graph& g, const UsersMap& users, const std::map<const Node*, size_t>& position,
                    const std::set<const Node*>& exclude, const FoldOptions& o,
                    const std::set<const Node*>& splits,
                    std::map<const Node*, std::set<const Value*>>& split_uses) {
  GemmFolds out;
  auto free = [&](const Node* x) { return !exclude.count(x) && (!out.folded.count(x) || splits.count(x)); };
  for (const auto& np : g.nodes()) {
    const Node& mm = *np;
    if (mm.op_type == "Conv") {
      if (!exclude.count(&mm) && classify_node(mm) == NodeLowering::kLibrary && mm.output(0))
        fold_conv(g, users, position, mm, free, out);
      continue;
    }
    const bool is_gemm = mm.op_type == "Gemm";
    if ((mm.op_type != "MatMul" && !is_gemm) || exclude.count(&mm) ||
        classify_node(mm) != NodeLowering::kLibrary || !mm.output(0))
      continue;
    if (!is_gemm &&
        (!mm.input(0) || !mm.input(1) || dims(mm.input(0)).size() < 2 || dims(mm.input(1)).size() < 2))
      continue;
    GemmFolds::Fold f;
    std::map<const Node*, std::string> why;
    // Output side: bias, then an activation or a transpose keeping the last axis last.
    const Value* y = mm.output(0);
    const int64_t cols = dims(y).back();
    if (auto it = users.find(y);
        !is_gemm && it != users.end() && only_reader(g, users, y, it->second.front())) {
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
    // A Gemm's C is added before the activation only through the bias epilogue.
    const bool plain_c =
        !is_gemm || !mm.input(2) || mm.attr_float("beta", 1.0f) == 0.0f || gemm_bias_epilogue(mm);
    // The product's only reader, through views (GPT-2's Gemm of [tokens, n] reshaped back to
    // [batch, seq, n]): a residual Add or an activation; the call writes the same elements in the
    // same order.
    std::vector<const Node*> views;
    const Value* tail = y;
    for (auto it = users.find(tail); it != users.end() && only_reader(g, users, tail, it->second.front());
         it = users.find(tail)) {
      const Node* v = it->second.front();
      if (classify_node(*v) != NodeLowering::kView || !free(v) || !v->output(0) ||
          v->output(0)->dtype != tail->dtype)
        break;
      views.push_back(v);
      tail = v->output(0);
    }
    // Residual: an Add of a same-shaped value written before the MatMul runs.
    if (plain_c) {
      if (auto [add, other] = residual_add(g, users, position, tail, mm, free); add) {
        f.residual_add = add;
        f.residual = other;
        for (const Node* v : views)
          why[v] =
              fmt::format("written by {} with its residual added (a view of its product)", mm.describe());
        why[add] = fmt::format("added by {} as its C (a residual: beta 1)", mm.describe());
        y = add->output(0);
      }
    }
    if (plain_c && !f.residual) {
      auto act = match_activation(g, users, tail, [&](const Node* n) { return free(n); });
      if (act && (act->kind != Activation::kGeluErf || o.approximate_gelu)) {
        f.activation = act->kind == Activation::kGeluErf ? Activation::kGeluTanh : act->kind;
        f.activation_out = act->out;
        const std::string form = act->kind == Activation::kRelu ? "ReLU"
                                 : act->kind == Activation::kGeluTanh
                                     ? "GELU, tanh form"
                                     : "GELU, erf form run as the tanh form (--approximate-gelu)";
        for (const Node* v : views)
          why[v] =
              fmt::format("written by {} with its activation applied (a view of its product)", mm.describe());
        for (const Node* n : act->nodes)
          why[n] = fmt::format("computed by {} in its epilogue ({})", mm.describe(), form);
      } else if (act) {
        out.notes.push_back(
            fmt::format("{} of {} stays a kernel: cuBLASLt's GELU epilogue computes the tanh form, up to "
                        "4.7e-4 away from the "
                        "erf form (--approximate-gelu allows it)",
                        activation_name(act->kind), mm.describe()));
      }
    }
    // Output transpose: the (biased) product, through views, read only by a Transpose whose
    // output puts each product row in one place (BLOOM's context [b*h, s, d] viewed as
    // [b, h, s, d] and put to [b, s, h, d]); the call writes that layout.
    if (!is_gemm && !f.activation_out && !f.residual) {
      if (auto it = users.find(tail); it != users.end() && only_reader(g, users, tail, it->second.front())) {
        const Node& t = *it->second.front();
        if (t.op_type == "Transpose" && free(&t) && classify_node(t) == NodeLowering::kKernel &&
            t.output(0) && t.output(0)->has_static_shape()) {
          if (auto axes = written_layout(dims(mm.output(0)), t)) {
            f.out_transpose = &t;
            f.out_axes = std::move(*axes);
            for (const Node* v : views)
              why[v] =
                  fmt::format("written by {} in the layout of the Transpose it feeds (a view of its product)",
                              mm.describe());
            why[&t] = fmt::format(
                "written by {} in the layout of the Transpose it feeds (row and batch "
                "strides of the call)",
                mm.describe());
          }
        }
      }
    }
    // A transposed C's batch sub-axes, which the operands' must nest with.
    const std::vector<SubAxes> out_batch =
        f.out_transpose ? std::vector<SubAxes>(f.out_axes.begin(), f.out_axes.end() - 2)
                        : std::vector<SubAxes>{};
    // Operands: the longest chain of views, Transposes, scalar Muls and Splits that gives a GEMM layout.
    for (int i = 0; i < 2 && !is_gemm; ++i) {
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
        } else if (p.op_type == "Slice" && classify_node(p) == NodeLowering::kKernel && unit_step_slice(p)) {
          next = p.input(0);
        } else if (p.op_type == "Expand" && classify_node(p) == NodeLowering::kKernel && p.input(0) &&
                   p.input(0)->dtype == v->dtype) {
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
        // The batch sub-axes of A, B and a transposed C must nest for lower_matmul to step all
        // three along one refinement of each batch dim (Q and K both merging batch and heads, in
        // the same order, do; K merged heads first against Q batch first does not).
        if (i == 1 && f.operand[0].root && !batches_nest(f.operand[0].batch_axes, o->batch_axes)) continue;
        if (!batches_nest(out_batch, o->batch_axes)) continue;
        // A scale whose product with alpha is not finite stays a kernel: the call's alpha is a
        // number in the schedule, which has no NaN or infinity.
        double scaled = f.alpha;
        for (const auto& [x, val] : fwd)
          if (x->op_type == "Mul")
            scaled *= *scalar_constant(scalar_constant(x->input(0)) ? x->input(0) : x->input(1));
        if (!std::isfinite(scaled)) continue;
        f.operand[i] = *o;
        for (const auto& [x, val] : fwd) {
          if (x->op_type == "Mul") {
            f.alpha *= *scalar_constant(scalar_constant(x->input(0)) ? x->input(0) : x->input(1));
            why[x] = fmt::format("folded into the alpha of {}", mm.describe());
          } else if (x->op_type == "Slice") {
            why[x] = fmt::format("read by {} through its operand {}'s offset and strides", mm.describe(),
                                 i == 0 ? "A" : "B");
          } else if (x->op_type == "Expand") {
            why[x] = fmt::format("read by {} in place: operand {} steps 0 along the repeated axis",
                                 mm.describe(), i == 0 ? "A" : "B");
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

GemmFolds find_gemm_folds(const Graph& g, const std::set<const Node*>& exclude, const FoldOptions& o) {
  const UsersMap users = g.users();
  std::map<const Node*, size_t> position;
  for (const auto& np : g.nodes()) position.emplace(np.get(), position.size());
  // A Split is taken over only when every output of it is; start with every candidate and drop
  // those some output of which stays a value of its own, until nothing changes.
  std::set<const Node*> splits;
  for (const auto& np : g.nodes())
    if (np->op_type == "Split" && !exclude.count(np.get()) && classify_node(*np) == NodeLowering::kKernel &&
        std::all_of(np->outputs.begin(), np->outputs.end(), [](const Value* v) { return v != nullptr; }))
      splits.insert(np.get());
  for (;;) {
    std::map<const Node*, std::set<const Value*>> uses;
    GemmFolds out = fold_pass(g, users, position, exclude, o, splits, uses);
    std::set<const Node*> kept;
    for (const Node* sp : splits)
      if (uses[sp].size() == sp->outputs.size()) kept.insert(sp);
    if (kept == splits) return out;
    splits = std::move(kept);
  }
}

}  // namespace stitch::codegen
