// The fusion planner's state and search (internal to compiler/fusion): a partition of the graph's
// nodes into groups, memoised group legality and cost, and the searches over it. plan.h is the
// interface; planner.cc holds the partition bookkeeping and the finished plan, search.cc the
// greedy, beam, ILP and brute-force searches, pack.cc independent packing.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/gemm_folds.h"
#include "codegen/stitch.h"
#include "fusion/plan.h"

namespace stitch::fusion {

using Clock = std::chrono::steady_clock;

struct Eval {
  bool ok = false;
  std::string why;
  Cost cost;
  codegen::StitchInfo info;
};

// A partition: gid[node] is the smallest node index of its group (so equal partitions are equal
// vectors); groups[id] holds the sorted member indices of the group with that id, and is empty
// for an index that is no group's id (searches look groups up millions of times: a vector over
// node indices, not a map).
struct Part {
  std::vector<int> gid;
  std::vector<std::vector<int>> groups;
  size_t count = 0;  // groups
  double cost = 0;   // of the component being planned
};

struct MembersHash {
  size_t operator()(const std::vector<int>& m) const {
    size_t h = m.size();
    for (int x : m) h = (h ^ static_cast<size_t>(x)) * 0x100000001b3ULL;  // FNV-1a over the members
    return h;
  }
};

// Analyses of groups of fusible nodes (codegen::analyze_stitch and the stitched cost), by member
// indices: they depend on the graph and the options alone, not on which MatMuls a plan offers
// as fine-grained or which nodes its GEMM calls take over, so the plans of one make_plan (the
// library plan and each round of fine-grained candidates) share them.
using Analyses = std::unordered_map<std::vector<int>, Eval, MembersHash>;

class Planner {
 public:
  // fold: let GEMM calls take over their neighbours' work (codegen::find_gemm_folds); off for
  // the unfused baseline. contract: fine-grained MatMuls that may join stitched kernels (they
  // take no folds; alone, each is still its library call). analyses: shared with other planners
  // of the same graph and options (null: this planner's own).
  Planner(const Graph& g, const FusionOptions& o, bool fold = true, std::set<const Node*> contract = {},
          Analyses* analyses = nullptr);
  // Steps of the search's budget (FusionOptions::work_limit): one per look at a candidate group's
  // legality and cost, kAnalysisStep more per node of a group analysed for the first time by the
  // planners sharing its Analyses (on the 2-core CI machine a look from memory took about 0.14 us
  // and analysing a node about 0.55 us: fitted to the planning times of the Qwen3-Next and RWKV
  // exports).
  static constexpr int64_t kLookStep = 1, kAnalysisStep = 4;
  // True once the budget is spent or the wall-clock limit passed; the searches then keep the best
  // partition they have.
  bool out_of_time();
  Part singletons() const;
  // Components: fusible nodes joined by producer-consumer edges, in order of their first node.
  std::vector<std::vector<int>> components() const;
  // Legality and cost of one group (sorted member indices), memoised.
  const Eval& eval(const std::vector<int>& m);
  // Nodes of `m` that count toward FusionOptions::max_group_size.
  int group_size(const std::vector<int>& m) const;
  // Outputs of `ns` read outside it (or graph outputs): what its kernel stores.
  std::set<const Value*> escaping(const std::vector<const Node*>& ns) const;
  // The same for the nodes `m` (indices; what codegen::group_outputs gives): every group the search
  // analyses asks, so it walks each member's readers by index rather than looking them up.
  std::set<const Value*> escaping(const std::vector<int>& m) const;
  static std::vector<int> merged(const std::vector<int>& a, const std::vector<int>& b);
  // True when the groups `ids` (sorted; to become one) would sit on a cycle of the group graph: some path
  // leaves them and comes back through other groups.
  // Nodes are in topological order, so such a path only passes nodes before the groups' last
  // member: the search never looks past it (this keeps the check local on long graphs).
  bool cycle(const Part& p, const std::vector<int>& ids) const;
  // Why groups a and b cannot merge ("" when they can), and the merged evaluation.
  std::string merge_check(const Part& p, int a, int b, const Eval** out);
  static void apply(Part& p, int a, int b, double delta);
  double group_cost(const Part& p, int id) { return eval(p.groups.at(id)).cost.time; }
  // Edges inside a component, consumer order.
  std::vector<std::pair<int, int>> edges(const std::vector<int>& comp) const;
  double component_cost(const Part& p, const std::vector<int>& comp);
  void greedy(Part& p, const std::vector<int>& comp);
  // Beam search over one window of a component (nodes `win`, moves along edges inside it: two
  // groups, a group with all its producer or all its consumer groups, and a view alone in its
  // group that other groups read too with its producer group and one consumer group at once,
  // since a kernel stores a view's result only for readers of its own). Every candidate move of
  // every state is scored first; only the `beam_width` best distinct children are kept. A state
  // is the merges that lead to it, applied to `p` while it is looked at and undone after, so no
  // step copies the partition.
  void beam_window(Part& p, const std::vector<int>& win);
  // Beam search per window of `beam_window` nodes in graph order (a transformer's layers are
  // separate windows, so the search grows linearly with depth), then greedy merges across window
  // boundaries; greedy over the whole component is kept as a candidate, so beam is never worse
  // before packing (plan_once also finishes greedy's partition of every component, packs
  // included, and keeps it when that plan is cheaper).
  void beam(Part& p, const std::vector<int>& comp);
  // Local improvement of a partition the beam search finished (plan.cc keeps it when the finished
  // plan, packs included, is estimated cheaper): for two groups joined by an edge, cuts of their
  // nodes into a first and a second group are looked at (for each node: the nodes before it in
  // graph order and the rest; it with what it reads inside the pair and the rest; the rest and it
  // with what reads it inside the pair), and the cheapest legal one that no path through other
  // groups makes a cycle replaces the pair when it is cheaper than the pair. Over all such pairs, up to
  // kRecutRounds times while one improves; true when one did. Both new groups must be connected (the
  // groups ILP and brute force choose from are). Beam keeps the first merge that looked best in
  // each window: a norm that took a router's first nodes where the router's kernel would have
  // taken them all gives them back this way.
  // A pair of more than kRecutWhole nodes is cut only where at most kRecutMove of its nodes change
  // sides: every cut costs an analysis of both new groups, so trying them all grows with the square
  // of the pair (an xLSTM export's element kernels of 250 nodes made recut 80% of a 100 s plan),
  // while the moves that pay off on such pairs are near the boundary the search left (at most 36
  // nodes on the exports measured; larger moves, up to 84 nodes, were on pairs of at most 174).
  static constexpr int kRecutRounds = 4;
  static constexpr size_t kRecutWhole = 192, kRecutMove = 48;
  bool recut(Part& p, const std::vector<int>& comp);
  // Whether the nodes `m` (sorted) are joined by producer-consumer edges among themselves.
  bool connected(const std::vector<int>& m) const;
  // Connected legal groups of a component (bit masks over comp positions), for ILP and brute force.
  std::vector<std::vector<int>> candidate_groups(const Part& p, const std::vector<int>& comp);
  // The groups in execution order (Kahn over the group graph, ties by first node); shorter than
  // p.groups when the group graph has a cycle.
  std::vector<int> group_order(const Part& p) const;
  bool acyclic(const Part& p) const { return group_order(p).size() == p.count; }
  Part with_groups(Part p, const std::vector<std::vector<int>>& chosen);
  // Exact cover by GLPK; false when the component is too big or no acyclic optimum was found.
  bool ilp(Part& p, const std::vector<int>& comp);
  bool brute(Part& p, const std::vector<int>& comp);
  // Threads per block of the stitched kernel a group would become; 0 when it is not one (a
  // library call, a view, an op the stitcher does not take).
  int64_t stitched_block(const std::vector<int>& m);
  // Execution order of groups where each pack is one node (Kahn, ties by first position in
  // `order`); empty when packing made a cycle.
  std::vector<int> packed_order(const Part& p, const std::vector<int>& order,
                                const std::map<int, int>& pack_of) const;
  // Independent (horizontal) packing: walking the execution order, a stitched kernel takes into
  // its launch the following stitched kernels (the next kPackWindow of them, same block size) that
  // no path joins to any member, as long as the packed group graph stays acyclic. Returns the new
  // order (a pack's members adjacent) and fills pack_of (group id -> the pack's first member).
  std::vector<int> pack(const Part& p, std::vector<int> order, std::map<int, int>& pack_of);
  // The plan for a finished partition: groups in execution order, costs, reasons, rejections.
  FusionPlan finish(const Part& p, const std::string& mode);
  FusionGroup describe(const std::vector<int>& m);

