#include "fusion/plan.h"

#include <fmt/format.h>
#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <unordered_map>

#include "codegen/gemm_folds.h"
#include "codegen/lower.h"
#include "codegen/stitch.h"
#include "support/check.h"

namespace stitch::fusion {
namespace {

using Clock = std::chrono::steady_clock;

struct Eval {
  bool ok = false;
  std::string why;
  Cost cost;
  codegen::StitchInfo info;
};

// A partition: gid[node] is the smallest node index of its group (so equal partitions are equal
// vectors); groups maps that id to the sorted member indices.
struct Part {
  std::vector<int> gid;
  std::map<int, std::vector<int>> groups;
  double cost = 0;  // of the component being planned
};

class Planner {
 public:
  // fold: let GEMM calls take over their neighbours' work (codegen::find_gemm_folds); off for
  // the unfused baseline.
  Planner(const Graph& g, const FusionOptions& o, bool fold = true) : g_(g), o_(o), fold_(fold), start_(Clock::now()) {
    for (const auto& n : g.nodes()) {
      idx_[n.get()] = static_cast<int>(nodes_.size());
      nodes_.push_back(n.get());
    }
    users_ = g.users();
    if (fold) folds_ = codegen::find_gemm_folds(g);
    const size_t n = nodes_.size();
    succ_.resize(n);
    pred_.resize(n);
    fusible_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const Node* x = nodes_[i];
      folded_.push_back(folds_.folded.count(x) > 0);
      fusible_[i] = codegen::stitch_role(*x) != codegen::StitchRole::kNone && !o.no_fuse.count(x->name) && !folded_[i];
      for (const Value* v : x->inputs)
        if (v && v->producer && idx_.count(v->producer)) {
          const int p = idx_.at(v->producer);
          if (std::find(pred_[i].begin(), pred_[i].end(), p) == pred_[i].end()) {
            pred_[i].push_back(p);
            succ_[p].push_back(static_cast<int>(i));
          }
        }
      alone_.push_back(single_cost(*x, o.device));
      single_.push_back(folded_[i] ? Cost{} : alone_.back());
    }
  }

  bool timed_out() const { return timed_out_; }
  bool out_of_time() {
    if (std::chrono::duration<double>(Clock::now() - start_).count() > o_.time_limit_s) timed_out_ = true;
    return timed_out_;
  }

  Part singletons() const {
    Part p;
    p.gid.resize(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i) {
      p.gid[i] = static_cast<int>(i);
      p.groups[static_cast<int>(i)] = {static_cast<int>(i)};
    }
    return p;
  }

  // Components: fusible nodes joined by producer-consumer edges, in order of their first node.
  std::vector<std::vector<int>> components() const {
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

  // Legality and cost of one group (sorted member indices), memoised.
  const Eval& eval(const std::vector<int>& m) {
    if (auto it = memo_.find(m); it != memo_.end()) return it->second;
    Eval e;
    if (m.size() == 1) {
      e.ok = true;
      e.cost = single_[m[0]];
      return memo_[m] = e;
    }
    if (static_cast<int>(m.size()) > o_.max_group_size) {
      e.why = fmt::format("the group would exceed --max-group-size {}", o_.max_group_size);
      return memo_[m] = e;
    }
    std::vector<const Node*> ns;
    for (int i : m) {
      if (!fusible_[i]) {
        e.why = o_.no_fuse.count(nodes_[i]->name) ? fmt::format("{} is in --no-fuse", nodes_[i]->describe())
                : folded_[i] ? fmt::format("{} is {}", nodes_[i]->describe(), folds_.folded.at(nodes_[i]))
                             : fmt::format("{} cannot be stitched", nodes_[i]->describe());
        return memo_[m] = e;
      }
      ns.push_back(nodes_[i]);
    }
    auto info = codegen::analyze_stitch(ns, escaping(ns));
    if (!info.is_ok()) {
      e.why = info.status().message();
      return memo_[m] = e;
    }
    e.ok = true;
    e.info = *info;
    e.cost = stitched_cost(ns, e.info, o_.device);
    return memo_[m] = e;
  }

  // Outputs of `ns` read outside it (or graph outputs): what its kernel stores.
  std::set<const Value*> escaping(const std::vector<const Node*>& ns) const {
    const std::set<const Node*> members(ns.begin(), ns.end());
    std::set<const Value*> out;
    for (const Node* x : ns)
      for (const Value* v : x->outputs) {
        if (!v) continue;
        bool esc = g_.is_graph_output(v);
        if (auto it = users_.find(v); it != users_.end())
          for (const Node* u : it->second) esc |= !members.count(u);
        if (esc) out.insert(v);
      }
    return out;
  }

  static std::vector<int> merged(const std::vector<int>& a, const std::vector<int>& b) {
    std::vector<int> m;
    std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(m));
    return m;
  }

