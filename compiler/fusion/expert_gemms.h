// Gathered expert GEMMs as all-expert GEMMs. transformers' MoE layers (Mixtral, Qwen3-MoE, OLMoE,
// PhiMoE, GraniteMoE, DeepSeek-V3, gpt-oss) export each expert projection as a GatherND of the
// stacked expert weights [E, M, K] by each routed slot's expert ([S, 1] indices, batch_dims 0: a
// slot is a token and one of its k experts) and a batched MatMul of that [S, M, K] by the slot's
// activation [S, K, 1]; or of the activation [S, 1, K] by a gather of [E, K, N]. The gather copies
// a whole expert's weight for every slot: S x M x K values written and read again, where the
// weights hold E x M x K (S is k times the tokens: 128 slots against 4 experts in the bench
// exports; a real prompt has thousands).
//
// Rewritten, each slot's activation is multiplied by every expert's weights in one GEMM, [S, K] by
// the weights laid out at compile time as [K, E * M], and the slot's expert's part of that product,
// viewed [S, E, M], is picked by a GatherND with batch_dims 1 (which joins the kernel that reads
// it). That is E times the gathered products, but the weights are read once, as onnxruntime's MoE
// op is read (importer/contrib_moe.cc). Where the activation is each token's row repeated over its
// slots (an Expand of [T, 1, K] to [T, k, K] read as [S, K, 1]: the first projection), the GEMM runs
// once per token, [T, K] by [K, E * M], and the slots' parts are picked from their token's product
// (indices [T, k, 1]); the Expand goes when nothing else reads it. A step that routes few slots gathers fewer bytes than all
// the experts' weights, so the rewrite is kept only when the plan's estimate is lower.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// Rewrites every MatMul of static shapes that multiplies a GatherND (batch_dims 0, indices [S, 1])
// of constant floating-point weights [E, M, K], read by that MatMul alone, by an activation
// [S, K, 1] (or an activation [S, 1, K] by such a gather of [E, K, N]): the activation as [S, K]
// (or its tokens' rows [T, K]) times the weights as [K, E * M], the product viewed [S, E, M] (or
// [T, E, M]), a GatherND with batch_dims 1 of the same indices (viewed [T, k, 1]), and a Reshape to
// the MatMul's output, which keeps its value. Returns one line
// per MatMul. Those named in `keep` (--no-fuse), and MatMuls of gathers named there, stay.
StatusOr<std::vector<std::string>> all_expert_gemms(Graph& g, const std::set<std::string>& keep = {});

// all_expert_gemms through rewrite_if_cheaper (plan.h): kept when the plan of the rewritten graph is
// estimated no slower.
StatusOr<RewriteResult> all_expert_gemms_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                    const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
