// The match behind expert_sums_as_gemms (see expert_sums_match.h): from the per-slot sum back
// through the slot weight, the second projection's pick and the activation to the first
// projection's pick; then a shared expert added to the sum.
#include "fusion/expert_sums_match.h"

#include <algorithm>
#include <unordered_set>

#include "codegen/stitch.h"
#include "fusion/graph_edit.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::fusion::expert_sums_internal {
namespace {

// The nearest of `v` and the values it is a view of (element order kept) with dims `want`, or null.
Value* viewed_as(Value* v, const Dims& want) {
  for (Value* cur = v; cur && cur->has_static_shape();) {
    if (*cur->dims == want) return cur;
    Node* p = cur->producer;
    if (!is_order_view(p) || !p->input(0)) return nullptr;
    cur = p->input(0);
  }
  return nullptr;
}

std::optional<std::vector<int64_t>> constant_ints(const Value* v) {
  if (!v || !v->is_constant() || !is_int(v->dtype)) return std::nullopt;
  return v->constant->to_i64();
}

// Whether `idx`, through views, holds each token's k experts along its last axis, each within
// [0, e) by construction: a TopK's indices (its k constant, its axis the last, over at most e
// elements), or a Concat along the last axis of ArgMaxes or ArgMins with kept axes over the last
// axis of at most e elements (PhiMoE's router picks its two experts so). The sum over the slots
// needs no more: a token that chose one expert twice gets the sum of the two weights, as it does
// from the per-slot form.
bool slot_experts_ok(const Value* idx, int64_t k, int64_t e) {
  const Value* cur = idx;
  while (cur && cur->producer && is_order_view(cur->producer) && cur->producer->input(0))
    cur = cur->producer->input(0);
  const Node* p = cur ? cur->producer : nullptr;
  if (!p || !p->domain.empty() || !cur->has_static_shape() || cur->dims->empty() || cur->dims->back() != k)
    return false;
  const int64_t rank = static_cast<int64_t>(cur->dims->size());
  // Whether node `n`'s axis attribute is the last of its input, whose length is at most e.
  auto over_last = [&](const Node& n, int64_t fallback) {
    const Value* in = n.input(0);
    if (!in || !in->has_static_shape() || in->dims->size() != static_cast<size_t>(rank)) return false;
    auto axis = ops::norm_axis(n, n.attr_int("axis", fallback), rank);
    return axis.is_ok() && *axis == rank - 1 && in->dims->back() <= e;
  };
  if (p->op_type == "TopK")
    return p->outputs.size() > 1 && p->output(1) == cur && p->input(1) &&
           constant_ints(p->input(1)) == std::vector<int64_t>{k} && over_last(*p, -1);
  if (p->op_type != "Concat") return false;
  auto axis = ops::norm_axis(*p, p->attr_int("axis", 0), rank);
  if (!axis.is_ok() || *axis != rank - 1) return false;
  for (const Value* in : p->inputs) {
    const Node* a = in ? in->producer : nullptr;
    if (!a || !a->domain.empty() || (a->op_type != "ArgMax" && a->op_type != "ArgMin") ||
        a->attr_int("keepdims", 1) != 1 || !over_last(*a, 0))
      return false;
  }
  return true;
}

// When `v` is a GatherND (batch_dims 0) of constant per-expert rows [E, ..] by indices [S, 1]:
// that constant and the indices; else nulls.
std::pair<Value*, Value*> gathered_rows(const Value* v, int64_t e, int64_t s) {
  const Node* p = v ? v->producer : nullptr;
  if (!p || p->op_type != "GatherND" || !p->domain.empty() || p->attr_int("batch_dims", 0) != 0 ||
      !p->input(0) || !p->input(1) || !p->input(0)->is_constant() || !v->has_static_shape())
    return {nullptr, nullptr};
  Value *data = p->input(0), *idx = p->input(1);
  const Dims& d = *data->dims;
  if (d.size() < 2 || d[0] != e || !idx->has_static_shape() || *idx->dims != Dims{s, 1} || v->dims->empty() ||
      (*v->dims)[0] != s || !std::equal(d.begin() + 1, d.end(), v->dims->begin() + 1, v->dims->end()))
    return {nullptr, nullptr};
  return {data, idx};
}

// Whether every non-constant input of the activation's nodes is on the chain, every constant
// broadcasts along the trailing axes only, and every axis a node names is past the slot axis.
bool activation_node_ok(const Node& n, const std::unordered_set<const Value*>& chain,
                        const std::unordered_map<const Value*, Value*>& biases, int64_t s) {
  if (!n.domain.empty()) return false;
  const Value* x = n.input(0);
  if (!x || !chain.count(x) || !x->has_static_shape() || x->dims->empty() || (*x->dims)[0] != s) return false;
  for (const Value* o : n.outputs)
    if (o && (!o->has_static_shape() || o->dims->empty() || (*o->dims)[0] != s)) return false;
  const int64_t rank = static_cast<int64_t>(x->dims->size());
  if (n.op_type == "Reshape") return n.inputs.size() == 2 && n.input(1) && n.input(1)->is_constant();
  if (n.op_type == "Split" || n.op_type == "Slice" || n.op_type == "Squeeze" || n.op_type == "Unsqueeze") {
    const int64_t axes_rank =
        n.op_type == "Unsqueeze" ? static_cast<int64_t>(n.output(0)->dims->size()) : rank;
    auto axes = node_axes(n, axes_rank);
    if (!axes) return false;
    for (int64_t a : *axes)
      if (a == 0) return false;
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.input(i) && !n.input(i)->is_constant()) return false;
    return true;
  }
  if (codegen::stitch_role(n) != codegen::StitchRole::kPointwise) return false;
  for (const Value* in : n.inputs) {
    if (!in || chain.count(in)) continue;
    // A bias gathered per slot: its expert's rows broadcast along the tokens.
    if (biases.count(in)) {
      if (n.outputs.size() != 1 || *in->dims != *n.output(0)->dims) return false;
      continue;
    }
    if (!in->is_constant() || !in->has_static_shape()) return false;
    const Dims& d = *in->dims;
    if (static_cast<int64_t>(d.size()) == rank && d[0] != 1) return false;
    if (static_cast<int64_t>(d.size()) > rank) return false;
  }
  return true;
}