  // True when the groups `ids` (to become one) would sit on a cycle of the group graph: some path
  // leaves them and comes back through other groups.
  // Nodes are in topological order, so such a path only passes nodes before the groups' last
  // member: the search never looks past it (this keeps the check local on long graphs).
  bool cycle(const Part& p, const std::set<int>& ids) const {
    int last = 0;
    for (int id : ids) last = std::max(last, p.groups.at(id).back());
    std::set<int> seen;
    std::vector<int> stack;
    for (int id : ids)
      for (int m : p.groups.at(id))
        for (int s : succ_[m])
          if (s < last && !ids.count(p.gid[s]) && seen.insert(p.gid[s]).second) stack.push_back(p.gid[s]);
    while (!stack.empty()) {
      const int gi = stack.back();
      stack.pop_back();
      for (int m : p.groups.at(gi))
        for (int s : succ_[m]) {
          if (s > last) continue;
          if (ids.count(p.gid[s])) return true;
          if (seen.insert(p.gid[s]).second) stack.push_back(p.gid[s]);
        }
    }
    return false;
  }

  // Why groups a and b cannot merge ("" when they can), and the merged evaluation.
  std::string merge_check(const Part& p, int a, int b, const Eval** out) {
    const std::vector<int> m = merged(p.groups.at(a), p.groups.at(b));
    const Eval& e = eval(m);
    *out = &e;
    if (!e.ok) return e.why;
    if (cycle(p, {a, b})) return "another path between the two groups runs outside them (merging would make a cycle)";
    return "";
  }

  static void apply(Part& p, int a, int b, double delta) {
    const int lo = std::min(a, b), hi = std::max(a, b);
    std::vector<int> m = merged(p.groups.at(lo), p.groups.at(hi));
    for (int x : m) p.gid[x] = lo;
    p.groups.erase(hi);
    p.groups[lo] = std::move(m);
    p.cost += delta;
  }

  double group_cost(const Part& p, int id) { return eval(p.groups.at(id)).cost.time; }

  // Edges inside a component, consumer order.
  std::vector<std::pair<int, int>> edges(const std::vector<int>& comp) const {
    std::set<int> in(comp.begin(), comp.end());
    std::vector<std::pair<int, int>> e;
    for (int v : comp)
      for (int u : pred_[v])
        if (in.count(u)) e.push_back({u, v});
    return e;
  }

  double component_cost(const Part& p, const std::vector<int>& comp) {
    std::set<int> ids;
    for (int v : comp) ids.insert(p.gid[v]);
    double c = 0;
    for (int id : ids) c += group_cost(p, id);
    return c;
  }

  void greedy(Part& p, const std::vector<int>& comp) {
    const auto es = edges(comp);
    for (bool changed = true; changed && !out_of_time();) {
      changed = false;
      for (auto [u, v] : es) {
        const int a = p.gid[u], b = p.gid[v];
        if (a == b) continue;
        const Eval* e = nullptr;
        if (!merge_check(p, a, b, &e).empty()) continue;
        const double delta = e->cost.time - group_cost(p, a) - group_cost(p, b);
        if (delta > 1e-9) continue;  // equal cost: a view joining its consumer costs nothing and opens later merges
        apply(p, a, b, delta);
        changed = true;
      }
    }
  }

