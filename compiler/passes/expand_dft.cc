// expand_dft: a DFT becomes one GEMM by a constant matrix of its weights (ops::dft_matrix), with
// views and at most two Transposes around it:
//   Transpose x so the transformed axis sits just before the parts axis (when it does not),
//   Reshape [..., n, parts] -> [..., n x parts]   (real and imaginary parts interleaved, as stored),
//   MatMul by W [n x parts_in, out x parts_out]  (the parts' products are W's interleaved entries),
//   Reshape -> [..., out, parts_out], and the Transpose back.
// This is the transform as a matrix product, O(n^2) per signal where an FFT is O(n log n), run by
// cuBLAS; at the lengths models transform (FNet's sequence and hidden axes, hundreds to a few
// thousand) a GEMM is what TPUs run FNet with, and the surrounding Transposes fuse. A DFT whose
// matrix would pass ops::kMaxDftWeights elements stays a DFT, which the back end refuses by name.
// Two forms PyTorch's exports take shrink the matrix: a complex input whose imaginary parts are
// constant zeros (a Concat of the real values and zeros: torch.fft of a real tensor) is read as
// real values, without the zero rows; and an output whose readers only take its real parts
// (Gathers of index 0 on the parts axis: `.real`) gets the real columns alone, its parts axis 1.
// Runs after fold_constants; the new nodes are named after the DFT ("F/product").
// An STFT is written the same way, its frames gathered first (below), before the DFTs.
#include <fmt/format.h>

#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

std::optional<int64_t> scalar_operand(const Node& n, size_t i) {
  const Value* v = n.input(i);
  if (!v || !v->constant) return std::nullopt;
  return v->constant->to_i64().at(0);
}

// The real values of a complex `x` written as Concat(real, zeros) along its parts axis, or null.
Value* real_values(const Value* x) {
  const Node* c = x->producer;
  const int64_t r = static_cast<int64_t>(x->dims->size());
  if (!c || c->op_type != "Concat" || c->inputs.size() != 2 || !c->input(0) || !c->input(1)) return nullptr;
  const int64_t axis = c->attr_int("axis", 0);
  if (axis != r - 1 && axis != -1) return nullptr;
  const Value* im = c->input(1);
  if (!im->constant || im->dims->back() != 1) return nullptr;
  for (double v : im->constant->to_f64())
    if (v != 0.0) return nullptr;
  return c->input(0);
}

// Whether every reader of `y` (rank r) takes its real parts alone: a Gather of the constant
// index 0 along the parts axis.
bool read_as_real(const Graph& g, const Value* y) {
  if (g.is_graph_output(y)) return false;
  const auto users = g.users();
  const auto it = users.find(y);
  if (it == users.end() || it->second.empty()) return false;
  const int64_t r = static_cast<int64_t>(y->dims->size());
  for (const Node* u : it->second) {
    const Value* i = u->input(1);
    const int64_t axis = u->attr_int("axis", 0);
    if (u->op_type != "Gather" || u->input(0) != y || !i || !i->constant || !i->dims->empty() ||
        i->constant->to_i64().at(0) != 0 || (axis != r - 1 && axis != -1))
      return false;
  }
  return true;
}

