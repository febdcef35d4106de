// Duplicates that share a kernel: a node that computes what another node computes (the same op,
// domain, opset and attributes over the same inputs, or over inputs that are themselves such
// duplicates) and whose reader's kernel computes the other one too. The rewrites make such copies
// on purpose: copy_row_statistics (row_statistics.h) gives each reader of a norm's statistic that
// scales a GEMM's product its own chain, so that each reader's kernel can compute the statistic
// itself. Where the plan then puts a reader in the kernel that computes the original chain (GLM-4-
// MoE's and DeepSeek-V3's router: the norm's statistic an outer reduction of the activations'
// kernel, the copy a kernel of its own in front of it), the copy is work and a launch for nothing:
// the reader reads the original instead. Only a reader in the original's kernel is rewired, so no
// value crosses kernels that did not before (merging every duplicate made bert_legacy_ort's two
// layers share one Cast of their mask and cost a kernel: passes/merge_duplicates.cc).
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
// are. Returns one line per duplicate whose readers were rewired.
StatusOr<std::vector<std::string>> share_kernel_duplicates(Graph& g, const FusionOptions& o);

// share_kernel_duplicates through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten
// graph is estimated no slower.
StatusOr<RewriteResult> share_kernel_duplicates_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                           const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
