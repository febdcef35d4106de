// Einsum (opset 12 and later; the table's range starts at 11, where the op does not exist, so an
// opset-11 model has none): the equation parsed once (einsum_spec), evaluated by the reference
// implementation as a plain sum of products over every subscript, and written by the front end's
// expand_einsum pass as Transposes, Reshapes, ReduceSums and batched MatMuls.
#include <algorithm>
#include <cctype>
#include <set>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::ops {

namespace {

struct Term {
  std::vector<int> letters;  // subscripts in order; -1 marks where the ellipsis stands
  bool ellipsis = false;
};

StatusOr<Term> parse_term(const Node& n, const std::string& t) {
  Term term;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '.') {
      if (t.compare(i, 3, "...") != 0 || term.ellipsis)
        return node_error(n, fmt::format("equation term '{}': an ellipsis is three dots, at most once", t));
      term.ellipsis = true;
      term.letters.push_back(-1);
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      term.letters.push_back(c);
    } else {
      return node_error(n,
                        fmt::format("equation term '{}': '{}' is not a subscript (letters and '...')", t, c));
    }
  }
  return term;
}

}  // namespace

StatusOr<EinsumSpec> einsum_spec(const Node& n, const std::vector<Dims>& inputs) {
  std::string eq;
  for (char c : n.attr_string("equation", "")) {
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  }
  if (eq.empty()) return node_error(n, "needs an equation");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t b = 0;;) {
    const size_t e = lhs.find(',', b);
    ASSIGN_OR_RETURN(Term t,
                     parse_term(n, lhs.substr(b, e == std::string::npos ? std::string::npos : e - b)));
    terms.push_back(std::move(t));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  if (terms.size() != inputs.size())
    return node_error(
        n, fmt::format("equation '{}' has {} input terms for {} inputs", eq, terms.size(), inputs.size()));
  // The ellipsis's rank in each term, and the widest.
  EinsumSpec spec;
  std::vector<int64_t> ell(terms.size(), 0);
  int64_t widest = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const int64_t named = static_cast<int64_t>(terms[i].letters.size()) - (terms[i].ellipsis ? 1 : 0);
    const int64_t r = static_cast<int64_t>(inputs[i].size());
    if (terms[i].ellipsis ? r < named : r != named)
      return node_error(n, fmt::format("input {} has rank {}, but its term in '{}' names {} axes{}", i, r, eq,
                                       named, terms[i].ellipsis ? " and an ellipsis" : ""));
    ell[i] = terms[i].ellipsis ? r - named : 0;
    widest = std::max(widest, ell[i]);
  }
  std::map<int, int> uses;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int> ids;
    size_t axis = 0;
    for (int l : terms[i].letters) {
      if (l < 0) {
        for (int64_t j = 0; j < ell[i]; ++j)
          ids.push_back(kEinsumEllipsis + static_cast<int>(widest - ell[i] + j));
      } else {
        ids.push_back(l);
      }
    }
    for (int id : ids) {
      const int64_t d = inputs[i][axis++];
      auto [it, fresh] = spec.size.emplace(id, d);
      if (fresh) continue;
      if (it->second < 0 || d < 0) {  // unbound before --shape: the known size, if any
        it->second = std::max(it->second, d);
      } else if (id >= kEinsumEllipsis && (it->second == 1 || d == 1)) {
        if (it->second == 1) it->second = d;  // broadcast: 1 against 0 is 0, not the larger
      } else if (it->second != d) {
        const std::string what =
            id >= kEinsumEllipsis ? "an ellipsis axis" : fmt::format("subscript '{}'", static_cast<char>(id));
        return node_error(n,
                          fmt::format("{} has size {} in one place and {} in another", what, it->second, d));
      }
    }
    for (int l : terms[i].letters)
      if (l >= 0) ++uses[l];
    spec.terms.push_back(std::move(ids));
  }
  if (arrow != std::string::npos) {
    ASSIGN_OR_RETURN(Term out, parse_term(n, eq.substr(arrow + 2)));
    std::set<int> seen;
    for (int l : out.letters) {
      if (l < 0) {
        for (int64_t j = 0; j < widest; ++j) spec.out.push_back(kEinsumEllipsis + static_cast<int>(j));
        continue;
      }
      if (!uses.count(l))
        return node_error(n, fmt::format("output subscript '{}' appears in no input term of '{}'",
                                         static_cast<char>(l), eq));
      if (!seen.insert(l).second)
        return node_error(n,
                          fmt::format("output subscript '{}' is repeated in '{}'", static_cast<char>(l), eq));
      spec.out.push_back(l);
    }
  } else {
    for (int64_t j = 0; j < widest; ++j) spec.out.push_back(kEinsumEllipsis + static_cast<int>(j));
    for (const auto& [l, count] : uses)
      if (count == 1) spec.out.push_back(l);
  }
  for (int id : spec.out) spec.out_dims.push_back(spec.size.at(id));
  return spec;
}

