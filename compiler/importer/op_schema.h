// What the ONNX spec says a node of each supported op may carry: its attributes (name, kind,
// whether required) and how many inputs and outputs it takes, per op version. The importer checks
// every node against it, so that a malformed node is refused with its name rather than read with
// defaults (an attribute of the wrong kind would otherwise look absent).
#pragma once

#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch {

enum class AttrKind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph, kGraphs, kOther };

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required;
};

struct OpSchema {
  std::string_view op;
  int since;  // the opset that introduced this version
  int min_inputs, max_inputs, min_outputs, max_outputs;
  std::string_view formal_inputs;  // per formal input: r required, o optional, v variadic (each required)
  std::vector<AttrSpec> attrs;
};

// The version of default-domain op `op` in effect at `opset`; null when the table has none.
const OpSchema* find_schema(std::string_view op, int opset);

// The node's attributes (as read, in `n.attrs`) and its input and output counts (omitted optional
// ones included, as written in the file) against its schema. Nodes of ops without a schema pass.
Status check_node_schema(const Node& n, size_t num_inputs, size_t num_outputs);

}  // namespace stitch
