// Fusion plans: which nodes run together in one generated kernel, and why.
//
// A FusionPlan is a value the planners return (DESIGN.md), so planners can be swapped and
// compared on the same graph. Groups are listed in a valid execution order (a topological order
// of the group graph); every node of the graph is in exactly one group.
//
// The first planner is greedy, in graph order, with two schemes:
//  - local: chains of per-element nodes (elementwise and broadcast ops whose intermediates all
//    have the group's shape) become one element-parallel kernel with intermediates in registers;
//  - regional (first form): such a chain that feeds only a softmax, layer norm or reduction is
//    recomputed inside that kernel's reads (a device function of the flat index), and a chain
//    that consumes its output is applied before its store (an epilogue that stores only its last
//    value; trailing nodes whose intermediates are read elsewhere are cut off and run alone).
// Each merge removes one write and one read of an intermediate and one launch; the recompute it
// adds is a few flops per read of a memory-bound kernel, so greedy merging never increases the
// estimated cost in these two schemes. The cost model that weighs barriers, shared-memory
// caching against recompute, and occupancy comes with the global scheme and the beam and ILP
// planners.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::fusion {

struct FusionOptions {
  std::string mode = "none";             // none | greedy
  std::set<std::string> no_fuse;         // node names that stay alone
  int max_group_size = 64;               // nodes per group
};

struct FusionGroup {
  std::vector<const Node*> nodes;  // in graph (topological) order
  std::string scheme;              // "single", "local" or "regional" (last node takes the rest as a prologue)
  std::string reason;              // why the group is what it is
  int64_t saved_bytes = 0;         // intermediate traffic removed against unfused
};

struct FusionPlan {
  std::string mode;
  std::vector<FusionGroup> groups;
  std::vector<std::string> rejected;  // "node 'b' not merged into the group of 'a': reason"
};

// Every node alone, in graph order: the unfused baseline.
FusionPlan plan_none(const Graph& g);
// Greedy local stitching (see above).
StatusOr<FusionPlan> plan_greedy(const Graph& g, const FusionOptions& o);
// Dispatch on o.mode; a user error for an unknown mode, or no_fuse names no node.
StatusOr<FusionPlan> make_plan(const Graph& g, const FusionOptions& o);

// Human-readable plan for --explain-fusion.
std::string explain(const FusionPlan& plan);

}  // namespace stitch::fusion
