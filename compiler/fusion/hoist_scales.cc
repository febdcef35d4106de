// hoist_row_scales (see hoist_scales.h): split a MatMul's A into its factors, check their shapes,
// fold the column factors into a new weight and multiply the product by the row factors.
#include "fusion/hoist_scales.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <unordered_set>

#include "codegen/lower.h"
#include "codegen/stitch.h"
#include "fusion/decompose_norm.h"
#include "fusion/graph_edit.h"
#include "fusion/row_paths.h"
#include "fusion/scaled_weight.h"
#include "ops/op_util.h"

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

enum class Mode {
  kScales,  // hoist_row_scales: products of row and column factors
  kNorms,   // hoist_layer_norms: centered (x - m), a constant column added, LayerNormalization
};

// One column range of a product and the value it becomes (`slice` the Slice that read it, or
// none for the whole product).
struct ColumnPart {
  int64_t lo = 0, hi = 0;
  Value* out = nullptr;
  Node* slice = nullptr;
};

// The readers of `y` but `skip` as column parts: each a Slice of a contiguous range of its last
// axis (every other axis whole, step 1). Empty when any reader is not, when none is left, or when
// `y` is a graph output.
std::vector<ColumnPart> column_parts(const Graph& g,
                                     const std::unordered_map<const Value*, std::vector<Node*>>& users,
                                     const Value* y, const std::vector<Node*>& skip) {
  auto it = users.find(y);
  if (g.is_graph_output(y) || it == users.end()) return {};
  const Dims& d = *y->dims;
  const Dims strides = ops::strides_of(d);
  std::vector<ColumnPart> parts;
  for (Node* r : it->second) {
    if (std::find(skip.begin(), skip.end(), r) != skip.end()) continue;
    if (r->op_type != "Slice" || !r->domain.empty() || r->input(0) != y || !r->output(0)) return {};
    auto spec = codegen::stitch_slice(*r);
    if (!spec.is_ok() || spec->strides != strides || spec->out.size() != d.size() || spec->base < 0)
      return {};
    for (size_t i = 0; i + 1 < d.size(); ++i)
      if (spec->out[i] != d[i]) return {};
    const int64_t lo = spec->base, hi = lo + spec->out.back();
    if (hi > d.back() || hi <= lo) return {};
    parts.push_back({lo, hi, r->output(0), r});
  }
  return parts;
}

