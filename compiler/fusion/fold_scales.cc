// fold_column_scales (see fold_scales.h): find Mul(GEMM product [+ bias], constant per column),
// scale the weight's columns and the bias into new constants, and hand the Mul's output to the
// GEMM (or its bias Add).
#include "fusion/fold_scales.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

}  // namespace

StatusOr<std::vector<std::string>> fold_column_scales(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  const auto users = g.users();
  auto only_reader = [&](const Value* v) { return sole_reader(g, users, v); };
  std::vector<Node*> dead;
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
      Node* last = y->producer;
      Node* bias_add = nullptr;
      Value* bias = nullptr;
      Node* mm = last;
      const int64_t n = y->dims->back();
      if (last->op_type == "Add" && last->domain.empty() && last->inputs.size() == 2) {
        const int b = last->input(0) && last->input(0)->is_constant() ? 0 : 1;
        bias = last->input(b);
        Value* prod = last->input(1 - b);
        if (!bias || !bias->is_constant() || bias->dtype != y->dtype || *bias->dims != Dims{n} || !prod ||
            !prod->producer || only_reader(prod) != last || keep.count(last->name))
          continue;
        bias_add = last;
        mm = prod->producer;
      }
      if (mm->op_type != "MatMul" || !mm->domain.empty() || mm->inputs.size() != 2 || keep.count(mm->name))
        continue;
      const Value* a = mm->input(0);
      const Value* w = mm->input(1);
      if (!a || a->is_constant() || !w || !w->is_constant() || w->dtype != y->dtype || !w->dims ||
          w->dims->size() != 2 || (*w->dims)[1] != n || !a->dims || a->dims->size() < 2)
        continue;
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
