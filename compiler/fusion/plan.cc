#include "fusion/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <future>
#include <optional>
#include <vector>

#include "codegen/node_facts.h"
#include "fusion/planner.h"

namespace stitch::fusion {
namespace {

// What one plan of a make_plan leaves for the next (another set of fine-grained MatMuls on the
// same graph): its components and the partition it returned.
struct Round {
  std::vector<std::vector<int>> comps;
  std::vector<int> gid;
};

// The plan with fine-grained MatMuls `contract`. With `prev` (beam and greedy), a component of
// exactly the nodes of one of prev's keeps prev's groups instead of being searched again: the
// fine-grained MatMuls a round drops change only the components they were in, and a search of the
// same nodes would look at the same groups (the ones other components make cycles with aside,
// and the result is checked for those). `out` gets this plan's round.
StatusOr<FusionPlan> plan_once(const Graph& g, const FusionOptions& o, const std::string& mode,
                               const std::set<const Node*>& contract, Analyses& analyses, const Round* prev,
                               Round* out) {
  Planner pl(g, o, true, contract, &analyses);
  Part p = pl.singletons();
  const std::vector<std::vector<int>> comps = pl.components();
  std::vector<bool> kept(comps.size(), false);
  if (prev && (mode == "beam" || mode == "greedy")) {
    std::map<int, const std::vector<int>*> by_first;
    for (const auto& c : prev->comps) by_first[c.front()] = &c;
    for (size_t i = 0; i < comps.size(); ++i) {
      const std::vector<int>& comp = comps[i];
      auto it = by_first.find(comp.front());
      if (comp.size() < 2 || it == by_first.end() || *it->second != comp) continue;
      kept[i] = true;
      for (int x : comp) p.groups[static_cast<size_t>(x)].clear();
      for (int x : comp) {
        const int id = prev->gid[static_cast<size_t>(x)];
        p.gid[static_cast<size_t>(x)] = id;
        p.groups[static_cast<size_t>(id)].push_back(x);
        if (id != x) --p.count;
      }
    }
    // A path between two of a kept component's groups through nodes whose groups changed.
    if (!pl.acyclic(p)) return plan_once(g, o, mode, contract, analyses, nullptr, out);
  }
  const Part start = p;
  for (size_t i = 0; i < comps.size(); ++i) {
    const std::vector<int>& comp = comps[i];
    if (comp.size() < 2 || kept[i]) continue;
    if (mode == "greedy")
      pl.greedy(p, comp);
    else if (mode == "beam")
      pl.beam(p, comp);
    else if (mode == "ilp") {
      if (!pl.ilp(p, comp)) pl.beam(p, comp);
    } else if (mode == "brute") {
      if (!pl.brute(p, comp))
        return Status::user(fmt::format("brute force: a component of {} nodes is too big", comp.size()));
    }
  }
  if (out) out->comps = comps;
  if (mode == "beam") {
    // Pairs of neighbouring groups cut anew where that is cheaper (Planner::recut), then merged
    // further, kept when the finished plan is estimated cheaper: a cut that lowers the groups' sum
    // may leave fewer independent kernels to share a launch (packing comes after the search).
    // For the same reason greedy's partition of every component, which beam weighs against its
    // own per component before packing, is finished too and kept when it is cheaper: so the beam
    // plan is never estimated slower than greedy's of the same graph.
    Part best = p;
    FusionPlan best_plan = pl.finish(p, mode);
    Part q = p;
    bool changed = false;
    for (size_t i = 0; i < comps.size(); ++i)
      if (comps[i].size() >= 2 && !kept[i] && !pl.out_of_time() && pl.recut(q, comps[i])) {
        pl.greedy(q, comps[i]);
        changed = true;
      }
    if (changed) {
      FusionPlan after = pl.finish(q, mode);
      if (after.cost.time < best_plan.cost.time - 1e-15) {
        best = std::move(q);
        best_plan = std::move(after);
      }
    }
    if (!pl.out_of_time()) {
      Part gr = start;
      for (size_t i = 0; i < comps.size(); ++i)
        if (comps[i].size() >= 2 && !kept[i]) pl.greedy(gr, comps[i]);
      if (gr.gid != best.gid) {  // beam often keeps greedy's partition: nothing to finish again
        FusionPlan greedy_plan = pl.finish(gr, mode);
        if (greedy_plan.cost.time < best_plan.cost.time - 1e-15) {
          best = std::move(gr);
          best_plan = std::move(greedy_plan);
        }
      }
    }
    if (out) out->gid = best.gid;
    return best_plan;
  }
  if (out) out->gid = p.gid;
  return pl.finish(p, mode);
}

// A plan where the fine-grained MatMuls `cands` may join stitched kernels. A candidate the search
// leaves alone would only lose its GEMM folds, so it goes back to being a library call and the
// rest are planned again (each round drops at least one). `cands` ends as the stitched ones.
// What the plans of one make_plan have spent of its budget and time limit, together.
struct Spent {
  Clock::time_point start = Clock::now();
  int64_t work = 0;
  bool budget = false, time = false;

