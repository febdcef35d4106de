#include "fusion/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <queue>

#include "codegen/lower.h"
#include "codegen/scalar_ops.h"
#include "support/check.h"

namespace stitch::fusion {
namespace {

int64_t bytes_of(const Value* v) { return num_elements(*v->dims) * dtype_size(v->dtype); }

// A node whose output element i depends only on element-aligned or broadcast inputs.
bool pointwise(const Node& n) {
  return codegen::has_scalar_expr(n) && codegen::classify_node(n) == codegen::NodeLowering::kKernel &&
         n.outputs.size() == 1 && n.output(0) != nullptr;
}

// Orders groups so every group follows the groups it reads from; ties by first node index.
std::vector<FusionGroup> order_groups(const Graph& g, std::vector<FusionGroup> groups,
                                      const std::map<const Node*, int>& group_of) {
  std::map<const Node*, int> index;
  for (size_t i = 0; i < g.nodes().size(); ++i) index[g.nodes()[i].get()] = static_cast<int>(i);
  const size_t n = groups.size();
  std::vector<std::set<int>> succ(n);
  std::vector<int> indeg(n, 0);
  for (size_t gi = 0; gi < n; ++gi)
    for (const Node* node : groups[gi].nodes)
      for (const Value* v : node->inputs)
        if (v && v->producer && group_of.at(v->producer) != static_cast<int>(gi))
          if (succ[group_of.at(v->producer)].insert(static_cast<int>(gi)).second) ++indeg[gi];
  auto first = [&](int gi) { return index.at(groups[gi].nodes.front()); };
  auto later = [&](int a, int b) { return first(a) > first(b); };
  std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
  for (size_t gi = 0; gi < n; ++gi)
    if (indeg[gi] == 0) ready.push(static_cast<int>(gi));
  std::vector<FusionGroup> out;
  while (!ready.empty()) {
    int gi = ready.top();
    ready.pop();
    out.push_back(groups[gi]);
    for (int s : succ[gi])
      if (--indeg[s] == 0) ready.push(s);
  }
  return out;  // the merge rule keeps the group graph acyclic, so every group is here
}

}  // namespace

FusionPlan plan_none(const Graph& g) {
  FusionPlan p;
  p.mode = "none";
  for (const auto& n : g.nodes()) p.groups.push_back({{n.get()}, "single", "--fusion none", 0});
  return p;
}

StatusOr<FusionPlan> plan_greedy(const Graph& g, const FusionOptions& o) {
  FusionPlan p;
  p.mode = "greedy";
  std::vector<FusionGroup> groups;
  std::map<const Node*, int> group_of;
  const auto users = g.users();
  // True when `q` (outside group gi) reads, directly or transitively, something group gi makes.
  auto depends_on_group = [&](const Node* q, int gi) {
    std::vector<const Node*> stack{q};
    std::set<const Node*> seen;
    while (!stack.empty()) {
      const Node* x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second) continue;
      for (const Value* v : x->inputs) {
        if (!v || !v->producer) continue;
        if (group_of.count(v->producer) && group_of.at(v->producer) == gi) return true;
        stack.push_back(v->producer);
      }
    }
    return false;
  };
  // Groups with a segment op: the values an epilogue may read in registers (the op's output 0 and
  // the epilogue's results). Which of them must be stored is settled after the walk.
  std::map<int, std::set<const Value*>> epi_vals;
  for (const auto& np : g.nodes()) {
    const Node* n = np.get();
    int joined = -1;
    bool epilogue = false;
    if (pointwise(*n) && !o.no_fuse.count(n->name)) {
      for (const Value* v : n->inputs) {
        if (!v || !v->producer || !group_of.count(v->producer)) continue;
        const int gi = group_of.at(v->producer);
        FusionGroup& grp = groups[gi];
        const Node* head = grp.nodes.front();
        auto reject = [&](const std::string& why) {
          p.rejected.push_back(fmt::format("{} not merged with {}: {}", n->describe(), v->producer->describe(), why));
        };
        if (epi_vals.count(gi) && epi_vals.at(gi).count(v)) {
          // Epilogue after a segment op: applied to its output before the store.
          std::string why;
          if (*n->output(0)->dims != *v->dims) why = "an epilogue must keep the segment op's output shape";
          else if (static_cast<int>(grp.nodes.size()) >= o.max_group_size)
            why = fmt::format("the group has reached --max-group-size {}", o.max_group_size);
          for (const Value* in : n->inputs) {
            if (!in || epi_vals.at(gi).count(in) || !in->producer || !why.empty()) continue;
            if (group_of.count(in->producer) && group_of.at(in->producer) == gi)
              why = "it reads a value of the group that is not in registers at the store";
            else if (depends_on_group(in->producer, gi))
              why = "another input depends on the group (a cycle)";
          }
          if (!why.empty()) {
            reject(why);
            continue;
          }
          joined = gi;
          epilogue = true;
          break;
        }
        if (grp.scheme != "local" && !(grp.nodes.size() == 1 && pointwise(*head) && !o.no_fuse.count(head->name))) {
          reject(o.no_fuse.count(head->name) ? "the producer is in --no-fuse"
                                             : "the producer is not a per-element op (local stitching only)");
          continue;
        }
        const Dims& domain = *head->output(0)->dims;
        if (*n->output(0)->dims != domain) {
          reject(fmt::format("its shape {} differs from the group's {} (a broadcast into a larger domain)",
                             dims_to_string(*n->output(0)->dims), dims_to_string(domain)));
          continue;
        }
        bool aligned = true;
        for (const Value* in : n->inputs)
          if (in && in->producer && group_of.count(in->producer) && group_of.at(in->producer) == gi &&
              *in->dims != domain)
            aligned = false;
        if (!aligned) {
          reject("it reads a group intermediate through a broadcast");
          continue;
        }
        if (static_cast<int>(grp.nodes.size()) >= o.max_group_size) {
          reject(fmt::format("the group has reached --max-group-size {}", o.max_group_size));
          continue;
        }
        bool cycle = false;
        for (const Value* in : n->inputs)
          if (in && in->producer && (!group_of.count(in->producer) || group_of.at(in->producer) != gi) &&
              depends_on_group(in->producer, gi))
            cycle = true;
        if (cycle) {
          reject("another of its inputs is computed from the group's outputs outside the group (a cycle)");
          continue;
        }
        joined = gi;
        break;
      }
    }
    // Regional: a segment op (softmax, norms, reductions) takes the per-element group that makes
    // its input as a prologue, recomputed at each of its reads, when nothing else needs the
    // group's results.
    if (joined < 0 && codegen::takes_prologue(*n) && codegen::classify_node(*n) == codegen::NodeLowering::kKernel &&
        !o.no_fuse.count(n->name) && n->input(0) && n->input(0)->producer && group_of.count(n->input(0)->producer)) {
      const Value* x = n->input(0);
      const int gi = group_of.at(x->producer);
      FusionGroup& grp = groups[gi];
      const Node* head = grp.nodes.front();
      auto reject = [&](const std::string& why) {
        p.rejected.push_back(fmt::format("{} not merged with {}: {}", n->describe(), x->producer->describe(), why));
      };
      const bool per_element = grp.scheme == "local" || (grp.nodes.size() == 1 && pointwise(*head));
      std::string why;
      if (!per_element || o.no_fuse.count(head->name)) {
        why = "its producer is not a per-element group";
      } else if (*head->output(0)->dims != *x->dims) {
        why = "the per-element group has another shape";
      } else if (static_cast<int>(grp.nodes.size()) >= o.max_group_size) {
        why = fmt::format("the group has reached --max-group-size {}", o.max_group_size);
      } else {
        std::set<const Node*> members(grp.nodes.begin(), grp.nodes.end());
        for (const Node* m : grp.nodes) {
          const Value* v = m->output(0);
          if (g.is_graph_output(v)) why = fmt::format("'{}' is a graph output", v->name);
          for (const Node* u : users.count(v) ? users.at(v) : std::vector<Node*>{})
            if (u != n && !members.count(u)) why = fmt::format("'{}' is also read by {}", v->name, u->describe());
        }
        for (size_t k = 1; k < n->inputs.size() && why.empty(); ++k) {
          const Value* in = n->input(k);
          if (in && in->producer && depends_on_group(in->producer, gi)) why = "another input depends on the group (a cycle)";
          if (in && in->producer && group_of.count(in->producer) && group_of.at(in->producer) == gi)
            why = "it reads the group's results through another input";
        }
      }
      if (why.empty()) {
        grp.nodes.push_back(n);
        grp.scheme = "regional";
        grp.saved_bytes += 2 * bytes_of(x);
        group_of[n] = gi;
        epi_vals[gi] = {n->output(0)};
        continue;
      }
      reject(why);
    }
    if (joined >= 0 && epilogue) {
      FusionGroup& grp = groups[joined];
      grp.scheme = "regional";
      grp.nodes.push_back(n);
      group_of[n] = joined;
      epi_vals[joined].insert(n->output(0));
      continue;
    }
    if (joined >= 0) {
      FusionGroup& grp = groups[joined];
      grp.scheme = "local";
      // The intermediates this merge keeps in registers: inputs made by the group and read only inside.
      for (const Value* in : n->inputs) {
        if (!in || !in->producer || group_of.at(in->producer) != joined) continue;
        bool inside_only = !g.is_graph_output(in);
        for (const Node* u : users.at(in))
          if (u != n && (!group_of.count(u) || group_of.at(u) != joined)) inside_only = false;
        if (inside_only) grp.saved_bytes += 2 * bytes_of(in);
      }
      grp.nodes.push_back(n);
      group_of[n] = joined;
    } else {
      groups.push_back({{n}, "single", "", 0});
      group_of[n] = static_cast<int>(groups.size()) - 1;
      if (codegen::takes_prologue(*n) && codegen::classify_node(*n) == codegen::NodeLowering::kKernel &&
          !o.no_fuse.count(n->name))
        epi_vals[group_of[n]] = {n->output(0)};
    }
  }
  // An epilogue stores only its last value: drop trailing epilogue nodes until nothing else in
  // registers is read outside the group (dropped nodes run alone).
  groups.reserve(groups.size() + g.nodes().size());  // dropped nodes are appended below
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    FusionGroup& grp = groups[gi];
    if (grp.scheme != "regional") continue;
    auto row = std::find_if(grp.nodes.begin(), grp.nodes.end(), [](const Node* m) { return !pointwise(*m); });
    for (;;) {
      const size_t r = static_cast<size_t>(row - grp.nodes.begin());
      if (r + 1 == grp.nodes.size()) break;
      std::set<const Node*> members(grp.nodes.begin(), grp.nodes.end());
      std::string leak;
      for (size_t i = r; i + 1 < grp.nodes.size() && leak.empty(); ++i) {
        const Value* v = grp.nodes[i]->output(0);
        if (g.is_graph_output(v)) leak = fmt::format("'{}' is a graph output", v->name);
        if (users.count(v))
          for (const Node* u : users.at(v))
            if (!members.count(u)) leak = fmt::format("'{}' is also read by {}", v->name, u->describe());
      }
      if (leak.empty()) break;
      const Node* dropped = grp.nodes.back();
      p.rejected.push_back(fmt::format("{} taken out of the epilogue of {}: {} (an epilogue stores only its last value)",
                                       dropped->describe(), (*row)->describe(), leak));
      grp.nodes.pop_back();
      groups.push_back({{dropped}, "single", "", 0});
      group_of[dropped] = static_cast<int>(groups.size()) - 1;
      row = std::find_if(groups[gi].nodes.begin(), groups[gi].nodes.end(), [](const Node* m) { return !pointwise(*m); });
    }
  }
  for (FusionGroup& grp : groups) {
    if (grp.scheme == "regional" && std::all_of(grp.nodes.begin(), grp.nodes.end(),
                                                [&](const Node* m) { return m == grp.nodes.front(); })) {
      grp.scheme = "single";
    }
    if (grp.scheme == "regional") {
      auto row = std::find_if(grp.nodes.begin(), grp.nodes.end(), [](const Node* m) { return !pointwise(*m); });
      const long before = row - grp.nodes.begin(), after = grp.nodes.end() - row - 1;
      // Every value but the stored one (the last node's) stays in registers.
      grp.saved_bytes = 0;
      for (const Node* m : grp.nodes)
        if (m != grp.nodes.back() && m->output(0)) grp.saved_bytes += 2 * bytes_of(m->output(0));
      grp.reason = fmt::format("{} '{}' with {} per-element nodes recomputed at its reads and {} applied before its "
                               "store (regional): {} fewer launches, {} B less traffic", (*row)->op_type, (*row)->name,
                               before, after, grp.nodes.size() - 1, grp.saved_bytes);
    }
    else if (grp.scheme == "local")
      grp.reason = fmt::format("{} per-element nodes of shape {} in registers: {} fewer launches, {} B less traffic",
                               grp.nodes.size(), dims_to_string(*grp.nodes.front()->output(0)->dims), grp.nodes.size() - 1,
                               grp.saved_bytes);
    else if (codegen::classify_node(*grp.nodes.front()) == codegen::NodeLowering::kView)
      grp.reason = "a view: shares its input's storage, no kernel";
    else if (codegen::classify_node(*grp.nodes.front()) == codegen::NodeLowering::kLibrary)
      grp.reason = "a library call (GEMM epilogues come later)";
    else
      grp.reason = pointwise(*grp.nodes.front()) ? "no per-element producer of the same shape to join"
                                                 : "not a per-element op (regional and global schemes come later)";
  }
  const size_t count = groups.size();
  p.groups = order_groups(g, std::move(groups), group_of);
  STITCH_CHECK(p.groups.size() == count, "fusion: the group graph has a cycle");
  return p;
}