  // Beam search over one window of a component (nodes `win`, moves along edges inside it).
  // Every candidate move of every state is scored first; only the `beam_width` best distinct
  // children are built, so a step costs one partition copy per kept child.
  void beam_window(Part& p, const std::vector<int>& win) {
    const auto es = edges(win);
    p.cost = 0;
    std::vector<Part> frontier{p};
    Part best = p;
    auto key = [&](const Part& x) {
      std::vector<int> k;
      for (int v : win) k.push_back(x.gid[v]);
      return k;
    };
    struct Move {
      double cost;
      size_t state;
      std::set<int> ids;
    };
    while (!frontier.empty() && !out_of_time()) {
      std::vector<Move> cand;
      for (size_t si = 0; si < frontier.size(); ++si) {
        const Part& s = frontier[si];
        // Moves: two groups joined by an edge; a group with all its producer groups, or with all
        // its consumer groups, in the window (several at once reach groups whose pairwise steps
        // are illegal, e.g. one that would store two shapes until a third node joins).
        std::set<std::set<int>> moves;
        std::map<int, std::set<int>> ins, outs;
        for (auto [u, v] : es) {
          const int a = s.gid[u], b = s.gid[v];
          if (a == b) continue;
          moves.insert({a, b});
          outs[a].insert(b);
          ins[b].insert(a);
        }
        for (auto* side : {&ins, &outs})
          for (auto& [a, others] : *side) {
            if (others.size() < 2) continue;
            std::set<int> m = others;
            m.insert(a);
            moves.insert(m);
          }
        for (const std::set<int>& ids : moves) {
          std::vector<int> members;
          double apart = 0;
          for (int id : ids) {
            members = merged(members, s.groups.at(id));
            apart += group_cost(s, id);
          }
          const Eval& e = eval(members);
          if (!e.ok) continue;
          const double delta = e.cost.time - apart;
          if (delta > 1e-9) continue;  // equal cost: a view joining its consumer costs nothing and opens later merges
          if (cycle(s, ids)) continue;
          cand.push_back({s.cost + delta, si, ids});
        }
      }
      std::sort(cand.begin(), cand.end(), [](const Move& x, const Move& y) {
        if (x.cost != y.cost) return x.cost < y.cost;
        if (x.state != y.state) return x.state < y.state;
        return x.ids < y.ids;
      });
      std::vector<Part> children;
      std::set<std::vector<int>> seen;
      for (const Move& mv : cand) {
        if (children.size() >= static_cast<size_t>(o_.beam_width)) break;
        Part c = frontier[mv.state];
        const int lo = *mv.ids.begin();
        for (int id : mv.ids)
          if (id != lo) apply(c, lo, id, 0);
        c.cost = mv.cost;
        if (seen.insert(key(c)).second) children.push_back(std::move(c));
      }
      if (!children.empty() && children.front().cost < best.cost) best = children.front();
      frontier = std::move(children);
    }
    p = std::move(best);
  }

  // Beam search per window of `beam_window` nodes in graph order (a transformer's layers are
  // separate windows, so the search grows linearly with depth), then greedy merges across window
  // boundaries; greedy over the whole component is kept as a candidate, so beam is never worse.
  void beam(Part& p, const std::vector<int>& comp) {
    Part greedy_part = p;
    greedy_part.cost = component_cost(p, comp);
    greedy(greedy_part, comp);
    Part b = p;
    const size_t w = static_cast<size_t>(std::max(2, o_.beam_window));
    for (size_t lo = 0; lo < comp.size() && !out_of_time(); lo += w) {
      const std::vector<int> win(comp.begin() + static_cast<std::ptrdiff_t>(lo),
                                 comp.begin() + static_cast<std::ptrdiff_t>(std::min(lo + w, comp.size())));
      if (win.size() > 1) beam_window(b, win);
    }
    b.cost = component_cost(b, comp);
    if (comp.size() > w) greedy(b, comp);
    p = greedy_part.cost < b.cost - 1e-15 ? greedy_part : b;
  }

