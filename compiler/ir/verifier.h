// The IR verifier: structural invariants every pass must keep. It runs after
// every pass in tests and debug builds (and on request in release builds).
// A failure is a compiler bug and comes back as an internal error.
#pragma once

#include "ir/graph.h"

namespace stitch {

struct VerifyOptions {
  // After shape inference: every value has a dtype and a fully static shape.
  bool require_static_types = false;
};

Status verify_graph(const Graph& g, const VerifyOptions& opts = {});

// Once every value is typed: each node's outputs have the type and shape its op's rule gives for its
// inputs, and the rule accepts the node. Passes build nodes with their output types given, not
// inferred, so a pass that wires two types into a MatMul would otherwise go unnoticed. Nodes with a
// constant output are left out (their values were computed). The graph is left as it was.
Status verify_node_types(Graph& g);

}  // namespace stitch
