// expand_recurrent: an LSTM, GRU or RNN whose sequence length is known becomes its steps written
// out (the recurrence as ops/recurrent.cc defines it), so the fusion planner sees ordinary nodes:
//   one MatMul of the whole input sequence by the input weights, plus the biases (a GEMM);
//   per step, the previous hidden state by the recurrence weights (a small GEMM the planner may
//   stitch into the step's kernel as a loop), the gates as Slices of the sum, their activations
//   and the state update; with sequence_lens, a Where per state keeps a finished row's state and
//   writes zeros to Y;
//   Y a Concat of the steps' states (in time order, whatever the direction), Y_h and Y_c the last.
// Weights, biases and peepholes may be constants (their parts are then constants too) or computed
// at run time (Slices, Reshapes and Transposes of them). The steps of all directions must be at
// most ops::kMaxRecurrentSteps: the graph grows by some 20 nodes a step. A recurrence this pass does not take
// stays its op, which the back end refuses by name. Runs after fold_constants; the new nodes are named after
// the op ("lstm/t3/c").
#include <fmt/format.h>

#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

// Rows [lo, hi) of direction d of a constant [dirs, rows, cols], transposed to [cols, hi - lo].
Tensor rows_transposed(const Tensor& w, int64_t d, int64_t lo, int64_t hi) {
  const int64_t rows = w.dims()[1], cols = w.dims()[2];
  const std::vector<double> v = w.to_f64();
  std::vector<double> t(static_cast<size_t>(cols * (hi - lo)));
  for (int64_t r = lo; r < hi; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t[static_cast<size_t>(c * (hi - lo) + r - lo)] = v[static_cast<size_t>((d * rows + r) * cols + c)];
  return Tensor::from_f64(w.dtype(), {cols, hi - lo}, t);
}

// Rows [lo, hi) of direction d of w [dirs, rows, cols], transposed to [cols, hi - lo]: a constant
// when w is one, else a Slice, Reshape and Transpose of it.
Value* weights_t(NodeBuilder& b, Value* w, int64_t d, int64_t lo, int64_t hi, const std::string& name) {
  if (w->constant) return b.constant(name, rows_transposed(*w->constant, d, lo, hi));
  const int64_t cols = (*w->dims)[2];
  Value* v =
      b.reshape(b.slice(w, {d, lo}, {d + 1, hi}, {0, 1}, name + "_rows"), {hi - lo, cols}, name + "_matrix");
  return b.node("Transpose", name, {v}, w->dtype, {cols, hi - lo}, {{"perm", std::vector<int64_t>{1, 0}}});
}

// Values [off, off + len) of direction d of v [dirs, n]: a constant when v is one, else a Slice and
// a Reshape of it.
Value* part(NodeBuilder& b, Value* v, int64_t d, int64_t off, int64_t len, const std::string& name) {
  if (v->constant) {
    const std::vector<double> all = v->constant->to_f64();
    const int64_t n = (*v->dims)[1];
    return b.constant(name, Tensor::from_f64(v->dtype, {len},
                                             std::vector<double>(all.begin() + d * n + off,
                                                                 all.begin() + d * n + off + len)));
  }
  return b.reshape(b.slice(v, {d, off}, {d + 1, off + len}, {0, 1}, name + "_part"), {len}, name);
}

std::string op_name(const std::string& f) {
  if (f == "sigmoid") return "Sigmoid";
  if (f == "tanh") return "Tanh";
  if (f == "relu") return "Relu";
  if (f == "softsign") return "Softsign";
  return "Softplus";
}

struct Steps {
  NodeBuilder b;
  const ops::RecurrentSpec& s;
  DType t;
  Dims bh;  // [batch, hidden]

  Value* add(Value* a, Value* c, const std::string& name) { return b.node("Add", name, {a, c}, t, bh); }
  Value* mul(Value* a, Value* c, const std::string& name) { return b.node("Mul", name, {a, c}, t, bh); }
  // The activation f of `x`, its input clipped first when the op has a clip.
  Value* act(const std::string& f, Value* x, const std::string& name) {
    if (s.clip) {
      const double c = *s.clip;
      x = b.node("Clip", name + "_clip",
                 {x, b.constant(name + "_lo", Tensor::from_f64(t, {}, {-c})),
                  b.constant(name + "_hi", Tensor::from_f64(t, {}, {c}))},
                 t, bh);
    }
    return b.node(op_name(f), name, {x}, t, bh);
  }
  Value* gate(Value* pre, int64_t k, const std::string& name) {
    return b.slice(pre, {k * s.hidden}, {(k + 1) * s.hidden}, {1}, name);
  }
};

StatusOr<bool> expand_recurrent_node(Graph& g, Node& n) {
  Value* x = n.input(0);
  std::vector<const Dims*> in_dims;
  for (const Value* v : n.inputs) {
    if (v && !v->has_static_shape()) return false;
    in_dims.push_back(v ? &*v->dims : nullptr);
  }
  if (!x || !n.input(1) || !n.input(2)) return false;
  ASSIGN_OR_RETURN(ops::RecurrentSpec s, ops::recurrent_spec(n, in_dims));
  const bool lstm = n.op_type == "LSTM", gru = n.op_type == "GRU";
  auto input = [&](size_t i) { return i < n.inputs.size() ? n.input(i) : nullptr; };
  if (s.seq * s.dirs > ops::kMaxRecurrentSteps || s.seq < 1) return false;
  const int64_t T = s.seq, B = s.batch, H = s.hidden, G = s.gates;
  const DType t = x->dtype;
  Steps st{NodeBuilder{g, n}, s, t, {B, H}};
  NodeBuilder& b = st.b;
  Value* w = input(1);
  Value* r = input(2);
  Value* bias = input(3);
  Value* peep = lstm ? input(7) : nullptr;
  Value* lens = input(4);
  if (lens && lens->constant) {  // every row the whole sequence: no masks
    bool all = true;
    for (int64_t v : lens->constant->to_i64()) all = all && v >= T;
    if (all) lens = nullptr;
  }
  const size_t seq_axis = s.layout == 0 ? 0 : 1;
  Value* mask_zero =
      lens ? b.constant("zero_state", Tensor::from_f64(t, {B, H}, std::vector<double>(B * H, 0.0))) : nullptr;
  // A [batch, hidden] state of direction d from a [dirs, batch, hidden] (layout 1: [batch, dirs,
  // hidden]) initial state, or zeros.
  auto initial = [&](Value* v, int64_t d, const std::string& name) -> Value* {
    if (!v) return b.constant(name, Tensor::from_f64(t, {B, H}, std::vector<double>(B * H, 0.0)));
    const int64_t axis = s.layout == 0 ? 0 : 1;
    return b.reshape(b.slice(v, {d}, {d + 1}, {axis}, name + "_dir"), {B, H}, name);
  };
  std::vector<Value*> y_dirs, h_dirs, c_dirs;
  for (int64_t d = 0; d < s.dirs; ++d) {
    const std::string p = s.dirs == 2 ? (d == 0 ? "fw/" : "bw/") : "";
    const std::vector<std::string>& f = s.acts[static_cast<size_t>(d)];
    // The input sequence by the input weights, once, with every bias that adds to it alone (GRU's
    // recurrence bias of its h gate is added where the reset gate applies).
    Dims xw_dims = *x->dims;
    xw_dims[2] = G * H;
    Value* xw = b.node("MatMul", p + "input_product", {x, weights_t(b, w, d, 0, G * H, p + "input_weights")},
                       t, xw_dims);
    Value* rbh = nullptr;
    if (bias) {
      const int64_t joined = gru ? 2 * H : G * H;
      Value* xb = b.node("Add", p + "biases",
                         {part(b, bias, d, 0, joined, p + "input_bias"),
                          part(b, bias, d, G * H, joined, p + "recurrence_bias")},
                         t, {joined});
      if (gru) {
        xb = b.node("Concat", p + "biases_zrh", {xb, part(b, bias, d, 2 * H, H, p + "input_bias_h")}, t,
                    {G * H}, {{"axis", int64_t{0}}});
        rbh = part(b, bias, d, G * H + 2 * H, H, p + "recurrence_bias_h");
      }
      xw = b.node("Add", p + "input_biased", {xw, xb}, t, xw_dims);
    }
    Value* rt = weights_t(b, r, d, 0, gru ? 2 * H : G * H, p + "recurrence_weights");
    Value* rht = gru ? weights_t(b, r, d, 2 * H, 3 * H, p + "recurrence_weights_h") : nullptr;
    auto peephole = [&](int64_t k) -> Value* {
      return peep ? part(b, peep, d, k * H, H, fmt::format("{}peephole_{}", p, "iof"[k])) : nullptr;
    };
    Value* pi = peephole(0);
    Value* po = peephole(1);
    Value* pf = peephole(2);
    Value* h = initial(input(5), d, p + "initial_h");
    Value* c = lstm ? initial(input(6), d, p + "initial_c") : nullptr;
    Value* one = nullptr;
    std::vector<Value*> ys(static_cast<size_t>(T));
    for (int64_t step = 0; step < T; ++step) {
      const int64_t tt = s.reversed(d) ? T - 1 - step : step;
      const std::string q = fmt::format("{}t{}/", p, tt);
      Value* xt = b.reshape(b.slice(xw, {tt}, {tt + 1}, {static_cast<int64_t>(seq_axis)}, q + "input_step"),
                            {B, G * H}, q + "input");
      const int64_t joined = gru ? 2 * H : G * H;  // gates whose recurrence term adds alone
      Value* hr = b.node("MatMul", q + "recurrence", {h, rt}, t, {B, joined});
      Value* pre = b.node("Add", q + "gates", {gru ? b.slice(xt, {0}, {2 * H}, {1}, q + "zr_in") : xt, hr}, t,
                          {B, joined});
      Value *hn = nullptr, *cn = nullptr;
      if (lstm) {
        Value* gi = st.gate(pre, 0, q + "i_in");
        if (pi) gi = st.add(gi, st.mul(c, pi, q + "i_peep"), q + "i_pre");
        Value* i = st.act(f[0], gi, q + "i");
        Value* fg;
        if (s.input_forget) {
          if (!one) one = b.constant(p + "one", Tensor::from_f64(t, {}, {1.0}));
          fg = b.node("Sub", q + "f", {one, i}, t, {B, H});
        } else {
          Value* gf = st.gate(pre, 2, q + "f_in");
          if (pf) gf = st.add(gf, st.mul(c, pf, q + "f_peep"), q + "f_pre");
          fg = st.act(f[0], gf, q + "f");
        }
        Value* cc = st.act(f[1], st.gate(pre, 3, q + "c_in"), q + "c_candidate");
        cn = st.add(st.mul(fg, c, q + "c_kept"), st.mul(i, cc, q + "c_new"), q + "c");
        Value* go = st.gate(pre, 1, q + "o_in");
        if (po) go = st.add(go, st.mul(cn, po, q + "o_peep"), q + "o_pre");
        Value* o = st.act(f[0], go, q + "o");
        hn = st.mul(o, st.act(f[2], cn, q + "c_act"), q + "h");
      } else if (gru) {
        Value* z = st.act(f[0], st.gate(pre, 0, q + "z_in"), q + "z");
        Value* rg = st.act(f[0], st.gate(pre, 1, q + "r_in"), q + "r");
        Value* xh = b.slice(xt, {2 * H}, {3 * H}, {1}, q + "h_in");
        Value* nh;
        if (s.linear_before_reset) {
          Value* hh = b.node("MatMul", q + "recurrence_h", {h, rht}, t, {B, H});
          if (rbh) hh = st.add(hh, rbh, q + "recurrence_h_bias");
          nh = st.add(xh, st.mul(rg, hh, q + "reset"), q + "candidate_in");
        } else {
          Value* hh = b.node("MatMul", q + "recurrence_h", {st.mul(rg, h, q + "reset"), rht}, t, {B, H});
          nh = st.add(xh, hh, q + "candidate_in");
          if (rbh) nh = st.add(nh, rbh, q + "candidate_biased");
        }
        Value* cand = st.act(f[1], nh, q + "candidate");
        // h' = (1 - z) n + z h = n + z (h - n)
        hn = st.add(cand, st.mul(z, b.node("Sub", q + "h_delta", {h, cand}, t, {B, H}), q + "h_kept"),
                    q + "h");
      } else {
        hn = st.act(f[0], pre, q + "h");
      }
      Value* yt = hn;
      if (lens) {
        Value* now = b.constant(q + "now", Tensor::from_i64(lens->dtype, {}, {tt}));
        Value* valid = b.node("Less", q + "valid", {now, lens}, DType::kBool, {B});
        valid = b.reshape(valid, {B, 1}, q + "valid_rows");
        yt = b.node("Where", q + "y", {valid, hn, mask_zero}, t, {B, H});
        hn = b.node("Where", q + "h_state", {valid, hn, h}, t, {B, H});
        if (cn) cn = b.node("Where", q + "c_state", {valid, cn, c}, t, {B, H});
      }
      ys[static_cast<size_t>(tt)] = yt;
      h = hn;
      if (cn) c = cn;
    }
    if (n.output(0)) {
      for (int64_t tt = 0; tt < T; ++tt) {
        Value*& y = ys[static_cast<size_t>(tt)];
        y = b.reshape(y, s.layout == 0 ? Dims{1, 1, B, H} : Dims{B, 1, 1, H},
                      fmt::format("{}t{}/y_row", p, tt));
      }
      y_dirs.push_back(b.node("Concat", p + "y", ys, t, s.layout == 0 ? Dims{T, 1, B, H} : Dims{B, T, 1, H},
                              {{"axis", static_cast<int64_t>(seq_axis)}}));
    }
    const Dims state = s.layout == 0 ? Dims{1, B, H} : Dims{B, 1, H};
    h_dirs.push_back(b.reshape(h, state, p + "y_h"));
    if (c) c_dirs.push_back(b.reshape(c, state, p + "y_c"));
  }
  // Each output from a node of its own (the per-direction results are read by the steps too).
  auto gather = [&](const std::vector<Value*>& parts, Dims d, int64_t axis, const std::string& name) {
    return b.node("Concat", name, parts, t, std::move(d), {{"axis", axis}});
  };
  const int64_t dir_axis = s.layout == 0 ? 1 : 2, state_axis = s.layout == 0 ? 0 : 1;
  std::vector<std::pair<Value*, Value*>> outs;  // built, original
  if (n.output(0)) outs.push_back({gather(y_dirs, *n.output(0)->dims, dir_axis, "Y"), n.output(0)});
  if (n.output(1)) outs.push_back({gather(h_dirs, *n.output(1)->dims, state_axis, "Y_h"), n.output(1)});
  if (lstm && n.outputs.size() > 2 && n.output(2))
    outs.push_back({gather(c_dirs, *n.output(2)->dims, state_axis, "Y_c"), n.output(2)});
  if (outs.empty()) {
    g.remove_nodes({&n});
    return true;
  }
  g.remove_nodes({&n});
  for (auto [built, out] : outs) {
    Node* producer = built->producer;
    producer->outputs[0] = out;
    out->producer = producer;
  }
  return true;
}

}  // namespace

StatusOr<bool> expand_recurrent(Graph& g, PassContext&) {
  bool changed = false;
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    ASSIGN_OR_RETURN(bool done, expand_each(g, op, expand_recurrent_node));
    changed = changed || done;
  }
  return changed;
}

}  // namespace stitch
