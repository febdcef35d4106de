// Memory planning: every intermediate buffer of a static schedule gets an offset in one device
// arena. Buffers alive at the same step never overlap in memory; a buffer may take over the
// storage of an input that dies at the step that writes it (in place), when the caller says
// the writer allows it (an elementwise kernel reads each element before writing it).
//
// Steps are the schedule's positions. A buffer is live from the step that writes it to the
// last step that reads it, both inclusive. Placement is greedy by size (largest first, each at
// the lowest aligned offset that fits between the already-placed buffers it is live with),
// which is deterministic and close to the live-bytes lower bound on transformer graphs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch {

// cudaMalloc's alignment; enough for 128-bit vector accesses and the libraries' workspaces.
inline constexpr int64_t kArenaAlignment = 256;

struct BufferRequest {
  std::string name;   // for messages and reports
  int64_t bytes = 0;  // > 0
  int first = 0;      // step that writes it
  int last = 0;       // last step that reads it (>= first)
  int reuse_of = -1;  // a request whose storage this one may take in place, or -1
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request, multiples of kArenaAlignment
  std::vector<int> storage;      // per request: requests sharing storage (in place) share a number
  int64_t arena_bytes = 0;
  int64_t total_bytes = 0;      // sum of all requests: the arena without any reuse
  int64_t peak_live_bytes = 0;  // most bytes live at one step: no placement can do better
  int in_place = 0;             // requests placed in an input's storage
};

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests);

// No two requests live at the same step overlap in memory, unless one took the other's storage
// in place at the step where the first dies; offsets are aligned and inside the arena.
// The error names both buffers.
Status verify_memory_plan(const std::vector<BufferRequest>& requests, const MemoryPlan& plan);

// Requests for an unfused schedule of `g`: one step per node in node order, a buffer for every
// value a node produces (graph outputs live to the end). Constants and graph inputs are not in
// the arena. An elementwise node's output may reuse an input of the same size whose last use
// is that node, unless the input is a graph output.
std::vector<BufferRequest> graph_buffer_requests(const Graph& g);

}  // namespace stitch
