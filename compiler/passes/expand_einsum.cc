// expand_einsum: an Einsum becomes the ops the back end plans: Transposes, Reshapes, ReduceSums,
// Gathers (diagonals) and batched MatMuls.
//
// Per input, a subscript repeated within its term takes the diagonal (the repeated axes moved
// last, merged, and a Gather of every (n^k - 1) / (n - 1)-th element), and a subscript no other
// term and not the output uses is summed. Then the inputs are contracted left to right: for the
// running result A and the next input B, the subscripts both keep (later terms or the output read
// them) are batch axes, those in both that nothing later reads are contracted, the rest are A's
// or B's own; A goes to [batch, own, contracted] and B to [batch, contracted, own], each reshaped
// to [batch..., M, K] and [batch..., K, N], and one MatMul (which broadcasts the batch axes, the
// ellipsis's) gives [batch..., M, N], reshaped back to one axis per subscript. What is left is
// summed and transposed into the output's order. Transposes and Reshapes that change nothing are
// not written. The last node writes the Einsum's output value; new nodes are named after it.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ops/op_params.h"
#include "passes/graph_builder.h"
#include "passes/pass.h"

namespace stitch {

namespace {

struct Operand {
  Value* v;
  std::vector<int> ids;  // one subscript per axis
  const Dims& dims() const { return *v->dims; }
  int64_t size(int id) const {
    auto it = std::find(ids.begin(), ids.end(), id);
    return dims()[static_cast<size_t>(it - ids.begin())];
  }
  bool has(int id) const { return std::find(ids.begin(), ids.end(), id) != ids.end(); }
};

struct Expander {
  NodeBuilder b;
  int step = 0;

  std::string name(const std::string& what) { return fmt::format("{}{}", what, step++); }

