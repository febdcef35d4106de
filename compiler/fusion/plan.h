// Fusion plans: which nodes run together in one stitched kernel, and why.
//
// A FusionPlan is a value the planners return (DESIGN.md), so planners can be swapped and
// compared on the same graph. Groups are listed in a valid execution order (a topological order
// of the group graph); every node of the graph is in exactly one group.
//
// A group is legal when codegen::analyze_stitch accepts it (an element or a row kernel, see
// codegen/stitch.h), it has at most max_group_size nodes, no node is in no_fuse, and the group
// graph stays acyclic. Its cost is the cost model's estimate (cost.h); a plan's cost is the sum.
// Three planners search the partitions, all deterministic (ties broken by node order) and
// time-bounded; fusion only happens inside a "component": nodes that can be stitched, connected
// by producer-consumer edges (library calls and unsupported ops separate components).
//  - greedy: merges along edges in graph order whenever the merge is legal and lowers the cost,
//    until no merge does (the baseline);
//  - beam (default): per window of `beam_window` nodes of a component (graph order), a beam of
//    the `beam_width` cheapest partitions, each step trying every legal merge of two groups
//    joined by an edge (or of a group with all its producers or all its consumers); greedy then
//    merges across windows, and greedy's own partition is kept as a candidate, so beam is never
//    worse than greedy and planning time grows linearly with the number of layers;
//  - ilp: per component of at most `ilp_max_nodes` nodes, every legal connected group is a binary
//    variable and GLPK picks the cheapest exact cover (cycles between chosen groups are cut and
//    the model solved again); larger components fall back to beam.
// Fine-grained GEMMs (codegen::contraction_length: attention's Q.K^T) are planned both ways: once
// as library calls that take over their neighbours' layouts and scalars (GEMM folds), and once as
// members the search may join to stitched kernels; a candidate left alone goes back to its call
// and the rest are planned again. The cheaper plan is kept and the plan says which and why.
// After any planner, independent stitched kernels close together in the execution order (no path
// between them, same block size) are packed into one launch when `horizontal` is set
// (independent stitching); packs are listed in the plan and counted as one launch.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/gemm_folds.h"
#include "fusion/cost.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

struct FusionOptions {
  std::string mode = "beam";             // none | greedy | beam | ilp
  std::set<std::string> no_fuse;         // node names that stay alone
  int max_group_size = 128;              // nodes per group, views not counted
  int beam_width = 8;
  int beam_window = 64;
  bool horizontal = true;                // pack independent stitched kernels into one launch
  bool approximate_gelu = false;         // erf-form GELU may run as cuBLASLt's tanh-form epilogue
  bool stitch_matmul = true;             // fine-grained MatMuls may join stitched kernels (codegen/stitch.h)
  // Feedback from the kernels built: no group may contain all nodes of one of these sets (a kernel
  // of them spilled, went over the register budget or computed its nodes more than
  // --max-evaluations times), and no group holding one of no_pack is packed.
  std::vector<std::set<std::string>> keep_apart;
  std::set<std::string> no_pack;                  // beam searches windows of this many nodes, then greedy joins them
  int ilp_max_nodes = 16;                // larger components use beam under --fusion ilp
  // The search's budget, in steps (fusion/planner.h: one per look at a candidate group, four more
  // per node of a group analysed): a count, not a clock, so a model gets the same plan on every
  // machine and under any load. When it runs out the best plan so far is kept. The default is
  // about 7 s of planning on 2 cores; the most any export seen took is 10.6M (RWKV's).
  int64_t work_limit = 50'000'000;
  // A safety net in wall-clock seconds for the whole search (the plan then depends on the
  // machine's speed, and says so); the budget above is what normally ends a search.
  double time_limit_s = 60;
  DeviceSpec device;                     // the cost model's device (sm_90 when unset)
};

struct FusionGroup {
  std::vector<const Node*> nodes;  // in graph (topological) order
  std::string scheme;              // "single", "view", "library", "local" (element kernel) or "regional" (row kernel)
  std::string reason;              // why the group is what it is
  std::string mapping;             // thread mapping (kernels)
  int64_t saved_bytes = 0;         // traffic removed against running its nodes alone
  Cost cost;                       // estimated
  Cost unfused;                    // the same nodes alone
  int pack = -1;                   // index into FusionPlan::packs when launched with other groups
};

