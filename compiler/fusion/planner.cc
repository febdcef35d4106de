// Planner bookkeeping: components, group legality and cost (memoised), cycle checks, the group
// order, and the finished plan with its reasons and rejected merges.
#include "fusion/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>

#include "codegen/lower.h"
#include "ops/op_util.h"
#include "ops/row_substitution.h"
#include "support/check.h"

namespace stitch::fusion {

Planner::Planner(const Graph& g, const FusionOptions& o, bool fold, std::set<const Node*> contract,
                 Analyses* analyses)
    : g_(g),
      o_(o),
      fold_(fold),
      start_(Clock::now()),
      contract_(std::move(contract)),
      analyses_(analyses ? analyses : &own_analyses_) {
  for (const auto& n : g.nodes()) {
    idx_[n.get()] = static_cast<int>(nodes_.size());
    nodes_.push_back(n.get());
  }
  users_ = g.users();
  output_uses_.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (const Value* v : nodes_[i]->outputs) {
      if (!v) continue;
      OutputUse use{v, g.is_graph_output(v), {}};
      if (auto it = users_.find(v); it != users_.end())
        for (const Node* u : it->second) use.readers.push_back(idx_.at(u));
      output_uses_[i].push_back(std::move(use));
    }
  if (fold) folds_ = codegen::find_gemm_folds(g, contract_, codegen::FoldOptions(true, o.approximate_gelu));
  const size_t n = nodes_.size();
  succ_.resize(n);
  pred_.resize(n);
  auto add_edge = [&](int from, int to) {
    auto& pred = pred_[static_cast<size_t>(to)];
    if (std::find(pred.begin(), pred.end(), from) != pred.end()) return;
    pred.push_back(from);
    succ_[static_cast<size_t>(from)].push_back(to);
  };
  fusible_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Node* x = nodes_[i];
    folded_.push_back(folds_.folded.count(x) > 0);
    const codegen::StitchRole role = codegen::stitch_role(*x);
    sized_.push_back(role != codegen::StitchRole::kView);
    // An in-place TensorScatter (a KV cache's update written into the cache input) may join the
    // kernel that computes its update, which then stores it into the cache (StitchInfo::scattered).
    fusible_[i] = (role != codegen::StitchRole::kNone || ops::tensor_scatter_in_place(g, *x)) &&
                  ((role != codegen::StitchRole::kContraction && role != codegen::StitchRole::kTiledGemm) ||
                   contract_.count(x)) &&
                  !o.no_fuse.count(x->name) && !folded_[i];
    for (const Value* v : x->inputs)
      if (v && v->producer && idx_.count(v->producer)) add_edge(idx_.at(v->producer), static_cast<int>(i));
    alone_.push_back(single_cost(*x, o.device));
    single_.push_back(folded_[i] ? Cost{} : alone_.back());
  }
  // A residual the call reads as its C (a convolution's z): the call runs after the residual's
  // producer (which comes earlier in graph order, so edges still point forward), and reads it once
  // more.
  for (const auto& [mm, f] : folds_.by_matmul) {
    if (!f.residual) continue;
    const int i = idx_.at(mm);
    const int64_t read = num_elements(*f.residual->dims) * dtype_size(f.residual->dtype);
    single_[static_cast<size_t>(i)].time += static_cast<double>(read) / (o.device.dram_bw * o.device.bw_eff);
    single_[static_cast<size_t>(i)].library_bytes += read;
    if (!f.residual->producer || !idx_.count(f.residual->producer)) continue;
    const int p = idx_.at(f.residual->producer);
    STITCH_CHECK(p < i, "a residual folded into {} is produced after it", mm->describe());
    add_edge(p, i);
  }
}

bool Planner::out_of_time() {
  if (work_ > o_.work_limit)
    budget_spent_ = true;
  else if (std::chrono::duration<double>(Clock::now() - start_).count() > o_.time_limit_s)
    timed_out_ = true;
  return budget_spent_ || timed_out_;
}

Part Planner::singletons() const {
  Part p;
  p.gid.resize(nodes_.size());
  p.groups.resize(nodes_.size());
  p.count = nodes_.size();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    p.gid[i] = static_cast<int>(i);
    p.groups[i] = {static_cast<int>(i)};
  }
  return p;
}