namespace {

Status infer_einsum(InferContext& ctx) {
  std::vector<Dims> dims;
  const DType t = ctx.dtype(0);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error(fmt::format("input {} is omitted", i));
    if (ctx.dtype(i) != t)
      return ctx.error(
          fmt::format("input {} is {} where input 0 is {}", i, dtype_name(ctx.dtype(i)), dtype_name(t)));
    dims.push_back(ctx.dims(i));
  }
  if (dims.empty()) return ctx.error("needs at least one input");
  ASSIGN_OR_RETURN(EinsumSpec spec, einsum_spec(ctx.node(), dims));
  ctx.set_output(0, t, spec.out_dims);
  return Status::ok();
}

// The sum over every subscript not in the output of the product of the inputs' `values` (T:
// double for floats; uint64_t for integers, which wrap as the kernels' 64-bit arithmetic does, where
// doubles would round products and sums past 2^53).
template <class T>
std::vector<T> einsum_sum(const EinsumSpec& spec, const std::vector<Dims>& dims,
                          const std::vector<std::vector<T>>& values) {
  std::vector<int> ids = spec.out;
  for (const auto& [id, s] : spec.size)
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  std::map<int, size_t> slot;
  for (size_t i = 0; i < ids.size(); ++i) slot[ids[i]] = i;
  std::vector<Dims> strides;
  for (const Dims& d : dims) strides.push_back(strides_of(d));
  std::vector<int64_t> at(ids.size(), 0);
  std::vector<T> y(static_cast<size_t>(num_elements(spec.out_dims)), T(0));
  bool empty = false;
  for (int id : ids) empty = empty || spec.size.at(id) == 0;
  while (!empty) {
    T p = 1;
    for (size_t k = 0; k < values.size(); ++k) {
      int64_t off = 0;
      for (size_t a = 0; a < spec.terms[k].size(); ++a) {
        const int64_t d = dims[k][a];
        off += (d == 1 ? 0 : at[slot[spec.terms[k][a]]]) * strides[k][a];
      }
      p *= values[k][static_cast<size_t>(off)];
    }
    int64_t o = 0;
    for (size_t a = 0; a < spec.out.size(); ++a) o = o * spec.out_dims[a] + at[a];
    y[static_cast<size_t>(o)] += p;
    // the next index, the last subscript fastest; done after the last
    size_t d = ids.size();
    while (d > 0) {
      --d;
      if (++at[d] < spec.size.at(ids[d])) break;
      at[d] = 0;
      if (d == 0) empty = true;
    }
    if (ids.empty()) break;
  }
  return y;
}

Status eval_einsum(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  std::vector<Dims> dims;
  for (const Tensor* t : in) dims.push_back(t->dims());
  ASSIGN_OR_RETURN(EinsumSpec spec, einsum_spec(n, dims));
  const DType t = in[0]->dtype();
  if (is_float(t)) {
    std::vector<std::vector<double>> v;
    for (const Tensor* x : in) v.push_back(x->to_f64());
    out[0] = Tensor::from_f64(t, spec.out_dims, einsum_sum(spec, dims, v));
    return Status::ok();
  }
  std::vector<std::vector<uint64_t>> v;
  for (const Tensor* x : in) {
    const std::vector<int64_t> i = x->to_i64();
    v.emplace_back(i.begin(), i.end());
  }
  const std::vector<uint64_t> y = einsum_sum(spec, dims, v);
  out[0] = Tensor::from_i64(t, spec.out_dims, std::vector<int64_t>(y.begin(), y.end()));
  return Status::ok();
}

}  // namespace

void register_einsum(std::vector<OpDef>& t) {
  t.push_back({"Einsum", 12, kMaxOpset, OpCategory::kLibrary, infer_einsum, eval_einsum});
}

}  // namespace stitch::ops
