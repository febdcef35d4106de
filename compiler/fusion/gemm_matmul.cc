// gemms_as_matmuls (see gemm_matmul.h): each Gemm node turns into a MatMul in place, with the
// transposes, the alpha scaling and the C addition as nodes of their own around it.
#include "fusion/gemm_matmul.h"

#include <fmt/format.h>

#include <cstring>

#include "fusion/graph_edit.h"

namespace stitch::fusion {
namespace {

// The transpose of a constant matrix [r, c], element bytes copied as they are.
Tensor transposed(const Tensor& t) {
  const int64_t r = t.dims()[0], c = t.dims()[1], es = dtype_size(t.dtype());
  Tensor out(t.dtype(), {c, r});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j)
      std::memcpy(out.data() + (j * r + i) * es, t.data() + (i * c + j) * es, static_cast<size_t>(es));
  return out;
}

Tensor scaled(const Tensor& t, double s) {
  std::vector<double> v = t.to_f64();
  for (double& x : v) x *= s;
  return Tensor::from_f64(t.dtype(), t.dims(), v);
}

// A node `op` named after `name` reading `inputs` and writing `y`.
Node* add_node_to(Graph& g, const std::string& op, const std::string& name, std::vector<Value*> inputs,
                  Value* y) {
  Node* n = add_op_node(g, op, g.unique_name(name));
  n->inputs = std::move(inputs);
  n->outputs = {y};
  y->producer = n;
  return n;
}

// The same, writing a new value of type `t` and dims `d`.
Value* add_node_out(Graph& g, const std::string& op, const std::string& name, std::vector<Value*> inputs,
                    DType t, const Dims& d, Node** node = nullptr) {
  Node* n = add_node_to(g, op, name, std::move(inputs), add_typed_value(g, name, t, d));
  if (node) *node = n;
  return n->output(0);
}

}  // namespace

StatusOr<std::vector<std::string>> gemms_as_matmuls(Graph& g, const std::set<std::string>& keep) {
  std::vector<std::string> log;
  const OpDef* matmul = find_op("", "MatMul", g.opset);
  if (matmul == nullptr) return log;
  std::vector<Node*> gemms;
  for (const auto& np : g.nodes())
    // Opsets 1-6 have Gemm's `broadcast` attribute: left alone.
    if (np->op_type == "Gemm" && np->domain.empty() && np->opset >= 7 && !keep.count(np->name))
      gemms.push_back(np.get());
  for (Node* n : gemms) {
    Value *a = n->input(0), *b = n->input(1), *c = n->input(2), *y = n->output(0);
    if (!a || !b || !y || !a->has_static_shape() || !b->has_static_shape() || !y->has_static_shape())
      continue;
    if (c && !c->has_static_shape()) continue;
    const DType t = y->dtype;
    if (!is_float(t) || a->dtype != t || b->dtype != t || (c && c->dtype != t)) continue;
    if (a->dims->size() != 2 || b->dims->size() != 2 || y->dims->size() != 2) continue;
    const bool ta = n->attr_int("transA", 0) != 0, tb = n->attr_int("transB", 0) != 0;
    const double alpha = n->attr_float("alpha", 1.0f), beta = n->attr_float("beta", 1.0f);
    const int64_t m = (*y->dims)[0], nn = (*y->dims)[1], k = ta ? (*a->dims)[0] : (*a->dims)[1];
    std::string parts;
    auto note = [&](const std::string& s) { parts += (parts.empty() ? "" : ", ") + s; };
    // op(X): a transposed constant, or a Transpose node.
    auto operand = [&](Value* x, bool trans, const std::string& tag) -> Value* {
      if (!trans) return x;
      const Dims d{(*x->dims)[1], (*x->dims)[0]};
      if (x->is_constant()) {
        Value* v = add_typed_value(g, n->name + "/" + tag + "_transposed", t, d);
        // Computed when first read, as the scaled constant below (Tensor::deferred): the rewrite is
        // judged on a copy of the graph, which planning reads by shape.
        v->constant = Tensor::deferred(t, d, [src = *x->constant] { return transposed(src); });
        note(fmt::format("{} transposed into a constant", tag));
        return v;
      }
      Node* tr = nullptr;
      Value* v = add_node_out(g, "Transpose", n->name + "/" + tag + "_transposed", {x}, t, d, &tr);
      tr->attrs["perm"] = std::vector<int64_t>{1, 0};
      note(fmt::format("{} through a Transpose", tag));
      return v;
    };
    Value* a2 = operand(a, ta, "A");
    Value* b2 = operand(b, tb, "B");
    // x times s: a new constant when x is one, else a Mul by a scalar constant (what a GEMM call
    // takes back as its alpha, and a loop as one multiplication per step).
    auto scale = [&](Value* x, double s, const std::string& what, const std::string& of) -> Value* {
      if (x->is_constant()) {
        Value* v = add_typed_value(g, n->name + "/" + what + "_scaled", t, *x->dims);
        v->constant = Tensor::deferred(t, *x->dims, [src = *x->constant, s] { return scaled(src, s); });
        note(fmt::format("{} {} folded into the constant {}", what, static_cast<float>(s), of));
        return v;
      }
      Value* factor = add_typed_value(g, n->name + "/" + what, t, {});
      factor->constant = Tensor::from_f64(t, {}, {s});
      note(fmt::format("{} {} as a Mul of {}", what, static_cast<float>(s), of));
      return add_node_out(g, "Mul", n->name + "/" + what + "_scaled", {x, factor}, t, *x->dims);
    };
    // alpha scales a constant operand when there is one, else A.
    if (alpha != 1.0) {
      if (b2->is_constant())
        b2 = scale(b2, alpha, "alpha", "B");
      else
        a2 = scale(a2, alpha, "alpha", "A");
    }
    Value* c2 = (c && beta != 0.0) ? c : nullptr;
    if (c2 && beta != 1.0) c2 = scale(c2, beta, "beta", "C");
    // The Gemm node becomes the MatMul; the Add of C, when there is one, writes the Gemm's output.
    n->op_type = "MatMul";
    n->def = matmul;
    n->opset = g.opset;
    n->attrs.clear();
    n->inputs = {a2, b2};
    if (c2) {
      Value* p = add_typed_value(g, n->name + "/product", t, {m, nn});
      n->outputs = {p};
      p->producer = n;
      add_node_to(g, "Add", n->name + "/C_add", {p, c2}, y);
      note(fmt::format("C{} added by an Add", c2 == c ? "" : " (scaled)"));
    } else {
      n->outputs = {y};
      y->producer = n;
    }
    log.push_back(fmt::format("node '{}' (Gemm) -> MatMul [{}x{}] x [{}x{}]{}{}", n->name, m, k, k, nn,
                              parts.empty() ? "" : ": ", parts));
  }
  if (log.empty()) return log;
  RETURN_IF_ERROR(remove_and_sort(g, {}));
  return log;
}

StatusOr<RewriteResult> gemms_as_matmuls_if_cheaper(std::unique_ptr<Graph>& g, const FusionOptions& o,
                                                    const std::optional<Cost>& before) {
  return rewrite_if_cheaper(
      g, o, [&](Graph& c) { return gemms_as_matmuls(c, o.no_fuse); }, "--no-gemms-as-matmuls",
      /*strict=*/false, before);
}

}  // namespace stitch::fusion