  // Connected legal groups of a component (bit masks over comp positions), for ILP and brute force.
  std::vector<std::vector<int>> candidate_groups(const Part& p, const std::vector<int>& comp) {
    const size_t n = comp.size();
    std::vector<uint32_t> adj(n, 0);
    std::map<int, size_t> pos;
    for (size_t i = 0; i < n; ++i) pos[comp[i]] = i;
    for (auto [u, v] : edges(comp)) {
      adj[pos[u]] |= 1u << pos[v];
      adj[pos[v]] |= 1u << pos[u];
    }
    std::vector<std::vector<int>> out;
    for (uint32_t mask = 1; mask < (1u << n); ++mask) {
      if (out_of_time()) break;
      const int size = __builtin_popcount(mask);
      if (size > o_.max_group_size) continue;
      uint32_t reach = mask & (~mask + 1), frontier = reach;
      while (frontier) {
        uint32_t next = 0;
        for (size_t i = 0; i < n; ++i)
          if (frontier & (1u << i)) next |= adj[i];
        next &= mask & ~reach;
        reach |= next;
        frontier = next;
      }
      if (reach != mask) continue;
      std::vector<int> m;
      for (size_t i = 0; i < n; ++i)
        if (mask & (1u << i)) m.push_back(comp[i]);
      if (!eval(m).ok) continue;
      if (size > 1) {  // convex on its own: no path out of the group and back
        Part q = p;
        for (size_t i = 1; i < m.size(); ++i)
          if (q.gid[m[0]] != q.gid[m[i]]) apply(q, q.gid[m[0]], q.gid[m[i]], 0);
        if (cycle(q, {q.gid[m[0]]})) continue;
      }
      out.push_back(m);
    }
    return out;
  }

