// fold_column_scales (see fold_scales.h): find Mul(GEMM product [+ bias], constant per column),
// scale the weight's columns and the bias into new constants, and hand the Mul's output to the
// GEMM (or its bias Add).
#include "fusion/fold_scales.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "codegen/gemm_folds.h"
#include "codegen/lower.h"
#include "fusion/graph_edit.h"

namespace stitch::fusion {
namespace {

// The scale's values per column (one value for a scalar), or empty when `c` is not a constant of
// `t` with one value per column of a product of rank `rank` and `n` columns.
std::vector<double> column_scale(const Value* c, DType t, size_t rank, int64_t n) {
  if (!c || !c->is_constant() || c->dtype != t || !c->dims || c->dims->size() > rank) return {};
  const Dims& d = *c->dims;
  for (size_t i = 0; i + 1 < d.size(); ++i)
    if (d[i] != 1) return {};
  if (!d.empty() && d.back() != n && d.back() != 1) return {};
  return c->constant->to_f64();
}

// Whether the scaled [k, n] weights `w` and bias `b` keep float16's precision: no value beyond
// its range, and each nonzero column's largest value normal. Entries far smaller than their
// column's largest may go subnormal: their absolute error (at most 2^-25) stays below the rounding
// of the column's sum. A scale as small as a freshly initialised layer scale (1e-5) makes whole
// columns subnormal: those folds are skipped.
bool keeps_precision(DType t, const std::vector<double>& w, const std::vector<double>& b, int64_t n) {
  if (t != DType::kF16) return true;
  constexpr double kMinNormal = 6.103515625e-05, kMax = 65504.0;
  std::vector<double> col_max(static_cast<size_t>(n), 0.0);
  for (size_t i = 0; i < w.size(); ++i) col_max[i % n] = std::max(col_max[i % n], std::fabs(w[i]));
  for (double m : col_max)
    if (m > kMax || (m != 0 && m < kMinNormal)) return false;
  for (double x : b)
    if (std::fabs(x) > kMax) return false;
  return true;
}

// What a per-column scale can fold into: a MatMul of a computed A (of rank `min_a_rank` or more)
// and a constant [k, n] weight of type t, and the constant [n] bias Add after it when `last`, the
// node whose output is scaled, is that Add. Null mm when `last` is neither.
struct Projection {
  Node* mm = nullptr;
  Node* bias_add = nullptr;
  Value* bias = nullptr;
};
Projection projection_of(const Graph& g, const codegen::UsersMap& users, Node* last, DType t, int64_t n,
                         size_t min_a_rank, const std::set<std::string>& keep) {
  Projection p;
  Node* mm = last;
  if (last->op_type == "Add" && last->domain.empty() && last->inputs.size() == 2) {
    const int b = last->input(0) && last->input(0)->is_constant() ? 0 : 1;
    Value* bias = last->input(b);
    Value* prod = last->input(1 - b);
    if (!bias || !bias->is_constant() || bias->dtype != t || *bias->dims != Dims{n} || !prod ||
        !prod->producer || sole_reader(g, users, prod) != last || keep.count(last->name))
      return p;
    p.bias_add = last;
    p.bias = bias;
    mm = prod->producer;
  }
  if (mm->op_type != "MatMul" || !mm->domain.empty() || mm->inputs.size() != 2 || keep.count(mm->name))
    return p;
  const Value* a = mm->input(0);
  const Value* w = mm->input(1);
  if (!a || a->is_constant() || !w || !w->is_constant() || w->dtype != t || !w->dims ||
      w->dims->size() != 2 || (*w->dims)[1] != n || !a->dims || a->dims->size() < min_a_rank)
    return p;
  p.mm = mm;
  return p;
}

// BatchNormalization in inference mode over a GEMM's product seen as [rows, C], through views that
// keep the columns (LeViT's Linear, then BatchNorm1d over the flattened tokens): per column it is
// y * s + t, s = scale / sqrt(var + epsilon), t = bias - mean * s. s goes into the weight's
// columns, t into the bias (a new bias Add after the MatMul when it has none), and the last view
// writes the norm's output. False when `bn` is not such a norm.
bool fold_batch_norm(Graph& g, const codegen::UsersMap& users, Node& bn, const std::set<std::string>& keep,
                     std::vector<std::string>& log, std::vector<Node*>& dead) {
  auto only_reader = [&](const Value* v) { return sole_reader(g, users, v); };
  if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5 ||
      keep.count(bn.name) || bn.attr_int("training_mode", 0) != 0 || !bn.output(0) ||
      std::any_of(bn.outputs.begin() + 1, bn.outputs.end(), [](const Value* v) { return v != nullptr; }))
    return false;
  Value* x = bn.input(0);
  if (!x || !x->has_static_shape() || x->dims->size() != 2 || !is_float(x->dtype) || only_reader(x) != &bn)
    return false;
  const int64_t n = (*x->dims)[1];
  std::vector<std::vector<double>> p;  // scale, bias, mean, var
  for (int i = 1; i < 5; ++i) {
    const Value* c = bn.input(i);
    if (!c || !c->is_constant() || !c->dims || *c->dims != Dims{n}) return false;
    p.push_back(c->constant->to_f64());
  }
  // Back through views keeping the last axis, to the product or its bias Add.
  Node* last = x->producer;
  Value* v = x;
  while (last && codegen::classify_node(*last) == codegen::NodeLowering::kView && !keep.count(last->name)) {
    Value* in = last->input(0);
    if (!in || !in->has_static_shape() || in->dims->empty() || in->dims->back() != n ||
        in->dtype != x->dtype || only_reader(in) != last)
      return false;
    v = in;
    last = in->producer;
  }
  if (!last || v->dims->back() != n) return false;
  const Projection proj = projection_of(g, users, last, x->dtype, n, 1, keep);
  if (!proj.mm) return false;
  Node* mm = proj.mm;
  Node* bias_add = proj.bias_add;
  Value* bias = proj.bias;
  const Value* w = mm->input(1);
  const double eps = bn.attr_float("epsilon", 1e-5f);
  std::vector<double> sc(static_cast<size_t>(n)), sh(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    sc[j] = p[0][j] / std::sqrt(p[3][j] + eps);
    sh[j] = p[1][j] - p[2][j] * sc[j];
  }
  const int64_t k = (*w->dims)[0];
  std::vector<double> wv = w->constant->to_f64();
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) wv[i * n + j] *= sc[j];
  std::vector<double> bv = sh;
  if (bias) {
    bv = bias->constant->to_f64();
    for (int64_t j = 0; j < n; ++j) bv[j] = bv[j] * sc[j] + sh[j];
  }
  const std::string into = fmt::format("the weight and bias of {}", mm->describe());
  if (!keeps_precision(x->dtype, wv, bv, n)) {
    log.push_back(
        fmt::format("{} stays a node: scaled into {}, a column would be subnormal in float16 (or a "
                    "value beyond its range)",
                    bn.describe(), into));
    return false;
  }
  Value* nw = add_constant(g, mm->name + "/normed_weight", w->dtype, *w->dims, wv);
  mm->inputs[1] = nw;
  Value* nb = add_constant(g, bn.name + "/shift", x->dtype, Dims{n}, bv);
  if (bias_add) {
    bias_add->inputs[bias_add->input(0) == bias ? 0 : 1] = nb;
  } else {  // the MatMul writes a new product, and a new bias Add its old output
    Value* y = mm->outputs[0];
    Value* prod = add_typed_value(g, mm->name + "/product", y->dtype, *y->dims);
    mm->outputs[0] = prod;
    prod->producer = mm;
    Node* add = add_op_node(g, "Add", g.unique_name(bn.name + "/shift_add"));
    add->inputs = {prod, nb};
    add->outputs = {y};
    y->producer = add;
  }
  // The node the norm read (the last view, or the product's writer) writes the norm's output.
  Node* writer = x->producer;
  Value* z = bn.output(0);
  writer->outputs[0] = z;
  z->producer = writer;
  bn.outputs[0] = nullptr;
  dead.push_back(&bn);
  log.push_back(fmt::format("{} -> folded into {}", bn.describe(), into));
  return true;
}

}  // namespace