// Whether `a` and `b` have the same leading dims and `b` one element along the last axis.
bool per_row_of(const Dims& a, const Dims& b) {
  return !a.empty() && a.size() == b.size() && b.back() == 1 && std::equal(a.begin(), a.end() - 1, b.begin());
}

// A shared expert added to the sum's output `out` (through views): an Add, no broadcast, of it and
// a MatMul of rows [.., Fs] (T rows) by constant weights [Fs, H], maybe times a gate of one value
// per token, each read by the next alone. Fills m.shared_* and the nodes that go. Neither its rows
// nor its gate can be computed from the sum, which only the views to the Add read, so the GEMM over
// every expert, which takes the Add's place, can read them.
void match_shared(const Graph& g, const Users& users, Value* out, Match& m) {
  const int64_t th = m.t * m.h;
  std::vector<Node*> views;
  Value* cur = out;
  Node* add = sole_reader(g, users, cur);
  while (is_order_view(add) && add->output(0)) {
    views.push_back(add);
    cur = add->output(0);
    add = sole_reader(g, users, cur);
  }
  if (!add || add->op_type != "Add" || !add->domain.empty() || add->inputs.size() != 2 || !add->output(0) ||
      !add->output(0)->has_static_shape())
    return;
  const Dims& od = *add->output(0)->dims;
  if (num_elements(od) != th || od.empty() || od.back() != m.h) return;
  Value* z = add->input(0) == cur ? add->input(1) : add->input(0);
  if (!z || z == cur || !z->has_static_shape() || *z->dims != od || !cur->has_static_shape() ||
      *cur->dims != od || z->dtype != out->dtype || sole_reader(g, users, z) != add || !z->producer ||
      !z->producer->domain.empty())
    return;
  Node* mul = nullptr;
  Value* gate = nullptr;
  Value* y = z;
  if (z->producer->op_type == "Mul" && z->producer->inputs.size() == 2) {
    mul = z->producer;
    for (size_t i = 0; i < 2 && !gate; ++i) {
      Value *a = mul->input(i), *b = mul->input(1 - i);
      if (a && b && a != b && a->has_static_shape() && *a->dims == od && b->has_static_shape() &&
          b->dtype == z->dtype && per_row_of(od, *b->dims) && a->producer &&
          a->producer->op_type == "MatMul") {
        y = a;
        gate = b;
      }
    }
    if (!gate || sole_reader(g, users, y) != mul) return;
  }
  Node* mm = y->producer;
  if (!mm || mm->op_type != "MatMul" || !mm->domain.empty() || !mm->input(0) || !mm->input(1)) return;
  Value *a = mm->input(0), *w = mm->input(1);
  if (!w->is_constant() || w->dims->size() != 2 || (*w->dims)[1] != m.h || w->dtype != z->dtype ||
      !a->has_static_shape() || a->dims->empty() || a->dims->back() != (*w->dims)[0] ||
      a->dtype != z->dtype || num_elements(*a->dims) != m.t * (*w->dims)[0])
    return;
  m.shared_add = add;
  m.shared_rows = a;
  m.shared_weights = w;
  m.shared_gate = gate;
  m.candidates.insert(m.candidates.end(), views.begin(), views.end());
  m.candidates.push_back(mm);
  if (mul) m.candidates.push_back(mul);
}

}  // namespace

