// expert_sums_as_gemms (see expert_sums.h): with the match (expert_sums_match.h), clone the
// activation at [T, E, ..] in place of [S, ..], weight it per expert and multiply by the second
// projection's weights laid out [E * F, H], a shared expert's rows and weights joined to them.
#include "fusion/expert_sums.h"

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <unordered_set>

#include "fusion/expert_sums_match.h"
#include "fusion/graph_edit.h"
#include "ops/op_util.h"

namespace stitch::fusion {
namespace {

using expert_sums_internal::as_dims;
using expert_sums_internal::Match;
using expert_sums_internal::node_axes;
using expert_sums_internal::Users;

// The activation node `n` cloned at [T, E, ..] (every value's slot axis split into tokens and
// experts), its inputs mapped through `now`.
void clone_activation(Graph& g, const Node& n, std::unordered_map<const Value*, Value*>& now,
                      const std::unordered_map<const Value*, Value*>& biases, int64_t t, int64_t e) {
  Node* c = add_copy_node(g, n, g.unique_name(n.name + "/per_expert"));
  auto wide = [&](const Dims& d) {
    Dims w{t, e};
    w.insert(w.end(), d.begin() + 1, d.end());
    return w;
  };
  const int64_t rank = static_cast<int64_t>(n.input(0)->dims->size());
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    Value* in = n.inputs[i];
    if (in && now.count(in)) {
      c->inputs.push_back(now.at(in));
      continue;
    }
    if (in && biases.count(in)) {
      c->inputs.push_back(biases.at(in));
      continue;
    }
    c->inputs.push_back(in);
  }
  auto shifted = [&](int64_t axes_rank) {
    std::vector<int64_t> axes = *node_axes(n, axes_rank);
    for (int64_t& a : axes) ++a;
    return axes;
  };
  auto axes_constant = [&](const std::vector<int64_t>& axes) {
    Value* v =
        add_typed_value(g, n.name + "/per_expert_axes", DType::kI64, {static_cast<int64_t>(axes.size())});
    v->constant = Tensor::vector_i64(axes);
    return v;
  };
  if (n.op_type == "Reshape") {
    c->inputs[1] = add_shape_constant(g, n.name + "/per_expert_shape", wide(*n.output(0)->dims));
  } else if (n.op_type == "Split") {
    c->attrs["axis"] = shifted(rank).front();
  } else if (n.op_type == "Slice") {
    c->inputs[3] = axes_constant(shifted(rank));
  } else if (n.op_type == "Squeeze" || n.op_type == "Unsqueeze") {
    const std::vector<int64_t> axes =
        shifted(n.op_type == "Unsqueeze" ? static_cast<int64_t>(n.output(0)->dims->size()) : rank);
    if (n.has_attr("axes"))
      c->attrs["axes"] = axes;
    else
      c->inputs[1] = axes_constant(axes);
  }
  for (const Value* o : n.outputs) {
    if (!o) {
      c->outputs.push_back(nullptr);
      continue;
    }
    Value* w = add_typed_value(g, o->name + "/per_expert", o->dtype, wide(*o->dims));
    w->producer = c;
    c->outputs.push_back(w);
    now[o] = w;
  }
}

}  // namespace

