// split_conv_padding: a Conv padded more on one side of a spatial axis than on the other (explicit
// pads such as [0, 0, 1, 2], or auto_pad SAME_UPPER / SAME_LOWER over an even kernel or a stride
// the input does not divide) becomes a Pad of the difference in front of a Conv padded alike on
// both sides. cuDNN's convolutions take one padding per axis, applied at both ends, so the library
// call could not take the Conv as it was; the Pad is a layout op the stitcher fuses with what
// produces the Conv's input. TensorFlow's SAME padding (tf2onnx's exports) and PyTorch's
// padding="same" over even kernels are written this way.
//
// Runs after fold_constants and leaves nodes without static shapes alone. The Pad is named
// "<conv>/pad"; the Conv keeps its name, its output and its other attributes, with explicit
// pads (auto_pad NOTSET).
#include <fmt/format.h>

#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

StatusOr<bool> split(Graph& g, Node& n) {
  Value *x = n.input(0), *wt = n.input(1);
  if (!x || !wt || !x->has_static_shape() || !wt->has_static_shape()) return false;
  ASSIGN_OR_RETURN(ops::Window w, ops::conv_window(n, *x->dims, *wt->dims));
  if (w.pad_begin == w.pad_end) return false;
  const size_t s = w.pad_begin.size(), r = x->dims->size();
  // Pad's pads over every axis of X (batch and channels unpadded), and the Conv's per spatial axis.
  std::vector<int64_t> extra(2 * r, 0), conv_pads(2 * s);
  Dims padded = *x->dims;
  for (size_t i = 0; i < s; ++i) {
    const int64_t both = std::min(w.pad_begin[i], w.pad_end[i]);
    extra[2 + i] = w.pad_begin[i] - both;
    extra[r + 2 + i] = w.pad_end[i] - both;
    padded[2 + i] += extra[2 + i] + extra[r + 2 + i];
    conv_pads[i] = conv_pads[s + i] = both;
  }
  NodeBuilder b{g, n};
  Value* pads = b.constant("pads", Tensor::vector_i64(extra));
  Value* p = b.node("Pad", "pad", {x, pads}, x->dtype, padded);  // constant mode, zeros
  n.inputs[0] = p;
  n.attrs.erase("auto_pad");
  n.attrs["pads"] = conv_pads;
  return true;
}

}  // namespace

StatusOr<bool> split_conv_padding(Graph& g, PassContext&) { return expand_each(g, "Conv", split); }

}  // namespace stitch