StatusOr<std::vector<std::string>> fold_column_scales(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  const auto users = g.users();
  auto only_reader = [&](const Value* v) { return sole_reader(g, users, v); };
  std::vector<Node*> dead;
  // The norms first, from a list: a fold adds nodes to the graph.
  std::vector<Node*> norms;
  for (const auto& np : g.nodes())
    if (np->op_type == "BatchNormalization") norms.push_back(np.get());
  for (Node* bn : norms) fold_batch_norm(g, users, *bn, keep, log, dead);
  for (const auto& np : g.nodes()) {
    Node& mul = *np;
    if (mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2 || !mul.output(0) ||
        keep.count(mul.name))
      continue;
    for (int side = 0; side < 2; ++side) {
      Value* y = mul.input(side);
      Value* c = mul.input(1 - side);
      if (!y || !c || y == c || y->is_constant() || !y->producer || !y->has_static_shape() ||
          y->dims->empty() || !is_float(y->dtype) || only_reader(y) != &mul || !mul.output(0)->dims ||
          *mul.output(0)->dims != *y->dims)
        continue;
      // y is the MatMul's product, or that plus a constant bias.
      const int64_t n = y->dims->back();
      Node* last = y->producer;
      const Projection proj = projection_of(g, users, last, y->dtype, n, 2, keep);
      if (!proj.mm) continue;
      Node* mm = proj.mm;
      Node* bias_add = proj.bias_add;
      Value* bias = proj.bias;
      const Value* w = mm->input(1);
      const std::vector<double> s = column_scale(c, y->dtype, y->dims->size(), n);
      if (s.empty()) continue;
      const int64_t k = (*w->dims)[0];
      std::vector<double> wv = w->constant->to_f64();
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < n; ++j) wv[i * n + j] *= s[s.size() == 1 ? 0 : j];
      std::vector<double> bv;
      if (bias) {
        bv = bias->constant->to_f64();
        for (int64_t j = 0; j < n; ++j) bv[j] *= s[s.size() == 1 ? 0 : j];
      }
      const std::string what = fmt::format("{} by a {} constant", mul.describe(), c->type_string());
      const std::string into = fmt::format(
          "{}{}", mm->describe(), bias_add ? fmt::format(" and the bias of {}", bias_add->describe()) : "");
      if (!keeps_precision(y->dtype, wv, bv, n)) {
        log.push_back(
            fmt::format("{} stays a node: scaled into the weight of {}, a column would be "
                        "subnormal in float16 (or a value beyond its range)",
                        what, into));
        break;
      }
      // New constants: the old ones may have other readers (tied weights).
      Value* nw = add_typed_value(g, mm->name + "/scaled_weight", w->dtype, *w->dims);
      nw->constant = Tensor::from_f64(w->dtype, *w->dims, wv);
      mm->inputs[1] = nw;
      if (bias) {
        Value* nb = add_typed_value(g, bias_add->name + "/scaled_bias", bias->dtype, Dims{n});
        nb->constant = Tensor::from_f64(bias->dtype, Dims{n}, bv);
        bias_add->inputs[bias_add->input(0) == bias ? 0 : 1] = nb;
      }
      Value* z = mul.output(0);
      last->outputs[0] = z;
      z->producer = last;
      mul.outputs[0] = nullptr;
      dead.push_back(&mul);
      log.push_back(fmt::format("{} -> folded into the weight of {}", what, into));
      break;
    }
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

}  // namespace stitch::fusion
