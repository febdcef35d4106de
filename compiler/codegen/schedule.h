// The static launch schedule of a compiled model: ordered steps (generated kernel launches,
// library calls, copies) over buffers that live in one of five storages: the arena (planned
// offsets), the weights blob, the session's input buffers, its output buffers, or its fault word
// (kernel.h's fault_word, for kernels that check their inputs at run time). Views (Reshape and
// friends) share their source's storage and cost no step.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/library.h"
#include "codegen/memory_plan.h"

namespace stitch::codegen {

enum class Storage { kArena, kWeights, kInput, kOutput, kFault };
const char* storage_name(Storage s);

struct BufferRef {
  Storage storage = Storage::kArena;
  int64_t offset = 0;  // bytes into the arena or weights blob; 0 for inputs and outputs
  int index = 0;       // input or output number
};

struct Step {
  enum Kind { kKernel, kLibrary, kCopy } kind = kKernel;
  int item = 0;                    // kernels[item] or calls[item]
  const Value* src = nullptr;      // kCopy
  const Value* dst = nullptr;      // kCopy
  int dst_output = -1;             // kCopy into output slot
};

struct Schedule {
  std::vector<Kernel> kernels;
  std::vector<LibraryCall> calls;
  std::vector<Step> steps;
  std::map<const Value*, BufferRef> buffers;  // every value a step touches
  std::vector<const Value*> weights;          // constants in the weights blob, in blob order
  int64_t weights_bytes = 0;
  std::vector<BufferRequest> requests;        // arena buffers, for the report and verifier
  // Output slots that are a graph input's storage, written in place (a TensorScatter's
  // present_cache): slot -> input index. No copy step fills them.
  std::map<int, int> outputs_in_inputs;
  MemoryPlan plan;
  int views = 0;                              // nodes lowered to no step
  int folded = 0;                             // nodes a GEMM call takes over (find_gemm_folds): no step
};

// Lowers every node of a frontend-prepared graph (static shapes) into a schedule. Reports every
// node the back end cannot handle in one error. `groups` (from a fusion plan, in a valid
// execution order, every node once) runs each multi-node group as one fused kernel; without it
// every node runs alone in graph order.
using NodeGroups = std::vector<std::vector<const Node*>>;
// packs (optional, one id per group): consecutive groups with the same id >= 0 become one
// packed kernel (independent stitching, lower_packed); the caller guarantees they are independent.
// fold_gemms: GEMM calls take over the work find_gemm_folds finds (a fusion plan's gemm_folds).
// room (ptxas feedback): the kernels, by their nodes' names, declared with room for
// room->registers per thread (give_register_room in lower.h).
struct RegisterRoom {
  std::vector<std::set<std::string>> kernels;
  int registers = 128;
};
StatusOr<Schedule> build_schedule(const Graph& g, const NodeGroups* groups = nullptr,
                                  const std::vector<int>* packs = nullptr, const FoldOptions& fold_gemms = {},
                                  const RegisterRoom* room = nullptr);

// The storage reference of value `v` (must be in the schedule).
const BufferRef& buffer_of(const Schedule& s, const Value* v);

}  // namespace stitch::codegen
