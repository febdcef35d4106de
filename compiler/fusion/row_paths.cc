// Row paths to attention's GEMMs (see row_paths.h): axes tracked as parts through each op, and
// the placement of a row factor at the GEMM.
#include "fusion/row_paths.h"

#include <algorithm>

namespace stitch::fusion {
namespace {

// Parts of one element dropped, neighbouring parts of -1 merged.
Axis normalize(const Axis& a) {
  Axis out;
  for (const Part& p : a) {
    if (p.second == 1) continue;
    if (p.first < 0 && !out.empty() && out.back().first < 0)
      out.back().second *= p.second;
    else
      out.push_back(p);
  }
  return out;
}

// The product's row axis an axis is, -1 when the row factors are one value along it, -2 when it
// mixes a row axis with other extents.
int row_axis(const Axis& a) {
  const Axis n = normalize(a);
  if (n.empty() || (n.size() == 1 && n[0].first < 0)) return -1;
  return n.size() == 1 ? n[0].first : -2;
}

// The axes of a reshape's output (`out`) from its input's: parts taken in order, a part of -1
// split where an output axis needs less of it; a row axis is never split.
std::optional<Axes> reshape_axes(const Axes& in, const Dims& out) {
  std::vector<Part> parts;
  for (const Axis& a : in)
    for (const Part& p : normalize(a)) parts.push_back(p);
  size_t next = 0;
  Axes res;
  for (int64_t d : out) {
    if (d <= 0) return std::nullopt;
    Axis axis;
    int64_t need = d;
    while (need > 1) {
      if (next >= parts.size()) return std::nullopt;
      Part& p = parts[next];
      if (p.second <= need && need % p.second == 0) {
        axis.push_back(p);
        need /= p.second;
        ++next;
      } else if (p.first < 0 && p.second % need == 0) {
        axis.push_back({-1, need});
        p.second /= need;
        need = 1;
      } else {
        return std::nullopt;
      }
    }
    res.push_back(normalize(axis));
  }
  if (next != parts.size()) return std::nullopt;
  return res;
}

// The axes of `n`'s output from its inputs' (`in`: one per input, empty where the input does not
// depend on the product). Empty when `n` is not linear in the product row by row.
std::optional<Axes> linear_axes(const Node& n, const std::vector<std::optional<Axes>>& in) {
  if (!n.domain.empty() || n.outputs.size() != 1 || !n.output(0) || !n.output(0)->has_static_shape())
    return std::nullopt;
  const Dims& out = *n.output(0)->dims;
  std::vector<size_t> scaled;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i]) scaled.push_back(i);
  if (scaled.empty()) return std::nullopt;
  const Value* v = n.input(scaled.front());
  if (!v->has_static_shape()) return std::nullopt;
  const Dims& d = *v->dims;
  const Axes& map = *in[scaled.front()];
  auto same = [](const Axes& x, const Axes& y) {
    if (x.size() != y.size()) return false;
    for (size_t k = 0; k < x.size(); ++k)
      if (normalize(x[k]) != normalize(y[k])) return false;
    return true;
  };
  const std::string& op = n.op_type;
  if (op == "Mul" || op == "Div") {  // times a value the product does not reach
    if (scaled.size() != 1 || (op == "Div" && scaled.front() != 0) || out != d) return std::nullopt;
    return map;
  }
  if (op == "Neg" || op == "Identity") return map;
  if (op == "Add" || op == "Sub") {  // two values with the same rows
    if (scaled.size() != 2 || !same(*in[0], *in[1]) || *n.input(0)->dims != *n.input(1)->dims)
      return std::nullopt;
    return map;
  }
  if (op == "Concat") {
    if (scaled.size() != n.inputs.size() || out.size() != d.size()) return std::nullopt;
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(out.size());
    if (axis < 0 || axis >= static_cast<int64_t>(out.size())) return std::nullopt;
    Axes res = map;
    for (size_t i = 0; i < in.size(); ++i) {
      Axes m = *in[i];
      if (row_axis(m[static_cast<size_t>(axis)]) != -1) return std::nullopt;
      m[static_cast<size_t>(axis)] = res[static_cast<size_t>(axis)] = {{-1, out[static_cast<size_t>(axis)]}};
      if (!same(m, res)) return std::nullopt;
    }
    return res;
  }
  if (scaled.size() != 1 || scaled.front() != 0) return std::nullopt;
  if (op == "Slice") {  // along extents no row factor varies along
    if (out.size() != d.size()) return std::nullopt;
    Axes res = map;
    for (size_t k = 0; k < d.size(); ++k) {
      if (d[k] == out[k]) continue;
      if (row_axis(map[k]) != -1) return std::nullopt;
      res[k] = normalize({{-1, out[k]}});
    }
    return res;
  }
  if (op == "Transpose") {
    std::vector<int64_t> perm = n.attr_ints("perm");
    if (perm.empty())
      for (int64_t k = static_cast<int64_t>(d.size()) - 1; k >= 0; --k) perm.push_back(k);
    if (perm.size() != d.size()) return std::nullopt;
    Axes next;
    for (int64_t q : perm) {
      if (q < 0 || q >= static_cast<int64_t>(d.size())) return std::nullopt;
      next.push_back(map[static_cast<size_t>(q)]);
    }
    return next;
  }
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten")
    return reshape_axes(map, out);
  if (op == "Expand") {
    if (out.size() < d.size()) return std::nullopt;
    const size_t lead = out.size() - d.size();
    Axes next(out.size());
    for (size_t k = 0; k < out.size(); ++k) {
      if (k < lead) {
        next[k] = normalize({{-1, out[k]}});
      } else if (d[k - lead] == out[k]) {
        next[k] = map[k - lead];
      } else if (d[k - lead] == 1) {
        next[k] = normalize({{-1, out[k]}});
      } else {
        return std::nullopt;
      }
    }
    return next;
  }
  return std::nullopt;
}

