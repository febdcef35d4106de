// expand_conv_transpose: a ConvTranspose as what the runtime runs fast, in one of three forms.
// - Sub-pixel (a strided one of constant weights without dilations; the default): one forward
//   Conv of the output's phases, interleaved by a kernel that also crops and adds the bias
//   (sub_pixel below). The transposed convolution's own work, on cuDNN's forward kernels.
// - The call (run-time weights, dilations, or PassContext::conv_transpose_form "call"): the
//   runtime's transposed-convolution step, cuDNN's backward-data convolution, where its one pad
//   per axis can give the op's pads, over a longer output cropped by a Slice where the output ends
//   before the call's (SAME_UPPER at an even stride); its bias moved to an Add that fuses with
//   what reads the output. On an H200 it was slower than both other forms on most shapes.
// - Zeros (stride 1, what neither other takes, or the form "zeros"), with constant weights: the
//   Conv the op equals over its input with zeros between the values:
//   y = ConvTranspose(x, W) with strides s, dilations d, kernel k, pads (b, e), output_padding p
//     = Conv(x', W') with stride 1, dilations d, pads (d (k - 1) - b, d (k - 1) - e + p)
//   where x' puts s - 1 zeros after each input value along each spatial axis (a Reshape giving
//   each value an axis of 1, a Pad of that axis to s, a Reshape back) and W' is W with its two
//   channel axes swapped within each group and its window flipped, computed here once. Pads that
//   come out negative crop x' with a Slice. The Reshapes, Pad and Slice fuse into one kernel with
//   whatever produces x, and split_conv_padding (later) turns unequal pads into a Pad there too.
//   At stride 1 there are no zeros and the Conv takes cuDNN's fused bias, ReLU and residual; at
//   stride s the product visits the zeros, s^2 times the multiplications in 2-D.
// Runs after fold_constants; leaves a ConvTranspose without static shapes, or of run-time weights
// in a form the call does not take, which the back end then refuses by name.
#include <fmt/format.h>

#include <map>

#include "codegen/library.h"
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
// it: per axis, its pad fits and the output runs past the call's by less than the stride
// (codegen::conv_transpose_excess); less than 0 (SAME_UPPER at an even stride, an end pad over the
// begin pad) is an output that ends before the call's.
std::vector<int64_t> call_excess(const ops::Window& w, bool* callable) {
  std::vector<int64_t> r(static_cast<size_t>(w.spatial));
  *callable = true;
  for (int64_t i = 0; i < w.spatial; ++i) {
    r[i] = codegen::conv_transpose_excess(w, i);
    *callable = *callable && codegen::conv_transpose_pad_fits(w, i) && r[i] < w.strides[i];
  }
  return r;
}

// y + B as [M, 1...], B the op's bias (or `v` itself without one).
Value* add_bias(NodeBuilder& b, Value* v, Value* bias, const Value* y) {
  if (!bias) return v;
  Dims column{(*y->dims)[1]};
  column.resize(y->dims->size() - 1, 1);
  return b.node("Add", "bias", {v, b.reshape(bias, column, "bias_column")}, y->dtype, *y->dims);
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
    v = b.slice(v, std::vector<int64_t>(ends.size(), 0), ends, axes, "crop");
  } else {
    v = b.node("ConvTranspose", "unbiased", {x, wt}, y->dtype, *y->dims, n.attrs);
  }
  b.finish(add_bias(b, v, bias, y), y);
  return true;
}

// The sub-pixel form (stride s, dilation 1, kernel k; J = ceil(k / s) taps in each of the s
// phases r of an output axis): y_full[q s + r] = sum over j < J of x[q - j] W[j s + r] (W zero
// past k), one forward Conv of x padded by J - 1 at both ends, with an output channel per (m, r)
// and weights W'[(m, r), c, J - 1 - j] = W[c, m, j s + r]; then the phases interleaved (Reshape,
// Transpose, Reshape) and y_full cropped to the op's pads (a Slice, and a Pad of zeros where the
// output reaches past y_full), the bias an Add. The Conv does the transposed convolution's
// multiplications (and J s - k zero taps an axis where s does not divide k); the layout ops fuse
// with the bias and what reads y.
Tensor sub_pixel_weights(const Tensor& w, int64_t group, const Dims& strides, const Dims& taps) {
  const Dims& wd = w.dims();
  const int64_t cin = wd[0], mg = wd[1], cg = cin / group, sp = static_cast<int64_t>(strides.size());
  const Dims kernel(wd.begin() + 2, wd.end());
  const int64_t phases = num_elements(strides), tap_count = num_elements(taps), ksz = num_elements(kernel);
  const std::vector<double> src = w.to_f64();
  std::vector<double> dst(static_cast<size_t>(mg * group * phases * cg * tap_count), 0.0);
  std::vector<int64_t> r(static_cast<size_t>(sp)), jj(static_cast<size_t>(sp));
  for (int64_t ph = 0; ph < phases; ++ph) {
    for (int64_t a = sp - 1, rem = ph; a >= 0; --a) r[a] = rem % strides[a], rem /= strides[a];
    for (int64_t tp = 0; tp < tap_count; ++tp) {
      int64_t t = 0;  // W's window offset of this phase and tap, or -1 past the kernel
      for (int64_t a = sp - 1, rem = tp; a >= 0; --a) jj[a] = rem % taps[a], rem /= taps[a];
      for (int64_t a = 0; a < sp && t >= 0; ++a) {
        const int64_t at = (taps[a] - 1 - jj[a]) * strides[a] + r[a];
        t = at < kernel[a] ? t * kernel[a] + at : -1;
      }
      if (t < 0) continue;
      for (int64_t c = 0; c < cin; ++c)
        for (int64_t m = 0; m < mg; ++m) {
          const int64_t out_channel = ((c / cg) * mg + m) * phases + ph;
          dst[static_cast<size_t>((out_channel * cg + c % cg) * tap_count + tp)] =
              src[static_cast<size_t>((c * mg + m) * ksz + t)];
        }
    }
  }
  Dims d{mg * group * phases, cg};
  d.insert(d.end(), taps.begin(), taps.end());
  return Tensor::from_f64(w.dtype(), d, dst);
}