Value* as_dims(Graph& g, Value* v, const Dims& want, const std::string& hint) {
  if (Value* a = viewed_as(v, want)) return a;
  return add_op(g, "Reshape", hint, {v, add_shape_constant(g, hint + "_shape", want)}, v->dtype, want);
}

std::optional<std::vector<int64_t>> node_axes(const Node& n, int64_t rank) {
  std::optional<std::vector<int64_t>> axes;
  if (n.op_type == "Split") {
    axes = std::vector<int64_t>{n.attr_int("axis", 0)};
  } else if (n.op_type == "Slice") {
    if (n.inputs.size() < 4 || !n.input(3)) return std::nullopt;
    axes = constant_ints(n.input(3));
  } else if (n.has_attr("axes")) {
    axes = n.attr_ints("axes");
  } else if (n.inputs.size() > 1 && n.input(1)) {
    axes = constant_ints(n.input(1));
  }
  if (!axes || axes->empty()) return std::nullopt;
  for (int64_t& a : *axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  return axes;
}

std::optional<Match> match(const Graph& g, const Users& users, Node* red, const std::set<std::string>& keep) {
  Match m;
  m.sum = red;
  Value *in = red->input(0), *out = red->output(0);
  if (!in || !out || !in->has_static_shape() || !out->has_static_shape() || in->dims->size() < 2 ||
      !is_float(in->dtype))
    return std::nullopt;
  const Dims& d = *in->dims;
  const int64_t rank = static_cast<int64_t>(d.size());
  auto axes = ops::constant_reduce_axes(*red, rank);
  if (!axes.is_ok() || axes->identity) return std::nullopt;
  for (int64_t a = 0; a < rank; ++a)
    if (axes->reduced[static_cast<size_t>(a)] != (a == rank - 2)) return std::nullopt;
  m.k = d[static_cast<size_t>(rank - 2)];
  m.h = d.back();
  m.t = num_elements(d) / (m.k * m.h);
  const int64_t s = m.t * m.k;
  if (m.k < 2 || m.h < 1) return std::nullopt;
  // Back from the sum: views, one Mul by the slots' weights and maybe one Add of a bias per slot, to
  // the second pick.
  Node* next = red;
  Value* cur = in;
  Node* second_bias_add = nullptr;
  Value* second_bias = nullptr;
  for (;;) {
    if (sole_reader(g, users, cur) != next) return std::nullopt;
    Node* p = cur->producer;
    if (is_order_view(p) && p->input(0)) {
      m.candidates.push_back(p);
      next = p;
      cur = p->input(0);
      continue;
    }
    if (p && p->op_type == "Mul" && p->domain.empty() && !m.slot_weight && p->inputs.size() == 2) {
      for (size_t i = 0; i < 2 && !m.slot_weight; ++i) {
        Value *a = p->input(i), *w = p->input(1 - i);
        if (!a || !w || !a->has_static_shape() || !w->has_static_shape() || a->dtype != in->dtype ||
            w->dtype != in->dtype || a->dims->size() != w->dims->size() || a->dims->back() != m.h ||
            w->dims->back() != 1 || num_elements(*a->dims) != s * m.h || num_elements(*w->dims) != s ||
            a == w)
          continue;
        bool rows = true;
        for (size_t j = 0; j + 1 < a->dims->size(); ++j) rows &= (*a->dims)[j] == (*w->dims)[j];
        if (!rows) continue;
        m.slot_weight = w;
        m.candidates.push_back(p);
        next = p;
        cur = a;
      }
      if (m.slot_weight) continue;
    }
    // The second projection's bias per slot, added before the weight.
    if (p && p->op_type == "Add" && p->domain.empty() && m.slot_weight && !second_bias_add &&
        p->inputs.size() == 2 && p->output(0)->has_static_shape()) {
      for (size_t i = 0; i < 2 && !second_bias_add; ++i) {
        Value *a = p->input(i), *b = p->input(1 - i);
        if (!a || !b || a == b || !b->has_static_shape() || *b->dims != *p->output(0)->dims ||
            !a->has_static_shape() || *a->dims != *b->dims || b->dims->size() != 2 || b->dtype != in->dtype ||
            !b->producer || b->producer->op_type != "GatherND")
          continue;
        second_bias_add = p;
        second_bias = b;
        m.candidates.push_back(p);
        next = p;
        cur = a;
      }
      if (second_bias_add) continue;
    }
    break;
  }
  Node* p2 = cur->producer;
  if (!m.slot_weight || !p2 || p2->op_type != "GatherND" || !p2->domain.empty() ||
      p2->attr_int("batch_dims", 0) != 1 || !p2->input(0) || !p2->input(1))
    return std::nullopt;
  Value *per2 = p2->input(0), *idx2 = p2->input(1);
  if (!per2->has_static_shape() || per2->dims->size() != 3 || (*per2->dims)[0] != s ||
      (*per2->dims)[2] != m.h || !idx2->has_static_shape() || *idx2->dims != Dims{s, 1} ||
      sole_reader(g, users, per2) != p2 || !is_order_view(per2->producer))
    return std::nullopt;
  m.e = (*per2->dims)[1];
  if (second_bias) {
    auto [rows, idx] = gathered_rows(second_bias, m.e, s);
    if (!rows || viewed_as(idx, {s, 1}) != idx2 || *rows->dims != Dims{m.e, m.h} ||
        sole_reader(g, users, second_bias) != second_bias_add)
      return std::nullopt;
    m.second_bias = rows;
    m.candidates.push_back(second_bias->producer);
  }
  Node* r2 = per2->producer;
  Value* y2 = r2->input(0);
  if (!y2 || sole_reader(g, users, y2) != r2 || !y2->producer || y2->producer->op_type != "MatMul" ||
      !y2->producer->domain.empty())
    return std::nullopt;
  Node* mm2 = y2->producer;
  Value *a2 = mm2->input(0), *b2 = mm2->input(1);
  if (!a2 || !b2 || !b2->is_constant() || !a2->has_static_shape() || a2->dims->size() != 2 ||
      (*a2->dims)[0] != s || b2->dims->size() != 2 || (*b2->dims)[1] != m.e * m.h ||
      (*b2->dims)[0] != (*a2->dims)[1] || *y2->dims != Dims{s, m.e * m.h} || b2->dtype != in->dtype ||
      a2->dtype != in->dtype || sole_reader(g, users, a2) != mm2)
    return std::nullopt;
  m.f = (*a2->dims)[1];
  m.second = mm2;
  m.second_pick = p2;
  m.experts = idx2;
  if (!slot_experts_ok(idx2, m.k, m.e)) return std::nullopt;
  m.candidates.insert(m.candidates.end(), {p2, r2, mm2});
  // Back from the second projection's operand to the first pick: the activation.
  std::unordered_set<const Value*> chain_values;
  std::unordered_set<Node*> nodes;
  std::vector<Value*> todo = {a2};
  while (!todo.empty()) {
    Value* v = todo.back();
    todo.pop_back();
    if (chain_values.count(v) || m.first_biases.count(v)) continue;
    if (auto [rows, idx] = gathered_rows(v, m.e, s);
        rows && viewed_as(idx, {s, 1}) == idx2 && rows->dtype == v->dtype) {
      m.first_biases[v] = rows;
      m.candidates.push_back(v->producer);
      continue;
    }
    chain_values.insert(v);
    Node* p = v->producer;
    if (!p) return std::nullopt;
    // The start: the first pick [T, k, M] viewed [S, ..] (all_expert_gemms' Reshape back).
    if (is_order_view(p) && p->input(0) && p->input(0)->producer &&
        p->input(0)->producer->op_type == "GatherND" &&
        p->input(0)->producer->attr_int("batch_dims", 0) == 1) {
      if (m.start && m.start != v) return std::nullopt;
      m.start = v;
      m.first_pick = p->input(0)->producer;
      if (sole_reader(g, users, p->input(0)) != p) return std::nullopt;
      m.candidates.insert(m.candidates.end(), {p, m.first_pick});
      continue;
    }
    if (nodes.insert(p).second)
      for (Value* i : p->inputs)
        if (i && !i->is_constant()) todo.push_back(i);
  }
  if (!m.start || !m.start->has_static_shape() || m.start->dims->empty() || (*m.start->dims)[0] != s)
    return std::nullopt;
  for (const auto& np : g.nodes())
    if (nodes.count(np.get())) m.activation.push_back(np.get());
  for (Node* n : m.activation) {
    if (!activation_node_ok(*n, chain_values, m.first_biases, s)) return std::nullopt;
    for (const Value* o : n->outputs) {  // read on the chain only
      if (!o) continue;
      if (g.is_graph_output(o)) return std::nullopt;
      if (auto it = users.find(o); it != users.end())
        for (const Node* r : it->second)
          if (!nodes.count(const_cast<Node*>(r)) && !(o == a2 && r == mm2)) return std::nullopt;
    }
  }
  if (auto it = users.find(m.start); it != users.end())
    for (const Node* r : it->second)
      if (!nodes.count(const_cast<Node*>(r))) return std::nullopt;
  m.candidates.insert(m.candidates.end(), m.activation.begin(), m.activation.end());
  // The first pick: every expert's part of the first product per token, [T, E, M], by the same
  // slots' experts viewed [T, k, 1].
  Node* p1 = m.first_pick;
  Value *per1 = p1->input(0), *idx1 = p1->input(1);
  if (!per1 || !idx1 || !per1->has_static_shape() || per1->dims->size() != 3 || (*per1->dims)[0] != m.t ||
      (*per1->dims)[1] != m.e || !idx1->has_static_shape() || *idx1->dims != Dims{m.t, m.k, 1} ||
      viewed_as(idx1, {s, 1}) != idx2 || num_elements(*m.start->dims) != s * (*per1->dims)[2] ||
      m.start->dtype != per1->dtype)
    return std::nullopt;
  if (is_order_view(idx1->producer)) m.candidates.push_back(idx1->producer);
  // The first projection: a MatMul by constant weights [K, E * M] of the tokens' rows, read by the
  // view per expert alone. The new one reads the rows as the value they view whose last axis is K
  // (a norm's output [B, S, K], not flattened), so that a row scale can move past it as past the
  // router's projection.
  Node* r1 = per1->producer;
  if (!is_order_view(r1) || !r1->input(0) || sole_reader(g, users, per1) != p1) return std::nullopt;
  Value* y1 = r1->input(0);
  Node* mm1 = y1->producer;
  if (!mm1 || mm1->op_type != "MatMul" || !mm1->domain.empty() || sole_reader(g, users, y1) != r1 ||
      !mm1->input(0) || !mm1->input(1) || !mm1->input(1)->is_constant() || !y1->has_static_shape() ||
      num_elements(*y1->dims) != m.t * m.e * (*per1->dims)[2] || !mm1->input(0)->has_static_shape())
    return std::nullopt;
  m.first = mm1;
  m.tokens = mm1->input(0);
  for (Node* p = m.tokens->producer; is_order_view(p) && p->input(0) && p->input(0)->has_static_shape() &&
                                     p->input(0)->dims->back() == m.tokens->dims->back();
       p = m.tokens->producer) {
    m.tokens = p->input(0);
  }
  m.candidates.insert(m.candidates.end(), {r1, mm1});
  for (Node* p = mm1->input(0)->producer; is_order_view(p); p = p->input(0)->producer)
    m.candidates.push_back(p);
  // The views from the TopK's indices and from the weights to their per-slot shapes go with the
  // slot form when nothing else reads them (the new weights read the [T, k] values).
  for (const Value* v : {m.experts, m.slot_weight})
    for (Node* p = v->producer; is_order_view(p); p = p->input(0)->producer) m.candidates.push_back(p);
  for (const Node* n : m.candidates)
    if (keep.count(n->name)) return std::nullopt;
  if (keep.count(red->name)) return std::nullopt;
  Match with_shared = m;
  match_shared(g, users, out, with_shared);
  if (with_shared.shared_add) {
    bool kept = keep.count(with_shared.shared_add->name) > 0;
    for (size_t i = m.candidates.size(); i < with_shared.candidates.size(); ++i)
      kept |= keep.count(with_shared.candidates[i]->name) > 0;
    if (!kept) return with_shared;
  }
  return m;
}

}  // namespace stitch::fusion::expert_sums_internal