std::vector<std::vector<int>> Planner::components() const {
  std::vector<int> comp(nodes_.size(), -1);
  std::vector<std::vector<int>> out;
  for (size_t s = 0; s < nodes_.size(); ++s) {
    if (!fusible_[s] || comp[s] >= 0) continue;
    std::vector<int> members, stack{static_cast<int>(s)};
    comp[s] = static_cast<int>(out.size());
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      members.push_back(x);
      for (const auto* adj : {&succ_[x], &pred_[x]})
        for (int y : *adj)
          if (fusible_[y] && comp[y] < 0) {
            comp[y] = comp[s];
            stack.push_back(y);
          }
    }
    std::sort(members.begin(), members.end());
    out.push_back(members);
  }
  return out;
}

int Planner::group_size(const std::vector<int>& m) const {
  return static_cast<int>(
      std::count_if(m.begin(), m.end(), [&](int i) { return sized_[static_cast<size_t>(i)]; }));
}

const Eval& Planner::eval(const std::vector<int>& m) {
  work_ += kLookStep;
  if (auto it = memo_.find(m); it != memo_.end()) return *it->second;
  // This planner's own verdicts (a single node's cost, a group it may not form) are kept in
  // own_evals_; an analysis is kept once, in the Analyses the planners of one graph share, and the
  // memo points at it rather than holding a copy.
  auto own = [&](Eval e) -> const Eval& {
    own_evals_.push_back(std::move(e));
    return *(memo_[m] = &own_evals_.back());
  };
  Eval e;
  if (m.size() == 1) {
    e.ok = true;
    e.cost = single_[m[0]];
    return own(std::move(e));
  }
  if (group_size(m) > o_.max_group_size) {
    e.why =
        fmt::format("the group would exceed --max-group-size {} (nodes other than views)", o_.max_group_size);
    return own(std::move(e));
  }
  std::vector<const Node*> ns;
  // The members' names as a set only when some are to be kept apart: building it for every group
  // looked at was 7% of a MoE export's planning.
  if (!o_.keep_apart.empty()) {
    std::set<std::string> names;
    for (int i : m) names.insert(nodes_[i]->name);
    for (const auto& apart : o_.keep_apart)
      if (std::includes(names.begin(), names.end(), apart.begin(), apart.end())) {
        e.why = fmt::format(
            "a kernel of {} of these nodes went over a budget checked after planning (ptxas's registers "
            "and spills, or --max-evaluations): they are kept apart",
            apart.size());
        return own(std::move(e));
      }
  }
  for (int i : m) {
    if (!fusible_[i]) {
      e.why = o_.no_fuse.count(nodes_[i]->name) ? fmt::format("{} is in --no-fuse", nodes_[i]->describe())
              : folded_[i] ? fmt::format("{} is {}", nodes_[i]->describe(), folds_.folded.at(nodes_[i]))
              : nodes_[i]->op_type == ops::kRowSubstitution
                  ? fmt::format("{} runs its steps in order in a kernel of its own", nodes_[i]->describe())
                  : fmt::format("{} cannot be stitched", nodes_[i]->describe());
      return own(std::move(e));
    }
    ns.push_back(nodes_[i]);
  }
  if (auto it = analyses_->find(m); it != analyses_->end()) return *(memo_[m] = &it->second);
  work_ += kAnalysisStep * static_cast<int64_t>(m.size());
  auto info = codegen::analyze_stitch(ns, escaping(m));
  if (!info.is_ok()) {
    e.why = info.status().message();
  } else {
    e.ok = true;
    e.info = std::move(*info);
    e.cost = stitched_cost(ns, e.info, o_.device);
  }
  Eval& kept = (*analyses_)[m];  // elements of an unordered_map stay where they are as it grows
  kept = std::move(e);
  memo_[m] = &kept;
  return kept;
}

std::set<const Value*> Planner::escaping(const std::vector<const Node*>& ns) const {
  return codegen::group_outputs(g_, users_, ns);
}

