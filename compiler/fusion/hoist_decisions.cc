// hoist_row_scales_if_cheaper and hoist_layer_norms_if_cheaper (see hoist_scales.h): each
// rewrite judged on the plan's estimate, the norms feeding attention apart from the others.
#include <fmt/format.h>

#include <functional>

#include "fusion/hoist_scales.h"
#include "fusion/row_statistics.h"

namespace stitch::fusion {

namespace {

// Two decisions through rewrite_if_cheaper, each kept when the plan's estimate is no slower: the
// candidates of kOther first, then those of kAttention, so a set that loses does not take the
// other with it; `other` and `attention` name them in the verdict. A kOther set that lost is
// judged once more when the kAttention set was then kept: the plan around it has changed (the
// attention side's norms moved, their kernels merged otherwise), and it may win there.
StatusOr<RewriteResult> decide_twice(
    std::unique_ptr<Graph>& g, const FusionOptions& o,
    const std::function<StatusOr<std::vector<std::string>>(Graph&, NormReaders)>& rewrite,
    const std::string& skip_flag, const char* other, const char* attention,
    const std::optional<Cost>& before) {
  RewriteResult out;
  std::optional<Cost> known = before;  // the estimate of *g as it stands, once a step planned it
  auto decide = [&](NormReaders r, const std::string& name) -> StatusOr<bool> {
    ASSIGN_OR_RETURN(RewriteResult step,
                     rewrite_if_cheaper(
                         g, o, [&](Graph& c) { return rewrite(c, r); }, skip_flag, /*strict=*/false, known));
    if (step.kept) known = out.kept = step.kept;
    if (step.kept_plan) out.kept_plan = step.kept_plan;
    out.add_step(name, step);
    return !step.lines.empty();
  };
  ASSIGN_OR_RETURN(bool other_kept, decide(NormReaders::kOther, other));
  const bool other_judged = !out.verdict.empty();
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