StatusOr<std::vector<std::string>> expert_sums_as_gemms(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  std::vector<Match> matches;
  {
    const Users users = g.users();
    std::unordered_set<const Node*> taken;
    for (const auto& np : g.nodes()) {
      if (np->op_type != "ReduceSum" || !np->domain.empty()) continue;
      auto m = expert_sums_internal::match(g, users, np.get(), keep);
      if (!m) continue;
      bool overlap = false;
      for (const Node* c : m->candidates) overlap |= !taken.insert(c).second;
      if (!overlap) matches.push_back(std::move(*m));
    }
  }
  std::vector<Node*> dead;
  std::unordered_set<const Node*> candidates;
  for (Match& m : matches) {
    const std::string base = m.sum->name + "/every_expert";
    const DType wt = m.slot_weight->dtype;
    // The token's weight for each expert: the slot's where the expert is the slot's, summed.
    Value* experts = as_dims(g, m.experts, {m.t, m.k}, base + "/slot_experts");
    Value* weights = as_dims(g, m.slot_weight, {m.t, m.k}, base + "/slot_weights");
    Value* ids = add_positions(g, base + "/expert_ids", experts->dtype, m.e);
    Value* zero = add_constant(g, base + "/zero", wt, {}, {0.0});
    Value* per_expert = nullptr;
    for (int64_t j = 0; j < m.k; ++j) {
      const std::string hj = fmt::format("{}/slot{}", base, j);
      Value* ej = add_typed_value(g, hj + "_expert", experts->dtype, {m.t, 1});
      add_slice(g, hj + "_expert", experts, 1, j, j + 1, ej);
      Value* wj = add_typed_value(g, hj + "_weight", wt, {m.t, 1});
      add_slice(g, hj + "_weight", weights, 1, j, j + 1, wj);
      Value* is = add_op(g, "Equal", hj + "_is_expert", {ej, ids}, DType::kBool, {m.t, m.e});
      Value* term = add_op(g, "Where", hj + "_per_expert", {is, wj, zero}, wt, {m.t, m.e});
      per_expert = per_expert ? add_op(g, "Add", hj + "_sum", {per_expert, term}, wt, {m.t, m.e}) : term;
    }
    // The activation on every expert's part of the first product.
    std::unordered_map<const Value*, Value*> now;
    Dims first_dims = *m.tokens->dims;
    first_dims.back() = (*m.first->input(1)->dims)[1];
    Value* first = add_op(g, "MatMul", m.first->name + "/tokens", {m.tokens, m.first->input(1)},
                          m.first->output(0)->dtype, first_dims);
    Dims start_dims{m.t, m.e};
    start_dims.insert(start_dims.end(), m.start->dims->begin() + 1, m.start->dims->end());
    now[m.start] = as_dims(g, first, start_dims, base + "/first_product");
    for (const Node* n : m.activation) clone_activation(g, *n, now, m.first_biases, m.t, m.e);
    Value* act = now.at(m.second->input(0));
    Dims col{m.t, m.e};
    col.insert(col.end(), act->dims->size() - 2, 1);
    Value* weight_col = as_dims(g, per_expert, col, base + "/weights");
    Value* weighted = add_op(g, "Mul", base + "/weighted", {act, weight_col}, act->dtype, *act->dims);
    // fc2's weights [F, E * H] (each expert's columns side by side) as [E * F, H]; with a bias,
    // each expert's part of the rows carries its weight as one more column and the weights its bias
    // rows as one more row each, [E * (F + 1), H]: the same GEMM adds the weighted biases.
    const Value* b2 = m.second->input(1);
    const int64_t fb = m.second_bias ? m.f + 1 : m.f;
    Value* per_expert_rows = weighted;  // [T, E, ..] of fb elements per expert
    Value* w2 = add_typed_value(g, b2->name + "/per_expert_rows", b2->dtype, {m.e * fb, m.h});
    if (m.second_bias) {
      Value* parts = add_op(g, "Concat", base + "/with_bias_weight",
                            {as_dims(g, weighted, {m.t, m.e, m.f}, base + "/weighted_rows"),
                             as_dims(g, per_expert, {m.t, m.e, 1}, base + "/bias_weights")},
                            act->dtype, {m.t, m.e, fb});
      parts->producer->attrs["axis"] = int64_t{2};
      per_expert_rows = parts;
    }
    // The weights' rows, computed when first read (Tensor::deferred): the rewrite is judged on a
    // copy of the graph, which planning reads by shape.
    std::function<Tensor()> expert_rows;
    if (m.second_bias) {
      expert_rows = [wt = *b2->constant, bt = *m.second_bias->constant, e = m.e, f = m.f, h = m.h, fb] {
        const std::vector<double> wv = wt.to_f64(), bv = bt.to_f64();
        std::vector<double> out(static_cast<size_t>(e * fb * h));
        for (int64_t x = 0; x < e; ++x)
          for (int64_t y = 0; y < fb; ++y)
            for (int64_t z = 0; z < h; ++z)
              out[static_cast<size_t>((x * fb + y) * h + z)] =
                  y < f ? wv[static_cast<size_t>(y * e * h + x * h + z)] : bv[static_cast<size_t>(x * h + z)];
        return Tensor::from_f64(wt.dtype(), {e * fb, h}, out);
      };
    } else {
      expert_rows = [wt = *b2->constant, e = m.e, f = m.f, h = m.h] {
        return ops::copy_strided(wt, {e, f, h}, 0, {h, e * h, 1}).reshaped({e * f, h});
      };
    }
    // A shared expert: its rows, times its gate, one more part of the rows, and its weights one
    // more part of the weights' rows; the same GEMM adds it.
    int64_t fs = 0;
    Value* rows = nullptr;
    if (!m.shared_add) {
      rows = as_dims(g, per_expert_rows, {m.t, m.e * fb}, base + "/rows");
    } else {
      fs = (*m.shared_weights->dims)[0];
      Value* shared = as_dims(g, m.shared_rows, {m.t, fs}, base + "/shared_rows");
      if (m.shared_gate)
        shared = add_op(g, "Mul", base + "/shared_weighted",
                        {shared, as_dims(g, m.shared_gate, {m.t, 1}, base + "/shared_gate")}, act->dtype,
                        {m.t, fs});
      const int64_t routed = m.e * fb;
      if (fs % fb == 0) {
        // Its rows as fs / fb more experts' [T, fs / fb, fb] after the experts' [T, E, fb], so that
        // the join is along the experts' axis, which a row kernel over the router's rows can take.
        Value* per = as_dims(g, per_expert_rows, {m.t, m.e, fb}, base + "/per_expert_rows");
        Value* more = as_dims(g, shared, {m.t, fs / fb, fb}, base + "/shared_as_experts");
        Value* both =
            add_op(g, "Concat", base + "/with_shared", {per, more}, act->dtype, {m.t, m.e + fs / fb, fb});
        both->producer->attrs["axis"] = int64_t{1};
        rows = as_dims(g, both, {m.t, routed + fs}, base + "/rows_with_shared");
      } else {
        rows = add_op(g, "Concat", base + "/with_shared",
                      {as_dims(g, per_expert_rows, {m.t, routed}, base + "/rows"), shared}, act->dtype,
                      {m.t, routed + fs});
        rows->producer->attrs["axis"] = int64_t{1};
      }
      // The shared expert's weights below the routed experts' rows.
      expert_rows = [routed_rows = std::move(expert_rows), ws = *m.shared_weights->constant,
                     rows = routed + fs, h = m.h] {
        const Tensor wr = routed_rows();
        Tensor stacked(wr.dtype(), {rows, h});
        std::memcpy(stacked.data(), wr.data(), static_cast<size_t>(wr.byte_size()));
        std::memcpy(stacked.data() + wr.byte_size(), ws.data(), static_cast<size_t>(ws.byte_size()));
        return stacked;
      };
      w2->dims = Dims{routed + fs, m.h};
    }
    w2->constant = Tensor::deferred(w2->dtype, *w2->dims, std::move(expert_rows));
    Value* y = add_op(g, "MatMul", base, {rows, w2}, act->dtype, {m.t, m.h});
    // The result: the sum's output, or with a shared expert the Add's.
    Node* last = m.shared_add ? m.shared_add : m.sum;
    Value* out = last->output(0);
    add_op_writing(g, "Reshape", base + "/back", {y, add_shape_constant(g, base + "/back_shape", *out->dims)},
                   out);
    last->outputs[0] = nullptr;
    dead.push_back(last);
    if (m.shared_add) candidates.insert(m.sum);
    candidates.insert(m.candidates.begin(), m.candidates.end());
    log.push_back(fmt::format(
        "{}: the {} slots of each of {} tokens as one GEMM over every expert, [{}, {}] by '{}'{} as [{}, "
        "{}]{}; "
        "the activation ({} nodes{}) on each of the {} experts' part of {}'s product, times the token's "
        "weight for the expert (was {} over each slot, {} picking its expert's part)",
        m.sum->describe(), m.k, m.t, m.t, m.e * fb + fs, b2->name,
        m.second_bias ? fmt::format(" with the biases '{}'", m.second_bias->name) : "", m.e * fb, m.h,
        m.shared_add
            ? fmt::format(" and the shared expert's '{}' [{}, {}]{}, {} gone", m.shared_weights->name, fs,
                          m.h, m.shared_gate ? fmt::format(" times '{}'", m.shared_gate->name) : "",
                          m.shared_add->describe())
            : "",
        m.activation.size(),
        m.first_biases.empty() ? "" : fmt::format(", {} bias(es) per expert", m.first_biases.size()), m.e,
        m.first->describe(), m.second->describe(), m.second_pick->describe()));
  }
  if (dead.empty()) return log;
  g.remove_nodes(dead);
  g.remove_dead_nodes(&candidates);
  g.remove_unused_values();
  RETURN_IF_ERROR(g.topo_sort());
  return log;
}

StatusOr<RewriteResult> expert_sums_as_gemms_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                        const std::optional<Cost>& before) {
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return expert_sums_as_gemms(c, o.no_fuse); }, "--no-expert-sums",
      /*strict=*/false, before);
}

}  // namespace stitch::fusion