struct FusionPlan {
  std::string mode;
  std::vector<FusionGroup> groups;
  std::vector<std::string> rejected;  // "node 'b' not merged with node 'a': reason"
  // Independent (horizontal) packs: groups (indices into `groups`, adjacent there) that run in one
  // launch, each over its own range of blocks. `cost` counts a pack as one launch.
  std::vector<std::vector<int>> packs;
  std::string device;                 // the device the costs are for
  Cost cost, unfused;
  double plan_seconds = 0;            // planning time (stitchc compile: the rewrites' included)
  double rewrite_seconds = 0;         // of it, the rewrites before planning (stitchc compile)
  int64_t work = 0;                   // steps of FusionOptions::work_limit taken
  // GEMM calls take over bias adds, activations, layouts, scalars (off for none).
  codegen::FoldOptions gemm_folds;
  std::vector<std::string> fold_notes;  // activations that stay kernels, and why
  std::string contraction_note;         // fine-grained MatMuls: stitched or library calls, and why
  std::vector<std::string> tiled_notes;  // tiled GEMM candidates left as library calls, and why
  bool budget_spent = false;             // the search stopped at FusionOptions::work_limit
  bool timed_out = false;                // ... at FusionOptions::time_limit_s
};

// Every node alone, in graph order: the unfused baseline.
FusionPlan plan_none(const Graph& g, const FusionOptions& o = {});
// Dispatch on o.mode; a user error for an unknown mode, or no_fuse names no node.
StatusOr<FusionPlan> make_plan(const Graph& g, const FusionOptions& o);
// Exhaustive search over partitions of each component (tests only: exponential).
StatusOr<FusionPlan> plan_brute_force(const Graph& g, const FusionOptions& o);

// Human-readable plan for --explain-fusion.
std::string explain(const FusionPlan& plan);

// A graph rewrite before planning (row scales past GEMMs, Splits and constant Gathers as Slices), applied to
// a copy of `g` and kept (g replaced) when the copy's plan is estimated no slower than g's (faster, with
// `strict`: for a rewrite that only adds nodes, a tie means it gained nothing). `lines` are the
// rewrite's lines when kept; `verdict` says what was compared, naming `skip_flag` when not kept
// (empty when the rewrite found nothing to do); `kept` is the estimate of the graph as left (with
// the rewrite or without), unset when nothing was compared. `before`, when set, is the estimate
// of `g` as it is (the `kept` of the judged rewrite before, with no other rewrite since): only the
// copy is planned then. With `no_more_kernels`, a copy planned with more kernels than `g` is not
// kept however fast (the verdict then names both counts). `kept_plan` is the plan `kept` comes
// from, of the graph as left, when this judgement planned it (null when `kept` is `before`, or
// unset): the last one stands for the final plan when no rewrite changes the graph after it.
struct RewriteResult {
  std::vector<std::string> lines;
  std::string verdict;
  std::optional<Cost> kept;
  std::shared_ptr<const FusionPlan> kept_plan;
  // rewrite_if_cheaper: the estimate of the rewritten copy, kept or not (unset when the rewrite
  // changed nothing), for a later judgement of the same rewrite together with another.
  std::optional<Cost> tried;
  // One more judgement of the same rewrite, under `label` (a part of its candidates, or a second
  // look after other rewrites): its verdict after this one's, "; " between, its lines after these.
  // Nothing when the step had no candidate (an empty verdict). `kept` is left to the caller.
  void add_step(const std::string& label, const RewriteResult& step);
};
StatusOr<RewriteResult> rewrite_if_cheaper(
    std::unique_ptr<Graph>& g, const FusionOptions& o,
    const std::function<StatusOr<std::vector<std::string>>(Graph&)>& rewrite, const std::string& skip_flag,
    bool strict = false, const std::optional<Cost>& before = std::nullopt, bool no_more_kernels = false);
// g's estimate for a judged rewrite when `before` is unset: g planned on a second thread while the
// caller plans its copy (planning reads the graphs only; the per-thread node facts are opened by
// each plan, and a copy shares g's weights read-only). An invalid future when `before` is set.
std::future<StatusOr<FusionPlan>> plan_unless_known(const std::optional<Cost>& before, const Graph& g,
                                                    const FusionOptions& o);
// `before` when set, else the plan plan_unless_known started, with its cost.
StatusOr<std::pair<Cost, std::shared_ptr<const FusionPlan>>> estimate_before(
    const std::optional<Cost>& before, std::future<StatusOr<FusionPlan>>& g_plan);
// rewrite_if_cheaper's judgement, for callers that made the copy and its plan themselves: `c0` is
// g's estimate (`plan0` its plan when the caller made it), `after` the copy's plan and `lines`
// the rewrite's. Kept when the result's lines are not empty; the caller then puts the copy in g.
RewriteResult judge_rewrite(const Cost& c0, std::shared_ptr<const FusionPlan> plan0, FusionPlan after,
                            std::vector<std::string> lines, const std::string& skip_flag, bool strict,
                            bool no_more_kernels);

}  // namespace stitch::fusion
