// LSTM, GRU and RNN (opsets 7 and 14): the layer's sizes and attributes (recurrent_spec), shapes,
// and the reference: each direction steps through the sequence (backwards for "reverse" and the
// second direction of "bidirectional"), a batch row past its sequence_lens keeping its state and
// giving zeros in Y. With G gates of H units and weights W [G x H, I], R [G x H, H], biases Wb, Rb:
//   LSTM  i = f(Xi + Hi + Pi c), f' = f(Xf + Hf + Pf c) (1 - i with input_forget),
//         c' = f' c + i g(Xc + Hc), o = f(Xo + Ho + Po c'), h' = o h(c')
//   GRU   z = f(Xz + Hz), r = f(Xr + Hr),
//         n = g(Xh + (r h) Rh + Rbh), or g(Xh + r (h Rh + Rbh)) with linear_before_reset,
//         h' = (1 - z) n + z h
//   RNN   h' = f(X + H)
// where Xg = x Wg + Wbg and Hg = h Rg + Rbg per gate g, and `clip` bounds every activation's input.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

double activate(const std::string& f, double x) {
  if (f == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (f == "tanh") return std::tanh(x);
  if (f == "relu") return std::max(x, 0.0);
  if (f == "softsign") return x / (1.0 + std::fabs(x));
  return std::log1p(std::exp(x));  // softplus
}

}  // namespace

StatusOr<RecurrentSpec> recurrent_spec(const Node& n, const std::vector<const Dims*>& in) {
  if (in.size() < 3 || !in[0] || !in[1] || !in[2]) return node_error(n, "takes its inputs X, W and R");
  const Dims& x = *in[0];
  const Dims& w = *in[1];
  RecurrentSpec s;
  const std::string& op = n.op_type;
  s.gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  const std::string dir = n.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return node_error(n, fmt::format("direction '{}' is not forward, reverse or bidirectional", dir));
  s.dirs = dir == "bidirectional" ? 2 : 1;
  s.reverse_only = dir == "reverse";
  s.layout = n.attr_int("layout", 0);
  if (s.layout != 0 && s.layout != 1) return node_error(n, fmt::format("layout {} is not 0 or 1", s.layout));
  if (x.size() != 3)
    return node_error(n, fmt::format("its input X is {}; it takes a rank-3 sequence", dims_to_string(x)));
  if (w.size() != 3)
    return node_error(n, fmt::format("its weights W are {}; they take [directions, gates x hidden, input]",
                                     dims_to_string(w)));
  s.seq = x[s.layout == 0 ? 0 : 1];
  s.batch = x[s.layout == 0 ? 1 : 0];
  s.input = x[2];
  for (int64_t d : {s.seq, s.batch, s.input})
    if (d == 0)
      return node_error(n,
                        fmt::format("its input X is {}: an empty sequence, batch or input is not supported",
                                    dims_to_string(x)));
  s.hidden = n.attr_int("hidden_size", w[1] >= 0 ? w[1] / s.gates : -1);
  if (w[0] >= 0 && w[0] != s.dirs)
    return node_error(
        n, fmt::format("its weights W are {} for {} direction(s) ('{}')", dims_to_string(w), s.dirs, dir));
  if (w[1] >= 0 && s.hidden >= 0 && w[1] != s.gates * s.hidden)
    return node_error(n, fmt::format("its weights W are {}, not {} gates of hidden_size {}",
                                     dims_to_string(w), s.gates, s.hidden));
  if (w[2] >= 0 && s.input >= 0 && w[2] != s.input)
    return node_error(n, fmt::format("its weights W are {} for an input of {}, but X is {}",
                                     dims_to_string(w), w[2], dims_to_string(x)));
  if (s.hidden == 0 || s.hidden < -1 || (n.attrs.count("hidden_size") && s.hidden < 1))
    return node_error(n, fmt::format("hidden_size {} must be positive", s.hidden));
  // The other inputs' shapes (a dimension of -1 is not known yet, and not checked).
  auto fits = [](const Dims& d, const Dims& want) {
    if (d.size() != want.size()) return false;
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i] >= 0 && want[i] >= 0 && d[i] != want[i]) return false;
    return true;
  };
  const int64_t H = s.hidden, GH = s.hidden < 0 ? -1 : s.gates * s.hidden;
  const Dims state = s.layout == 0 ? Dims{s.dirs, s.batch, H} : Dims{s.batch, s.dirs, H};
  const std::vector<std::pair<const char*, Dims>> want = {
      {"W", {s.dirs, GH, s.input}},       {"R", {s.dirs, GH, H}}, {"B", {s.dirs, GH < 0 ? -1 : 2 * GH}},
      {"sequence_lens", {s.batch}},       {"initial_h", state},   {"initial_c", state},
      {"P", {s.dirs, H < 0 ? -1 : 3 * H}}};
  for (size_t i = 1; i < in.size() && i <= want.size(); ++i)
    if (in[i] && !fits(*in[i], want[i - 1].second))
      return node_error(n, fmt::format("its input {} '{}' is {}; it takes {} (-1: any)", i, want[i - 1].first,
                                       dims_to_string(*in[i]), dims_to_string(want[i - 1].second)));
  if (n.attrs.count("clip")) {
    s.clip = n.attr_float("clip", 0);
    if (!(*s.clip > 0)) return node_error(n, fmt::format("clip {} must be positive", *s.clip));
  }
  s.input_forget = op == "LSTM" && n.attr_int("input_forget", 0) != 0;
  s.linear_before_reset = op == "GRU" && n.attr_int("linear_before_reset", 0) != 0;
  for (const char* a : {"activation_alpha", "activation_beta"})
    if (n.attrs.count(a))
      return node_error(n,
                        fmt::format("{} is not supported: stitch takes the activations Sigmoid, Tanh, Relu, "
                                    "Softsign and Softplus, which have no parameters",
                                    a));
  const std::vector<std::string> dflt = op == "LSTM"  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                        : op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                      : std::vector<std::string>{"Tanh"};
  std::vector<std::string> acts;
  if (auto it = n.attrs.find("activations"); it != n.attrs.end())
    if (const auto* v = std::get_if<std::vector<std::string>>(&it->second)) acts = *v;
  if (acts.empty())
    for (int64_t d = 0; d < s.dirs; ++d) acts.insert(acts.end(), dflt.begin(), dflt.end());
  if (acts.size() != dflt.size() * static_cast<size_t>(s.dirs))
    return node_error(
        n, fmt::format("activations lists {} functions; {} takes {} per direction, {} in all", acts.size(),
                       op, dflt.size(), dflt.size() * static_cast<size_t>(s.dirs)));
  for (int64_t d = 0; d < s.dirs; ++d) {
    s.acts.emplace_back();
    for (size_t k = 0; k < dflt.size(); ++k) {
      const std::string f = lower(acts[static_cast<size_t>(d) * dflt.size() + k]);
      if (f != "sigmoid" && f != "tanh" && f != "relu" && f != "softsign" && f != "softplus")
        return node_error(n,
                          fmt::format("activation '{}' is not supported: stitch takes Sigmoid, Tanh, Relu, "
                                      "Softsign and Softplus",
                                      acts[static_cast<size_t>(d) * dflt.size() + k]));
      s.acts.back().push_back(f);
    }
  }
  return s;
}