std::set<const Value*> Planner::escaping(const std::vector<int>& m) const {
  if (member_marks_.size() < nodes_.size()) member_marks_.assign(nodes_.size(), 0);
  for (int x : m) member_marks_[static_cast<size_t>(x)] = 1;
  std::set<const Value*> out;
  for (int x : m)
    for (const OutputUse& use : output_uses_[static_cast<size_t>(x)]) {
      bool outside = use.graph_output;
      for (int r : use.readers) outside = outside || !member_marks_[static_cast<size_t>(r)];
      if (outside) out.insert(use.v);
    }
  for (int x : m) member_marks_[static_cast<size_t>(x)] = 0;
  return out;
}

std::vector<int> Planner::merged(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> m;
  m.reserve(a.size() + b.size());  // growing it was 8% of a MoE model's planning
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(m));
  return m;
}

bool Planner::cycle(const Part& p, const std::vector<int>& ids) const {
  auto in = [&](int id) { return std::binary_search(ids.begin(), ids.end(), id); };
  int last = 0;
  for (int id : ids) last = std::max(last, p.groups[static_cast<size_t>(id)].back());
  // Groups seen, marked in cycle_marks_ (cleared before returning) and listed in cycle_seen_.
  if (cycle_marks_.size() < p.groups.size()) cycle_marks_.assign(p.groups.size(), 0);
  cycle_seen_.clear();
  cycle_stack_.clear();
  auto see = [&](int gi) {
    char& mark = cycle_marks_[static_cast<size_t>(gi)];
    if (mark) return;
    mark = 1;
    cycle_seen_.push_back(gi);
    cycle_stack_.push_back(gi);
  };
  for (int id : ids)
    for (int m : p.groups[static_cast<size_t>(id)])
      for (int s : succ_[m])
        if (s < last && !in(p.gid[s])) see(p.gid[s]);
  auto walk = [&] {
    while (!cycle_stack_.empty()) {
      const int gi = cycle_stack_.back();
      cycle_stack_.pop_back();
      for (int m : p.groups[static_cast<size_t>(gi)])
        for (int s : succ_[m]) {
          if (s > last) continue;
          if (in(p.gid[s])) return true;
          see(p.gid[s]);
        }
    }
    return false;
  };
  const bool found = walk();
  for (int gi : cycle_seen_) cycle_marks_[static_cast<size_t>(gi)] = 0;
  return found;
}

std::string Planner::merge_check(const Part& p, int a, int b, const Eval** out) {
  const std::vector<int> m = merged(p.groups.at(a), p.groups.at(b));
  const Eval& e = eval(m);
  *out = &e;
  if (!e.ok) return e.why;
  if (cycle(p, {std::min(a, b), std::max(a, b)}))
    return "another path between the two groups runs outside them (merging would make a cycle)";
  return "";
}

void Planner::apply(Part& p, int a, int b, double delta) {
  const int lo = std::min(a, b), hi = std::max(a, b);
  std::vector<int>& into = p.groups.at(static_cast<size_t>(lo));
  std::vector<int>& from = p.groups.at(static_cast<size_t>(hi));
  for (int x : from) p.gid[x] = lo;
  // Merged in place from the back (both sorted), so that the search's many merges and undos
  // reuse the groups' storage rather than allocate.
  size_t i = into.size(), j = from.size();
  into.resize(i + j);
  for (size_t k = into.size(); j > 0;) {
    if (i > 0 && into[i - 1] > from[j - 1])
      into[--k] = into[--i];
    else
      into[--k] = from[--j];
  }
  from.clear();
  --p.count;
  p.cost += delta;
}

std::vector<std::pair<int, int>> Planner::edges(const std::vector<int>& comp) const {
  std::set<int> in(comp.begin(), comp.end());
  std::vector<std::pair<int, int>> e;
  for (int v : comp)
    for (int u : pred_[v])
      if (in.count(u)) e.push_back({u, v});
  return e;
}

double Planner::component_cost(const Part& p, const std::vector<int>& comp) {
  std::set<int> ids;
  for (int v : comp) ids.insert(p.gid[v]);
  double c = 0;
  for (int id : ids) c += group_cost(p, id);
  return c;
}

