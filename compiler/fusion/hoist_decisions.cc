// hoist_row_scales_if_cheaper and hoist_layer_norms_if_cheaper (see hoist_scales.h): each
// rewrite judged on the plan's estimate, the norms feeding attention apart from the others.
#include <fmt/format.h>

#include <functional>
#include <future>
#include <optional>

#include "fusion/hoist_scales.h"
#include "fusion/row_statistics.h"

namespace stitch::fusion {

namespace {

// Two decisions through rewrite_if_cheaper, each kept when the plan's estimate is no slower: the
// candidates of kOther first, then those of kAttention, so a set that loses does not take the
// other with it; `other` and `attention` name them in the verdict. A kOther set that lost is
// judged once more when the kAttention set was then kept: the plan around it has changed (the
// attention side's norms moved, their kernels merged otherwise), and it may win there.
// The first two are planned at once: the kOther copy on a second thread, and the kAttention copy
// made from it here, which is what the second decision looks at when the first keeps its copy
// (the same graphs and plans as one after the other). When it does not, that plan goes unused and
// the second decision plans its copy of g.
StatusOr<RewriteResult> decide_twice(
    std::unique_ptr<Graph>& g, const FusionOptions& o,
    const std::function<StatusOr<std::vector<std::string>>(Graph&, NormReaders)>& rewrite,
    const std::string& skip_flag, const char* other, const char* attention,
    const std::optional<Cost>& before) {
  RewriteResult out;
  std::optional<Cost> known = before;  // the estimate of *g as it stands, once a step planned it
  // A step's judgement into `out`; whether it was kept.
  auto take = [&](const std::string& name, const RewriteResult& step) {
    if (step.kept) known = out.kept = step.kept;
    if (step.kept_plan) out.kept_plan = step.kept_plan;
    out.add_step(name, step);
    return !step.lines.empty();
  };
  auto decide = [&](NormReaders r, const std::string& name) -> StatusOr<bool> {
    ASSIGN_OR_RETURN(RewriteResult step,
                     rewrite_if_cheaper(
                         g, o, [&](Graph& c) { return rewrite(c, r); }, skip_flag, /*strict=*/false, known));
    return take(name, step);
  };
  std::unique_ptr<Graph> with_other = clone_graph(*g);
  ASSIGN_OR_RETURN(std::vector<std::string> other_lines, rewrite(*with_other, NormReaders::kOther));
  const bool other_judged = !other_lines.empty();
  bool other_kept = false;
  if (other_judged) {
    std::unique_ptr<Graph> with_both = clone_graph(*with_other);
    ASSIGN_OR_RETURN(std::vector<std::string> both_lines, rewrite(*with_both, NormReaders::kAttention));
    // The futures end (joined) before the graphs they read.
    auto plan_other = std::async(std::launch::async, [&] { return make_plan(*with_other, o); });
    std::future<StatusOr<FusionPlan>> plan_g = plan_unless_known(known, *g, o);
    std::optional<StatusOr<FusionPlan>> plan_both;
    if (!both_lines.empty()) plan_both = make_plan(*with_both, o);
    ASSIGN_OR_RETURN(FusionPlan p_other, plan_other.get());
    ASSIGN_OR_RETURN(auto estimate, estimate_before(known, plan_g));
    const RewriteResult step = judge_rewrite(estimate.first, std::move(estimate.second), std::move(p_other),
                                             std::move(other_lines), skip_flag, /*strict=*/false,
                                             /*no_more_kernels=*/false);
    other_kept = take(other, step);
    if (other_kept) {
      g = std::move(with_other);
      if (!both_lines.empty()) {
        ASSIGN_OR_RETURN(FusionPlan p_both, std::move(*plan_both));
        if (take(attention,
                 judge_rewrite(*step.kept, step.kept_plan, std::move(p_both), std::move(both_lines),
                               skip_flag, /*strict=*/false, /*no_more_kernels=*/false)))
          g = std::move(with_both);
      }
      return out;
    }
  }
  ASSIGN_OR_RETURN(bool attention_kept, decide(NormReaders::kAttention, attention));
  if (other_judged && !other_kept && attention_kept) {
    RETURN_IF_ERROR(decide(NormReaders::kOther, fmt::format("{}, judged again after those", other)).status());
  }
  return out;
}

}  // namespace

StatusOr<RewriteResult> hoist_layer_norms_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                     const std::optional<Cost>& before) {
  // The norms whose products feed other work (an activation, a residual), then those feeding
  // attention, whose products a kernel must store for Q.K^T anyway.
  return decide_twice(
      g, o, [&](Graph& c, NormReaders r) { return hoist_layer_norms(c, o.no_fuse, r); },
      "--no-hoist-layer-norms", "feeding other work", "feeding attention", before);
}

StatusOr<RewriteResult> hoist_row_scales_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                    const std::optional<Cost>& before) {
  // The products only kernels read, then those attention's GEMMs read (the row scale moved onto
  // Q.K^T and P). A row scale whose scaled products per-head norms reduce (Qwen3's Q and K) is
  // computed again for each (row_statistics.h), judged with the move.
  return decide_twice(
      g, o,
      [&](Graph& c, NormReaders r) -> StatusOr<std::vector<std::string>> {
        ASSIGN_OR_RETURN(std::vector<std::string> lines, hoist_row_scales(c, o.no_fuse, r));
        if (lines.empty()) return lines;
        ASSIGN_OR_RETURN(std::vector<std::string> copies, copy_row_statistics(c, o.no_fuse));
        lines.insert(lines.end(), copies.begin(), copies.end());
        return lines;
      },
      "--no-hoist-row-scales", "read by kernels", "read by attention", before);
}

}  // namespace stitch::fusion
