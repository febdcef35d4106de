// Graph outputs computed again for their readers. A value the model returns and also reads is one
// stored tensor, and every kernel that reads it waits for the kernel that writes it. A decoding
// step's present keys are such a value: Concat(the cached keys, this token's keys after the rotary
// embedding), returned for the next step and read by the attention kernel's Q.K^T. Writing the
// cache and attending were then two dependent kernels (LLaMA's and GPT-2's decoding steps: one
// kernel per layer more than their prefill). When the value's producers back to stored values
// (graph inputs, constants, results of library calls or reductions) are data movement and
// element-wise ops only, the readers get a copy of that cone: they compute the value themselves
// (here: one token's rotary embedding again, the cache read in place), the writer's kernel and
// theirs no longer depend on each other, and the packer puts them into one launch.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

// For every graph output with static shape whose producer cone (as above) holds at most
// kMaxOutputCone nodes, none named in `keep` (--no-fuse), and which some node reads (only those
// named in `only`, when given): one copy of the cone, and every reader reads the copy. Returns one
// line per output copied; `copies`, when given, receives each output's name -> its copy's name,
// and `kinds` its cone's kind: the op types of the cone in graph order and of the output's
// readers, alike for the same output of every layer (each layer's present keys).
inline constexpr size_t kMaxOutputCone = 48;
StatusOr<std::vector<std::string>> copy_output_cones(Graph& g, const std::set<std::string>& keep = {},
                                                     const std::set<std::string>* only = nullptr,
                                                     std::map<std::string, std::string>* copies = nullptr,
                                                     std::map<std::string, std::string>* kinds = nullptr);

// copy_output_cones in two rounds: every candidate is copied and the copy planned; an output whose
// copy that plan still stores (a library call reads it, as P.V reads the present values, or its
// readers are in another kernel than its producer) gains nothing and is left out of the second
// round. Where the useful cones are of several kinds, each kind is also left out in turn (a
// decoding step's present values may cost P.V's kernel more than the store they save) and the set
// estimated fastest goes on; it goes through rewrite_if_cheaper (plan.h): kept only when the plan
// of the rewritten graph is estimated faster.
StatusOr<RewriteResult> copy_output_cones_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                     const std::optional<Cost>& before = std::nullopt);

}  // namespace stitch::fusion
