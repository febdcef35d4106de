#include "fusion/plan.h"

#include <fmt/format.h>

#include "fusion/planner.h"

namespace stitch::fusion {
namespace {

StatusOr<FusionPlan> run_planner(const Graph& g, const FusionOptions& o, const std::string& mode) {
  Planner pl(g, o);
  Part p = pl.singletons();
  for (const auto& comp : pl.components()) {
    if (comp.size() < 2) continue;
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
  return pl.finish(p, mode);
}

}  // namespace

FusionPlan plan_none(const Graph& g, const FusionOptions& o) {
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

}  // namespace stitch::fusion