StatusOr<std::vector<std::string>> hoist(Graph& g, const std::set<std::string>& keep, Mode mode,
                                         NormReaders readers = NormReaders::kAll) {
  std::vector<std::string> log;
  auto users = g.users();
  // A LayerNorm in front of attention's Q/K/V: V's GEMM (P.V) reads the product through views,
  // and no centering passes a GEMM; the product is corrected where it is read instead (the
  // rotary's row kernel, which also stores V for P.V), as a half type's row scale is. Its
  // product's readers may then be GEMMs.
  const bool gemm_readers = mode == Mode::kNorms && readers == NormReaders::kAttention;
  auto only_reader = [&](const Value* v, const Node* reader) {
    auto it = users.find(v);
    return !g.is_graph_output(v) && it != users.end() && it->second.size() == 1 &&
           it->second.front() == reader;
  };
  // Every reader of the product, through views and ops that only move data (Slice, Transpose...),
  // computes in a kernel: none is a GEMM or a convolution, which would read the scaled product
  // stored (where a GEMM reads a slice or transpose of the product in place, that is its operand).
  std::function<bool(const Value*, int)> kernel_readers;
  std::function<bool(const Node*, int)> kernel_reader = [&](const Node* r, int depth) {
    const auto lowering = codegen::classify_node(*r);
    static const std::set<std::string> moves = {"Slice", "Split", "Transpose", "Expand", "Concat", "Tile"};
    if (lowering == codegen::NodeLowering::kView || moves.count(r->op_type)) {  // data movement only
      for (const Value* o : r->outputs)
        if (o && !kernel_readers(o, depth + 1)) return false;
      return true;
    }
    return lowering == codegen::NodeLowering::kKernel &&
           codegen::stitch_role(*r) != codegen::StitchRole::kContraction;
  };
  kernel_readers = [&](const Value* v, int depth) {
    if (g.is_graph_output(v) || depth > 8) return false;
    auto it = users.find(v);
    if (it == users.end()) return false;
    return std::all_of(it->second.begin(), it->second.end(),
                       [&](const Node* r) { return kernel_reader(r, depth); });
  };
  // Whether the product reaches, through views, data movement and element-wise ops, a MatMul
  // of two computed operands (attention's Q.K^T or P.V).
  std::function<bool(const Value*, int)> feeds_attention = [&](const Value* v, int depth) {
    auto it = users.find(v);
    if (depth > 8 || it == users.end()) return false;
    for (const Node* r : it->second) {
      if (r->op_type == "MatMul" && r->domain.empty() &&
          std::none_of(r->inputs.begin(), r->inputs.end(),
                       [](const Value* i) { return i && i->is_constant(); }))
        return true;
      const auto role = codegen::stitch_role(*r);
      if (role == codegen::StitchRole::kPointwise || role == codegen::StitchRole::kLayout ||
          role == codegen::StitchRole::kView)
        for (const Value* o : r->outputs)
          if (o && feeds_attention(o, depth + 1)) return true;
    }
    return false;
  };
  auto wanted = [&](const Value* y) {
    return readers == NormReaders::kAll || (readers == NormReaders::kAttention) == feeds_attention(y, 0);
  };
  std::vector<Node*> dead;
  std::unordered_set<const Node*> kept;  // chains left for A's other readers
  // Lines of MatMuls whose A others read too, with the node computing A: the chain stays for
  // those readers unless they were rewritten too (the line says so when it stays).
  std::vector<std::pair<size_t, const Node*>> shared;
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
    // A itself may have other readers (a post-norm residual, an MoE's experts beside its router):
    // the chain then stays for them, and the MatMul alone reads the norm's input.
    const bool shared_top = !only_reader(a, mm);
    if (mode == Mode::kNorms && y->dtype != DType::kF32 && y->dtype != DType::kF64) continue;
    std::function<void(Value*, const Node*, bool)> split = [&](Value* v, const Node* reader, bool inv) {
      Node* p = v->producer;
      const bool through =
          p && (only_reader(v, reader) || v == a) && p->domain.empty() &&
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
    const Dims& ad = *a->dims;
    // kNorms: A = P + b (b one constant per column, added to the product as b W) or a
    // LayerNormalization over the last axis (its mean and standard deviation computed again by
    // new nodes, which the reader's kernel takes), where P is a product as above.
    Value* beta = nullptr;
    Node* top = a->producer;
    std::string ln_name;  // a LayerNormalization op decomposed first
    if (mode == Mode::kNorms && top && top->domain.empty() && top->op_type == "LayerNormalization") {
      // Decomposed in place (its output written by the last new node), when the rest will match.
      const int64_t axis = top->attr_int("axis", -1);
      const bool one_output = std::all_of(top->outputs.begin() + 1, top->outputs.end(),
                                          [](const Value* o) { return o == nullptr; });
      Value* lx = top->input(0);
      Value* scale = top->input(1);
      Value* bias = top->input(2);
      if ((axis != -1 && axis != static_cast<int64_t>(ad.size()) - 1) || !one_output || !lx ||
          lx->is_constant() || classify(lx, ad) != Kind::kFull || lx->dtype != a->dtype || !scale ||
          classify(scale, ad) != Kind::kColumn || (bias && classify(bias, ad) != Kind::kColumn) ||
          keep.count(top->name) || (!gemm_readers && !kernel_readers(y, 0)) || !wanted(y))
        continue;
      decompose_layer_norm(g, *top);
      dead.push_back(top);
      ln_name = top->name;
      users = g.users();
      top = a->producer;
    }
    if (mode == Mode::kNorms && top && top->domain.empty() && top->op_type == "Add" &&
        top->inputs.size() == 2 && top->input(0) && top->input(1) && classify(a, ad) == Kind::kFull) {
      const int c = classify(top->input(1), ad) == Kind::kColumn   ? 1
                    : classify(top->input(0), ad) == Kind::kColumn ? 0
                                                                   : -1;
      if (c >= 0 && !top->input(1 - c)->is_constant()) {
        beta = top->input(c);
        chain.push_back(top);
        split(top->input(1 - c), top, false);
      } else {
        split(a, mm, false);
      }
    } else {
      split(a, mm, false);
    }
    if (chain.empty() ||
        std::any_of(chain.begin(), chain.end(), [&](const Node* n) { return keep.count(n->name); }))
      continue;
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
    // kNorms: the full factor is x - m for a row value m (a LayerNorm's centering), the MatMul reads
    // x and m times the column sums of the new weight is subtracted from the product.
    Value* center = nullptr;
    if (mode == Mode::kNorms && ok && x) {
      const Node* sub = x->producer;
      if (sub && sub->domain.empty() && sub->op_type == "Sub" && sub->input(0) && sub->input(1) &&
          !keep.count(sub->name) && classify(sub->input(0), ad) == Kind::kFull &&
          !sub->input(0)->is_constant() && classify(sub->input(1), ad) == Kind::kRow) {
        center = sub->input(1);
        x = sub->input(0);
      }
    }
    if (!ok || x == nullptr || g.is_graph_output(y) || !users.count(y)) continue;
    // The product's readers: kernel ops (through views and data movement) and, for row scales,
    // paths linear in the product row by row to GEMMs of two computed operands (attention's Q and
    // K through rotary to Q.K^T, V to P.V; track_rows). Those read the unscaled product, and the
    // row factors scale the GEMM's output (Q's rows, K's columns) or its other operand (P's
    // columns for V's rows): one kernel less when the product's other readers are GEMMs.
    std::vector<Node*> entries;
    std::vector<GemmEnd> ends;
    bool readers_ok = true;
    const bool paths = mode == Mode::kScales && readers != NormReaders::kOther;
    const std::unordered_set<const Value*> reached =
        paths ? reached_from(users, y) : std::unordered_set<const Value*>{};
    for (Node* r : users.at(y)) {
      if (paths) {
        if (auto t = track_rows(g, users, keep, reached, r, y)) {
          entries.push_back(r);
          ends.insert(ends.end(), t->begin(), t->end());
          continue;
        }
      }
      readers_ok = readers_ok && (gemm_readers || kernel_reader(r, 0));
    }
    if (mode == Mode::kScales && readers == NormReaders::kAttention && entries.empty()) continue;
    if (!readers_ok) continue;
    if (mode == Mode::kScales && rows.empty()) continue;
    // kNorms takes what kScales does not: a centering, a constant column added, or a LayerNorm.
    if (mode == Mode::kNorms && ((!center && !beta) || !wanted(y))) continue;
    if (mode == Mode::kNorms && x->dtype != a->dtype) continue;
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
    const DType row_type = rows.empty() ? y->dtype : rows.front().value->dtype;
    if (std::any_of(rows.begin(), rows.end(), [&](const Factor& f) { return f.value->dtype != row_type; }))
      continue;
    const bool cast_rows = row_type != y->dtype;
    // Half types whose norm computes in float32: the row factors do not go past attention's GEMMs
    // (Q.K^T of unscaled rows can overflow the half type, and P would take a float32 factor).
    // They scale the product where it is read instead, as for kernel readers: the rotary
    // embeddings read the scaled product, attention's GEMMs read it as they read the normalized
    // one's product before, and the kernel that computes it also computes the norm's statistics
    // (a row kernel storing the rotated heads moved), so the norm needs no kernel of its own.
    if (cast_rows && !ends.empty()) {
      entries.clear();
      ends.clear();
    }
    // Each row factor at each GEMM end, in the target's type; a GEMM whose product's rows reach
    // its contraction takes the factor on its other operand, which must not be reached itself.
    std::vector<std::vector<Placement>> placed;
    for (const GemmEnd& e : ends) {
      std::vector<Placement> per_row;
      for (const Factor& f : rows) {
        auto pl = place(f.value, y, e);
        if (!pl || f.value->dtype != pl->target->dtype || (pl->output && g.is_graph_output(pl->target)))
          break;
        if (!pl->output && std::any_of(ends.begin(), ends.end(), [&](const GemmEnd& o) {
              return o.matmul == e.matmul && o.operand != e.operand;
            }))
          break;
        per_row.push_back(std::move(*pl));
      }
      if (per_row.size() != rows.size()) break;
      placed.push_back(std::move(per_row));
    }
    if (placed.size() != ends.size() || (cast_rows && !ends.empty())) continue;
    // The new weight: row i of W times the column factors at i (in double, then rounded once).
    const int64_t k = (*w->dims)[0], n = (*w->dims)[1];
    std::vector<double> scale(static_cast<size_t>(k), 1.0);
    for (const Factor& f : columns)
      for (int64_t i = 0; i < k; ++i) {
        const double c = f.value->constant->get_f64(f.value->constant->size() == 1 ? 0 : i);
        scale[static_cast<size_t>(i)] =
            f.inverse ? scale[static_cast<size_t>(i)] / c : scale[static_cast<size_t>(i)] * c;
      }
    // The new weight and, for a centering, the column sums of the new weight before it is rounded,
    // and for a beta, the bias row b W: one pass over W (BERT-base's Q/K/V and FFN1 weights), run
    // when one of them is first read. Planning reads their shapes alone, so a judged try that is
    // thrown away computes none of them.
    auto pass = std::make_shared<ScaledWeightPass>();
    pass->w0 = *w->constant;
    pass->scale = std::move(scale);
    pass->center = center != nullptr;
    if (beta)
      for (int64_t i = 0; i < k; ++i)
        pass->beta.push_back(beta->constant->get_f64(beta->constant->size() == 1 ? 0 : i));
    Value* w2 = add_typed_value(g, mm->name + "/scaled_weight", w->dtype, *w->dims);
    w2->constant = Tensor::deferred(w->dtype, *w->dims, [pass] {
      pass->run();
      return std::move(pass->scaled);
    });
    Node* m2 = add_op_node(g, "MatMul", g.unique_name(mm->name + "/unscaled"));
    Value* z = add_typed_value(g, mm->name + "/unscaled_product", y->dtype, *y->dims);
    m2->inputs = {x, w2};
    m2->outputs = {z};
    z->producer = m2;
    auto add_cast = [&](Value* in, Value* out) {
      Node* c = add_op_node(g, "Cast", g.unique_name(mm->name + "/row_scale_cast"));
      c->attrs["to"] = static_cast<int64_t>(dtype_to_onnx(out->dtype));
      c->inputs = {in};
      c->outputs = {out};
      out->producer = c;
    };
    // After the product: the centering, the row factors (one Mul or Div each) and the bias row, in
    // that order, between two Casts when the row factors' type is not the product's; each new node
    // writes a new value, the last the MatMul's old output, or each of its column parts' (below).
    // With a centering, m times the column sums of the new weight (`sums`) is subtracted; with a
    // beta, b W (`bw`) is added.
    // The product's column parts, each corrected on its own: the Slices of merged sibling GEMMs
    // (merge_gemms), when they are all its readers but the entries (which read the unscaled
    // product on their way to a GEMM end). A part read outside the kernel that corrects it (V's,
    // which P.V reads) is then stored alone, not the whole product whose other parts only that
    // kernel reads (Q's and K's, rotated there); a part whose reader's rows are not the product's
    // (Q's and K's per-head norms) is computed in that reader's kernel. Else the whole product.
    std::vector<ColumnPart> parts = column_parts(g, users, y, entries);
    // A bias row added to the product (merged siblings' biases, merge_gemms) whose sum only
    // column parts read: it becomes each part's last step, so that the parts reach past it (GLM's
    // Q/K/V with their biases) and the Add goes.
    Node* bias_add = nullptr;
    std::vector<double> bias_row;
    if (parts.empty() && entries.empty() && !cast_rows) {
      Node* r = sole_reader(g, users, y);
      const bool add = r && r->op_type == "Add" && r->domain.empty() && r->inputs.size() == 2;
      const Value* b = !add ? nullptr : r->input(0) == y ? r->input(1) : r->input(0);
      if (b && b->is_constant() && b->dtype == y->dtype && classify(b, *y->dims) == Kind::kColumn &&
          r->output(0) && r->output(0)->dims && *r->output(0)->dims == *y->dims && !keep.count(r->name)) {
        parts = column_parts(g, users, r->output(0), {});
        if (!parts.empty()) {
          bias_add = r;
          for (int64_t j = 0; j < n; ++j)
            bias_row.push_back(b->constant->get_f64(b->constant->size() == 1 ? 0 : j));
        }
      }
    }
    const bool whole = parts.empty();
    if (whole) parts.push_back({0, n, y, nullptr});
    for (const ColumnPart& part : parts) {
      const int64_t width = part.hi - part.lo;
      Dims pd = *y->dims;
      pd.back() = width;
      auto cols = [&](const std::vector<double>& v) {
        return std::vector<double>(v.begin() + part.lo, v.begin() + part.hi);
      };
      // This part's columns of the pass's sums or bias row, as a constant of the product's type.
      auto pass_cols = [&](const std::string& hint, std::vector<double> ScaledWeightPass::*row) {
        Value* c = add_typed_value(g, hint, y->dtype, {width});
        c->constant = Tensor::deferred(y->dtype, {width}, [pass, row, lo = part.lo, t = y->dtype, width] {
          pass->run();
          const std::vector<double>& v = (*pass).*row;
          return Tensor::from_f64(t, {width}, std::vector<double>(v.begin() + lo, v.begin() + lo + width));
        });
        return c;
      };
      struct Step {
        std::string op;
        Value* operand;
      };
      std::vector<Step> steps;
      if (center) {
        Value* c = pass_cols(mm->name + "/weight_column_sums", &ScaledWeightPass::sums);
        Dims md = *center->dims;
        md.back() = width;
        steps.push_back({"Sub", add_op(g, "Mul", mm->name + "/centering", {center, c}, y->dtype, md)});
      }
      for (const Factor& f : rows) steps.push_back({f.inverse ? "Div" : "Mul", f.value});
      if (beta) steps.push_back({"Add", pass_cols(mm->name + "/bias_times_weight", &ScaledWeightPass::bw)});
      if (bias_add)
        steps.push_back({"Add", add_constant(g, mm->name + "/bias", y->dtype, {width}, cols(bias_row))});
      Value* cur = z;
      if (part.slice) {
        cur = add_typed_value(g, mm->name + "/unscaled_part", y->dtype, pd);
        add_slice(g, mm->name + "/unscaled_part", z, -1, part.lo, part.hi, cur);
      }
      if (cast_rows) {
        Value* wide = add_typed_value(g, mm->name + "/unscaled_product_cast", row_type, pd);
        add_cast(cur, wide);
        cur = wide;
      }
      for (size_t i = 0; i < steps.size(); ++i) {
        Node* s = add_op_node(g, steps[i].op, g.unique_name(mm->name + "/row_scale"));
        Value* out = part.out;
        if (i + 1 < steps.size() || cast_rows)
          out = add_typed_value(g, mm->name + "/row_scaled", row_type, pd);
        s->inputs = {cur, steps[i].operand};
        s->outputs = {out};
        out->producer = s;
        cur = out;
      }
      if (cast_rows) add_cast(cur, part.out);
      if (part.slice) {  // its output now written by the part's last step
        part.slice->outputs[0] = nullptr;
        dead.push_back(part.slice);
      }
    }
    if (bias_add) dead.push_back(bias_add);
    // GEMM ends: the paths read the unscaled product; each row factor, reshaped to the target's
    // axes, multiplies (divides) the GEMM's output, for its readers, or its other operand.
    std::vector<std::string> end_names;
    for (size_t i = 0; i < ends.size(); ++i) {
      Node* gemm = ends[i].matmul;
      for (size_t j = 0; j < rows.size(); ++j) {
        const Placement& pl = placed[i][j];
        Value* shape = add_shape_constant(g, mm->name + "/row_scale_shape", pl.dims);
        Value* f = add_op(g, "Reshape", mm->name + "/row_scale_moved", {rows[j].value, shape},
                          rows[j].value->dtype, pl.dims);
        Value* t = pl.output ? gemm->output(0) : gemm->input(static_cast<size_t>(1 - ends[i].operand));
        Value* scaled =
            add_op(g, rows[j].inverse ? "Div" : "Mul",
                   gemm->name + (pl.output ? "/row_scale" : "/operand_scale"), {t, f}, t->dtype, *t->dims);
        if (pl.output) {
          g.replace_uses(t, scaled);
          scaled->producer->inputs[0] = t;
        } else {
          gemm->inputs[static_cast<size_t>(1 - ends[i].operand)] = scaled;
        }
      }
      end_names.push_back(fmt::format("'{}' ({})", gemm->name,
                                      placed[i].front().output
                                          ? (ends[i].operand == 0 ? "its rows" : "its columns")
                                          : (ends[i].operand == 0 ? "B's rows" : "A's columns")));
    }
    for (Node* e : entries)
      for (Value*& in : e->inputs)
        if (in == y) in = z;
    if (!entries.empty() && whole)  // steps left without readers go with the dead nodes
      for (Value* v = y; v && v != z && v->producer; v = v->producer->input(0)) kept.insert(v->producer);
    std::string names;
    for (const Factor& f : rows) names += (names.empty() ? "'" : ", '") + f.value->name + "'";
    mm->outputs[0] = nullptr;
    dead.push_back(mm);
    // Each chain node is read only by the next, so no other MatMul's chain shares one; a shared
    // top keeps the chain for A's other readers.
    if (!shared_top)
      dead.insert(dead.end(), chain.begin(), chain.end());
    else
      kept.insert(chain.begin(), chain.end());
    if (mode == Mode::kScales) {
      log.push_back(fmt::format(
          "{}: row scale {} applied to the product{}{}, {} column scale(s) folded into its weight; "
          "it reads '{}' (node '{}')",
          mm->describe(), names,
          end_names.empty() ? "" : fmt::format(" and, for attention, at {}", fmt::join(end_names, ", ")),
          bias_add ? fmt::format(" before {}'s bias", bias_add->describe()) : "", columns.size(), x->name,
          m2->name));
    } else {
      std::vector<std::string> what;
      if (!ln_name.empty()) what.push_back(fmt::format("LayerNormalization '{}' decomposed", ln_name));
      if (center)
        what.push_back(fmt::format("row mean '{}' times the weight's column sums subtracted", center->name));
      if (!names.empty()) what.push_back(fmt::format("row scale {} applied", names));
      if (columns.size() > 0)
        what.push_back(fmt::format("{} column scale(s) folded into its weight", columns.size()));
      if (beta) what.push_back(fmt::format("'{}' times the weight added", beta->name));
      if (bias_add) what.push_back(fmt::format("{}'s bias added after", bias_add->describe()));
      log.push_back(fmt::format("{}: {}; it reads '{}' (node '{}')", mm->describe(), fmt::join(what, ", "),
                                x->name, m2->name));
    }
    if (shared_top) shared.emplace_back(log.size() - 1, a->producer);
  }
  if (dead.empty()) return log;
  // A chain left for other readers that were themselves rewritten (two MatMuls of one norm) is
  // read by nothing now: its nodes go too.
  g.remove_nodes(dead);
  g.remove_dead_nodes(&kept);
  g.remove_unused_values();
  RETURN_IF_ERROR(g.topo_sort());
  std::unordered_set<const Node*> live;
  for (const auto& np : g.nodes()) live.insert(np.get());
  for (const auto& [line, top] : shared)
    if (live.count(top)) log[line] += ", the norm stays for its other readers";
  return log;
}

}  // namespace

StatusOr<std::vector<std::string>> hoist_row_scales(Graph& g, const std::set<std::string>& keep,
                                                    NormReaders readers) {
  return hoist(g, keep, Mode::kScales, readers);
}

StatusOr<std::vector<std::string>> hoist_layer_norms(Graph& g, const std::set<std::string>& keep,
                                                     NormReaders readers) {
  return hoist(g, keep, Mode::kNorms, readers);
}

}  // namespace stitch::fusion
