// hoist_row_scales (see hoist_scales.h): split a MatMul's A into its factors, check their shapes,
// fold the column factors into a new weight and multiply the product by the row factors.
#include "fusion/hoist_scales.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

#include "codegen/lower.h"
#include "codegen/stitch.h"
#include "fusion/graph_edit.h"

namespace stitch::fusion {
namespace {

struct Factor {
  Value* value = nullptr;
  bool inverse = false;  // divides
};

enum class Kind { kFull, kRow, kColumn, kOther };

// What a factor is to A (dims `a`, last axis k): A's own shape, one value per row, one constant
// per column (or a scalar constant).
Kind classify(const Value* v, const Dims& a) {
  if (!v->has_static_shape() || !is_float(v->dtype)) return Kind::kOther;
  const Dims& d = *v->dims;
  if (d.size() > a.size()) return Kind::kOther;
  const size_t lead = a.size() - d.size();
  if (v->is_constant() && num_elements(d) == 1) return Kind::kColumn;
  if (d == a) return v->is_constant() ? Kind::kOther : Kind::kFull;
  if (!d.empty() && d.back() == 1) {
    for (size_t i = 0; i + 1 < d.size(); ++i)
      if (d[i] != 1 && d[i] != a[lead + i]) return Kind::kOther;
    return Kind::kRow;
  }
  if (v->is_constant() && !d.empty() && d.back() == a.back() && num_elements(d) == a.back())
    return Kind::kColumn;
  return Kind::kOther;
}

// True when every value of type `from` is exactly a value of type `to`: float16 and bfloat16 in
// float32 or float64, float32 in float64, and a type in itself.
bool widens_exactly(DType from, DType to) {
  if (from == to) return true;
  if (from == DType::kF16 || from == DType::kBF16) return to == DType::kF32 || to == DType::kF64;
  return from == DType::kF32 && to == DType::kF64;
}

}  // namespace

StatusOr<std::vector<std::string>> hoist_row_scales(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  const auto users = g.users();
  auto only_reader = [&](const Value* v, const Node* reader) {
    auto it = users.find(v);
    return !g.is_graph_output(v) && it != users.end() && it->second.size() == 1 &&
           it->second.front() == reader;
  };
  // Every reader of the product, through views and ops that only move data (Slice, Transpose...),
  // computes in a kernel: none is a GEMM or a convolution, which would read the scaled product
  // stored (where a GEMM reads a slice or transpose of the product in place, that is its operand).
  std::function<bool(const Value*, int)> kernel_readers = [&](const Value* v, int depth) {
    if (g.is_graph_output(v) || depth > 8) return false;
    auto it = users.find(v);
    if (it == users.end()) return false;
    for (const Node* r : it->second) {
      const auto lowering = codegen::classify_node(*r);
      static const std::set<std::string> moves = {"Slice", "Split", "Transpose", "Expand", "Concat", "Tile"};
      if (lowering == codegen::NodeLowering::kView || moves.count(r->op_type)) {  // data movement only
        for (const Value* o : r->outputs)
          if (o && !kernel_readers(o, depth + 1)) return false;
      } else if (lowering != codegen::NodeLowering::kKernel ||
                 codegen::stitch_role(*r) == codegen::StitchRole::kContraction) {
        return false;
      }
    }
    return true;
  };
  std::vector<Node*> dead;
  const std::vector<Node*> matmuls = [&] {
    std::vector<Node*> out;
    for (const auto& np : g.nodes())
      if (np->op_type == "MatMul" && np->domain.empty()) out.push_back(np.get());
    return out;
  }();
  for (Node* mm : matmuls) {
    Value* a = mm->input(0);
    Value* w = mm->input(1);
    Value* y = mm->output(0);
    if (!a || !w || !y || !a->has_static_shape() || a->dims->size() < 2 || !w->is_constant() ||
        w->dtype != a->dtype || w->dims->size() != 2 || (*w->dims)[0] != a->dims->back() ||
        y->dtype != a->dtype || keep.count(mm->name))
      continue;
    // Factors of A through Mul, Div (the divisor's factors inverted) and Casts between float
    // types, each node read only by the next. A half model's RMSNorm computes in float32 between
    // two Casts (LLaMA's: x in bfloat16, Cast to float32, times the row scale, Cast back, times
    // the weight): the rewritten product skips the narrowing Cast's rounding, which only makes it
    // closer to the exact value.
    std::vector<Factor> factors;
    std::vector<Node*> chain;
    std::function<void(Value*, const Node*, bool)> split = [&](Value* v, const Node* reader, bool inv) {
      Node* p = v->producer;
      const bool through =
          p && only_reader(v, reader) && p->domain.empty() &&
          (((p->op_type == "Mul" || p->op_type == "Div") && p->inputs.size() == 2) ||
           (p->op_type == "Cast" && p->input(0) && is_float(p->input(0)->dtype) && is_float(v->dtype)));
      if (!through) {
        factors.push_back({v, inv});
        return;
      }
      chain.push_back(p);
      split(p->input(0), p, inv);
      if (p->op_type == "Mul") split(p->input(1), p, inv);
      if (p->op_type == "Div") split(p->input(1), p, !inv);
    };
    split(a, mm, false);
    if (chain.empty() ||
        std::any_of(chain.begin(), chain.end(), [&](const Node* n) { return keep.count(n->name); }))
      continue;
    const Dims& ad = *a->dims;
    Value* x = nullptr;
    std::vector<Factor> rows, columns;
    bool ok = true;
    for (const Factor& f : factors) {
      switch (classify(f.value, ad)) {
        case Kind::kFull:
          ok &= x == nullptr && !f.inverse;
          x = f.value;
          break;
        case Kind::kRow:
          rows.push_back(f);
          break;
        case Kind::kColumn:
          columns.push_back(f);
          break;
        case Kind::kOther:
          ok = false;
          break;
      }
    }
    if (!ok || x == nullptr || rows.empty() || !kernel_readers(y, 0)) continue;
    // The product reads x in A's type: x itself, or the value a widening Cast made x from (the
    // Cast stays for its other readers, such as the norm's sum of squares).
    if (x->dtype != a->dtype) {
      const Node* c = x->producer;
      if (!c || c->op_type != "Cast" || !c->input(0) || c->input(0)->dtype != a->dtype ||
          !widens_exactly(a->dtype, x->dtype))
        continue;
      x = c->input(0);
    }
    // The row factors all of one type; when it is not the product's, the product is cast to it,
    // scaled, and cast back into the MatMul's old output.
    const DType row_type = rows.front().value->dtype;
    if (std::any_of(rows.begin(), rows.end(), [&](const Factor& f) { return f.value->dtype != row_type; }))
      continue;
    const bool cast_rows = row_type != y->dtype;
    // The new weight: row i of W times the column factors at i (in double, then rounded once).
    const int64_t k = (*w->dims)[0], n = (*w->dims)[1];
    std::vector<double> scale(static_cast<size_t>(k), 1.0);
    for (const Factor& f : columns)
      for (int64_t i = 0; i < k; ++i) {
        const double c = f.value->constant->get_f64(f.value->constant->size() == 1 ? 0 : i);
        scale[static_cast<size_t>(i)] =
            f.inverse ? scale[static_cast<size_t>(i)] / c : scale[static_cast<size_t>(i)] * c;
      }
    std::vector<double> wv = w->constant->to_f64();
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) wv[static_cast<size_t>(i * n + j)] *= scale[static_cast<size_t>(i)];
    Value* w2 = add_typed_value(g, mm->name + "/scaled_weight", w->dtype, *w->dims);
    w2->constant = Tensor::from_f64(w->dtype, *w->dims, wv);
    Node* m2 = add_op_node(g, "MatMul", g.unique_name(mm->name + "/unscaled"));
    Value* z = add_typed_value(g, mm->name + "/unscaled_product", y->dtype, *y->dims);
    m2->inputs = {x, w2};
    m2->outputs = {z};
    z->producer = m2;
    // The row factors, one Mul or Div each (between two Casts when their type is not the
    // product's); the last node writes the MatMul's old output.
    auto add_cast = [&](Value* in, Value* out) {
      Node* c = add_op_node(g, "Cast", g.unique_name(mm->name + "/row_scale_cast"));
      c->attrs["to"] = static_cast<int64_t>(dtype_to_onnx(out->dtype));
      c->inputs = {in};
      c->outputs = {out};
      out->producer = c;
    };
    Value* cur = z;
    if (cast_rows) {
      Value* wide = add_typed_value(g, mm->name + "/unscaled_product_cast", row_type, *y->dims);
      add_cast(z, wide);
      cur = wide;
    }
    std::string names;
    for (size_t i = 0; i < rows.size(); ++i) {
      Node* s = add_op_node(g, rows[i].inverse ? "Div" : "Mul", g.unique_name(mm->name + "/row_scale"));
      Value* out = y;
      if (i + 1 < rows.size() || cast_rows) {
        out = add_typed_value(g, mm->name + "/row_scaled", row_type, *y->dims);
      }
      s->inputs = {cur, rows[i].value};
      s->outputs = {out};
      out->producer = s;
      cur = out;
      names += (names.empty() ? "'" : ", '") + rows[i].value->name + "'";
    }
    if (cast_rows) add_cast(cur, y);
    mm->outputs[0] = nullptr;
    dead.push_back(mm);
    // Each chain node is read only by the next, so no other MatMul's chain shares one.
    dead.insert(dead.end(), chain.begin(), chain.end());
    log.push_back(
        fmt::format("{}: row scale {} applied to the product, {} column scale(s) folded into its weight; "
                    "it reads '{}' (node '{}')",
                    mm->describe(), names, columns.size(), x->name, m2->name));
  }
  if (dead.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, dead));
  return log;
}

StatusOr<RewriteResult> hoist_row_scales_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o) {
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return hoist_row_scales(c, o.no_fuse); }, "--no-hoist-row-scales");
}

}  // namespace stitch::fusion