  Operand transpose(const Operand& x, const std::vector<int>& order) {
    if (order == x.ids) return x;
    std::vector<int64_t> perm;
    Dims d;
    for (int id : order) {
      const int64_t a = std::find(x.ids.begin(), x.ids.end(), id) - x.ids.begin();
      perm.push_back(a);
      d.push_back(x.dims()[static_cast<size_t>(a)]);
    }
    return {b.node("Transpose", name("transpose"), {x.v}, x.v->dtype, d, {{"perm", perm}}), order};
  }
  Value* reshape(Value* x, const Dims& d) {
    if (*x->dims == d) return x;
    Value* shape = b.constant(name("shape"), Tensor::vector_i64(std::vector<int64_t>(d.begin(), d.end())));
    return b.node("Reshape", name("reshape"), {x, shape}, x->dtype, d);
  }
  // Sums the axes of `ids` (keepdims: they stay as size 1 and keep their subscripts).
  Operand reduce_sum(const Operand& x, const std::vector<int>& ids, bool keepdims) {
    if (ids.empty()) return x;
    std::vector<int64_t> axes;
    Dims d;
    Operand y{nullptr, {}};
    for (size_t a = 0; a < x.ids.size(); ++a) {
      const bool summed = std::find(ids.begin(), ids.end(), x.ids[a]) != ids.end();
      if (summed) axes.push_back(static_cast<int64_t>(a));
      if (!summed || keepdims) {
        d.push_back(summed ? 1 : x.dims()[a]);
        y.ids.push_back(x.ids[a]);
      }
    }
    std::map<std::string, AttrValue> attrs{{"keepdims", static_cast<int64_t>(keepdims)}};
    std::vector<Value*> in{x.v};
    if (b.g.opset >= 13)
      in.push_back(b.constant(name("axes"), Tensor::vector_i64(axes)));
    else
      attrs["axes"] = axes;
    y.v = b.node("ReduceSum", name("sum"), in, x.v->dtype, d, attrs);
    return y;
  }
  // The diagonal of every subscript repeated in `x`'s term.
  Operand diagonals(Operand x) {
    for (size_t a = 0; a < x.ids.size(); ++a) {
      const int id = x.ids[a];
      const int64_t k = std::count(x.ids.begin(), x.ids.end(), id);
      if (k < 2) continue;
      // The repeated axes last (by position: their subscripts are alike).
      std::vector<int64_t> perm;
      for (size_t i = 0; i < x.ids.size(); ++i)
        if (x.ids[i] != id) perm.push_back(static_cast<int64_t>(i));
      for (size_t i = 0; i < x.ids.size(); ++i)
        if (x.ids[i] == id) perm.push_back(static_cast<int64_t>(i));
      Dims td;
      for (int64_t p : perm) td.push_back(x.dims()[static_cast<size_t>(p)]);
      Value* t = x.v;
      bool moved = false;
      for (size_t i = 0; i < perm.size(); ++i) moved = moved || perm[i] != static_cast<int64_t>(i);
      if (moved) t = b.node("Transpose", name("transpose"), {x.v}, x.v->dtype, td, {{"perm", perm}});
      const int64_t n = td.back();
      int64_t flat = 1, stride = 0;
      for (int64_t i = 0; i < k; ++i) {
        stride = stride * n + 1;
        flat *= n;
      }
      Dims md(td.begin(), td.end() - k);
      md.push_back(flat);
      Value* merged = reshape(t, md);
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < n; ++i) idx.push_back(i * stride);
      Dims gd(md.begin(), md.end() - 1);
      gd.push_back(n);
      Value* g = b.node("Gather", name("diagonal"),
                        {merged, b.constant(name("diagonal_index"), Tensor::vector_i64(idx))}, x.v->dtype, gd,
                        {{"axis", static_cast<int64_t>(md.size() - 1)}});
      std::vector<int> ids;
      for (int o : x.ids)
        if (o != id) ids.push_back(o);
      ids.push_back(id);
      x = {g, ids};
      a = static_cast<size_t>(-1);  // start again: the axes moved
    }
    return x;
  }
  // Sums the subscripts of `x` that `keep` and `other` do not use.
  Operand sum_unused(const Operand& x, const std::set<int>& keep, const Operand* other) {
    std::vector<int> sum;
    for (int id : x.ids)
      if (!keep.count(id) && !(other && other->has(id))) sum.push_back(id);
    return reduce_sum(x, sum, false);
  }
  Operand contract(Operand a, Operand c, const std::set<int>& keep) {
    a = sum_unused(a, keep, &c);
    c = sum_unused(c, keep, &a);
    std::vector<int> batch, contracted, a_own, c_own;
    for (int id : a.ids) {
      if (!c.has(id))
        a_own.push_back(id);
      else if (keep.count(id))
        batch.push_back(id);
      else
        contracted.push_back(id);
    }
    for (int id : c.ids)
      if (!a.has(id)) c_own.push_back(id);
    // A contracted ellipsis axis of size 1 on one side: sum the other side's first.
    std::vector<int> sum_a, sum_c;
    for (int id : contracted) {
      if (a.size(id) == c.size(id)) continue;
      (a.size(id) > c.size(id) ? sum_a : sum_c).push_back(id);
    }
    a = reduce_sum(a, sum_a, true);
    c = reduce_sum(c, sum_c, true);
    auto concat = [](std::vector<int> x, const std::vector<int>& y, const std::vector<int>& z) {
      x.insert(x.end(), y.begin(), y.end());
      x.insert(x.end(), z.begin(), z.end());
      return x;
    };
    a = transpose(a, concat(batch, a_own, contracted));
    c = transpose(c, concat(batch, contracted, c_own));
    int64_t m = 1, k = 1, n = 1;
    for (int id : a_own) m *= a.size(id);
    for (int id : contracted) k *= a.size(id);
    for (int id : c_own) n *= c.size(id);
    Dims ad, cd, pd, rd;
    for (int id : batch) {
      ad.push_back(a.size(id));
      cd.push_back(c.size(id));
      pd.push_back(a.size(id) == 1 ? c.size(id) : a.size(id));  // broadcast (1 against 0 is 0)
    }
    rd = pd;
    ad.insert(ad.end(), {m, k});
    cd.insert(cd.end(), {k, n});
    pd.insert(pd.end(), {m, n});
    for (int id : a_own) rd.push_back(a.size(id));
    for (int id : c_own) rd.push_back(c.size(id));
    Value* p = b.node("MatMul", name("matmul"), {reshape(a.v, ad), reshape(c.v, cd)}, a.v->dtype, pd);
    return {reshape(p, rd), concat(batch, a_own, c_own)};
  }
};

StatusOr<bool> expand_einsum_node(Graph& g, Node& n) {
  Value* y = n.output(0);
  std::vector<Dims> dims;
  for (Value* v : n.inputs) {
    if (!v || !v->has_static_shape()) return false;
    dims.push_back(*v->dims);
  }
  if (!y || !y->has_static_shape() || dims.empty()) return false;
  ASSIGN_OR_RETURN(ops::EinsumSpec spec, ops::einsum_spec(n, dims));
  Expander e{NodeBuilder{g, n}};
  std::vector<Operand> ops;
  for (size_t i = 0; i < n.inputs.size(); ++i) ops.push_back(e.diagonals({n.inputs[i], spec.terms[i]}));
  const std::set<int> out(spec.out.begin(), spec.out.end());
  // What the output and the inputs from k on read.
  auto kept_after = [&](size_t k) {
    std::set<int> keep = out;
    for (size_t j = k; j < ops.size(); ++j) keep.insert(ops[j].ids.begin(), ops[j].ids.end());
    return keep;
  };
  Operand cur = e.sum_unused(ops[0], kept_after(1), nullptr);
  for (size_t k = 1; k < ops.size(); ++k) cur = e.contract(cur, ops[k], kept_after(k + 1));
  cur = e.sum_unused(cur, out, nullptr);
  cur = e.transpose(cur, spec.out);
  Value* last = e.reshape(cur.v, spec.out_dims);
  if (last == n.input(0) || !last->producer)
    last = e.b.node("Identity", "copy", {last}, last->dtype, *last->dims);
  e.b.finish(last, y);
  return true;
}

}  // namespace

StatusOr<bool> expand_einsum(Graph& g, PassContext&) { return expand_each(g, "Einsum", expand_einsum_node); }

}  // namespace stitch
