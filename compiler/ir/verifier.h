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

}  // namespace stitch
