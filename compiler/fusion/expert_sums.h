// Routed experts' weighted sum as one GEMM over every expert. After all_expert_gemms, a
// transformers MoE layer computes its first projection once per token over every expert ([T, K] by
// [K, E * M]), picks each slot's expert's part (a slot is a token and one of its k experts: S = T k
// slots), runs the activation per slot ([S, F]), multiplies each slot by every expert's second
// projection ([S, F] by [F, E * H]), picks the slot's expert's part again, weights it by the slot's
// routing weight and sums each token's k slots.
//
// Rewritten as onnxruntime's MoE op is read (importer/contrib_moe.cc): the activation runs on every
// expert's part of the first product ([T, E, M]), is multiplied by the token's weight for each
// expert ([T, E, 1]: the slot's routing weight where the expert is one of the token's k, else 0),
// and the second projection of every expert, weighted and summed, is one GEMM: [T, E * F] by its
// weights laid out at compile time as [E * F, H]. That GEMM has k times fewer rows than the
// per-slot one, no per-slot product is stored or picked, and the weighting and the activation can
// join the router's row kernel (the activations an axis of their own beside its rows of E), so the
// kernel that summed the slots goes. The activation runs E / k times as often. A token whose
// unchosen expert's activation is inf or NaN gets NaN (times 0), where the per-slot form skips that
// expert. A token that chose one expert twice gets the two weights summed, as the per-slot form
// gives it; the experts must be within range by construction (a TopK's indices, or ArgMaxes' joined
// as PhiMoE's router joins its two picks), as an index out of range would drop a slot where the
// per-slot pick fails. Per-expert biases gathered per slot (gpt-oss's) become constants: the first
// projection's, [E, ..], broadcast over the tokens in the activation; the second's, [E, H], one
// more row of each expert's weights, read with the token's weight for the expert as one more column
// of its rows (the same GEMM adds them). A shared expert whose output is added to the sum
// (Qwen2-MoE's, times a sigmoid gate per token; DeepSeek's, ungated) joins the GEMM: its second
// projection's rows [T, Fs], times the gate, are more columns of the GEMM's rows and its weights
// [Fs, H] more rows of the GEMM's weights, so its own GEMM and the Add go; when Fs is a multiple of
// an expert's width they join the routed rows along the experts' axis, as Fs / F more experts
// always chosen, so that the router's row kernel can compute both (a join along the rows' last axis
// would merge the experts' axis into it).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Rewrites every sum that matches: a ReduceSum over the k slots of each token ([.., k, H], one
// axis) of the per-slot second projection's picked part (all_expert_gemms' form: a MatMul of [S, F]
// by a constant [F, E * H], viewed [S, E, H], a GatherND with batch_dims 1 by the slots' experts
// [S, 1], a TopK's indices or a Concat of ArgMaxes or ArgMins over at most E), maybe plus a bias
// gathered by the same experts, times a per-slot weight (S values, one per row of the product),
// through views; whose activation, from the first projection's pick (per token: [T, E, M] by
// [T, k, 1], the same experts) to the second's operand, is element-wise work with constants that do not
// vary along the slots or biases gathered by the same experts, Splits, Slices, Squeezes, Unsqueezes
// and Reshapes that keep the slot axis first, read by nothing else. A shared expert joins when the
// sum, through views, is read by an Add alone whose other input is, read by it alone, a MatMul of
// [.., Fs] (T rows) by constant weights [Fs, H], maybe times a value per token (a Mul read by the
// Add alone, of the MatMul read by it alone). Returns one line per sum. None of the matched nodes
// may be named in `keep` (--no-fuse).
StatusOr<std::vector<std::string>> expert_sums_as_gemms(Graph& g, const std::set<std::string>& keep = {});

// expert_sums_as_gemms through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten
// graph is estimated no slower.
StatusOr<RewriteResult> expert_sums_as_gemms_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                        const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
