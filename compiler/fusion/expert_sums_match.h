// The match behind expert_sums_as_gemms (expert_sums.h), apart from the rewrite: an MoE token's
// per-slot sum traced back to the first projection's pick, the activation between them, the
// per-expert biases and a shared expert added to the sum. For expert_sums.cc alone.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace stitch::fusion::expert_sums_internal {

struct Match {
  Node* sum = nullptr;            // the ReduceSum over the slots
  Value* slot_weight = nullptr;   // S values
  Node* second = nullptr;         // the per-slot MatMul [S, F] by [F, E * H]
  Node* second_pick = nullptr;    // its GatherND
  Node* first_pick = nullptr;     // the first projection's GatherND, [T, E, M] by [T, k, 1]
  Value* start = nullptr;         // the activation's input: the first pick viewed [S, ..]
  Value* experts = nullptr;       // the slots' experts [S, 1]
  Node* first = nullptr;          // the first projection's MatMul, [T, K] by [K, E * M]
  Value* tokens = nullptr;        // the rows it reads, as the value they view (last axis K)
  std::vector<Node*> activation;  // in graph order
  std::vector<Node*> candidates;  // matched nodes that go when nothing reads them any more
  // Per-expert biases gathered per slot (gpt-oss's): in the activation, each such value and its
  // expert's rows [E, ..]; after the second projection, the bias rows [E, H] added before the weight.
  std::unordered_map<const Value*, Value*> first_biases;
  Value* second_bias = nullptr;
  // A shared expert's output added to the sum (Qwen2-MoE's, gated per token; DeepSeek's): the Add,
  // the shared second projection's rows [T, Fs] (as read), its constant weights [Fs, H] and the
  // gate (T values, or null).
  Node* shared_add = nullptr;
  Value* shared_rows = nullptr;
  Value* shared_weights = nullptr;
  Value* shared_gate = nullptr;
  int64_t t = 0, k = 0, e = 0, f = 0, h = 0;
};

using Users = std::unordered_map<const Value*, std::vector<Node*>>;

// The match for ReduceSum `red` (expert_sums.h names the forms), or nullopt. None of the matched
// nodes may be named in `keep`; a shared expert one of whose nodes is stays apart.
std::optional<Match> match(const Graph& g, const Users& users, Node* red, const std::set<std::string>& keep);

// `v` as dims `want`: a value it is a view of (element order kept), else a new Reshape.
Value* as_dims(Graph& g, Value* v, const Dims& want, const std::string& hint);

// The axes an activation node names (Split's attribute, Slice's, Squeeze's and Unsqueeze's axes),
// normalized against `rank`, or nullopt when they are not known at compile time.
std::optional<std::vector<int64_t>> node_axes(const Node& n, int64_t rank);

}  // namespace stitch::fusion::expert_sums_internal
