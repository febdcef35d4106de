// split_head_rows (see head_rows.h): a last-axis norm over rows merged by a Reshape computed with the
// merged axes apart.
#include "fusion/head_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_set>

#include "codegen/stitch.h"
#include "fusion/graph_edit.h"

namespace stitch::fusion {
namespace {

const Dims& head_dims(const Value* v) { return *v->dims; }

Dims per_row(Dims d) {
  d.back() = 1;
  return d;
}

// Whether each axis of `coarse` (axes of one element aside) is the product of a run of `fine`'s, and
// the two differ: `coarse` merges some of `fine`'s (or only drops or adds axes of one element: a
// decoding step's sequence of 1) and splits none.
bool merges(const Dims& fine, const Dims& coarse) {
  Dims f, c;
  for (int64_t e : fine)
    if (e != 1) f.push_back(e);
  for (int64_t e : coarse)
    if (e != 1) c.push_back(e);
  size_t i = 0;
  for (int64_t e : c) {
    int64_t p = 1;
    while (p < e && i < f.size()) p *= f[i++];
    if (p != e) return false;
  }
  return i == f.size() && fine != coarse;
}

// The dims a Reshape of x (`xd`) into `yd` takes with the merged axes apart: x's leading axes, the
// heads (W / D, when more than one), the rows' D. Nullopt unless `yd` has the same elements as
// `xd`, rows of D > 1 that tile x's last axis, and leading axes that merge those (never split them:
// a view of a flattened GEMM product into [B, S, N] stays as it is).
std::optional<Dims> unmerged(const Dims& xd, const Dims& yd) {
  if (xd.size() < 2 || yd.size() < 2 || num_elements(xd) <= 0 || num_elements(xd) != num_elements(yd))
    return std::nullopt;
  const int64_t w = xd.back(), d = yd.back();
  if (d <= 1 || w % d != 0) return std::nullopt;
  Dims n(xd.begin(), xd.end() - 1);
  if (w > d) n.push_back(w / d);
  if (!merges(n, Dims(yd.begin(), yd.end() - 1))) return std::nullopt;
  n.push_back(d);
  return n;
}

// Whether `n` is a row op over the last axis of its input alone, whose axis a rank-independent
// attribute or input names (not InstanceNormalization or a global pool, whose axes are all those
// after the channels).
bool last_axis_row_op(const Node& n) {
  const std::string& op = n.op_type;
  if (op.rfind("Reduce", 0) != 0 && op != "Softmax" && op != "LogSoftmax" && op != "LayerNormalization")
    return false;
  if (codegen::stitch_role(n) != codegen::StitchRole::kRow) return false;
  auto ri = codegen::row_op_info(n);
  if (!ri.is_ok() || ri->column) return false;
  const Dims& in = head_dims(n.input(0));
  for (size_t k = 0; k + 1 < in.size(); ++k)
    if (ri->reduced[k] && in[k] != 1) return false;
  return ri->reduced.back();
}

// Whether an operand of dims `od` from outside the rows broadcasts against rows of `yd` along the
// last axis at most (a norm's weight [D], a scalar): it meets every row the same way in any
// arrangement of the rows.
bool along_rows_only(const Dims& od, const Dims& yd) {
  if (od.size() > yd.size()) return false;
  for (size_t k = 0; k + 1 < od.size(); ++k)
    if (od[k] != 1) return false;
  return od.empty() || od.back() == 1 || od.back() == yd.back();
}

struct Region {
  std::vector<Node*> nodes;                      // element-wise nodes and row ops
  std::vector<Node*> rows;                       // the row ops among them
  std::map<Value*, bool> values;                 // each value of the rows' shape -> whether per row
  std::vector<Node*> ends;                       // the Reshapes reading them
  std::vector<std::pair<Node*, size_t>> viewed;  // outside operands of the rows' own dims
};

// The nodes from Reshape `r`'s result to the Reshapes that read it, or nullopt when some value on
// the way is read otherwise, is a graph output, or a node is kept. The graph is in topological
// order, so every value of the rows a node reads is known when the node is reached.
std::optional<Region> region_of(const Graph& g, const Node& r, const std::set<std::string>& keep) {
  Value* y = r.outputs[0];
  const Dims yd = head_dims(y);
  const Dims yr = per_row(yd);
  Region reg;
  reg.values[y] = false;
  for (const auto& node : g.nodes()) {
    Node* u = node.get();
    if (std::none_of(u->inputs.begin(), u->inputs.end(), [&](Value* v) { return v && reg.values.count(v); }))
      continue;
    if (keep.count(u->name)) return std::nullopt;
    if (u->op_type == "Reshape" && u->domain.empty() && reg.values.count(u->inputs[0]) &&
        !reg.values.count(u->input(1)) && u->output(0) && u->output(0)->has_static_shape()) {
      reg.ends.push_back(u);
      continue;
    }
    // One result (a LayerNormalization's mean and inverse deviation not asked for).
    if (u->outputs.empty() ||
        std::any_of(u->outputs.begin() + 1, u->outputs.end(), [](const Value* v) { return v != nullptr; }))
      return std::nullopt;
    Value* out = u->outputs[0];
    if (out == nullptr || !out->has_static_shape() || (head_dims(out) != yd && head_dims(out) != yr) ||
        g.is_graph_output(out))
      return std::nullopt;
    const codegen::StitchRole role = codegen::stitch_role(*u);
    if (role == codegen::StitchRole::kRow) {
      // A row op over the rows themselves; its other inputs (a norm's weight and bias, a
      // reduction's axes) from outside, the same for every row.
      Value* x = u->inputs[0];
      if (!last_axis_row_op(*u) || !reg.values.count(x) || reg.values.at(x)) return std::nullopt;
      const bool reduce = u->op_type.rfind("Reduce", 0) == 0;
      for (size_t i = 1; i < u->inputs.size(); ++i) {
        const Value* o = u->input(i);
        if (o && (reg.values.count(u->inputs[i]) || !o->has_static_shape() ||
                  (!reduce && !along_rows_only(head_dims(o), yd))))
          return std::nullopt;
      }
    } else if (role == codegen::StitchRole::kPointwise) {
      for (size_t i = 0; i < u->inputs.size(); ++i) {
        const Value* o = u->input(i);
        if (o == nullptr || reg.values.count(u->inputs[i])) continue;
        if (!o->has_static_shape()) return std::nullopt;
        const Dims& od = head_dims(o);
        if (along_rows_only(od, yd)) continue;
        if (od != yd && od != yr) return std::nullopt;
        reg.viewed.push_back({u, i});  // another value of the rows' arrangement: viewed as the rows
      }
    } else {
      return std::nullopt;
    }
    reg.nodes.push_back(u);
    if (role == codegen::StitchRole::kRow) reg.rows.push_back(u);
    reg.values[out] = head_dims(out) == yr;
  }
  // Only rows some row op reduces: other element-wise work gains nothing from the heads apart.
  if (reg.ends.empty() || reg.rows.empty() || g.is_graph_output(y)) return std::nullopt;
  return reg;
}

// Row op `n`'s reduced axis set to `axis` (the last of the new dims).
void set_last_axis(Graph& g, Node& n, int64_t axis) {
  if (n.op_type.rfind("Reduce", 0) == 0) {
    if (n.inputs.size() > 1 && n.input(1) && n.input(1)->is_constant())
      n.inputs[1] = add_constant(g, n.name + "/axes", DType::kI64, {1}, {static_cast<double>(axis)});
    else if (n.has_attr("axes"))
      n.attrs["axes"] = std::vector<int64_t>{axis};
    return;
  }
  n.attrs["axis"] = axis;  // Softmax, LogSoftmax, LayerNormalization
}

}  // namespace

StatusOr<std::vector<std::string>> split_head_rows(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> lines;
  std::vector<Node*> reshapes;
  for (const auto& n : g.nodes())
    if (n->op_type == "Reshape" && n->domain.empty()) reshapes.push_back(n.get());
  std::unordered_set<const Node*> maybe_dead;
  std::unordered_set<const Node*> done;  // Reshapes already rewritten or read by a rewritten region
  for (Node* r : reshapes) {
    if (done.count(r) || keep.count(r->name)) continue;
    const Value *x = r->input(0), *y = r->output(0);
    if (x == nullptr || y == nullptr || !x->has_static_shape() || !y->has_static_shape()) continue;
    const std::optional<Dims> nd = unmerged(head_dims(x), head_dims(y));
    if (!nd) continue;
    std::optional<Region> reg = region_of(g, *r, keep);
    if (!reg) continue;
    const Dims yd = head_dims(y), nr = per_row(*nd);
    const std::string from = dims_to_string(yd);
    r->inputs.resize(2);
    r->inputs[1] = add_shape_constant(g, r->name + "/rows_apart", *nd);
    // The row ops as region_of found them: with the new dims and the old axes a row op may no
    // longer be one (a reduction over an axis of one element, as Ergo's RMSNorm after a ReduceSum
    // over [N, 1, D] has), so its role is not asked again until its axis is set.
    for (auto& [v, row] : reg->values) v->dims = row ? nr : *nd;
    const int64_t last = static_cast<int64_t>(nd->size()) - 1;
    for (Node* n : reg->rows) set_last_axis(g, *n, last);
    for (const auto& [n, i] : reg->viewed) {
      Value* v = n->inputs[i];
      const Dims vd = head_dims(v) == yd ? *nd : nr;
      if (v->is_constant()) {
        Value* c = add_typed_value(g, v->name + "/rows_apart", v->dtype, vd);
        c->constant = v->constant->reshaped(vd);
        n->inputs[i] = c;
      } else {
        n->inputs[i] = add_op(g, "Reshape", v->name + "/rows_apart",
                              {v, add_shape_constant(g, v->name + "/rows_apart_shape", vd)}, v->dtype, vd);
      }
    }
    for (Node* n : reg->rows)
      if (!last_axis_row_op(*n))
        return Status::internal(
            fmt::format("split_head_rows: {} no longer reduces the last axis alone", n->describe()));
    // The Reshapes that read the rows: their targets spelled out (a 0 copied the merged axis), and
    // a Reshape of one of them reads the rows itself (none at all when it gives the rows' shape).
    int direct = 0;
    const auto users = g.users();
    for (Node* e : reg->ends) {
      done.insert(e);
      Value* ev = e->output(0);
      e->inputs.resize(2);
      e->inputs[1] = add_shape_constant(g, e->name + "/shape", head_dims(ev));
      Value* rows = e->inputs[0];
      auto it = users.find(ev);
      if (it == users.end()) continue;
      for (Node* u : it->second) {
        if (u->op_type != "Reshape" || !u->domain.empty() || u->input(0) != ev || !u->output(0) ||
            !u->output(0)->has_static_shape() || keep.count(u->name) ||
            (u->inputs.size() > 1 && u->input(1) == ev))
          continue;
        done.insert(u);
        u->inputs.resize(2);
        u->inputs[0] = rows;
        u->inputs[1] = add_shape_constant(g, u->name + "/shape", head_dims(u->output(0)));
        if (head_dims(u->output(0)) == head_dims(rows) && !g.is_graph_output(u->output(0))) {
          g.replace_uses(u->output(0), rows);
          maybe_dead.insert(u);
        }
        ++direct;
      }
      maybe_dead.insert(e);
    }
    std::vector<std::string> ends;
    for (const Node* e : reg->ends) ends.push_back(e->describe());
    lines.push_back(
        fmt::format("{}: rows {} as {}, {} node(s) after it; {} read(s) them{}", r->describe(), from,
                    dims_to_string(*nd), reg->nodes.size(), fmt::join(ends, ", "),
                    direct ? fmt::format(" ({} Reshape(s) of them read the rows directly)", direct) : ""));
  }
  if (lines.empty()) return lines;
  g.remove_dead_nodes(&maybe_dead);
  g.remove_unused_values();
  RETURN_IF_ERROR(g.topo_sort());
  return lines;
}

}  // namespace stitch::fusion
