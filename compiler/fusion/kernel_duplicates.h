// Duplicates that share a kernel: a node that computes what another node computes (the same op,
// domain, opset and attributes over the same inputs, or over inputs that are themselves such
// duplicates) and whose reader's kernel computes the other one too. The rewrites make such copies
// on purpose: copy_row_statistics (row_statistics.h) gives each reader of a norm's statistic that
// scales a GEMM's product its own chain, so that each reader's kernel can compute the statistic
// itself. Where the plan then puts a reader in the kernel that computes the original chain too
// (Mixtral's router kernel: the norm's statistic for the router's row scale beside the norm's own),
// the kernel computes the statistic twice: the reader reads the original instead. Only a reader in
// the original's kernel is rewired, so no value crosses kernels that did not before (merging every
// duplicate made bert_legacy_ort's two layers share one Cast of their mask and cost a kernel:
// passes/merge_duplicates.cc). Where most of the copy is a kernel of its own (GLM-4-MoE's router),
// only its last nodes are in the original's kernel; rewired, the graph is planned anew and the
// estimate decides (there the search plans the rows differently, and the rewrite is not kept).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Plans `g` with `o`, then rewires each reader of a duplicate's output (a computing node: element-
// wise or a row op, one output) that the plan puts in the kernel of the node it duplicates to read
// that node's output, and removes the nodes left unread. Nodes named in o.no_fuse are left as they
// are. Returns one line per duplicate whose readers were rewired. `plan_of`, when given, is a plan
// with `o` of `planned`, a graph `g` was cloned from and equals (the same nodes, in the same order
// and with the same names): its groups are taken node for node rather than planning `g` again.
StatusOr<std::vector<std::string>> share_kernel_duplicates(Graph& g, const FusionOptions& o,
                                                           const FusionPlan* plan_of = nullptr,
                                                           const Graph* planned = nullptr);

// share_kernel_duplicates through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten
// graph is estimated no slower. `g_plan`, when given, is the plan of *g with `o` (the judged
// rewrites' plan of the graph as it stands), which the rewrite then reads instead of planning its
// copy of g again.
StatusOr<RewriteResult> share_kernel_duplicates_if_cheaper(
    std::unique_ptr<Graph>& g, const FusionOptions& o, const std::optional<Cost>& before = std::nullopt,
    std::shared_ptr<const FusionPlan> g_plan = nullptr);

}  // namespace stitch::fusion
