// The planners' searches over partitions of a component: greedy (the baseline), beam (windows
// of the component, then greedy across them), exact cover by ILP (GLPK) and brute force (tests).
#include <fmt/format.h>
#include <glpk.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <unordered_set>

#include "fusion/planner.h"

namespace stitch::fusion {

void Planner::greedy(Part& p, const std::vector<int>& comp) {
  const auto es = edges(comp);
  for (bool changed = true; changed && !out_of_time();) {
    changed = false;
    for (auto [u, v] : es) {
      const int a = p.gid[u], b = p.gid[v];
      if (a == b) continue;
      const Eval* e = nullptr;
      if (!merge_check(p, a, b, &e).empty()) continue;
      const double delta = e->cost.time - group_cost(p, a) - group_cost(p, b);
      if (delta > 1e-9)
        continue;  // equal cost: a view joining its consumer costs nothing and opens later merges
      apply(p, a, b, delta);
      changed = true;
    }
  }
}

void Planner::beam_window(Part& p, const std::vector<int>& win) {
  const auto es = edges(win);
  p.cost = 0;
  auto key = [&](const Part& x) {
    std::vector<int> k;
    k.reserve(win.size());
    for (int v : win) k.push_back(x.gid[v]);
    return k;
  };
  // A candidate move: its cost, the state it is made from, and its group ids (sorted), the
  // `len` ints from `off` in cand_ids.
  struct Move {
    double cost;
    size_t state;
    size_t off, len;
  };
  std::vector<int> cand_ids;
  auto ids_of = [&](const Move& m) { return std::span<const int>(cand_ids.data() + m.off, m.len); };
  // A state is the moves that lead to it from `p`. The search keeps one partition, `p`, applies
  // a state's moves to look at it and undoes them after (a partition holds every group of the
  // graph, and copying it per state was most of the time planning long graphs took). The undo
  // log's entries, the moves' lists and the producer and consumer lists keep their storage from
  // state to state: allocating them anew was almost half of the search's own time.
  struct State {
    double cost = 0;
    std::vector<std::vector<int>> moves;
  };
  struct Undo {
    int lo, hi;
    std::vector<int> lo_members, hi_members;
  };
  std::vector<Undo> log;
  size_t logged = 0;
  auto enter = [&](const State& st) {
    for (const std::vector<int>& ids : st.moves) {
      const int lo = ids.front();
      for (int id : ids)
        if (id != lo) {
          if (logged == log.size()) log.emplace_back();
          Undo& u = log[logged++];
          u.lo = lo;
          u.hi = id;
          const std::vector<int>&glo = p.groups.at(static_cast<size_t>(lo)),
                &ghi = p.groups.at(static_cast<size_t>(id));
          u.lo_members.assign(glo.begin(), glo.end());
          u.hi_members.assign(ghi.begin(), ghi.end());
          apply(p, lo, id, 0);
        }
    }
    p.cost = st.cost;
  };
  auto leave = [&]() {
    while (logged > 0) {
      Undo& u = log[--logged];
      for (int x : u.hi_members) p.gid[x] = u.hi;
      p.groups[static_cast<size_t>(u.hi)].swap(u.hi_members);
      p.groups[static_cast<size_t>(u.lo)].swap(u.lo_members);
      ++p.count;
    }
    p.cost = 0;
  };
  std::vector<State> frontier{State{}};
  State best;
  // This state's moves: the first `n_moves` of `moves`.
  std::vector<std::vector<int>> moves;
  size_t n_moves = 0;
  auto new_move = [&]() -> std::vector<int>& {
    if (n_moves == moves.size()) moves.emplace_back();
    std::vector<int>& m = moves[n_moves++];
    m.clear();
    return m;
  };
  // Producer and consumer groups of each group in the window, by group id; the ids with a list.
  std::vector<std::vector<int>> ins(p.groups.size()), outs(p.groups.size());
  std::vector<int> with_ins, with_outs;
  std::vector<int> members;
  while (!frontier.empty() && !out_of_time()) {
    std::vector<Move> cand;
    cand_ids.clear();
    for (size_t si = 0; si < frontier.size(); ++si) {
      enter(frontier[si]);
      const Part& s = p;
      // Moves: two groups joined by an edge; a group with all its producer groups, or with all
      // its consumer groups, in the window (several at once reach groups whose pairwise steps
      // are illegal, e.g. one that would store two shapes until a third node joins).
      n_moves = 0;
      for (int a : with_ins) ins[static_cast<size_t>(a)].clear();
      for (int a : with_outs) outs[static_cast<size_t>(a)].clear();
      with_ins.clear();
      with_outs.clear();
      for (auto [u, v] : es) {
        const int a = s.gid[u], b = s.gid[v];
        if (a == b) continue;
        std::vector<int>& m = new_move();
        m.push_back(std::min(a, b));
        m.push_back(std::max(a, b));
        std::vector<int>&out = outs[static_cast<size_t>(a)], &in = ins[static_cast<size_t>(b)];
        if (out.empty()) with_outs.push_back(a);
        if (in.empty()) with_ins.push_back(b);
        out.push_back(b);
        in.push_back(a);
      }
      for (auto [side, ids] : {std::pair{&ins, &with_ins}, std::pair{&outs, &with_outs}})
        for (int a : *ids) {
          std::vector<int>& others = (*side)[static_cast<size_t>(a)];
          std::sort(others.begin(), others.end());
          others.erase(std::unique(others.begin(), others.end()), others.end());
          if (others.size() < 2) continue;
          std::vector<int>& m = new_move();
          m.assign(others.begin(), others.end());
          m.insert(std::upper_bound(m.begin(), m.end(), a), a);
        }
      // A view alone in its group that nodes of other groups read too, with its producer group and
      // one consumer group at once: it joins neither alone (a kernel stores a view's result only for
      // readers of its own, of a value it computes: analyze_stitch). A view read by one group alone
      // joins it by the moves above.
      for (int v : with_outs) {
        const std::vector<int>& vg = s.groups[static_cast<size_t>(v)];
        if (vg.size() != 1 || sized_[static_cast<size_t>(vg.front())]) continue;
        const std::vector<int>& in = ins[static_cast<size_t>(v)];
        if (in.empty()) continue;
        const std::vector<int>& readers = succ_[static_cast<size_t>(vg.front())];
        for (int b : outs[static_cast<size_t>(v)]) {
          if (std::all_of(readers.begin(), readers.end(), [&](int r) { return s.gid[r] == b; })) continue;
          for (int a : in) {
            std::vector<int>& m = new_move();
            m.assign({a, v, b});
            std::sort(m.begin(), m.end());
          }
        }
      }
      const auto moves_end = moves.begin() + static_cast<std::ptrdiff_t>(n_moves);
      std::sort(moves.begin(), moves_end);
      n_moves = static_cast<size_t>(std::unique(moves.begin(), moves_end) - moves.begin());
      for (size_t mi = 0; mi < n_moves; ++mi) {
        const std::vector<int>& ids = moves[mi];
        members.clear();
        double apart = 0;
        for (int id : ids) {
          const std::vector<int>& g = s.groups[static_cast<size_t>(id)];
          members.insert(members.end(), g.begin(), g.end());
          apart += group_cost(s, id);
        }
        std::sort(members.begin(), members.end());
        const Eval& e = eval(members);
        if (!e.ok) continue;
        const double delta = e.cost.time - apart;
        if (delta > 1e-9)
          continue;  // equal cost: a view joining its consumer costs nothing and opens later merges
        if (cycle(s, ids)) continue;
        cand.push_back({s.cost + delta, si, cand_ids.size(), ids.size()});
        cand_ids.insert(cand_ids.end(), ids.begin(), ids.end());
      }
      leave();
    }
    std::sort(cand.begin(), cand.end(), [&](const Move& x, const Move& y) {
      if (x.cost != y.cost) return x.cost < y.cost;
      if (x.state != y.state) return x.state < y.state;
      const auto a = ids_of(x), b = ids_of(y);
      return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
    });
    std::vector<State> children;
    std::set<std::vector<int>> seen;
    for (const Move& mv : cand) {
      if (children.size() >= static_cast<size_t>(o_.beam_width)) break;
      State c = frontier[mv.state];
      const auto ids = ids_of(mv);
      c.moves.emplace_back(ids.begin(), ids.end());
      c.cost = mv.cost;
      enter(c);
      const bool fresh = seen.insert(key(p)).second;
      leave();
      if (fresh) children.push_back(std::move(c));
    }
    if (!children.empty() && children.front().cost < best.cost) best = children.front();
    frontier = std::move(children);
  }
  enter(best);  // kept
  logged = 0;
}

bool Planner::connected(const std::vector<int>& m) const {
  // Marks by node: 1 for a member not reached yet, 2 reached; cleared before returning, so the
  // walk is O(|m| + its edges) for groups of hundreds of nodes.
  if (member_marks_.size() < nodes_.size()) member_marks_.assign(nodes_.size(), 0);
  for (int x : m) member_marks_[static_cast<size_t>(x)] = 1;
  std::vector<int> stack{m.front()};
  member_marks_[static_cast<size_t>(m.front())] = 2;
  size_t reached = 1;
  while (!stack.empty()) {
    const int x = stack.back();
    stack.pop_back();
    for (const std::vector<std::vector<int>>* next : {&pred_, &succ_})
      for (int y : (*next)[static_cast<size_t>(x)]) {
        char& s = member_marks_[static_cast<size_t>(y)];
        if (s != 1) continue;
        s = 2;
        ++reached;
        stack.push_back(y);
      }
  }
  for (int x : m) member_marks_[static_cast<size_t>(x)] = 0;
  return reached == m.size();
}

namespace {

// How many of a pair's `n` nodes change sides when its groups become `head` and the rest, from
// `first` and the rest (all sorted): the nodes in one of head and first only, or in both or
// neither when the cut swaps the sides.
size_t sides_changed(const std::vector<int>& head, const std::vector<int>& first, size_t n) {
  size_t both = 0;
  for (size_t i = 0, j = 0; i < head.size() && j < first.size();) {
    if (head[i] < first[j]) {
      ++i;
    } else if (first[j] < head[i]) {
      ++j;
    } else {
      ++both;
      ++i;
      ++j;
    }
  }
  const size_t differ = head.size() + first.size() - 2 * both;
  return std::min(differ, n - differ);
}

}  // namespace

bool Planner::recut(Part& p, const std::vector<int>& comp) {
  const auto es = edges(comp);
  bool changed = false;
  std::vector<char> mark(p.gid.size(), 0);  // closure's, cleared after each walk
  // Puts `first` and `second` (each sorted, non-empty) in the place of groups a and b.
  auto place = [&](int a, int b, const std::vector<int>& first, const std::vector<int>& second) {
    p.groups[static_cast<size_t>(a)].clear();
    p.groups[static_cast<size_t>(b)].clear();
    for (const std::vector<int>* m : {&first, &second}) {
      for (int x : *m) p.gid[x] = m->front();
      p.groups[static_cast<size_t>(m->front())] = *m;
    }
  };
  for (int round = 0; round < kRecutRounds && !out_of_time(); ++round) {
    bool improved = false;
    std::set<std::pair<int, int>> seen;
    for (auto [u, v] : es) {
      if (out_of_time()) break;
      const int a = p.gid[u], b = p.gid[v];
      if (a == b || !seen.insert({std::min(a, b), std::max(a, b)}).second) continue;
      const std::vector<int> ga = p.groups.at(a), gb = p.groups.at(b);
      if (!eval(ga).ok || !eval(gb).ok) continue;
      const std::vector<int> all = merged(ga, gb);
      const double now = group_cost(p, a) + group_cost(p, b);
      double best = now - 1e-9;
      std::vector<int> head, tail, best_head, best_tail;
      // The nodes of the pair a node reaches, or that reach it, inside the pair, with it (sorted).
      auto closure = [&](int v, const std::vector<std::vector<int>>& next) {
        std::vector<int> out{v}, stack{v};
        mark[static_cast<size_t>(v)] = 1;
        while (!stack.empty()) {
          const int x = stack.back();
          stack.pop_back();
          for (int y : next[static_cast<size_t>(x)])
            if ((p.gid[y] == a || p.gid[y] == b) && !mark[static_cast<size_t>(y)]) {
              mark[static_cast<size_t>(y)] = 1;
              out.push_back(y);
              stack.push_back(y);
            }
        }
        for (int y : out) mark[static_cast<size_t>(y)] = 0;
        std::sort(out.begin(), out.end());
        return out;
      };
      // Heads already looked at for this pair: the three cuts of neighbouring nodes often agree (in
      // a chain, each closure cut is a graph-order cut too), and a cut's tail is the rest of the pair.
      std::unordered_set<std::vector<int>, MembersHash> tried;
      for (size_t i = 0; i < all.size(); ++i)
        for (int how : {0, 1, 2}) {
          // 0: the nodes before all[i] in graph order first; 1: all[i] with what it reads inside the
          // pair first; 2: all[i] with what reads it inside the pair after, the rest first.
          if (how == 0) {
            if (i == 0) continue;
            head.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(i));
            tail.assign(all.begin() + static_cast<std::ptrdiff_t>(i), all.end());
          } else {
            const std::vector<int> side = closure(all[i], how == 1 ? pred_ : succ_);
            if (side.size() == all.size()) continue;
            std::vector<int> rest;
            std::set_difference(all.begin(), all.end(), side.begin(), side.end(), std::back_inserter(rest));
            head = how == 1 ? side : rest;
            tail = how == 1 ? rest : side;
          }
          if (all.size() > kRecutWhole && sides_changed(head, ga, all.size()) > kRecutMove) continue;
          if (head == ga || head == gb || !tried.insert(head).second || !connected(head) || !connected(tail))
            continue;
          const Eval& eh = eval(head);
          if (!eh.ok || eh.cost.time >= best) continue;
          const Eval& et = eval(tail);
          if (et.ok && eh.cost.time + et.cost.time < best) {
            best = eh.cost.time + et.cost.time;
            best_head = head;
            best_tail = tail;
          }
        }
      if (best_head.empty()) continue;
      place(a, b, best_head, best_tail);
      if (cycle(p, {best_head.front()}) || cycle(p, {best_tail.front()})) {
        place(best_head.front(), best_tail.front(), ga, gb);
        continue;
      }
      p.cost += best - now;
      improved = changed = true;
    }
    if (!improved) break;
  }
  return changed;
}

void Planner::beam(Part& p, const std::vector<int>& comp) {
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

std::vector<std::vector<int>> Planner::candidate_groups(const Part& p, const std::vector<int>& comp) {
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
    if (m.size() > 1) {  // convex on its own: no path out of the group and back
      Part q = p;
      for (size_t i = 1; i < m.size(); ++i)
        if (q.gid[m[0]] != q.gid[m[i]]) apply(q, q.gid[m[0]], q.gid[m[i]], 0);
      if (cycle(q, {q.gid[m[0]]})) continue;
    }
    out.push_back(m);
  }
  return out;
}

bool Planner::ilp(Part& p, const std::vector<int>& comp) {
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

bool Planner::brute(Part& p, const std::vector<int>& comp) {
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
      if (!used.count(v)) {
        first = v;
        break;
      }
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

}  // namespace stitch::fusion
