// The CPU reference interpreter: the project's oracle. It evaluates a graph
// node by node with each op's reference row (simple loops, double
// accumulation). It is checked against ONNX's node tests and PyTorch/
// onnxruntime outputs, then serves to check every pass and kernel.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace stitch {

using TensorMap = std::map<std::string, Tensor>;

// Evaluates one node on concrete inputs (null for omitted ones). Checks that
// the outputs match the node's recorded types when those are known.
StatusOr<std::vector<Tensor>> eval_node(const Node& n, std::span<const Tensor* const> inputs);

// Runs the whole graph. `inputs` are keyed by graph input name; each must
// match the input's dtype and static shape. Returns the graph outputs by name.
StatusOr<TensorMap> run_reference(const Graph& g, const TensorMap& inputs);

// Checks one tensor against a graph input's declared type; the message names the input.
Status check_input(const Value& input, const Tensor& t);

}  // namespace stitch
