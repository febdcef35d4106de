// The elements an indexing node takes in an integer operand, and StitchIndexCheck, the compiler's own
// element-wise op that keeps refusing the others once a rewrite has replaced that node.
//
// A rewrite that replaces an indexing node by element-wise work (passes/expand_attention.cc's
// TensorScatter into a computed cache and RotaryEmbedding's position ids,
// passes/expand_reverse_sequence.cc's run-time lengths, passes/expand_losses.cc's targets,
// fusion/scatter_selects.h's ScatterElements as Wheres) reads the indices through checked_index, so
// that an index the node would refuse is still refused; passes/check_divisors.cc does the same for an
// integer Div's or Mod's divisor. Output 0 of a StitchIndexCheck is input 0 (any integer type). An
// element its bounds (attributes "min", "max", "nonzero") refuse fails the reference naming the
// replaced node (attributes "node" and "op") with "message", in which "{value}" stands for the
// element; a kernel reports it after the run the same way (codegen/kernel.h's KernelFault) and goes
// on with the nearest bound, or with 1 for a 0 (ops/value_range.h relies on both).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "ir/graph.h"
#include "support/status.h"

namespace stitch::ops {

inline constexpr const char* kIndexCheck = "StitchIndexCheck";

// The elements an operand may hold: [min, max], and not 0 with `nonzero`. `message` says what is
// wrong with one outside, "{value}" standing for it.
struct IndexBounds {
  int64_t min = 0, max = 0;
  std::string message;
  bool nonzero = false;

  bool admits(int64_t v) const { return v >= min && v <= max && !(nonzero && v == 0); }
  // The first of `values` these bounds refuse, or nothing.
  std::optional<int64_t> first_refused(std::span<const int64_t> values) const;
};

// `message` with its "{value}" replaced by `value`.
std::string with_value(std::string message, int64_t value);

// The node a check made by `n` reports, as {name, op}: the replaced node for a StitchIndexCheck,
// n itself otherwise.
std::pair<std::string, std::string> checked_node(const Node& n);

// Ok when `b` admits every one of `values`; otherwise the refusal of the first one outside, naming
// checked_node(n): "node 'name' (op): message".
Status refuse_outside(const Node& n, const IndexBounds& b, std::span<const int64_t> values);

// The bounds StitchIndexCheck `check` holds.
IndexBounds index_check_bounds(const Node& check);

// Whether the bounds of `v` known at compile time (ops/value_range.h) show that `b` admits every
// element: a constant inside, a Clip into them, the positions a TopK picks.
bool proven_admitted(const Value* v, const IndexBounds& b);

// `v`, which `replaced` reads under `b`, as the nodes that replace it must read it: `v` itself where
// its bounds prove every element admitted; the output of a check already on `v` with the same bounds,
// op and message (one check for the position ids that every layer's rotary embedding reads);
// otherwise a new StitchIndexCheck of `v` named "<replaced>/<name>". A constant `v` with an element
// outside is refused now, naming `replaced`.
StatusOr<Value*> checked_index(Graph& g, const Node& replaced, Value* v, const IndexBounds& b,
                               const std::string& name);

// The write indices a TensorScatter `n` takes for `count` updates into a cache of `len` positions:
// [0, len - count] in mode linear, [0, 2^63 - 1] in mode circular.
IndexBounds tensor_scatter_bounds(const Node& n, int64_t len, int64_t count);
// The valid key counts an Attention `n` takes in nonpad_kv_seqlen (input 6) for keys of `total`
// positions: [0, total].
IndexBounds valid_keys_bounds(const Node& n, int64_t total);
// The sequence lengths a ReverseSequence takes along a time axis of `steps`: [0, steps].
IndexBounds sequence_lens_bounds(int64_t steps);
// The position ids a RotaryEmbedding takes for caches of `rows` positions: [0, rows - 1].
IndexBounds position_ids_bounds(int64_t rows);

}  // namespace stitch::ops
