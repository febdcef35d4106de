#include "fusion/rewrites.h"

#include <fmt/format.h>

#include <memory>
#include <optional>

#include "fusion/arg_reductions.h"
#include "fusion/expert_gemms.h"
#include "fusion/expert_sums.h"
#include "fusion/fold_scales.h"
#include "fusion/gemm_matmul.h"
#include "fusion/group_norms.h"
#include "fusion/head_rows.h"
#include "fusion/hoist_scales.h"
#include "fusion/kernel_duplicates.h"
#include "fusion/merge_gemms.h"
#include "fusion/output_copies.h"
#include "fusion/pool_taps.h"
#include "fusion/relayout_copies.h"
#include "fusion/row_statistics.h"
#include "fusion/short_reductions.h"
#include "fusion/split_slices.h"
#include "fusion/topk_rounds.h"
#include "fusion/unflatten_gemms.h"
#include "ir/verifier.h"

namespace stitch::fusion {
namespace {

// A rewrite's verdict by itself, within the verdict of its judgement with another rewrite.
std::string by_themselves(const std::string& verdict) {
  const std::string no = "not applied: ";
  return verdict.rfind(no, 0) == 0 ? verdict.substr(no.size()) : verdict;
}

}  // namespace

StatusOr<Rewrites> rewrite_for_planning(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                        const RewriteSwitches& on) {
  Rewrites r;
  if (o.mode == "none") return r;
  // The estimate of *g as it stands, from the last judged rewrite that planned it (its kept graph's),
  // unset once an unjudged rewrite changes the graph: each judged rewrite then plans only its copy.
  std::optional<Cost> known;
  // The plan of *g as it stands, when a judged rewrite planned it (r.plan at the end).
  std::shared_ptr<const FusionPlan> known_plan;
  auto judged = [&](const RewriteResult& step) {
    if (step.kept) known = step.kept;
    if (step.kept_plan)
      known_plan = step.kept_plan;
    else if (!step.lines.empty())
      known_plan.reset();
  };
  auto changed = [&](const std::vector<std::string>& lines) {
    if (!lines.empty()) known.reset(), known_plan.reset();
  };
  if (on.split_group_norms) {
    ASSIGN_OR_RETURN(r.group_norms, split_group_norms(*g, o.no_fuse));
  }
  if (on.split_head_rows) {
    ASSIGN_OR_RETURN(r.head_rows, split_head_rows(*g, o.no_fuse));
  }
  if (on.gemms_as_matmuls) {
    ASSIGN_OR_RETURN(r.gemms, gemms_as_matmuls_if_cheaper(g, o));
    judged(r.gemms);
  }
  if (on.all_expert_gemms) {
    ASSIGN_OR_RETURN(r.experts, all_expert_gemms_if_cheaper(g, o, known));
    judged(r.experts);
  }
  bool experts_with_sums = false;
  if (on.expert_sums && on.all_expert_gemms && r.experts.lines.empty() && r.experts.kept) {
    // Not cheaper by themselves, the GEMMs over every expert may pay with the sums over every
    // expert they leave room for (which read their form): judged together, against neither.
    std::unique_ptr<Graph> both = clone_graph(*g);
    ASSIGN_OR_RETURN(std::vector<std::string> expert_lines, all_expert_gemms(*both, o.no_fuse));
    ASSIGN_OR_RETURN(std::vector<std::string> sum_lines, expert_sums_as_gemms(*both, o.no_fuse));
    if (!sum_lines.empty()) {
      ASSIGN_OR_RETURN(FusionPlan p_both, make_plan(*both, o));
      const Cost& c_none = *r.experts.kept;
      const double t_both = p_both.cost.time * 1e6, t_none = c_none.time * 1e6;
      const std::string alone = by_themselves(r.experts.verdict);
      if (t_both < t_none) {
        experts_with_sums = true;
        g = std::move(both);
        known = p_both.cost;
        known_plan = std::make_shared<const FusionPlan>(p_both);
        r.experts.lines = std::move(expert_lines);
        r.experts.verdict = fmt::format(
            "estimated {:.1f} us with the sums over every expert below, against {:.1f} us without "
            "either, {} kernels against {}; by themselves {}",
            t_both, t_none, p_both.cost.kernels, c_none.kernels, alone);
        r.expert_sums.lines = std::move(sum_lines);
        r.expert_sums.verdict = fmt::format(
            "estimated {:.1f} us with the GEMMs over every expert above, judged together", t_both);
        r.expert_sums.kept = p_both.cost;
      } else {
        r.experts.verdict +=
            fmt::format("; with the sums over every expert they leave room for, estimated {:.1f} us", t_both);
      }
    }
  }
  if (on.expert_sums && on.all_expert_gemms && !experts_with_sums) {
    ASSIGN_OR_RETURN(r.expert_sums, expert_sums_as_gemms_if_cheaper(g, o, known));
    judged(r.expert_sums);
  }
  if (on.unflatten_gemms) {
    ASSIGN_OR_RETURN(r.unflattened, unflatten_gemms(*g, o.no_fuse));
    changed(r.unflattened);
  }
  if (on.fold_scales) {
    ASSIGN_OR_RETURN(r.scale_folds, fold_column_scales(*g, o.no_fuse));
    changed(r.scale_folds);
  }
  if (on.merge_gemms) {
    ASSIGN_OR_RETURN(r.merges, merge_sibling_gemms(*g, o.no_fuse));
    changed(r.merges);
  }
  if (on.split_slices) {
    ASSIGN_OR_RETURN(r.slices, split_to_slices_if_cheaper(g, o, known));
    judged(r.slices);
  }
  bool copies_done = false;
  // The copies judged on a copy of g below, when the Slices with them are not: what judging them on
  // g itself would give (the same graph, the same estimate to beat), without planning it again.
  std::optional<RewriteResult> copies_of_g;
  std::unique_ptr<Graph> g_with_copies;
  if (on.split_slices && on.relayout_copies && r.slices.lines.empty() && !r.slices.verdict.empty()) {
    // Not cheaper alone, the Slices may pay with the per-reader copies of the relayouts they leave
    // shared (Falcon's K and V, Gathers of one Transpose of the fused QKV product): judged
    // together, against the copies alone (each as copy_shared_relayouts_if_cheaper keeps it).
    std::unique_ptr<Graph> alone = clone_graph(*g), both = clone_graph(*g);
    ASSIGN_OR_RETURN(RewriteResult copies_alone, copy_shared_relayouts_if_cheaper(alone, o, known));
    ASSIGN_OR_RETURN(std::vector<std::string> slice_lines, split_to_slices(*both, o.no_fuse));
    // `both` is the copy the Slices' judgement above planned (g has not changed since): its estimate.
    ASSIGN_OR_RETURN(RewriteResult copies_both, copy_shared_relayouts_if_cheaper(both, o, r.slices.tried));
    if (!copies_both.lines.empty()) {  // then copies_both.kept is the plan of `both`
      Cost c_alone;
      if (copies_alone.kept) {
        c_alone = *copies_alone.kept;
      } else if (known) {  // `alone` is a copy of g as it stands
        c_alone = *known;
      } else {
        ASSIGN_OR_RETURN(FusionPlan p_alone, make_plan(*alone, o));
        c_alone = p_alone.cost;
      }
      const Cost& c_both = *copies_both.kept;
      const double t_alone = c_alone.time * 1e6, t_both = c_both.time * 1e6;
      if (t_both < t_alone) {
        known = c_both;
        known_plan = copies_both.kept_plan;
        g = std::move(both);
        const std::string itself = by_themselves(r.slices.verdict);
        r.slices.verdict = fmt::format(
            "estimated {:.1f} us with the relayout copies they leave room for, against {:.1f} us without, {} "
            "kernels against {}; by themselves {}",
            t_both, t_alone, c_both.kernels, c_alone.kernels, itself);
        r.slices.lines = std::move(slice_lines);
        r.copies = std::move(copies_both);
      } else {
        known = c_alone;
        // A plan of `alone` itself: the copies' when they were kept (of the graph they left).
        known_plan = copies_alone.lines.empty() ? nullptr : copies_alone.kept_plan;
        g = std::move(alone);
        r.copies = std::move(copies_alone);
      }
      copies_done = true;
    } else {
      copies_of_g = std::move(copies_alone);
      g_with_copies = std::move(alone);
    }
  }
  if (on.relayout_copies && !copies_done) {
    if (copies_of_g) {
      r.copies = std::move(*copies_of_g);
      if (!r.copies.lines.empty()) g = std::move(g_with_copies);
    } else {
      ASSIGN_OR_RETURN(r.copies, copy_shared_relayouts_if_cheaper(g, o, known));
    }
    judged(r.copies);
  }
  if (on.hoist_row_scales) {
    ASSIGN_OR_RETURN(r.hoists, hoist_row_scales_if_cheaper(g, o, known));
    judged(r.hoists);
  }
  if (on.hoist_layer_norms) {
    ASSIGN_OR_RETURN(r.norm_hoists, hoist_layer_norms_if_cheaper(g, o, known));
    judged(r.norm_hoists);
  }
  if (on.arg_reductions) {
    ASSIGN_OR_RETURN(r.args, arg_extremes_as_reductions_if_cheaper(g, o, known));
    judged(r.args);
  }
  if (on.short_reductions) {
    ASSIGN_OR_RETURN(r.short_sums, short_reductions_as_adds_if_cheaper(g, o, known));
    judged(r.short_sums);
  }
  if (on.pool_taps) {
    ASSIGN_OR_RETURN(r.pools, pools_as_taps_if_cheaper(g, o, known));
    judged(r.pools);
  }
  if (on.topk_rounds) {
    ASSIGN_OR_RETURN(r.topks, topk_as_rounds_if_cheaper(g, o, known));
    judged(r.topks);
  }
  bool maxima_done = false;
  if (on.topk_rounds && on.short_maxima && r.topks.lines.empty() && r.topks.kept) {
    // Not cheaper by themselves, a TopK's rounds over a few elements may pay once their maxima are
    // element-wise (a router's top 2 of 4 experts, when the router's first nodes may also join the
    // norm's kernel): judged together, against neither.
    std::unique_ptr<Graph> both = clone_graph(*g);
    ASSIGN_OR_RETURN(std::vector<std::string> round_lines, topk_as_rounds(*both, o.no_fuse));
    ASSIGN_OR_RETURN(RewriteResult maxima, short_maxima_as_maxes_if_cheaper(both, o));
    const Cost& c_none = *r.topks.kept;
    const double t_none = c_none.time * 1e6;
    if (!round_lines.empty() && !maxima.lines.empty() && maxima.kept && maxima.kept->time < c_none.time) {
      const double t_both = maxima.kept->time * 1e6;
      const std::string alone = by_themselves(r.topks.verdict);
      r.topks.verdict = fmt::format(
          "estimated {:.1f} us with the maxima over a few elements below, against {:.1f} us without "
          "either, {} kernels against {}; by themselves {}",
          t_both, t_none, maxima.kept->kernels, c_none.kernels, alone);
      r.topks.lines = std::move(round_lines);
      r.topks.kept = maxima.kept;
      r.short_maxima = std::move(maxima);
      r.short_maxima.verdict = "with the TopKs' rounds above, judged together: " + r.short_maxima.verdict;
      g = std::move(both);
      known = r.topks.kept;
      known_plan = r.short_maxima.kept_plan;
      maxima_done = true;
    } else if (!round_lines.empty() && maxima.kept) {
      r.topks.verdict += fmt::format("; with the maxima over a few elements they leave, estimated {:.1f} us",
                                     maxima.kept->time * 1e6);
    }
  }
  // The row scales not moved, once more when the router's rewrites were kept: with the softmax over
  // a few experts element-wise and the top k as row ops over the router's rows, a norm's statistics
  // may join the router's kernel (an outer reduction) only now. With none left, nothing is planned.
  if (on.hoist_row_scales && (!r.short_sums.lines.empty() || !r.topks.lines.empty())) {
    ASSIGN_OR_RETURN(RewriteResult again, hoist_row_scales_if_cheaper(g, o, known));
    judged(again);
    r.hoists.add_step("judged again after the short reductions and TopKs below", again);
  }
  if (on.short_maxima && !maxima_done) {  // after the TopKs, whose rounds are ReduceMaxes, and the row scales
    ASSIGN_OR_RETURN(r.short_maxima, short_maxima_as_maxes_if_cheaper(g, o, known));
    judged(r.short_maxima);
  }
  // Row statistics computed again by themselves: a row scale moved past its GEMM before the router's
  // rewrites, whose scaled product a row op reduces only now (a top k over more experts than the
  // short maxima take, as rounds of row reductions), gets a copy for that reader, so that the
  // router's kernel computes the norm's statistics itself and shares a launch with the norm's
  // kernel. After the short maxima, which leave no row op to reduce it over a few experts.
  if (on.hoist_row_scales && (!r.topks.lines.empty() || !r.args.lines.empty())) {
    ASSIGN_OR_RETURN(RewriteResult copies,
                     rewrite_if_cheaper(
                         g, o, [&](Graph& c) { return copy_row_statistics(c, o.no_fuse); },
                         "--no-hoist-row-scales", /*strict=*/true, known));
    judged(copies);
    r.hoists.add_step("statistics computed again after the maxima below", copies);
  }
  if (on.shared_duplicates) {  // after the rewrites that copy chains, on a plan close to the final one
    ASSIGN_OR_RETURN(r.duplicates, share_kernel_duplicates_if_cheaper(g, o, known, known_plan));
    judged(r.duplicates);
  }
  if (on.output_copies) {
    ASSIGN_OR_RETURN(r.outputs, copy_output_cones_if_cheaper(g, o, known));
    judged(r.outputs);
  }
  // The nodes the kept rewrites built, with the types and shapes they were given: each must be what
  // its op's rule gives (as after each front-end pass), or planning would reason about a graph the
  // kernels do not compute.
  if (Status st = verify_node_types(*g); !st.is_ok())
    return st.with_context("after the rewrites before planning");
  r.plan = known_plan;
  return r;
}

std::string Rewrites::text() const {
  std::string s;
  auto section = [&](const std::string& title, const std::vector<std::string>& lines) {
    s += title + ":\n";
    for (const std::string& l : lines) s += "  " + l + "\n";
  };
  if (!group_norms.empty())
    section(
        "GroupNorms with each group's channels as an axis (the Reshape back to channels moved past the "
        "element-wise nodes after the norm)",
        group_norms);
  if (!head_rows.empty())
    section(
        "norms over rows a Reshape merged computed with the merged axes apart (a token's heads apart "
        "from the tokens)",
        head_rows);
  if (!gemms.verdict.empty()) section("Gemms as MatMuls (" + gemms.verdict + ")", gemms.lines);
  if (!experts.verdict.empty())
    section("GEMMs of expert weights gathered per slot as GEMMs of every expert's weights (" +
                experts.verdict + ")",
            experts.lines);
  if (!expert_sums.verdict.empty())
    section("MoE tokens' sums over their slots as one GEMM over every expert (" + expert_sums.verdict + ")",
            expert_sums.lines);
  if (!unflattened.empty())
    section("GEMMs of flattened activations read them unflattened (the views around them gone)", unflattened);
  if (!scale_folds.empty())
    section(
        "constant scales and BatchNormalizations after GEMMs folded into their weights (one value per "
        "column)",
        scale_folds);
  if (!merges.empty())
    section("sibling GEMMs merged (same activation, constant weights concatenated along n)", merges);
  if (!slices.verdict.empty())
    section("Splits and constant Gathers as Slices (" + slices.verdict + ")", slices.lines);
  if (!copies.verdict.empty())
    section("shared relayouts copied per reader (" + copies.verdict + ")", copies.lines);
  if (!hoists.verdict.empty()) section("row scales moved past GEMMs (" + hoists.verdict + ")", hoists.lines);
  if (!norm_hoists.verdict.empty())
    section("LayerNorms moved past GEMMs (" + norm_hoists.verdict + ")", norm_hoists.lines);
  if (!args.verdict.empty())
    section("ArgMax and ArgMin as row reductions, scatters of a few indices per row as selects (" +
                args.verdict + ")",
            args.lines);
  if (!short_sums.verdict.empty())
    section("sums and softmaxes over a few elements as element-wise ops (" + short_sums.verdict + ")",
            short_sums.lines);
  if (!pools.verdict.empty())
    section("pools over small windows as strided Slices combined element-wise (" + pools.verdict + ")",
            pools.lines);
  if (!topks.verdict.empty())
    section("TopKs as rounds of row reductions (" + topks.verdict + ")", topks.lines);
  if (!short_maxima.verdict.empty())
    section("maxima and minima over a few elements as element-wise ops, judged per row length (" +
                short_maxima.verdict + ")",
            short_maxima.lines);
  if (!duplicates.verdict.empty())
    section("duplicates sharing a kernel read as their originals (" + duplicates.verdict + ")",
            duplicates.lines);
  if (!outputs.verdict.empty())
    section("graph outputs computed again for their readers (" + outputs.verdict + ")", outputs.lines);
  return s;
}

}  // namespace stitch::fusion