  // The groups in execution order (Kahn over the group graph, ties by first node); shorter than
  // p.groups when the group graph has a cycle.
  std::vector<int> group_order(const Part& p) const {
    std::map<int, std::set<int>> out;
    std::map<int, int> indeg;
    for (const auto& [id, m] : p.groups) indeg[id] += 0;
    for (const auto& [id, m] : p.groups)
      for (int x : m)
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
  bool acyclic(const Part& p) const { return group_order(p).size() == p.groups.size(); }

  Part with_groups(Part p, const std::vector<std::vector<int>>& chosen) {
    for (const auto& m : chosen)
      for (size_t i = 1; i < m.size(); ++i)
        if (p.gid[m[0]] != p.gid[m[i]]) apply(p, p.gid[m[0]], p.gid[m[i]], 0);
    return p;
  }

  // Exact cover by GLPK; false when the component is too big or no acyclic optimum was found.
  bool ilp(Part& p, const std::vector<int>& comp) {
    if (comp.size() > static_cast<size_t>(o_.ilp_max_nodes) || comp.size() > 24) return false;
    const auto cands = candidate_groups(p, comp);
    if (out_of_time()) return false;
    glp_prob* lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_rows(lp, static_cast<int>(comp.size()));
    std::map<int, int> row;
    for (size_t i = 0; i < comp.size(); ++i) {
      row[comp[i]] = static_cast<int>(i) + 1;
      glp_set_row_bnds(lp, static_cast<int>(i) + 1, GLP_FX, 1, 1);
    }
    glp_add_cols(lp, static_cast<int>(cands.size()));
    std::vector<int> ia{0}, ja{0};
    std::vector<double> ar{0};
    for (size_t c = 0; c < cands.size(); ++c) {
      const int col = static_cast<int>(c) + 1;
      glp_set_col_kind(lp, col, GLP_BV);
      glp_set_obj_coef(lp, col, eval(cands[c]).cost.time * 1e6);  // microseconds
      for (int v : cands[c]) {
        ia.push_back(row[v]);
        ja.push_back(col);
        ar.push_back(1);
      }
    }
    glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    bool found = false;
    for (int round = 0; round < 64 && !out_of_time(); ++round) {
      const double left = o_.time_limit_s - std::chrono::duration<double>(Clock::now() - start_).count();
      parm.tm_lim = std::max(1, static_cast<int>(left * 1000));
      if (glp_intopt(lp, &parm) != 0 || (glp_mip_status(lp) != GLP_OPT)) break;
      std::vector<std::vector<int>> chosen;
      std::vector<int> cols;
      for (size_t c = 0; c < cands.size(); ++c)
        if (glp_mip_col_val(lp, static_cast<int>(c) + 1) > 0.5) {
          chosen.push_back(cands[c]);
          if (cands[c].size() > 1) cols.push_back(static_cast<int>(c) + 1);
        }
      Part q = with_groups(p, chosen);
      if (acyclic(q)) {
        q.cost = component_cost(q, comp);
        p = q;
        found = true;
        break;
      }
      // Cut this combination of groups and solve again.
      const int r = glp_add_rows(lp, 1);
      std::vector<int> ind{0};
      std::vector<double> val{0};
      for (int c : cols) {
        ind.push_back(c);
        val.push_back(1);
      }
      glp_set_mat_row(lp, r, static_cast<int>(cols.size()), ind.data(), val.data());
      glp_set_row_bnds(lp, r, GLP_UP, 0, static_cast<double>(cols.size()) - 1);
    }
    glp_delete_prob(lp);
    return found;
  }

  bool brute(Part& p, const std::vector<int>& comp) {
    if (comp.size() > 12) return false;
    const auto cands = candidate_groups(p, comp);
    std::map<int, std::vector<const std::vector<int>*>> by_first;
    for (const auto& c : cands) by_first[c[0]].push_back(&c);
    std::optional<Part> best;
    std::vector<std::vector<int>> chosen;
    std::set<int> used;
    std::function<void()> rec = [&]() {
      int first = -1;
      for (int v : comp)
        if (!used.count(v)) { first = v; break; }
      if (first < 0) {
        Part q = with_groups(p, chosen);
        if (!acyclic(q)) return;
        q.cost = component_cost(q, comp);
        if (!best || q.cost < best->cost - 1e-15) best = q;
        return;
      }
      for (const auto* c : by_first[first]) {
        bool free = true;
        for (int v : *c) free &= !used.count(v);
        if (!free) continue;
        for (int v : *c) used.insert(v);
        chosen.push_back(*c);
        rec();
        chosen.pop_back();
        for (int v : *c) used.erase(v);
      }
    };
    rec();
    if (!best) return false;
    p = *best;
    return true;
  }

  // Threads per block of the stitched kernel a group would become; 0 when it is not one (a
  // library call, a view, an op the stitcher does not take).
  int64_t stitched_block(const std::vector<int>& m) {
    if (m.size() > 1) {
      const Eval& e = eval(m);
      if (!e.ok) return 0;
      return e.info.row ? codegen::row_mapping(e.info.cols).block : codegen::kMapBlock;
    }
    const Node* n = nodes_[m[0]];
    if (!fusible_[m[0]] || codegen::classify_node(*n) != codegen::NodeLowering::kKernel) return 0;
    auto info = codegen::analyze_stitch({n}, escaping({n}));
    if (!info.is_ok()) return 0;
    return info->row ? codegen::row_mapping(info->cols).block : codegen::kMapBlock;
  }

  // Execution order of groups where each pack is one node (Kahn, ties by first position in
  // `order`); empty when packing made a cycle.
  std::vector<int> packed_order(const Part& p, const std::vector<int>& order, const std::map<int, int>& pack_of) const {
    std::map<int, int> pos;
    for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
    auto rep = [&](int id) {  // a pack is represented by its first member in `order`
      auto it = pack_of.find(id);
      return it == pack_of.end() ? id : it->second;
    };
    std::map<int, std::vector<int>> members;
    for (int id : order) members[rep(id)].push_back(id);
    std::map<int, std::set<int>> out;
    std::map<int, int> indeg;
    for (const auto& [r, ms] : members) indeg[r] += 0;
    for (const auto& [r, ms] : members)
      for (int id : ms)
        for (int x : p.groups.at(id))
          for (int sx : succ_[x]) {
            const int t = rep(p.gid[sx]);
            if (t != r && out[r].insert(t).second) ++indeg[t];
          }
    std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
    for (auto [r, d] : indeg)
      if (d == 0) ready.push({pos.at(members.at(r).front()), r});
    std::vector<int> result;
    while (!ready.empty()) {
      const int r = ready.top().second;
      ready.pop();
      for (int id : members.at(r)) result.push_back(id);
      for (int t : out[r])
        if (--indeg[t] == 0) ready.push({pos.at(members.at(t).front()), t});
    }
    if (result.size() != order.size()) result.clear();
    return result;
  }

  // Independent (horizontal) packing: walking the execution order, a stitched kernel takes into
  // its launch the following stitched kernels (the next kPackWindow of them, same block size) that
  // no path joins to any member, as long as the packed group graph stays acyclic. Returns the new
  // order (a pack's members adjacent) and fills pack_of (group id -> the pack's first member).
  std::vector<int> pack(const Part& p, std::vector<int> order, std::map<int, int>& pack_of) {
    constexpr size_t kPackWindow = 8, kPackMax = 8;
    std::map<int, int> pos;
    for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
    std::map<int, int64_t> block;
    for (int id : order) block[id] = stitched_block(p.groups.at(id));
    // Is there a path from group a to group b (b later in `order`)?
    auto reaches = [&](int a, int b) {
      std::set<int> seen{a};
      std::vector<int> stack{a};
      while (!stack.empty()) {
        const int gi = stack.back();
        stack.pop_back();
        for (int x : p.groups.at(gi))
          for (int sx : succ_[x]) {
            const int t = p.gid[sx];
            if (t == b) return true;
            if (pos.at(t) < pos.at(b) && seen.insert(t).second) stack.push_back(t);
          }
      }
      return false;
    };
    for (size_t i = 0; i < order.size(); ++i) {
      const int a = order[i];
      if (pack_of.count(a) || block[a] == 0) continue;
      std::vector<int> members{a};
      size_t seen = 0;  // stitched kernels looked at after a (views, library calls and folded nodes not counted)
      for (size_t j = i + 1; j < order.size() && seen < kPackWindow && members.size() < kPackMax; ++j) {
        const int b = order[j];
        if (block[b] == 0) continue;
        ++seen;
        if (pack_of.count(b) || block[b] != block[a]) continue;
        if (std::any_of(members.begin(), members.end(), [&](int m) { return reaches(m, b); })) continue;
        for (int m : members) pack_of[m] = a;
        pack_of[b] = a;
        if (packed_order(p, order, pack_of).empty()) {  // would interlock with an earlier pack
          pack_of.erase(b);
          continue;
        }
        members.push_back(b);
      }
      if (members.size() < 2) pack_of.erase(a);
    }
    if (pack_of.empty()) return order;
    auto packed = packed_order(p, order, pack_of);
    STITCH_CHECK(!packed.empty(), "fusion: packing made a cycle");
    return packed;
  }

  // The plan for a finished partition: groups in execution order, costs, reasons, rejections.
  FusionPlan finish(const Part& p, const std::string& mode) {
    FusionPlan plan;
    plan.mode = mode;
    plan.gemm_folds = fold_;
    plan.device = o_.device.arch + " (" + o_.device.name + ")";
    std::vector<int> order = group_order(p);
    STITCH_CHECK(order.size() == p.groups.size(), "fusion: the group graph has a cycle");
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
        if (lu == codegen::NodeLowering::kLibrary || lv == codegen::NodeLowering::kLibrary) {
          why = fmt::format("{} is a library call", (lu == codegen::NodeLowering::kLibrary ? nodes_[u] : nodes_[v])->describe());
        } else {
          const Eval* e = nullptr;
          why = merge_check(p, a, b, &e);
          if (why.empty()) {
            const double apart = group_cost(p, a) + group_cost(p, b);
            why = e->cost.time >= apart
                      ? fmt::format("merging would not lower the estimate ({:.2f} us together, {:.2f} us apart)",
                                    e->cost.time * 1e6, apart * 1e6)
                      : fmt::format("the {} planner chose other groups (merging these two alone: {:.2f} us, apart {:.2f} us)",
                                    mode, e->cost.time * 1e6, apart * 1e6);
          }
        }
        plan.rejected.push_back(fmt::format("{} not merged with {}: {}", nodes_[v]->describe(), nodes_[u]->describe(), why));
      }
    plan.timed_out = timed_out_;
    plan.plan_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return plan;
  }

