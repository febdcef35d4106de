// The graph rewrites before planning, in their one order (what `stitchc compile` runs and what the
// ONNX node tests run when they plan): GroupNorms with their channels apart (group_norms.h),
// per-head norms over merged rows with the heads apart (head_rows.h), Gemms as MatMuls
// (gemm_matmul.h), GEMMs of expert weights gathered per slot as GEMMs of all the experts' weights
// (expert_gemms.h), an MoE token's sum over its slots as one GEMM over every expert (expert_sums.h:
// right after, on their form), MatMuls of flattening views reading the activation itself
// (unflatten_gemms.h: after the Gemms, which onnxruntime writes between such views), constant
// scales after a GEMM folded into its weights (fold_scales.h), sibling GEMMs merged
// (merge_gemms.h), Splits and constant Gathers as Slices (split_slices.h), shared relayouts copied
// per reader (relayout_copies.h: after the Slices, which make such chains), row scales moved past
// GEMMs, then LayerNorms moved past GEMMs (hoist_scales.h), ArgMax and ArgMin as row reductions
// with scatters of a few indices per row as selects (arg_reductions.h), sums and softmaxes over a few
// elements as element-wise ops (short_reductions.h: after the rewrites that read a norm's
// ReduceMean), pools over windows of a few positions as strided Slices combined element-wise
// (pool_taps.h), TopKs of a few as rounds of row reductions (topk_rounds.h: late, judged on a plan
// close to the final one, since the rewrites before it change the kernels its rounds would join),
// maxima and minima over a few elements as element-wise ops (short_reductions.h: after the TopKs,
// whose rounds they take, and after the row scales judged again; judged per row length, and kept
// only with no more kernels), duplicates that share a kernel read as their originals
// (kernel_duplicates.h: after every rewrite that copies a chain), graph outputs computed again for
// their readers (output_copies.h: last, since it keeps only the copies the final plan does not
// store). Gemms go first so that the MatMul rewrites see them too, and the fold before the merge,
// whose weights it changes. The GroupNorms, the head rows, the unflattening, the fold and the
// merge always apply (each leaves less work); every other rewrite is kept only when the plan of
// the rewritten graph is estimated no slower. Slices that are not cheaper by themselves are judged
// once more together with the relayout copies they leave room for (Falcon's K and V, picked out of
// one Transpose), against the copies alone; GEMMs over every expert not cheaper by themselves,
// together with the sums over every expert that read their form, against neither (mixtral_tiny's
// plan before them is good enough that only both gain). None runs for --fusion none (the unfused
// baseline is the graph as imported).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

struct RewriteSwitches {  // each off with its --no-... flag
  bool gemms_as_matmuls = true;
  bool all_expert_gemms = true;
  bool expert_sums = true;
  bool topk_rounds = true;
  bool short_reductions = true;
  bool pool_taps = true;
  bool short_maxima = true;  // --no-short-reductions too
  bool shared_duplicates = true;
  bool arg_reductions = true;
  bool fold_scales = true;
  bool merge_gemms = true;
  bool unflatten_gemms = true;
  bool split_slices = true;
  bool relayout_copies = true;
  bool output_copies = true;
  bool hoist_row_scales = true;
  bool hoist_layer_norms = true;
  bool split_group_norms = true;
  bool split_head_rows = true;
};

struct Rewrites {
  RewriteResult gemms;
  std::vector<std::string> scale_folds;  // fold_column_scales' lines
  std::vector<std::string> merges;       // merge_sibling_gemms' lines
  std::vector<std::string> unflattened;  // unflatten_gemms' lines
  std::vector<std::string> group_norms;  // split_group_norms' lines
  std::vector<std::string> head_rows;    // split_head_rows' lines
  RewriteResult experts, expert_sums, args, short_sums, pools, topks, short_maxima, duplicates, slices,
      copies, outputs, hoists, norm_hoists;
  // The plan of the graph as the rewrites leave it, with the options they were given, when the
  // last rewrite that changed it was judged by planning it (or none changed it after a judged
  // rewrite planned it): make_plan would return the same plan. Null otherwise.
  std::shared_ptr<const FusionPlan> plan;
  // The plan's opening lines: each rewrite that had candidates, with its verdict and lines.
  std::string text() const;
};

StatusOr<Rewrites> rewrite_for_planning(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                        const RewriteSwitches& on = {});

}  // namespace stitch::fusion