std::vector<int> Planner::group_order(const Part& p) const {
  std::map<int, std::set<int>> out;
  std::map<int, int> indeg;
  for (size_t i = 0; i < p.groups.size(); ++i)
    if (!p.groups[i].empty()) indeg[static_cast<int>(i)] += 0;
  for (const auto& [id, d] : indeg)
    for (int x : p.groups[static_cast<size_t>(id)])
      for (int s : succ_[x])
        if (p.gid[s] != id && out[id].insert(p.gid[s]).second) ++indeg[p.gid[s]];
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (auto [id, d] : indeg)
    if (d == 0) ready.push(id);
  std::vector<int> order;
  while (!ready.empty()) {
    const int id = ready.top();
    ready.pop();
    order.push_back(id);
    for (int s : out[id])
      if (--indeg[s] == 0) ready.push(s);
  }
  return order;
}

Part Planner::with_groups(Part p, const std::vector<std::vector<int>>& chosen) {
  for (const auto& m : chosen)
    for (size_t i = 1; i < m.size(); ++i)
      if (p.gid[m[0]] != p.gid[m[i]]) apply(p, p.gid[m[0]], p.gid[m[i]], 0);
  return p;
}

FusionPlan Planner::finish(const Part& p, const std::string& mode) {
  FusionPlan plan;
  plan.mode = mode;
  plan.gemm_folds = codegen::FoldOptions(fold_, o_.approximate_gelu);
  plan.fold_notes = folds_.notes;
  plan.device = o_.device.arch + " (" + o_.device.name + ")" +
                (o_.device.tf32 ? ", float32 GEMMs and convolutions on TF32 tensor cores" : "");
  std::vector<int> order = group_order(p);
  STITCH_CHECK(order.size() == p.count, "fusion: the group graph has a cycle");
  std::map<int, int> pack_of;
  if (o_.horizontal && mode != "none") order = pack(p, order, pack_of);
  std::map<int, int> pack_number;
  for (int id : order) {
    plan.groups.push_back(describe(p.groups.at(id)));
    if (auto it = pack_of.find(id); it != pack_of.end()) {
      auto [pn, fresh] = pack_number.insert({it->second, static_cast<int>(plan.packs.size())});
      if (fresh) plan.packs.emplace_back();
      plan.groups.back().pack = pn->second;
      plan.packs[pn->second].push_back(static_cast<int>(plan.groups.size()) - 1);
    }
  }
  for (const FusionGroup& grp : plan.groups) {
    plan.cost += grp.cost;
    plan.unfused += grp.unfused;
  }
  for (const auto& members : plan.packs) {  // one launch instead of one per member
    const int saved = static_cast<int>(members.size()) - 1;
    plan.cost.kernels -= saved;
    plan.cost.launches -= saved;
    plan.cost.time -= saved * o_.device.launch;
  }
  // Every edge between two groups where one side is a generated kernel: why it is a boundary.
  std::set<std::pair<int, int>> said;
  for (size_t v = 0; v < nodes_.size(); ++v)
    for (int u : pred_[v]) {
      const int a = p.gid[u], b = p.gid[v];
      if (a == b || !said.insert({std::min(a, b), std::max(a, b)}).second) continue;
      const auto lu = codegen::classify_node(*nodes_[u]), lv = codegen::classify_node(*nodes_[v]);
      if (lu != codegen::NodeLowering::kKernel && lv != codegen::NodeLowering::kKernel) continue;
      std::string why;
      // A fine-grained MatMul this plan may stitch is weighed like any other node.
      const bool libu = lu == codegen::NodeLowering::kLibrary && !fusible_[u];
      const bool libv = lv == codegen::NodeLowering::kLibrary && !fusible_[v];
      if (libu || libv) {
        why = fmt::format("{} is a library call", (libu ? nodes_[u] : nodes_[v])->describe());
      } else {
        const Eval* e = nullptr;
        why = merge_check(p, a, b, &e);
        if (why.empty()) {
          const double apart = group_cost(p, a) + group_cost(p, b);
          why =
              e->cost.time >= apart
                  ? fmt::format("merging would not lower the estimate ({:.2f} us together, {:.2f} us apart)",
                                e->cost.time * 1e6, apart * 1e6)
                  : fmt::format(
                        "the {} planner chose other groups (merging these two alone: {:.2f} us, apart {:.2f} "
                        "us)",
                        mode, e->cost.time * 1e6, apart * 1e6);
        }
      }
      plan.rejected.push_back(
          fmt::format("{} not merged with {}: {}", nodes_[v]->describe(), nodes_[u]->describe(), why));
    }
  plan.timed_out = timed_out_;
  plan.budget_spent = budget_spent_;
  plan.work = work_;
  plan.plan_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  return plan;
}

