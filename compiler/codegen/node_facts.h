// Facts about one node that the planner asks for over and over, remembered while a
// NodeFactsScope is open on this thread. Planning a long graph evaluates hundreds of thousands
// of candidate groups over the same few thousand nodes; a node's stitch role and the
// instructions of its scalar expression each cost string comparisons of its op type (the latter
// writes the expression's text), and they were half the planning time of an RWKV export. Open a
// scope only where the graph does not change while it lives (a node's facts are kept by address).
#pragma once

#include <memory>

#include "ir/graph.h"

namespace stitch::codegen {

enum class StitchRole;

class NodeFactsScope {
 public:
  NodeFactsScope();
  ~NodeFactsScope();
  NodeFactsScope(const NodeFactsScope&) = delete;
  NodeFactsScope& operator=(const NodeFactsScope&) = delete;
  struct Facts;

 private:
  std::unique_ptr<Facts> facts_;  // null when an outer scope is already open
};

// compute(n), from the open scope's memory when it has it.
StitchRole remembered_role(const Node& n, StitchRole (*compute)(const Node&));
int remembered_instructions(const Node& n, int (*compute)(const Node&));

}  // namespace stitch::codegen