bool sub_pixel(Graph& g, Node& n, const ops::Window& win) {
  Value *x = n.input(0), *w = n.input(1), *bias = n.input(2), *y = n.output(0);
  const Dims& xd = *x->dims;
  const int64_t sp = win.spatial, group = n.attr_int("group", 1), m = (*y->dims)[1];
  const int64_t phases = num_elements(win.strides);
  Dims taps, conv_out{xd[0], m * phases}, split{xd[0], m}, full{xd[0], m};
  std::vector<int64_t> conv_pads(static_cast<size_t>(2 * sp)), perm{0, 1};
  for (int64_t a = 0; a < sp; ++a) {
    taps.push_back((win.kernel[a] + win.strides[a] - 1) / win.strides[a]);
    conv_pads[a] = conv_pads[sp + a] = taps[a] - 1;
    conv_out.push_back(win.in[a] + taps[a] - 1);
    split.push_back(win.strides[a]);
    perm.insert(perm.end(), {2 + sp + a, 2 + a});
    full.push_back(conv_out.back() * win.strides[a]);
  }
  for (int64_t a = 0; a < sp; ++a) split.push_back(conv_out[2 + a]);
  NodeBuilder b{g, n};
  Value* v =
      b.node("Conv", "phases",
             {x, b.constant("phase_weights", sub_pixel_weights(*w->constant, group, win.strides, taps))},
             x->dtype, conv_out,
             {{"pads", conv_pads},
              {"strides", std::vector<int64_t>(static_cast<size_t>(sp), 1)},
              {"dilations", std::vector<int64_t>(static_cast<size_t>(sp), 1)},
              {"group", group}});
  v = b.reshape(v, split, "phase_axes");
  Dims moved{split[0], split[1]};
  for (size_t i = 2; i < perm.size(); ++i) moved.push_back(split[static_cast<size_t>(perm[i])]);
  v = b.node("Transpose", "interleave", {v}, x->dtype, moved, {{"perm", perm}});
  v = b.reshape(v, full, "interleaved");
  // The op's output is y_full from the begin pad on; a negative begin pad, or an output past
  // y_full (output_padding, output_shape), reads zeros there.
  std::vector<int64_t> starts, ends, axes, zeros(static_cast<size_t>(2 * (2 + sp)), 0);
  bool padded = false;
  for (int64_t a = 0; a < sp; ++a) {
    const int64_t begin = win.pad_begin[a], end = begin + win.out[a];
    const int64_t lo = std::max<int64_t>(begin, 0), hi = std::min(end, full[2 + a]);
    if (lo > 0 || hi < full[2 + a]) {
      starts.push_back(lo);
      ends.push_back(hi);
      axes.push_back(2 + a);
    }
    zeros[static_cast<size_t>(2 + a)] = lo - begin;
    zeros[static_cast<size_t>(2 + sp + 2 + a)] = end - hi;
    padded = padded || lo > begin || end > hi;
  }
  if (!axes.empty()) v = b.slice(v, starts, ends, axes, "crop");
  if (padded)
    v = b.node("Pad", "outside", {v, b.constant("outside_pads", Tensor::vector_i64(zeros))}, x->dtype,
               *y->dims);
  b.finish(add_bias(b, v, bias, y), y);
  return true;
}

// The Conv over the input with zeros between its values (the file's comment).
bool zero_stuffed(Graph& g, Node& n, const ops::Window& win, bool strided) {
  Value *x = n.input(0), *w = n.input(1), *bias = n.input(2), *y = n.output(0);
  const Dims& xd = *x->dims;
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
    }
  }
  if (!axes.empty()) v = b.slice(v, starts, ends, axes, "crop");
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

StatusOr<bool> expand_conv_transpose_node(Graph& g, Node& n, const std::string& form) {
  Value *x = n.input(0), *w = n.input(1), *y = n.output(0);
  if (!x || !w || !y || !x->has_static_shape() || !w->has_static_shape() || !y->has_static_shape())
    return false;
  ASSIGN_OR_RETURN(ops::Window win, ops::convt_window(n, *x->dims, *w->dims));
  bool strided = false, dilated = false;
  for (int64_t s : win.strides) strided = strided || s > 1;
  for (int64_t d : win.dilations) dilated = dilated || d > 1;
  const bool constant = w->constant.has_value();
  if (strided && constant && !dilated && (form.empty() || form == "subpixel")) return sub_pixel(g, n, win);
  bool callable = false;
  const std::vector<int64_t> excess = call_excess(win, &callable);
  if ((strided || !constant) && callable && !(form == "zeros" && constant))
    return rewrite_for_call(g, n, win, excess);
  if (!constant) return false;
  return zero_stuffed(g, n, win, strided);
}

}  // namespace

StatusOr<bool> expand_conv_transpose(Graph& g, PassContext& ctx) {
  return expand_each(g, "ConvTranspose", [&](Graph& graph, Node& n) {
    return expand_conv_transpose_node(graph, n, ctx.conv_transpose_form);
  });
}

}  // namespace stitch