  FusionGroup describe(const std::vector<int>& m) {
    FusionGroup grp;
    for (int i : m) {
      grp.nodes.push_back(nodes_[i]);
      grp.unfused += alone_[i];
    }
    const Eval& e = eval(m);
    grp.cost = e.cost;
    grp.saved_bytes = grp.unfused.bytes - grp.cost.bytes;
    const Node* n = nodes_[m[0]];
    if (m.size() == 1) {
      switch (codegen::classify_node(*n)) {
        case codegen::NodeLowering::kView: grp.scheme = "view"; grp.reason = "a view: shares its input's storage, no kernel"; break;
        case codegen::NodeLowering::kLibrary: grp.scheme = "library"; grp.reason = "a library call (cuBLAS/cuDNN)"; break;
        default:
          if (folded_[m[0]]) {
            grp.scheme = "folded";
            grp.reason = folds_.folded.at(n) + ": no step";
            break;
          }
          grp.scheme = "single";
          grp.reason = !fusible_[m[0]] ? (o_.no_fuse.count(n->name) ? "in --no-fuse" : "an op the stitcher does not take (own kernel)")
                                       : "no merge with a neighbour is legal and cheaper (see rejected merges)";
      }
      return grp;
    }
    const codegen::StitchInfo& info = e.info;
    grp.scheme = info.row ? "regional" : "local";
    if (info.row) {
      const codegen::RowMapping rm = codegen::row_mapping(info.cols);
      grp.mapping = fmt::format("{}, {} rows x {}, {} passes", rm.warp_per_row ? "warp per row" : "block per row", info.rows,
                                info.cols, info.passes);
    } else {
      grp.mapping = fmt::format("one thread per element of {}", dims_to_string(info.domain));
    }
    grp.reason = fmt::format("{} nodes in one {} kernel: {} fewer launches, {} B less traffic, {:.2f} us vs {:.2f} us alone",
                             m.size(), info.row ? "row (regional)" : "element (local)", grp.unfused.launches - 1,
                             grp.saved_bytes, grp.cost.time * 1e6, grp.unfused.time * 1e6);
    return grp;
  }