StatusOr<FusionPlan> make_plan(const Graph& g, const FusionOptions& o) {
  for (const std::string& name : o.no_fuse) {
    bool found = false;
    for (const auto& n : g.nodes()) found |= n->name == name;
    if (!found) return Status::user(fmt::format("--no-fuse '{}': the model has no node of that name", name));
  }
  if (o.max_group_size < 1) return Status::user("--max-group-size must be at least 1");
  if (o.mode == "none") return plan_none(g);
  if (o.mode == "greedy") return plan_greedy(g, o);
  return Status::user(fmt::format("--fusion {}: available planners are none and greedy (beam and ilp come later)",
                                  o.mode));
}

std::string explain(const FusionPlan& plan) {
  std::string s = fmt::format("fusion plan ({}): {} groups\n", plan.mode, plan.groups.size());
  int i = 0;
  for (const FusionGroup& grp : plan.groups) {
    if (grp.nodes.size() == 1 && grp.scheme == "single" && plan.mode == "none") {
      ++i;
      continue;
    }
    s += fmt::format("  group {} [{}]: {}\n", i++, grp.scheme, grp.reason);
    for (const Node* n : grp.nodes) s += fmt::format("    {} -> {}\n", n->describe(), n->output(0) ? n->output(0)->type_string() : "");
  }
  if (!plan.rejected.empty()) {
    s += "rejected merges:\n";
    for (const std::string& r : plan.rejected) s += "  " + r + "\n";
  }
  return s;
}

}  // namespace stitch::fusion
