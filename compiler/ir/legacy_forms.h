// Models of opsets 1 to 10 (the ONNX model zoo's classic CNNs and BERT, Caffe2's conversions of
// opset 3, early PyTorch exports).
//
// The op table implements each op as it is from opset 11 on (kMinOpset). A model of an older opset
// is read in its own forms: the importer checks each node against the ONNX schema of the model's
// opset, finds its row at opset 11 (Upsample's in Resize, Scatter's in ScatterElements), and keeps
// the node's opset as the model's. Before a node's shape rule first runs (infer_shapes), with its
// inputs' types and shapes known, upgrade_legacy_node rewrites it into its opset-11 form: attributes
// that became inputs (Slice's bounds, Pad's pads and value, Clip's bounds, TopK's k, Upsample's and
// Resize-10's scales, Reshape-1's shape, Tile-1's tiles and axis) become constant inputs, a legacy
// broadcast along an axis becomes a reshaped constant, Upsample and Resize-10 take the coordinate
// mapping they were defined with, Cast-1's type name becomes its code, Split-1's split input and
// Pad-1's paddings become their later attributes, Concat-1's axis gets its default, attributes with no
// meaning for inference (consumed_inputs, is_test, spatial=1, output_sequence, broadcast) go; the
// node's opset then reads kMinOpset. A form with no opset-11 equivalent is refused with the node's
// name.
#pragma once

#include <string_view>

#include "ir/graph.h"
#include "ir/op_table.h"
#include "support/status.h"

namespace stitch {

// The oldest default-domain opset the importer reads.
inline constexpr int kMinModelOpset = 1;

// The row that implements a node of `op` in a model of `opset` (the domain's): for the default
// domain below opset 11, the row at opset 11 (Resize's for Upsample, ScatterElements' for
// Scatter); null before kMinModelOpset, where no row claims it, and for the compiler's own ops
// (OpDef::internal).
const OpDef* find_model_op(std::string_view domain, std::string_view op, int opset);

// Rewrites a default-domain node of an opset below kMinOpset into its opset-11 form (see above);
// its inputs must be typed. Adds constants to `g`, never nodes.
Status upgrade_legacy_node(Graph& g, Node& n);

}  // namespace stitch