bool is_two_operand_gemm(const Node& n) {
  return n.op_type == "MatMul" && n.domain.empty() && n.inputs.size() == 2 && n.input(0) && n.input(1) &&
         !n.input(0)->is_constant() && !n.input(1)->is_constant() && n.input(0)->has_static_shape() &&
         n.input(1)->has_static_shape() && n.output(0) && n.output(0)->has_static_shape() &&
         n.input(0)->dims->size() >= 2 && n.input(1)->dims->size() >= 2;
}

}  // namespace

std::unordered_set<const Value*> reached_from(const Users& users, const Value* y) {
  std::unordered_set<const Value*> reached = {y};
  std::vector<const Value*> todo = {y};
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    auto it = users.find(v);
    if (it == users.end()) continue;
    for (const Node* n : it->second)
      for (const Value* o : n->outputs)
        if (o && reached.insert(o).second) todo.push_back(o);
  }
  return reached;
}

std::optional<std::vector<GemmEnd>> track_rows(const Graph& g, const Users& users,
                                               const std::set<std::string>& keep,
                                               const std::unordered_set<const Value*>& reached, Node* entry,
                                               const Value* y) {
  std::unordered_map<const Value*, Axes> axes;
  {
    const Dims& yd = *y->dims;
    Axes m;
    for (size_t i = 0; i < yd.size(); ++i)
      m.push_back(normalize({{i + 1 < yd.size() ? static_cast<int>(i) : -1, yd[i]}}));
    axes[y] = std::move(m);
  }
  std::vector<GemmEnd> ends;
  size_t nodes = 0;  // on the paths so far
  std::vector<Node*> pending = {entry};
  std::unordered_set<const Node*> seen = {entry};
  // A node waits until each of its inputs the product reaches has its axes; a pass without
  // progress leaves a node that reads a value off the paths.
  for (bool progress = true; !pending.empty() && progress;) {
    progress = false;
    std::vector<Node*> next;
    for (Node* n : pending) {
      if (keep.count(n->name) || nodes > 64) return std::nullopt;
      // A GEMM takes what it has: its other operand may come from another reader of the product.
      const bool gemm = is_two_operand_gemm(*n);
      std::vector<std::optional<Axes>> in(n->inputs.size());
      bool ready = true;
      for (size_t i = 0; i < n->inputs.size(); ++i) {
        const Value* v = n->input(i);
        if (!v || !reached.count(v)) continue;
        auto it = axes.find(v);
        if (it != axes.end()) {
          in[i] = it->second;
        } else if (!gemm) {
          ready = false;
          break;
        }
      }
      if (!ready) {
        next.push_back(n);
        continue;
      }
      progress = true;
      if (gemm) {
        for (int i = 0; i < 2; ++i)
          if (in[static_cast<size_t>(i)]) ends.push_back({n, i, *in[static_cast<size_t>(i)]});
        continue;
      }
      auto m = linear_axes(*n, in);
      if (!m) return std::nullopt;
      const Value* o = n->output(0);
      auto it = users.find(o);
      if (g.is_graph_output(o) || it == users.end()) return std::nullopt;
      axes[o] = std::move(*m);
      ++nodes;
      for (Node* r : it->second)
        if (seen.insert(r).second) next.push_back(r);
    }
    pending = std::move(next);
  }
  if (!pending.empty() || ends.empty()) return std::nullopt;
  return ends;
}

