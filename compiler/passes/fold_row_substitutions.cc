// fold_row_substitutions: a triangular solve written out row by row, as one StitchRowSubstitution
// (ops/row_substitution.h).
//
// A step is the export of `attn[..., i, :i] = row + (row.unsqueeze(-1) * attn[..., :i, :i]).sum(-2)`
// with `row = attn[..., i, :i]`, as torch.onnx writes it once constants are folded:
//
//   R  = Gather(S, i) along the row axis (the second to last)
//   a  = R's first i elements (Slices that keep a leading corner)
//   P  = S's leading i x i corner (likewise)
//   n  = Add(a, ReduceSum(Mul(Unsqueeze(a) to [..., i, 1], P), the row axis, keepdims 0))
//   R' = R with its first i elements n: a ScatterND of rows 0..i-1 along axis 0, between
//        Transposes that bring the column axis there and back (or none when it is already there)
//   S' = ScatterElements(S, i everywhere, Unsqueeze(R') to one row, the row axis)
//
// Each value is checked by what it holds (shapes, constant indices, the corner a Slice keeps), not
// by how its parameters are spelled. A run of steps i, i + 1, ..., whose matrices between them
// nothing else reads, becomes one node from the first step's S to the last step's S'; the steps'
// nodes are then dead. Runs of one step stay as written. Float32 only (the op's reference then
// computes what the steps compute, bit for bit).
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ops/op_params.h"
#include "ops/op_util.h"
#include "ops/row_substitution.h"
#include "passes/pass.h"

