// expand_conv_transpose: a ConvTranspose that strides, or whose weights are computed at run time,
// runs as the runtime's transposed-convolution call (cuDNN's backward-data convolution) where that
// call takes its pads, over a longer output cropped by a Slice where the output ends before the
// call's (SAME_UPPER at an even stride), its bias moved to an Add that fuses with what reads the
// output. Otherwise, with constant weights, it becomes the Conv it equals, over its input with
// zeros between the values:
//   y = ConvTranspose(x, W) with strides s, dilations d, kernel k, pads (b, e), output_padding p
//     = Conv(x', W') with stride 1, dilations d, pads (d (k - 1) - b, d (k - 1) - e + p)
// where x' puts s - 1 zeros after each input value along each spatial axis (a Reshape giving each
// value an axis of 1, a Pad of that axis to s, a Reshape back) and W' is W with its two channel
// axes swapped within each group and its window flipped, computed here once. Pads that come out
// negative crop x' with a Slice. The Reshapes, Pad and Slice fuse into one kernel with whatever
// produces x, and split_conv_padding (later) turns unequal pads into a Pad there too, so cuDNN's
// forward convolution runs it. At stride 1 there are no zeros and the Conv takes cuDNN's fused
// bias, ReLU and residual, so that form is kept there; at stride s the product visits the zeros,
// s^2 times the multiplications in 2-D, which is why the call is preferred where it applies. Runs
// after fold_constants; leaves a ConvTranspose without static shapes, or of run-time weights in a
// form the call does not take, which the back end then refuses by name.
#include <fmt/format.h>

#include <map>

#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

// W [C, M/g, k...] of a transposed convolution as the forward convolution's [M, C/g, k...], each
// group's channel axes swapped and the window flipped on every spatial axis.
Tensor forward_weights(const Tensor& w, int64_t group) {
  const Dims& wd = w.dims();
  const int64_t cin = wd[0], mg = wd[1], cg = cin / group;
  const Dims kernel(wd.begin() + 2, wd.end());
  const int64_t ksz = num_elements(kernel);
  const std::vector<double> src = w.to_f64();
  std::vector<double> dst(src.size());
  std::vector<int64_t> flipped(static_cast<size_t>(ksz));
  for (int64_t k = 0; k < ksz; ++k) {
    int64_t f = 0, r = k, scale = 1;
    for (size_t d = kernel.size(); d-- > 0;) {
      f += (kernel[d] - 1 - r % kernel[d]) * scale;
      r /= kernel[d];
      scale *= kernel[d];
    }
    flipped[static_cast<size_t>(k)] = f;
  }
  for (int64_t c = 0; c < cin; ++c)
    for (int64_t m = 0; m < mg; ++m)
      for (int64_t k = 0; k < ksz; ++k) {
        const int64_t out_channel = (c / cg) * mg + m, in_channel = c % cg;
        dst[static_cast<size_t>((out_channel * cg + in_channel) * ksz + flipped[static_cast<size_t>(k)])] =
            src[static_cast<size_t>((c * mg + m) * ksz + k)];
      }
  Dims d{mg * group, cg};
  d.insert(d.end(), kernel.begin(), kernel.end());
  return Tensor::from_f64(w.dtype(), d, dst);
}

// Whether the transposed-convolution call can run `n`, perhaps over a longer output cropped after
// it: the begin pad in [0, d (k - 1)] and r = out + 2 pad - d (k - 1) - 1 - s (in - 1), the end of
// the output past the call's, below the stride (codegen::conv_transpose_call); r < 0 (SAME_UPPER
// at an even stride, an end pad over the begin pad) is an output that ends before the call's.
std::vector<int64_t> call_excess(const ops::Window& w, bool* callable) {
  std::vector<int64_t> r(static_cast<size_t>(w.spatial));
  *callable = true;
  for (int64_t i = 0; i < w.spatial; ++i) {
    const int64_t extent = w.dilations[i] * (w.kernel[i] - 1), p = w.pad_begin[i];
    r[i] = w.out[i] + 2 * p - extent - 1 - w.strides[i] * (w.in[i] - 1);
    *callable = *callable && p >= 0 && p <= extent && r[i] < w.strides[i];
  }
  return r;
}