 private:
  const Graph& g_;
  const FusionOptions& o_;
  bool fold_;
  Clock::time_point start_;
  bool timed_out_ = false;
  std::vector<const Node*> nodes_;
  std::map<const Node*, int> idx_;
  std::unordered_map<const Value*, std::vector<Node*>> users_;
  std::vector<std::vector<int>> succ_, pred_;
  std::vector<bool> fusible_;
  codegen::GemmFolds folds_;
  std::vector<bool> folded_;  // nodes a GEMM call takes over (codegen::find_gemm_folds)
  std::vector<Cost> single_;  // in this plan (zero for nodes a GEMM call takes over)
  std::vector<Cost> alone_;   // as its own step (the unfused figure)
  std::map<std::vector<int>, Eval> memo_;
};

StatusOr<FusionPlan> run_planner(const Graph& g, const FusionOptions& o, const std::string& mode) {
  Planner pl(g, o);
  Part p = pl.singletons();
  for (const auto& comp : pl.components()) {
    if (comp.size() < 2) continue;
    if (mode == "greedy") pl.greedy(p, comp);
    else if (mode == "beam") pl.beam(p, comp);
    else if (mode == "ilp") {
      if (!pl.ilp(p, comp)) pl.beam(p, comp);
    } else if (mode == "brute") {
      if (!pl.brute(p, comp)) return Status::user(fmt::format("brute force: a component of {} nodes is too big", comp.size()));
    }
  }
  return pl.finish(p, mode);
}

}  // namespace