FusionGroup Planner::describe(const std::vector<int>& m) {
  FusionGroup grp;
  for (int i : m) {
    grp.nodes.push_back(nodes_[i]);
    grp.unfused += alone_[i];
  }
  const Eval& e = eval(m);
  grp.cost = e.cost;
  grp.saved_bytes = grp.unfused.bytes - grp.cost.bytes;
  const Node* n = nodes_[m[0]];
  if (m.size() == 1 && folded_[m[0]]) {
    grp.scheme = "folded";
    grp.reason = folds_.folded.at(n) + ": no step";
    return grp;
  }
  if (m.size() == 1) {
    switch (codegen::classify_node(*n)) {
      case codegen::NodeLowering::kView:
        grp.scheme = "view";
        grp.reason = "a view: shares its input's storage, no kernel";
        break;
      case codegen::NodeLowering::kLibrary:
        grp.scheme = "library";
        grp.reason = "a library call (cuBLAS/cuDNN)";
        break;
      default:
        grp.scheme = "single";
        grp.reason =
            !fusible_[m[0]]
                ? (o_.no_fuse.count(n->name) ? "in --no-fuse"
                   : ops::tensor_scatter_in_place(g_, *n)
                       ? fmt::format("the update written into input '{}' in place (not stitched "
                                     "with other ops; the present cache is that input's buffer)",
                                     n->input(0)->name)
                   : n->op_type == ops::kRowSubstitution
                       ? fmt::format(
                             "steps {} to {} of a triangular solve written out row by "
                             "row (up to node '{}'), each reading the rows the steps "
                             "before it wrote: a kernel of their own that runs them "
                             "in order{}",
                             n->attr_int("first", 0), n->attr_int("last", 0),
                             n->attr_string("steps_of", n->name),
                             n->input(1) ? fmt::format(", then adds constant '{}'", n->input(1)->name) : "")
                       : "an op the stitcher does not take (own kernel)")
                : "no merge with a neighbour is legal and cheaper (see rejected merges)";
    }
    return grp;
  }
  const codegen::StitchInfo& info = e.info;
  grp.scheme = info.row ? "regional" : "local";
  if (info.row) {
    const codegen::RowMapping rm = codegen::row_mapping(info);
    if (rm.split()) grp.scheme = "global";
    grp.mapping =
        fmt::format("{}, {} {} x {}, {} pass{}", codegen::row_mapping_text(rm), info.rows,
                    info.column ? "columns" : "rows", info.cols, info.passes, info.passes == 1 ? "" : "es");
    for (size_t i : m)  // in the group's order: shared_pass is keyed by address
      if (auto it = info.shared_pass.find(nodes_[i]); it != info.shared_pass.end())
        grp.mapping += fmt::format(", {} in the pass of {}", nodes_[i]->describe(), it->second->describe());
    for (int64_t width : info.wide_widths) grp.mapping += fmt::format(", a store loop of {} per row", width);
    for (const codegen::StitchInfo::Outer& o : info.outer)
      grp.mapping += fmt::format(", {} over its own {} rows x {} first in each row (an outer reduction)",
                                 o.node->describe(), o.rows, o.cols);
  } else if (info.tile) {
    grp.mapping = fmt::format(
        "tiled GEMM, {} x {} tiles of the {} x {} product, K = {}; the epilogue on its accumulators",
        info.tile->bm(), info.tile->bm(), info.tile->rows, info.tile->n, info.tile->k);
  } else {
    grp.mapping = fmt::format("one thread per element of {}", dims_to_string(info.domain));
  }
  grp.reason = fmt::format(
      "{} nodes in one {} kernel: {} fewer launches, {} B less traffic, {:.2f} us vs {:.2f} us alone",
      m.size(),
      info.tile                ? "tiled GEMM (local)"
      : !info.row              ? "element (local)"
      : grp.scheme == "global" ? "row (global)"
      : info.column            ? "column (regional)"
                               : "row (regional)",
      grp.unfused.launches - 1, grp.saved_bytes, grp.cost.time * 1e6, grp.unfused.time * 1e6);
  return grp;
}

}  // namespace stitch::fusion