// The call's form: where the output ends before the call's, a ConvTranspose of explicit pads (the
// begin pad at both ends, no output_padding) and a Slice of its start; the bias, if any, moved to
// an Add of it as [M, 1...] after.
bool rewrite_for_call(Graph& g, Node& n, const ops::Window& w, const std::vector<int64_t>& r) {
  Value *x = n.input(0), *wt = n.input(1), *bias = n.input(2), *y = n.output(0);
  bool crop = false;
  for (int64_t e : r) crop = crop || e < 0;
  if (!bias && !crop) return false;
  NodeBuilder b{g, n};
  Value* v = nullptr;
  if (crop) {
    const Dims outpad = n.attr_ints("output_padding", Dims(static_cast<size_t>(w.spatial), 0));
    std::vector<int64_t> pads = w.pad_begin, padding(outpad.begin(), outpad.end()), ends, axes;
    Dims longer = *y->dims;
    pads.insert(pads.end(), w.pad_end.begin(), w.pad_end.end());
    for (int64_t i = 0; i < w.spatial; ++i) {
      if (r[i] >= 0) continue;
      pads[w.spatial + i] = w.pad_begin[i];
      padding[i] = 0;
      longer[2 + i] = w.out[i] - r[i];
      ends.push_back(w.out[i]);
      axes.push_back(2 + i);
    }
    std::map<std::string, AttrValue> attrs = n.attrs;
    attrs.erase("auto_pad");
    attrs.erase("output_shape");
    attrs["pads"] = pads;
    attrs["output_padding"] = padding;
    v = b.node("ConvTranspose", "longer", {x, wt}, y->dtype, longer, attrs);
    v = b.node("Slice", "crop",
               {v, b.constant("crop_starts", Tensor::vector_i64(std::vector<int64_t>(ends.size(), 0))),
                b.constant("crop_ends", Tensor::vector_i64(ends)),
                b.constant("crop_axes", Tensor::vector_i64(axes))},
               y->dtype, *y->dims);
  } else {
    v = b.node("ConvTranspose", "unbiased", {x, wt}, y->dtype, *y->dims, n.attrs);
  }
  if (bias) {
    Dims column{(*y->dims)[1]};
    column.resize(y->dims->size() - 1, 1);
    v = b.node("Add", "bias", {v, b.reshape(bias, column, "bias_column")}, y->dtype, *y->dims);
  }
  b.finish(v, y);
  return true;
}

StatusOr<bool> expand(Graph& g, Node& n, bool as_conv) {
  Value *x = n.input(0), *w = n.input(1), *bias = n.input(2), *y = n.output(0);
  if (!x || !w || !y || !x->has_static_shape() || !w->has_static_shape() || !y->has_static_shape())
    return false;
  const Dims& xd = *x->dims;
  ASSIGN_OR_RETURN(ops::Window win, ops::convt_window(n, xd, *w->dims));
  bool strided = false;
  for (int64_t s : win.strides) strided = strided || s > 1;
  bool callable = false;
  const std::vector<int64_t> excess = call_excess(win, &callable);
  if ((strided || !w->constant) && callable && !(as_conv && w->constant))
    return rewrite_for_call(g, n, win, excess);
  if (!w->constant) return false;
  const int64_t sp = win.spatial, group = n.attr_int("group", 1);
  const Dims outpad = n.attr_ints("output_padding", Dims(static_cast<size_t>(sp), 0));
  NodeBuilder b{g, n};
  Value* v = x;
  Dims cur = xd;
  if (strided) {
    Dims spread{xd[0], xd[1]}, wide{xd[0], xd[1]};
    std::vector<int64_t> pads(static_cast<size_t>(2 * (2 + 2 * sp)), 0);
    for (int64_t i = 0; i < sp; ++i) {
      spread.insert(spread.end(), {win.in[i], 1});
      wide.insert(wide.end(), {win.in[i], win.strides[i]});
      pads[static_cast<size_t>(2 + 2 * sp + 3 + 2 * i)] = win.strides[i] - 1;  // after each value
      cur[2 + i] = win.in[i] * win.strides[i];
    }
    v = b.reshape(v, spread, "spread");
    v = b.node("Pad", "zeros_between", {v, b.constant("zeros_between_pads", Tensor::vector_i64(pads))},
               x->dtype, wide);
    v = b.reshape(v, cur, "upsampled");
  }
  // The forward convolution's pads, less the s - 1 zeros already after the last value; negative
  // ones crop.
  std::vector<int64_t> conv_pads(static_cast<size_t>(2 * sp)), starts, ends, axes;
  for (int64_t i = 0; i < sp; ++i) {
    const int64_t extent = win.dilations[i] * (win.kernel[i] - 1);
    const int64_t before = extent - win.pad_begin[i];
    const int64_t after = extent - win.pad_end[i] + outpad[i] - (win.strides[i] - 1);
    conv_pads[i] = std::max<int64_t>(before, 0);
    conv_pads[sp + i] = std::max<int64_t>(after, 0);
    if (before < 0 || after < 0) {
      const int64_t start = std::max<int64_t>(-before, 0), end = cur[2 + i] - std::max<int64_t>(-after, 0);
      if (end <= start) return false;
      starts.push_back(start);
      ends.push_back(end);
      axes.push_back(2 + i);
      cur[2 + i] = end - start;
    }
  }
  if (!axes.empty())
    v = b.node("Slice", "crop",
               {v, b.constant("crop_starts", Tensor::vector_i64(starts)),
                b.constant("crop_ends", Tensor::vector_i64(ends)),
                b.constant("crop_axes", Tensor::vector_i64(axes))},
               x->dtype, cur);
  std::vector<Value*> in{v, b.constant("weights", forward_weights(*w->constant, group))};
  if (bias) in.push_back(bias);
  Value* out = b.node("Conv", "conv", in, x->dtype, *y->dims,
                      {{"pads", conv_pads},
                       {"strides", std::vector<int64_t>(static_cast<size_t>(sp), 1)},
                       {"dilations", win.dilations},
                       {"group", group}});
  b.finish(out, y);
  return true;
}

}  // namespace

StatusOr<bool> expand_conv_transpose(Graph& g, PassContext& ctx) {
  return expand_each(g, "ConvTranspose",
                     [&](Graph& graph, Node& n) { return expand(graph, n, ctx.conv_transpose_as_conv); });
}

}  // namespace stitch