FusionPlan plan_none(const Graph& g, const FusionOptions& o) {
  Planner pl(g, o, false);
  return pl.finish(pl.singletons(), "none");
}

StatusOr<FusionPlan> plan_brute_force(const Graph& g, const FusionOptions& o) {
  FusionOptions b = o;
  if (b.device.arch.empty()) { ASSIGN_OR_RETURN(b.device, device_spec("sm_90")); }
  return run_planner(g, b, "brute");
}

StatusOr<FusionPlan> make_plan(const Graph& g, const FusionOptions& o) {
  for (const std::string& name : o.no_fuse) {
    bool found = false;
    for (const auto& n : g.nodes()) found |= n->name == name;
    if (!found) return Status::user(fmt::format("--no-fuse '{}': the model has no node of that name", name));
  }
  if (o.max_group_size < 1) return Status::user("--max-group-size must be at least 1");
  if (o.beam_width < 1) return Status::user("--beam-width must be at least 1");
  FusionOptions b = o;
  if (b.device.arch.empty()) { ASSIGN_OR_RETURN(b.device, device_spec("sm_90")); }
  if (o.mode == "none") return plan_none(g, b);
  if (o.mode == "greedy" || o.mode == "beam" || o.mode == "ilp") return run_planner(g, b, o.mode);
  return Status::user(fmt::format("--fusion {}: available planners are none, greedy, beam and ilp", o.mode));
}

std::string explain(const FusionPlan& plan) {
  std::string s = fmt::format("fusion plan ({}) for {}: {} groups, {} kernels + {} library calls, estimated {:.1f} us and "
                              "{} B moved by generated kernels (unfused: {} kernels, {:.1f} us, {} B); planned in {:.3f} s{}\n",
                              plan.mode, plan.device, plan.groups.size(), plan.cost.kernels, plan.cost.library_calls,
                              plan.cost.time * 1e6, plan.cost.bytes, plan.unfused.kernels, plan.unfused.time * 1e6,
                              plan.unfused.bytes, plan.plan_seconds, plan.timed_out ? " (time limit reached: best plan so far)" : "");
  int i = 0;
  for (const FusionGroup& grp : plan.groups) {
    if (plan.mode == "none" && grp.nodes.size() == 1) {
      ++i;
      continue;
    }
    s += fmt::format("  group {} [{}{}]: {}\n", i++, grp.scheme, grp.pack >= 0 ? fmt::format(", pack {}", grp.pack) : "",
                     grp.reason);
    if (!grp.mapping.empty()) s += fmt::format("    mapping: {}\n", grp.mapping);
    for (const Node* n : grp.nodes) s += fmt::format("    {} -> {}\n", n->describe(), n->output(0) ? n->output(0)->type_string() : "");
  }
  if (!plan.packs.empty()) {
    s += "independent packs (one launch each, every member over its own blocks):\n";
    for (size_t k = 0; k < plan.packs.size(); ++k) {
      std::string members;
      for (int gi : plan.packs[k]) members += (members.empty() ? "" : ", ") + std::to_string(gi);
      s += fmt::format("  pack {}: groups {}: no path joins them and they share a block size; {} fewer launches\n", k,
                       members, plan.packs[k].size() - 1);
    }
  }
  if (!plan.rejected.empty()) {
    s += "kernel boundaries (rejected merges):\n";
    for (const std::string& r : plan.rejected) s += "  " + r + "\n";
  }
  return s;
}

}  // namespace stitch::fusion
