// The IR's text form: printed for --dump-dir and tests, parsed back by tests.
//
//   graph "main" opset 17 {
//     input %x: f32[batch,4]
//     const %w: f32[4] = [1.0, 2.0, 3.0, 4.0]
//     %y: f32[batch,4] = Add(%x, %w) @"add_0"
//     %a, _ = Dropout(%y, _, _) {seed = 3} @"drop"
//     output %y
//   }
//
// A symbolic dim is bare when it is one symbol (batch), quoted otherwise ("past + 1").
// Names are bare when they only use [A-Za-z0-9_./-], quoted otherwise. An
// omitted optional input or output is `_`. Attribute values: 3, 2.5, "s",
// ints[..], floats[..], strings[..], tensor<f32[2]>[..]. Output types are
// optional in the parsed form (shape inference fills them).
#pragma once

#include <string>

#include "ir/graph.h"

namespace stitch {

struct PrintOptions {
  // Constants with more elements print as `<N elements>` (not parseable);
  // -1 prints everything, so the text round-trips.
  int64_t max_constant_elements = -1;
};

std::string print_graph(const Graph& g, const PrintOptions& opts = {});
// Parses the text form; ops are looked up in the op table (unknown ops are
// kept with a null def, as the importer does). Errors give line and column.
StatusOr<std::unique_ptr<Graph>> parse_graph(const std::string& text);

}  // namespace stitch