namespace stitch {

namespace {

const Dims& shape(const Value* v) { return *v->dims; }

bool static_f32(const Value* v) { return v && v->dtype == DType::kF32 && v->has_static_shape(); }

// The node that computes `v` when it is of type `op` (default domain), else null.
const Node* made_by(const Value* v, const char* op) {
  if (!v || !v->producer || !v->producer->domain.empty() || v->producer->op_type != op) return nullptr;
  return v->producer->output(0) == v ? v->producer : nullptr;
}

// A Slice that keeps a leading corner of its input: every axis from 0, step 1.
const Value* corner_source(const Value* y) {
  const Node* n = made_by(y, "Slice");
  if (!n || n->inputs.size() < 3 || !n->input(1) || !n->input(2) || !static_f32(n->input(0)) ||
      !static_f32(y))
    return nullptr;
  std::optional<std::vector<int64_t>> v[4];
  for (size_t k = 1; k < 5; ++k) {
    const Value* p = n->input(k);
    if (!p) continue;
    if (!p->constant) return nullptr;
    v[k - 1] = p->constant->to_i64();
  }
  auto spec = ops::slice_spec(*n, shape(n->input(0)), *v[0], *v[1], v[2], v[3]);
  if (!spec.is_ok() || spec->base != 0 || spec->out != shape(y) ||
      spec->strides != ops::strides_of(shape(n->input(0))))
    return nullptr;
  return n->input(0);
}

// Whether `y` is the leading corner of `x` through at most two such Slices; `nodes` receives them.
bool corner_of(const Value* y, const Value* x, std::vector<const Node*>& nodes) {
  for (int hops = 0; hops < 2 && y; ++hops) {
    const Value* from = corner_source(y);
    if (!from) return false;
    nodes.push_back(y->producer);
    if (from == x) return true;
    y = from;
  }
  return false;
}

// The scalar a constant of one integer element holds.
std::optional<int64_t> scalar_of(const Value* v) {
  if (!v || !v->constant || v->constant->size() != 1 || !is_int(v->dtype)) return std::nullopt;
  return v->constant->get_i64(0);
}

// `v` through a Transpose by `perm` (or `v` itself when perm is empty).
const Value* through_transpose(const Value* v, const std::vector<int64_t>& perm) {
  if (perm.empty()) return v;
  const Node* t = made_by(v, "Transpose");
  if (!t) return nullptr;
  auto p = ops::transpose_perm(*t, static_cast<int64_t>(shape(t->input(0)).size()));
  return p.is_ok() && *p == perm ? t->input(0) : nullptr;
}

// The two operands of binary `n` in either order, `first` the one that satisfies `is_first`.
template <typename Pred>
std::optional<std::pair<const Value*, const Value*>> operands(const Node* n, Pred is_first) {
  if (!n || n->inputs.size() != 2) return std::nullopt;
  if (is_first(n->input(0))) return std::make_pair(n->input(0), n->input(1));
  if (is_first(n->input(1))) return std::make_pair(n->input(1), n->input(0));
  return std::nullopt;
}

struct Step {
  Value* in = nullptr;   // S
  Value* out = nullptr;  // S'
  int64_t i = 0;
  const Node* write = nullptr;        // the ScatterElements
  std::vector<const Node*> reads_in;  // the step's nodes that read S
};

// The permutation of a row of `rank` axes that brings its column axis (the last) to the front and
// back (it is its own inverse): none when the row has one axis.
std::vector<int64_t> column_to_front(int64_t rank) {
  std::vector<int64_t> perm;
  if (rank > 1) {
    for (int64_t d = 0; d < rank; ++d) perm.push_back(d);
    std::swap(perm[0], perm[static_cast<size_t>(rank - 1)]);
  }
  return perm;
}

// The ScatterND that writes `new_row`'s first `i` columns (between Transposes by `perm`): its
// indices rows 0..i-1 along axis 0, no reduction; or null.
const Node* prefix_scatter(const Value* new_row, const std::vector<int64_t>& perm, int64_t i) {
  const Node* sc = made_by(through_transpose(new_row, perm), "ScatterND");
  if (!sc || sc->inputs.size() != 3 || sc->attr_string("reduction", "none") != "none") return nullptr;
  const Value* idx = sc->input(1);
  if (!idx || !idx->constant || shape(idx) != Dims{i, 1}) return nullptr;
  for (int64_t k = 0; k < i; ++k)
    if (idx->constant->get_i64(k) != k) return nullptr;
  return sc;
}

std::optional<Step> match_step(Node& write) {
  if (write.op_type != "ScatterElements" || !write.domain.empty() || write.inputs.size() != 3)
    return std::nullopt;
  Value* s = write.input(0);
  Value* s_out = write.output(0);
  if (!static_f32(s) || !static_f32(s_out) || write.attr_string("reduction", "none") != "none")
    return std::nullopt;
  const Dims& sd = shape(s);
  const int64_t rank = static_cast<int64_t>(sd.size());
  if (rank < 2 || sd[rank - 1] != sd[rank - 2] || shape(s_out) != sd) return std::nullopt;
  const int64_t size = sd.back(), row_axis = rank - 2;
  auto axis = ops::norm_axis(write, write.attr_int("axis", 0), rank);
  if (!axis.is_ok() || *axis != row_axis) return std::nullopt;
  // The indices: one row, every element the same row i.
  const Value* idx = write.input(1);
  Dims one_row = sd;
  one_row[static_cast<size_t>(row_axis)] = 1;
  if (!idx || !idx->constant || shape(idx) != one_row || idx->constant->size() == 0) return std::nullopt;
  int64_t i = idx->constant->get_i64(0);
  for (int64_t k = 1; k < idx->constant->size(); ++k)
    if (idx->constant->get_i64(k) != i) return std::nullopt;
  if (i < 0) i += size;
  if (i < 1 || i >= size) return std::nullopt;
  // The update: the new row, as one row.
  const Node* up = made_by(write.input(2), "Unsqueeze");
  if (!up || shape(write.input(2)) != one_row) return std::nullopt;
  const Value* new_row = up->input(0);
  Dims row_dims = sd;
  row_dims.erase(row_dims.begin() + row_axis);
  if (!static_f32(new_row) || shape(new_row) != row_dims) return std::nullopt;
  // R' = R with its first i elements the Add's output n, which is R's first i elements a plus the sum.
  Dims prefix = row_dims;
  prefix.back() = i;
  const std::vector<int64_t> perm = column_to_front(static_cast<int64_t>(row_dims.size()));
  const Node* sc = prefix_scatter(new_row, perm, i);
  if (!sc) return std::nullopt;
  const Value* update = through_transpose(sc->input(2), perm);
  const Value* row = through_transpose(sc->input(0), perm);
  const Node* add = made_by(update, "Add");
  if (!add || !static_f32(update) || shape(update) != prefix || !row) return std::nullopt;
  // R = Gather(S, i) along the row axis.
  const Node* gather = made_by(row, "Gather");
  if (!gather || gather->input(0) != s) return std::nullopt;
  auto gaxis = ops::norm_axis(*gather, gather->attr_int("axis", 0), rank);
  const auto gi = scalar_of(gather->input(1));
  if (!gaxis.is_ok() || *gaxis != row_axis || !gi || shape(gather->input(1)).size() != 0 ||
      (*gi < 0 ? *gi + size : *gi) != i)
    return std::nullopt;
  Step st;
  st.in = s;
  st.out = s_out;
  st.i = i;
  st.write = &write;
  st.reads_in = {gather, &write};
  // a: the row's prefix; the sum: ReduceSum over the row axis of Unsqueeze(a) times S's corner.
  auto parts = operands(add, [&](const Value* v) {
    std::vector<const Node*> ns;
    return v && static_f32(v) && shape(v) == prefix && corner_of(v, row, ns);
  });
  if (!parts) return std::nullopt;
  const Value* a = parts->first;
  const Node* sum = made_by(parts->second, "ReduceSum");
  if (!sum || sum->attr_int("keepdims", 1) != 0 || !static_f32(sum->input(0))) return std::nullopt;
  auto red = ops::constant_reduce_axes(*sum, rank);
  if (!red.is_ok() || red->identity) return std::nullopt;
  for (int64_t d = 0; d < rank; ++d)
    if (red->reduced[static_cast<size_t>(d)] != (d == row_axis)) return std::nullopt;
  Dims corner = sd;
  corner[static_cast<size_t>(row_axis)] = corner[static_cast<size_t>(rank - 1)] = i;
  Dims column = prefix;
  column.push_back(1);
  const Node* mul = made_by(sum->input(0), "Mul");
  auto factors = operands(mul, [&](const Value* v) {
    const Node* u = made_by(v, "Unsqueeze");
    return u && u->input(0) == a && static_f32(v) && shape(v) == column;
  });
  if (!factors || !static_f32(factors->second) || shape(factors->second) != corner) return std::nullopt;
  std::vector<const Node*> corner_nodes;
  if (!corner_of(factors->second, s, corner_nodes)) return std::nullopt;
  st.reads_in.push_back(corner_nodes.back());
  return st;
}

}  // namespace

StatusOr<bool> fold_row_substitutions(Graph& g, PassContext& ctx) {
  (void)ctx;
  // The steps in graph order (so that runs, and the nodes that replace them, come in an order that
  // does not depend on addresses), each by the matrix it reads and the one it writes.
  std::vector<Step> steps;
  for (const auto& np : g.nodes())
    if (auto st = match_step(*np)) steps.push_back(*st);
  if (steps.empty()) return false;
  std::unordered_map<const Value*, size_t> reading, writing;
  for (size_t k = 0; k < steps.size(); ++k) {
    reading.emplace(steps[k].in, k);  // a matrix two steps read: the first of them
    writing[steps[k].out] = k;
  }
  const auto users = g.users();
  // Whether step `next` continues a run through the matrix `v` it reads: the step before wrote
  // `v` with the row before, and only `next`'s own nodes read it (it is no graph output).
  auto continues = [&](const Value* v, const Step& next) {
    auto w = writing.find(v);
    if (w == writing.end() || steps[w->second].i + 1 != next.i || g.is_graph_output(v)) return false;
    if (auto r = reading.find(v); r == reading.end() || &steps[r->second] != &next) return false;
    auto it = users.find(v);
    if (it == users.end()) return true;
    for (const Node* u : it->second)
      if (std::find(next.reads_in.begin(), next.reads_in.end(), u) == next.reads_in.end()) return false;
    return true;
  };
  struct Run {
    Value* in;
    Value* out;
    int64_t first, last;
    const Node* last_write;
  };
  std::vector<Run> runs;
  for (const Step& st : steps) {
    if (continues(st.in, st)) continue;  // inside a run that an earlier step starts
    Run r{st.in, st.out, st.i, st.i, st.write};
    for (auto it = reading.find(r.out); it != reading.end() && continues(r.out, steps[it->second]);
         it = reading.find(r.out)) {
      const Step& next = steps[it->second];
      r.out = next.out;
      r.last = next.i;
      r.last_write = next.write;
    }
    if (r.last > r.first) runs.push_back(r);
  }
  if (runs.empty()) return false;
  for (const Run& r : runs) {
    Node* old = const_cast<Node*>(r.last_write);
    // A constant added to the result and read nowhere else (the solve's `+ torch.eye(chunk_size)`)
    // is the op's addend: the kernel adds it as it finishes.
    Node* plus = nullptr;
    Value* addend = nullptr;
    if (auto it = users.find(r.out);
        it != users.end() && it->second.size() == 1 && !g.is_graph_output(r.out)) {
      Node* u = it->second[0];
      if (u->op_type == "Add" && u->domain.empty() && u->inputs.size() == 2 && u->output(0) &&
          u->output(0)->has_static_shape() && *u->output(0)->dims == *r.out->dims &&
          u->output(0)->dtype == DType::kF32) {
        Value* other = u->input(0) == r.out ? u->input(1) : u->input(0);
        if (other != r.out && ops::row_substitution_addend(other, r.out->dims->back()) &&
            other->dims->size() <= r.out->dims->size()) {
          plus = u;
          addend = other;
        }
      }
    }
    auto n = std::make_unique<Node>();
    n->name = g.unique_name(old->name + "/row_substitution");
    n->op_type = ops::kRowSubstitution;
    n->opset = old->opset;
    n->def = find_op("", ops::kRowSubstitution, n->opset);
    n->inputs = {r.in};
    n->attrs["first"] = r.first;
    n->attrs["last"] = r.last;
    n->attrs["steps_of"] = old->name;
    g.remove_nodes({old});
    n->outputs = {r.out};
    if (plus) {
      n->inputs.push_back(addend);
      n->outputs = {plus->output(0)};
      g.remove_nodes({plus});
    }
    g.add_node(std::move(n));
  }
  g.remove_dead_nodes();
  RETURN_IF_ERROR(g.topo_sort());
  return true;
}

}  // namespace stitch
