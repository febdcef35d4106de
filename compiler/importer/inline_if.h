// Compile-time decisions taken on the ONNX model before import (internal to the importer: exposes
// ONNX types): graph inputs fixed to a value (`stitchc compile --constant-input NAME=V`), and If
// nodes whose condition is then known, replaced by the nodes of the branch they take. Optimum's
// merged decoders choose between their first step and the steps with a KV cache by an If on
// the input `use_cache_branch`; an artifact has static shapes, so it holds one of the two.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "ir/graph.h"

namespace stitch {

// Parses each "NAME=V[,V...]" against the graph's inputs (bool: 0, 1, true, false; integers;
// floats) and turns the input into an initializer of its declared type: its declared shape when
// static (the values must fill it), else the values as a vector (scalar for one value of a rank-0
// input). Appends each to `fixed`, for the artifact's manifest.
Status fix_inputs(onnx::GraphProto& g, const std::vector<std::string>& specs, std::vector<FixedInput>* fixed);

// Replaces each If whose condition is an initializer or a Constant node's output by the nodes of
// the branch it takes: values and node names defined in the branch are prefixed with the If's
// name, the branch's initializers join the graph's, and an Identity per output writes the If's
// output. Repeats until no such If is left, so Ifs inside a taken branch are decided too.
// Appends a line per If decided to `log`.
Status inline_decided_ifs(onnx::GraphProto& g, const std::string& base_dir, std::vector<std::string>* log);

// Why an If that is left cannot be compiled, naming what to do (for the unsupported-op list).
std::string undecided_if_reason(const onnx::NodeProto& n, const onnx::GraphProto& g);

}  // namespace stitch