  // Options for the next plan: what is left.
  FusionOptions rest(const FusionOptions& o) const {
    FusionOptions r = o;
    r.work_limit = o.work_limit - work;
    r.time_limit_s = o.time_limit_s - std::chrono::duration<double>(Clock::now() - start).count();
    return r;
  }
  void add(const FusionPlan& p) {
    work += p.work;
    budget = budget || p.budget_spent;
    time = time || p.timed_out;
  }
  // Marks the plan that make_plan returns with the whole search's figures.
  void stamp(FusionPlan& p) const {
    p.work = work;
    p.budget_spent = budget;
    p.timed_out = time;
    p.plan_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
};

StatusOr<std::optional<FusionPlan>> settle(const Graph& g, const FusionOptions& o, const std::string& mode,
                                           std::set<const Node*>& cands, Spent& spent, Analyses& analyses,
                                           Round& last) {
  while (!cands.empty()) {
    const FusionOptions rest = spent.rest(o);
    if (rest.work_limit <= 0 || rest.time_limit_s <= 0) {
      (rest.work_limit <= 0 ? spent.budget : spent.time) = true;
      break;
    }
    Round round;
    ASSIGN_OR_RETURN(FusionPlan with, plan_once(g, rest, mode, cands, analyses, &last, &round));
    last = std::move(round);
    spent.add(with);
    std::set<const Node*> alone;
    for (const FusionGroup& grp : with.groups)
      if (grp.nodes.size() == 1 && cands.count(grp.nodes.front())) alone.insert(grp.nodes.front());
    if (alone.empty()) return std::optional<FusionPlan>(std::move(with));
    for (const Node* n : alone) cands.erase(n);
  }
  return std::optional<FusionPlan>();
}

// The element kernel of `plan` that reads, at its shape, what MatMul mm's library call writes (its
// product, or the output of the bias or residual add the call folds); null when there is none, or
// when the call writes what a tile's epilogue does not (a transposed layout, an activation).
// Only MatMuls with such a kernel in the library plan are offered to the search as tiled GEMMs
// (BERT's erf GELU after FFN1): the search sees a candidate without its folds, so a projection
// whose bias and residual the call already takes would look cheaper tiled than as a call with a
// bias kernel, while the call with its folds is cheaper still. `folds` are the library plan's
// (codegen::find_gemm_folds of the whole graph).
const FusionGroup* epilogue_kernel(const FusionPlan& plan, const codegen::GemmFolds& folds, const Node& mm) {
  const Value* out = mm.output(0);
  if (auto it = folds.by_matmul.find(&mm); it != folds.by_matmul.end()) {
    const codegen::GemmFolds::Fold& f = it->second;
    if (f.out_transpose || f.activation_out) return nullptr;
    if (f.residual_add)
      out = f.residual_add->output(0);
    else if (f.bias_add)
      out = f.bias_add->output(0);
  }
  for (const FusionGroup& grp : plan.groups) {
    if (grp.scheme != "local" && grp.scheme != "single") continue;
    for (const Node* n : grp.nodes)
      for (const Value* in : n->inputs)
        if (in == out && codegen::stitch_role(*n) == codegen::StitchRole::kPointwise &&
            *n->output(0)->dims == *out->dims)
          return &grp;
  }
  return nullptr;
}

// Why tiled GEMM candidate `mm`, a library call in `plan`, is not one tiled kernel with its
// epilogue: the kernel of mm, the adds its call folds and its epilogue_kernel, estimated against
// the call and that kernel as planned, and the tiled_gemm_eff from which it would win. "" when
// the plan has no such kernel.
std::string tiled_note(const Graph& g, const codegen::UsersMap& users, const FusionPlan& plan,
                       const codegen::GemmFolds& folds, const Node& mm, const DeviceSpec& d) {
  const FusionGroup* epilogue = epilogue_kernel(plan, folds, mm);
  if (!epilogue) return "";
  std::set<const Node*> members{&mm};
  if (auto it = folds.by_matmul.find(&mm); it != folds.by_matmul.end())
    for (const Node* add : {it->second.bias_add, it->second.residual_add})
      if (add) members.insert(add);
  members.insert(epilogue->nodes.begin(), epilogue->nodes.end());
  double planned = 0;  // the call, its folded nodes (no step) and the epilogue's kernel
  for (const FusionGroup& grp : plan.groups)
    for (const Node* n : grp.nodes)
      if (members.count(n)) {
        planned += grp.cost.time;
        break;
      }
  std::vector<const Node*> nodes;
  for (const auto& n : g.nodes())
    if (members.count(n.get())) nodes.push_back(n.get());
  const std::string head =
      fmt::format("{} stays a library call rather than one tiled GEMM kernel with the {} nodes after it",
                  mm.describe(), nodes.size() - 1);
  auto info = codegen::analyze_stitch(nodes, codegen::group_outputs(g, users, nodes));
  if (!info.is_ok()) return fmt::format("{}: {}", head, info.status().message());
  if (!info->tile) return "";
  auto tiled_at = [&](double eff) {
    DeviceSpec e = d;
    e.tiled_gemm_eff = eff;
    return stitched_cost(nodes, *info, e).time;
  };
  std::string verdict;
  if (tiled_at(1.0) >= planned) {
    verdict = "it would not win even at the library's rate";
  } else {
    double lo = 0.01, hi = 1.0;  // the cost falls as the efficiency grows: bisect for the break-even
    for (int i = 0; i < 40; ++i) ((tiled_at((lo + hi) / 2) < planned) ? hi : lo) = (lo + hi) / 2;
    verdict = fmt::format("it wins from tiled_gemm_eff {:.2f} (`stitchc calibrate` measures it)", hi);
  }
  return fmt::format(
      "{}: estimated {:.2f} us against {:.2f} us as the call and its kernels, at tiled_gemm_eff {:.2f}; {}",
      head, tiled_at(d.tiled_gemm_eff) * 1e6, planned * 1e6, d.tiled_gemm_eff, verdict);
}

// Fine-grained GEMMs are planned three ways and the cheapest estimate wins: every MatMul a library
// call (with its folds); the candidates free to join stitched kernels; and only those that the
// second plan put into row kernels (attention's scores next to their softmax) or ran as tiled
// GEMMs, since a loop in an element kernel often just trades its call for a kernel launch while
// giving up its folds.
StatusOr<FusionPlan> run_planner(const Graph& g, const FusionOptions& o, const std::string& mode) {
  const codegen::NodeFactsScope facts;  // g does not change while it is planned
  Spent spent;
  Analyses analyses;  // shared by the plans below: one graph, one set of options
  Round last;         // the latest plan's, for the next
  ASSIGN_OR_RETURN(FusionPlan lib, plan_once(g, o, mode, {}, analyses, nullptr, &last));
  spent.add(lib);
  std::set<const Node*> cands;
  std::vector<const Node*> tiled_cands;     // in graph order, which their notes follow
  std::optional<codegen::GemmFolds> folds;  // the library plan's, once a tiled GEMM asks
  auto tiled_candidate = [&](const Node& n) {
    if (codegen::stitch_role(n) != codegen::StitchRole::kTiledGemm) return false;
    if (!folds) folds = codegen::find_gemm_folds(g, {}, codegen::FoldOptions(true, o.approximate_gelu));
    if (!epilogue_kernel(lib, *folds, n)) return false;
    tiled_cands.push_back(&n);
    return true;
  };
  if (o.stitch_matmul)
    for (const auto& n : g.nodes())
      if (!o.no_fuse.count(n->name) &&
          (codegen::stitch_role(*n) == codegen::StitchRole::kContraction || tiled_candidate(*n)))
        cands.insert(n.get());
  if (cands.empty()) {
    spent.stamp(lib);
    return lib;
  }
  // Tiled candidates the final plan leaves as calls, and why (BERT-base's FFN1 + GELU until the
  // tiled kernel's efficiency is measured).
  auto add_tiled_notes = [&](FusionPlan& p) {
    const codegen::UsersMap users = g.users();
    for (const Node* mm : tiled_cands) {
      bool tiled = false;
      for (const FusionGroup& grp : p.groups)
        for (const Node* n : grp.nodes) tiled |= n == mm && grp.scheme != "library";
      if (tiled) continue;
      if (std::string note = tiled_note(g, users, p, *folds, *mm, o.device); !note.empty())
        p.tiled_notes.push_back(std::move(note));
    }
  };
  const bool any_loops = std::any_of(cands.begin(), cands.end(), [](const Node* n) {
    return codegen::stitch_role(*n) == codegen::StitchRole::kContraction;
  });
  struct Option {
    std::optional<FusionPlan> plan;
    std::set<const Node*> stitched;
  };
  std::vector<Option> options(1);
  options[0].stitched = cands;
  ASSIGN_OR_RETURN(options[0].plan, settle(g, o, mode, options[0].stitched, spent, analyses, last));
  if (options[0].plan) {
    std::set<const Node*> in_rows;  // and tiled GEMMs, whose kernels take their epilogues
    for (const FusionGroup& grp : options[0].plan->groups)
      for (const Node* n : grp.nodes)
        if (options[0].stitched.count(n) &&
            (grp.scheme != "local" || codegen::stitch_role(*n) == codegen::StitchRole::kTiledGemm))
          in_rows.insert(n);
    if (!in_rows.empty() && in_rows.size() < options[0].stitched.size()) {
      options.push_back({std::nullopt, in_rows});
      ASSIGN_OR_RETURN(options[1].plan, settle(g, o, mode, options[1].stitched, spent, analyses, last));
    }
  }
  Option* best = nullptr;
  for (Option& x : options)
    if (x.plan && (!best || x.plan->cost.time < best->plan->cost.time)) best = &x;
  const double lib_time = lib.cost.time;
  if (!best || best->plan->cost.time >= lib_time) {
    if (any_loops)
      lib.contraction_note =
          best ? fmt::format(
                     "fine-grained MatMuls stay library calls: stitching {} of them was estimated {:.2f} us "
                     "against {:.2f} us",
                     best->stitched.size(), best->plan->cost.time * 1e6, lib_time * 1e6)
               : "fine-grained MatMuls stay library calls: the search joined none of them to a kernel";
    add_tiled_notes(lib);
    spent.stamp(lib);
    return lib;
  }
  FusionPlan chosen = std::move(*best->plan);
  std::string names, tiled;
  size_t loops = 0;
  for (const FusionGroup& grp : chosen.groups)
    for (const Node* n : grp.nodes) {
      if (!best->stitched.count(n)) continue;
      const bool tile = codegen::stitch_role(*n) == codegen::StitchRole::kTiledGemm;
      std::string& list = tile ? tiled : names;
      list += (list.empty() ? "" : ", ") + n->describe();
      loops += tile ? 0 : 1;
    }
  const std::string estimate = fmt::format("estimated {:.2f} us against {:.2f} us with library calls",
                                           chosen.cost.time * 1e6, lib_time * 1e6);
  std::vector<std::string> lines;
  if (loops > 0)
    lines.push_back(fmt::format(
        "fine-grained MatMuls stitched into kernels ({} of them, as loops over the contraction axis): {}: {}",
        loops, estimate, names));
  if (!tiled.empty())
    lines.push_back(fmt::format("MatMuls run as tiled GEMMs with their epilogues in the kernel{}: {}",
                                loops > 0 ? "" : " (" + estimate + ")", tiled));
  chosen.contraction_note = fmt::format("{}", fmt::join(lines, "\n"));
  add_tiled_notes(chosen);
  spent.stamp(chosen);
  return chosen;
}

}  // namespace

FusionPlan plan_none(const Graph& g, const FusionOptions& o) {
  const codegen::NodeFactsScope facts;
  Planner pl(g, o, false);
  return pl.finish(pl.singletons(), "none");
}

StatusOr<FusionPlan> plan_brute_force(const Graph& g, const FusionOptions& o) {
  FusionOptions b = o;
  if (b.device.arch.empty()) {
    ASSIGN_OR_RETURN(b.device, device_spec("sm_90"));
  }
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
  if (o.work_limit < 1) return Status::user("--plan-budget must be at least 1 step");
  if (!(o.time_limit_s > 0)) return Status::user("--plan-time-limit must be more than 0 seconds");
  FusionOptions b = o;
  if (b.device.arch.empty()) {
    ASSIGN_OR_RETURN(b.device, device_spec("sm_90"));
  }
  if (o.mode == "none") return plan_none(g, b);
  if (o.mode == "greedy" || o.mode == "beam" || o.mode == "ilp") return run_planner(g, b, o.mode);
  return Status::user(fmt::format("--fusion {}: available planners are none, greedy, beam and ilp", o.mode));
}

std::string explain(const FusionPlan& plan) {
  std::string s = fmt::format(
      "fusion plan ({}) for {}: {} groups, {} kernels + {} library calls, estimated {:.1f} us and "
      "{} B moved by generated kernels, {} B by library calls (unfused: {} kernels, {:.1f} us, {} B + {} B); "
      "planned in {:.3f} s{}, {} search steps{}\n",
      plan.mode, plan.device, plan.groups.size(), plan.cost.kernels, plan.cost.library_calls,
      plan.cost.time * 1e6, plan.cost.bytes, plan.cost.library_bytes, plan.unfused.kernels,
      plan.unfused.time * 1e6, plan.unfused.bytes, plan.unfused.library_bytes, plan.plan_seconds,
      plan.rewrite_seconds > 0
          ? fmt::format(
                " ({:.3f} s of it in the rewrites before planning, whose judged ones plan the graph too)",
                plan.rewrite_seconds)
          : "",
      plan.work,
      plan.budget_spent ? " (the search's budget ran out: best plan so far; --plan-budget raises it)"
      : plan.timed_out
          ? " (the time limit was reached: best plan so far, which depends on this machine's speed; "
            "--plan-time-limit raises it)"
          : "");
  int i = 0;
  for (const FusionGroup& grp : plan.groups) {
    if (plan.mode == "none" && grp.nodes.size() == 1) {
      ++i;
      continue;
    }
    s += fmt::format("  group {} [{}{}]: {}\n", i++, grp.scheme,
                     grp.pack >= 0 ? fmt::format(", pack {}", grp.pack) : "", grp.reason);
    if (!grp.mapping.empty()) s += fmt::format("    mapping: {}\n", grp.mapping);
    for (const Node* n : grp.nodes)
      s += fmt::format("    {} -> {}\n", n->describe(), n->output(0) ? n->output(0)->type_string() : "");
  }
  if (!plan.packs.empty()) {
    s += "independent packs (one launch each, every member over its own blocks):\n";
    for (size_t k = 0; k < plan.packs.size(); ++k) {
      std::string members;
      for (int gi : plan.packs[k]) members += (members.empty() ? "" : ", ") + std::to_string(gi);
      s += fmt::format(
          "  pack {}: groups {}: no path joins them and they share a block size; {} fewer launches\n", k,
          members, plan.packs[k].size() - 1);
    }
  }
  if (!plan.contraction_note.empty()) s += plan.contraction_note + "\n";
  if (!plan.tiled_notes.empty()) {
    s += "tiled GEMMs not used:\n";
    for (const std::string& r : plan.tiled_notes) s += "  " + r + "\n";
  }
  if (!plan.fold_notes.empty()) {
    s += "GEMM epilogues not used:\n";
    for (const std::string& r : plan.fold_notes) s += "  " + r + "\n";
  }
  if (!plan.rejected.empty()) {
    s += "kernel boundaries (rejected merges):\n";
    for (const std::string& r : plan.rejected) s += "  " + r + "\n";
  }
  return s;
}

void RewriteResult::add_step(const std::string& label, const RewriteResult& step) {
  if (step.verdict.empty()) return;
  verdict += fmt::format("{}{}: {}", verdict.empty() ? "" : "; ", label, step.verdict);
  lines.insert(lines.end(), step.lines.begin(), step.lines.end());
}

StatusOr<RewriteResult> rewrite_if_cheaper(
    std::unique_ptr<Graph>& g, const FusionOptions& o,
    const std::function<StatusOr<std::vector<std::string>>(Graph&)>& rewrite, const std::string& skip_flag,
    bool strict, const std::optional<Cost>& before, bool no_more_kernels) {
  RewriteResult out;
  std::unique_ptr<Graph> copy = clone_graph(*g);
  ASSIGN_OR_RETURN(std::vector<std::string> lines, rewrite(*copy));
  if (lines.empty()) return out;
  std::future<StatusOr<FusionPlan>> g_plan = plan_unless_known(before, *g, o);
  StatusOr<FusionPlan> after_or = make_plan(*copy, o);
  ASSIGN_OR_RETURN(auto estimate, estimate_before(before, g_plan));
  ASSIGN_OR_RETURN(FusionPlan after, std::move(after_or));
  const Cost tried = after.cost;
  out = judge_rewrite(estimate.first, std::move(estimate.second), std::move(after), std::move(lines),
                      skip_flag, strict, no_more_kernels);
  out.tried = tried;
  if (!out.lines.empty()) g = std::move(copy);  // the same Graph object: the kept plan's nodes are g's
  return out;
}

std::future<StatusOr<FusionPlan>> plan_unless_known(const std::optional<Cost>& before, const Graph& g,
                                                    const FusionOptions& o) {
  if (before) return {};
  return std::async(std::launch::async, [&g, &o] { return make_plan(g, o); });
}

StatusOr<std::pair<Cost, std::shared_ptr<const FusionPlan>>> estimate_before(
    const std::optional<Cost>& before, std::future<StatusOr<FusionPlan>>& g_plan) {
  if (before) return std::make_pair(*before, std::shared_ptr<const FusionPlan>());
  ASSIGN_OR_RETURN(FusionPlan p0, g_plan.get());
  const Cost c0 = p0.cost;
  return std::make_pair(c0, std::make_shared<const FusionPlan>(std::move(p0)));
}

RewriteResult judge_rewrite(const Cost& c0, std::shared_ptr<const FusionPlan> plan0, FusionPlan after,
                            std::vector<std::string> lines, const std::string& skip_flag, bool strict,
                            bool no_more_kernels) {
  RewriteResult out;
  const double t0 = c0.time * 1e6, t1 = after.cost.time * 1e6;
  // Enough digits that the two estimates read differently when they differ.
  const int digits = fmt::format("{:.1f}", t0) == fmt::format("{:.1f}", t1) && t0 != t1 ? 3 : 1;
  const bool more_kernels = no_more_kernels && after.cost.kernels > c0.kernels;
  if ((strict ? t1 < t0 : t1 <= t0) && !more_kernels) {
    out.kept = after.cost;
    out.lines = std::move(lines);
    out.verdict = fmt::format("estimated {:.{}f} us against {:.{}f} us without, {} kernels against {}", t1,
                              digits, t0, digits, after.cost.kernels, c0.kernels);
    out.kept_plan = std::make_shared<const FusionPlan>(std::move(after));
  } else {
    out.kept = c0;
    out.kept_plan = std::move(plan0);
    const std::string kernels =
        more_kernels ? fmt::format(", {} kernels against {}", after.cost.kernels, c0.kernels) : "";
    out.verdict = fmt::format(
        "not applied: estimated {:.{}f} us against {:.{}f} us without{} ({} candidates; {} skips "
        "the comparison)",
        t1, digits, t0, digits, kernels, lines.size(), skip_flag);
  }
  return out;
}

}  // namespace stitch::fusion