std::optional<Placement> place(const Value* f, const Value* y, const GemmEnd& e) {
  const Dims& fd = *f->dims;
  const Dims& yd = *y->dims;
  if (fd.size() > yd.size()) return std::nullopt;
  const size_t lead = yd.size() - fd.size();
  auto fdim = [&](int axis) -> int64_t {
    return axis < static_cast<int>(lead) ? 1 : fd[static_cast<size_t>(axis) - lead];
  };
  Node* mm = e.matmul;
  const Value* self = mm->input(static_cast<size_t>(e.operand));
  Value* other = mm->input(static_cast<size_t>(1 - e.operand));
  const int64_t rs = static_cast<int64_t>(self->dims->size());
  const int64_t contraction = e.operand == 0 ? rs - 1 : rs - 2;
  bool to_output = false, to_other = false;
  for (int64_t k = 0; k < rs; ++k) {
    const int a = row_axis(e.axes[static_cast<size_t>(k)]);
    if (a == -2) return std::nullopt;
    if (a < 0 || fdim(a) == 1) continue;
    if (k == contraction) {
      to_other = true;
    } else if (k >= rs - 2) {
      to_output = true;
    }
  }
  if (to_other && to_output) return std::nullopt;
  Placement p;
  p.output = !to_other;
  p.target = p.output ? mm->output(0) : other;
  const Dims& td = *p.target->dims;
  const int64_t rt = static_cast<int64_t>(td.size());
  p.dims.assign(td.size(), 1);
  std::vector<int> order(td.size(), -1);
  for (int64_t k = 0; k < rs; ++k) {
    const int a = row_axis(e.axes[static_cast<size_t>(k)]);
    if (a < 0 || fdim(a) == 1) continue;
    int64_t at;  // the target's axis
    if (k == contraction) {
      at = e.operand == 0 ? rt - 2 : rt - 1;  // B's rows, or A's columns
    } else if (k == rs - 2 && e.operand == 0) {
      at = rt - 2;  // A's rows: the output's rows
    } else if (k == rs - 1 && e.operand == 1) {
      at = rt - 1;  // B's columns: the output's columns
    } else if (k < rs - 2) {
      at = k - rs + rt;  // batch axes, aligned at the right
      if (at < 0 || at >= rt - 2) return std::nullopt;
    } else {
      return std::nullopt;
    }
    if (td[static_cast<size_t>(at)] != fdim(a) || order[static_cast<size_t>(at)] >= 0) return std::nullopt;
    p.dims[static_cast<size_t>(at)] = fdim(a);
    order[static_cast<size_t>(at)] = a;
  }
  int last = -1;
  for (int a : order) {
    if (a < 0) continue;
    if (a <= last) return std::nullopt;
    last = a;
  }
  if (num_elements(p.dims) != num_elements(fd)) return std::nullopt;
  return p;
}

}  // namespace stitch::fusion