namespace {

Status infer_recurrent(InferContext& ctx) {
  const Node& n = ctx.node();
  if (!is_float(ctx.dtype(0)))
    return ctx.error(
        fmt::format("its input is {}; it takes floating-point sequences", dtype_name(ctx.dtype(0))));
  std::vector<const Dims*> dims;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) dims.push_back(ctx.has_input(i) ? &ctx.dims(i) : nullptr);
  ASSIGN_OR_RETURN(RecurrentSpec s, recurrent_spec(n, dims));
  const DType t = ctx.dtype(0);
  if (s.layout == 0) {
    ctx.set_output(0, t, {s.seq, s.dirs, s.batch, s.hidden});
    ctx.set_output(1, t, {s.dirs, s.batch, s.hidden});
    ctx.set_output(2, t, {s.dirs, s.batch, s.hidden});
  } else {
    ctx.set_output(0, t, {s.batch, s.seq, s.dirs, s.hidden});
    ctx.set_output(1, t, {s.batch, s.dirs, s.hidden});
    ctx.set_output(2, t, {s.batch, s.dirs, s.hidden});
  }
  return Status::ok();
}

Status eval_recurrent(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  std::vector<const Dims*> dims;
  for (const Tensor* t : in) dims.push_back(t ? &t->dims() : nullptr);
  ASSIGN_OR_RETURN(RecurrentSpec s, recurrent_spec(n, dims));
  const bool lstm = n.op_type == "LSTM", gru = n.op_type == "GRU";
  const int64_t T = s.seq, B = s.batch, I = s.input, H = s.hidden, G = s.gates, D = s.dirs;
  auto opt = [&](size_t i) { return i < in.size() && in[i] ? in[i]->to_f64() : std::vector<double>(); };
  const std::vector<double> x = in[0]->to_f64(), w = in[1]->to_f64(), r = in[2]->to_f64(), bias = opt(3),
                            h0 = opt(5), c0 = lstm ? opt(6) : std::vector<double>(),
                            p = lstm ? opt(7) : std::vector<double>();
  std::vector<int64_t> lens(static_cast<size_t>(B), T);
  if (in.size() > 4 && in[4]) lens = in[4]->to_i64();
  auto xi = [&](int64_t t, int64_t b, int64_t i) {
    return s.layout == 0 ? (t * B + b) * I + i : (b * T + t) * I + i;
  };
  auto yi = [&](int64_t t, int64_t d, int64_t b, int64_t k) {
    return s.layout == 0 ? ((t * D + d) * B + b) * H + k : ((b * T + t) * D + d) * H + k;
  };
  auto si = [&](int64_t d, int64_t b, int64_t k) {
    return s.layout == 0 ? (d * B + b) * H + k : (b * D + d) * H + k;
  };
  std::vector<double> y(static_cast<size_t>(T * D * B * H), 0.0), yh(static_cast<size_t>(D * B * H)),
      yc(static_cast<size_t>(D * B * H));
  auto clip = [&](double v) {
    return s.clip ? std::clamp(v, -static_cast<double>(*s.clip), static_cast<double>(*s.clip)) : v;
  };
  for (int64_t d = 0; d < D; ++d) {
    const std::vector<std::string>& f = s.acts[static_cast<size_t>(d)];
    const double* wd = w.data() + d * G * H * I;
    const double* rd = r.data() + d * G * H * H;
    auto wb = [&](int64_t j) { return bias.empty() ? 0.0 : bias[static_cast<size_t>(d * 2 * G * H + j)]; };
    auto rb = [&](int64_t j) {
      return bias.empty() ? 0.0 : bias[static_cast<size_t>(d * 2 * G * H + G * H + j)];
    };
    auto pp = [&](int64_t j) { return p.empty() ? 0.0 : p[static_cast<size_t>(d * 3 * H + j)]; };
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H)),
          xg(static_cast<size_t>(G * H)), hg(static_cast<size_t>(G * H)), hn(static_cast<size_t>(H)),
          reset(static_cast<size_t>(H));  // GRU's reset gate of the step
      for (int64_t k = 0; k < H; ++k) {
        h[k] = h0.empty() ? 0.0 : h0[static_cast<size_t>(si(d, b, k))];
        c[k] = c0.empty() ? 0.0 : c0[static_cast<size_t>(si(d, b, k))];
      }
      for (int64_t step = 0; step < T; ++step) {
        const int64_t t = s.reversed(d) ? T - 1 - step : step;
        if (t >= lens[static_cast<size_t>(b)]) continue;
        for (int64_t j = 0; j < G * H; ++j) {
          double a = wb(j), e = rb(j);
          for (int64_t i = 0; i < I; ++i) a += x[static_cast<size_t>(xi(t, b, i))] * wd[j * I + i];
          for (int64_t k = 0; k < H; ++k) e += h[k] * rd[j * H + k];
          xg[j] = a;
          hg[j] = e;
        }
        if (gru)
          for (int64_t k = 0; k < H; ++k) reset[k] = activate(f[0], clip(xg[H + k] + hg[H + k]));
        for (int64_t k = 0; k < H; ++k) {
          if (lstm) {
            const double i = activate(f[0], clip(xg[k] + hg[k] + pp(k) * c[k]));
            const double fg =
                s.input_forget ? 1.0 - i
                               : activate(f[0], clip(xg[2 * H + k] + hg[2 * H + k] + pp(2 * H + k) * c[k]));
            c[k] = fg * c[k] + i * activate(f[1], clip(xg[3 * H + k] + hg[3 * H + k]));
            const double o = activate(f[0], clip(xg[H + k] + hg[H + k] + pp(H + k) * c[k]));
            hn[k] = o * activate(f[2], c[k]);
          } else if (gru) {
            const double z = activate(f[0], clip(xg[k] + hg[k]));
            double cand = xg[2 * H + k];
            if (s.linear_before_reset) {
              cand += reset[k] * hg[2 * H + k];
            } else {
              cand += rb(2 * H + k);
              for (int64_t m = 0; m < H; ++m) cand += reset[m] * h[m] * rd[(2 * H + k) * H + m];
            }
            hn[k] = (1.0 - z) * activate(f[1], clip(cand)) + z * h[k];
          } else {
            hn[k] = activate(f[0], clip(xg[k] + hg[k]));
          }
        }
        h = hn;
        for (int64_t k = 0; k < H; ++k) y[static_cast<size_t>(yi(t, d, b, k))] = h[k];
      }
      for (int64_t k = 0; k < H; ++k) {
        yh[static_cast<size_t>(si(d, b, k))] = h[k];
        yc[static_cast<size_t>(si(d, b, k))] = c[k];
      }
    }
  }
  const DType t = in[0]->dtype();
  out[0] = s.layout == 0 ? Tensor::from_f64(t, {T, D, B, H}, y) : Tensor::from_f64(t, {B, T, D, H}, y);
  const Dims sd = s.layout == 0 ? Dims{D, B, H} : Dims{B, D, H};
  if (out.size() > 1) out[1] = Tensor::from_f64(t, sd, yh);
  if (out.size() > 2) out[2] = Tensor::from_f64(t, sd, yc);
  return Status::ok();
}

}  // namespace

void register_recurrent(std::vector<OpDef>& t) {
  for (const char* op : {"LSTM", "GRU", "RNN"})
    t.push_back({op, kMinOpset, kMaxOpset, OpCategory::kOpaque, infer_recurrent, eval_recurrent});
}

}  // namespace stitch::ops