StatusOr<bool> expand_dft_node(Graph& g, Node& n) {
  Value *x = n.input(0), *y = n.output(0);
  if (!x || !y || !x->has_static_shape()) return false;
  if ((n.input(1) && !n.input(1)->constant) || (n.input(2) && !n.input(2)->constant)) return false;
  ASSIGN_OR_RETURN(ops::DftSpec s, ops::dft_spec(n, *x->dims, scalar_operand(n, 1), scalar_operand(n, 2)));
  if (Value* re = s.complex_in && !(s.inverse && s.onesided) ? real_values(x) : nullptr) {
    x = re;
    s.complex_in = false;
  }
  const int64_t ci = s.complex_in ? 2 : 1;
  const bool real_out = s.complex_out && read_as_real(g, y);
  const int64_t co = s.complex_out && !real_out ? 2 : 1;
  if (s.in * ci * s.out * co > ops::kMaxDftWeights) return false;
  std::vector<double> weights = ops::dft_matrix(s);
  if (real_out) {  // the even columns: each output's real part
    std::vector<double> re(static_cast<size_t>(s.in * ci * s.out));
    for (size_t k = 0; k < re.size(); ++k) re[k] = weights[2 * k];
    weights = std::move(re);
    s.out_dims.back() = 1;
    y->dims = s.out_dims;
  }
  const Dims& xd = *x->dims;
  const int64_t r = static_cast<int64_t>(xd.size());
  NodeBuilder b{g, n};
  // The other axes in order, then the transformed one and the parts.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d + 1 < r; ++d)
    if (d != s.axis) perm.push_back(d);
  perm.push_back(s.axis);
  perm.push_back(r - 1);
  const bool moved = s.axis != r - 2;
  Value* v = x;
  Dims d;
  for (int64_t p : perm) d.push_back(xd[p]);
  if (moved) v = b.node("Transpose", "to_last", {v}, x->dtype, d, {{"perm", perm}});
  Dims rows(d.begin(), d.end() - 2);
  Dims flat = rows;
  flat.push_back(s.in * ci);
  v = b.reshape(v, flat, "pairs");
  Value* w = b.constant("weights", Tensor::from_f64(x->dtype, {s.in * ci, s.out * co}, weights));
  Dims prod = rows;
  prod.push_back(s.out * co);
  v = b.node("MatMul", "product", {v, w}, x->dtype, prod);
  Dims parts = rows;
  parts.push_back(s.out);
  parts.push_back(co);
  v = b.reshape(v, parts, "parts");
  if (moved) {
    std::vector<int64_t> back(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) back[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    v = b.node("Transpose", "back", {v}, x->dtype, s.out_dims, {{"perm", back}});
  }
  b.finish(v, y);
  return true;
}

// An STFT as the frames' Gather (constant indices f step + n along the signal), the window's Mul
// (folded into the weights when the window is a constant) and the DFT's GEMM:
//   Gather [batch, frames, frame, parts] (or [batch, frames, frame] of a 2-D signal)
//   -> Reshape [batch, frames, frame x parts]
//   -> MatMul by W [frame x parts, bins x 2] -> Reshape [batch, frames, bins, 2].
StatusOr<bool> expand_stft(Graph& g, Node& n) {
  Value *x = n.input(0), *y = n.output(0), *window = n.input(2);
  if (!x || !y || !x->has_static_shape() || !n.input(1) || !n.input(1)->constant) return false;
  if (n.input(3) && !n.input(3)->constant) return false;
  ASSIGN_OR_RETURN(ops::StftSpec s, ops::stft_spec(n, *x->dims, *scalar_operand(n, 1),
                                                   window ? &*window->dims : nullptr, scalar_operand(n, 3)));
  const int64_t ci = s.dft.complex_in ? 2 : 1, cols = s.dft.out * 2, batch = (*x->dims)[0];
  if (s.frame * ci * cols > ops::kMaxDftWeights) return false;
  std::vector<double> weights = ops::dft_matrix(s.dft);
  if (window && window->constant) {
    const std::vector<double> w = window->constant->to_f64();
    for (int64_t i = 0; i < s.frame * ci; ++i)
      for (int64_t o = 0; o < cols; ++o)
        weights[static_cast<size_t>(i * cols + o)] *= w[static_cast<size_t>(i / ci)];
  }
  NodeBuilder b{g, n};
  std::vector<int64_t> idx(static_cast<size_t>(s.frames * s.frame));
  for (int64_t f = 0; f < s.frames; ++f)
    for (int64_t k = 0; k < s.frame; ++k) idx[static_cast<size_t>(f * s.frame + k)] = f * s.step + k;
  Value* at = b.constant("frame_indices", Tensor::from_i64(DType::kI64, {s.frames, s.frame}, idx));
  Dims frames{batch, s.frames, s.frame};
  if (x->dims->size() == 3) frames.push_back(ci);
  Value* v = b.node("Gather", "frames", {x, at}, x->dtype, frames, {{"axis", int64_t{1}}});
  if (window && !window->constant)
    v = b.node("Mul", "windowed",
               {v, x->dims->size() == 3 ? b.reshape(window, {s.frame, 1}, "window") : window}, x->dtype,
               frames);
  v = b.reshape(v, {batch, s.frames, s.frame * ci}, "pairs");
  Value* w = b.constant("weights", Tensor::from_f64(x->dtype, {s.frame * ci, cols}, weights));
  v = b.node("MatMul", "product", {v, w}, x->dtype, {batch, s.frames, cols});
  b.finish(b.reshape(v, s.dft.out_dims, "parts"), y);
  return true;
}

}  // namespace

StatusOr<bool> expand_dft(Graph& g, PassContext&) {
  ASSIGN_OR_RETURN(bool stft, expand_each(g, "STFT", expand_stft));
  ASSIGN_OR_RETURN(bool dft, expand_each(g, "DFT", expand_dft_node));
  return stft || dft;
}

}  // namespace stitch