 private:
  const Graph& g_;
  const FusionOptions& o_;
  bool fold_;
  Clock::time_point start_;
  bool timed_out_ = false;
  bool budget_spent_ = false;
  int64_t work_ = 0;  // steps of FusionOptions::work_limit taken
  std::vector<const Node*> nodes_;
  std::map<const Node*, int> idx_;
  std::unordered_map<const Value*, std::vector<Node*>> users_;
  std::vector<std::vector<int>> succ_, pred_;
  // Per node, its outputs: each with whether the graph returns it and the nodes that read it.
  struct OutputUse {
    const Value* v;
    bool graph_output;
    std::vector<int> readers;
  };
  std::vector<std::vector<OutputUse>> output_uses_;
  std::vector<bool> fusible_;
  // connected()'s and escaping()'s scratch, all 0 between calls (a Planner runs on one thread).
  mutable std::vector<char> member_marks_;
  // cycle()'s scratch: marks by group id, all 0 between calls; the groups marked; the walk's stack.
  mutable std::vector<char> cycle_marks_;
  mutable std::vector<int> cycle_seen_, cycle_stack_;
  std::vector<bool> sized_;  // counts toward --max-group-size: every node but a view (no code in a kernel)
  std::set<const Node*> contract_;
  codegen::GemmFolds folds_;
  std::vector<bool> folded_;  // nodes a GEMM call takes over (codegen::find_gemm_folds)
  std::vector<Cost> single_;  // in this plan (zero for nodes a GEMM call takes over)
  std::vector<Cost> alone_;   // as its own step (the unfused figure)
  // Every group looked at: its Eval in *analyses_ or in own_evals_ (deque and unordered_map
  // elements stay where they are as they grow).
  std::unordered_map<std::vector<int>, const Eval*, MembersHash> memo_;
  std::deque<Eval> own_evals_;
  Analyses own_analyses_;
  Analyses* analyses_;  // own_analyses_ or a make_plan's
};

}  // namespace stitch::fusion
