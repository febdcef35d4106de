#include "model_mutations.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

namespace stitch::fuzz {
namespace {

using onnx::AttributeProto;
using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;

int64_t pick(std::mt19937_64& rng, int64_t n) {
  return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
}

template <typename T, size_t N>
T pick_of(std::mt19937_64& rng, const std::array<T, N>& xs) {
  return xs[pick(rng, N)];
}

// A constant tensor of the model: an initializer or a Constant node's value, with how to name it.
struct Constant {
  TensorProto* t;
  std::string what;
};

std::vector<Constant> constants(ModelProto& m) {
  std::vector<Constant> out;
  auto* g = m.mutable_graph();
  for (auto& t : *g->mutable_initializer()) out.push_back({&t, fmt::format("initializer '{}'", t.name())});
  for (auto& n : *g->mutable_node())
    if (n.op_type() == "Constant")
      for (auto& a : *n.mutable_attribute())
        if (a.name() == "value" && a.has_t())
          out.push_back({a.mutable_t(), fmt::format("node '{}' (Constant)", n.name())});
  return out;
}

int64_t elements(const TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  return n;
}

// The raw bytes of `t` as `n` elements of T, when they are that many.
template <typename T>
std::optional<std::vector<T>> raw_elements(const TensorProto& t, int64_t n) {
  if (t.raw_data().size() != static_cast<size_t>(n) * sizeof(T)) return std::nullopt;
  std::vector<T> v(static_cast<size_t>(n));
  std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(T));
  return v;
}

template <typename T>
void set_raw(TensorProto& t, const std::vector<T>& v) {
  t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
}

// The integer elements of an INT64 or INT32 tensor, stored raw or in the typed field.
std::optional<std::vector<int64_t>> read_ints(const TensorProto& t) {
  const int64_t n = elements(t);
  std::vector<int64_t> v;
  const bool raw = !t.raw_data().empty();
  if (t.data_type() == TensorProto::INT64) {
    auto r = raw ? raw_elements<int64_t>(t, n)
                 : std::vector<int64_t>(t.int64_data().begin(), t.int64_data().end());
    if (!r) return std::nullopt;
    v = std::move(*r);
  } else if (t.data_type() == TensorProto::INT32) {
    auto r = raw ? raw_elements<int32_t>(t, n)
                 : std::vector<int32_t>(t.int32_data().begin(), t.int32_data().end());
    if (!r) return std::nullopt;
    v.assign(r->begin(), r->end());
  } else {
    return std::nullopt;
  }
  if (static_cast<int64_t>(v.size()) != n) return std::nullopt;
  return v;
}

void write_ints(TensorProto& t, const std::vector<int64_t>& v) {
  const bool raw = !t.raw_data().empty();
  if (t.data_type() == TensorProto::INT64) {
    if (raw) return set_raw(t, v);
    t.clear_int64_data();
    for (int64_t x : v) t.add_int64_data(x);
  } else {
    const std::vector<int32_t> w(v.begin(), v.end());
    if (raw) return set_raw(t, w);
    t.clear_int32_data();
    for (int32_t x : w) t.add_int32_data(x);
  }
}

std::optional<std::vector<float>> read_floats(const TensorProto& t) {
  if (t.data_type() != TensorProto::FLOAT) return std::nullopt;
  const int64_t n = elements(t);
  auto v = !t.raw_data().empty() ? raw_elements<float>(t, n)
                                 : std::vector<float>(t.float_data().begin(), t.float_data().end());
  if (!v || static_cast<int64_t>(v->size()) != n) return std::nullopt;
  return v;
}

void write_floats(TensorProto& t, const std::vector<float>& v) {
  if (!t.raw_data().empty()) return set_raw(t, v);
  t.clear_float_data();
  for (float x : v) t.add_float_data(x);
}

// Integers a malformed or edited model puts in place of `v`: off by one, negated, the edges of
// the types, and the values shape and axis inputs give special meanings (0, -1).
int64_t other_int(std::mt19937_64& rng, int64_t v) {
  const std::array<int64_t, 9> xs{
      v + 1, v - 1, -v, 0, -1, 1, 2, int64_t{1} << 31, std::numeric_limits<int64_t>::max()};
  int64_t x = pick_of(rng, xs);
  return x == v ? v + 2 : x;
}

// Floats in place of `v`. NaN, the infinities and 1e30 only where `extremes` (a one-element
// constant: a scale, an epsilon, a bound): in a weight or an attribute, whether 0 x inf is NaN
// depends on which products an implementation forms (a convolution's padding, where Gemm's alpha
// applies), and a norm's float32 sum of squares overflows where the reference's double does not,
// so comparing there would flag what IEEE leaves open.
float other_float(std::mt19937_64& rng, float v, bool extremes) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::array<float, 9> xs{0.0f, -1.0f, 1e-30f, 2 * v, -v, std::numeric_limits<float>::quiet_NaN(),
                                inf,  -inf,  1e30f};
  return xs[pick(rng, extremes ? 9 : 5)];
}

// Mutation kinds. Each returns "" when the model has nothing it applies to.
using Kind = std::function<std::string(ModelProto&, std::mt19937_64&)>;

// One element of a small constant that `read` takes (element type T) changed to `other(t, v, old)`,
// written back with `write`.
template <typename T, typename Read, typename Write, typename Other>
std::string constant_element(ModelProto& m, std::mt19937_64& rng, Read read, Write write, Other other) {
  std::vector<std::pair<Constant, std::vector<T>>> cands;
  for (const Constant& c : constants(m))
    if (auto v = read(*c.t); v && !v->empty() && v->size() <= 64) cands.emplace_back(c, *v);
  if (cands.empty()) return "";
  auto& [c, v] = cands[pick(rng, cands.size())];
  const int64_t k = pick(rng, v.size());
  const T old = v[k];
  v[k] = other(*c.t, v, old);
  write(*c.t, v);
  return fmt::format("{} element {}: {} -> {}", c.what, k, old, v[k]);
}

std::string int_constant(ModelProto& m, std::mt19937_64& rng) {
  return constant_element<int64_t>(m, rng, read_ints, write_ints,
                                   [&](const TensorProto& t, const std::vector<int64_t>&, int64_t old) {
                                     const int64_t x = other_int(rng, old);
                                     if (t.data_type() != TensorProto::INT32) return x;
                                     return std::clamp<int64_t>(x, std::numeric_limits<int32_t>::min(),
                                                                std::numeric_limits<int32_t>::max());
                                   });
}

std::string float_constant(ModelProto& m, std::mt19937_64& rng) {
  return constant_element<float>(m, rng, read_floats, write_floats,
                                 [&](const TensorProto&, const std::vector<float>& v, float old) {
                                   return other_float(rng, old, v.size() == 1);
                                 });
}

std::string describe(const NodeProto& n) { return fmt::format("node '{}' ({})", n.name(), n.op_type()); }

std::string attribute(ModelProto& m, std::mt19937_64& rng) {
  std::vector<std::pair<NodeProto*, AttributeProto*>> cands;
  for (auto& n : *m.mutable_graph()->mutable_node())
    for (auto& a : *n.mutable_attribute())
      if (a.type() == AttributeProto::INT || a.type() == AttributeProto::INTS ||
          a.type() == AttributeProto::FLOAT || a.type() == AttributeProto::STRING)
        cands.emplace_back(&n, &a);
  if (cands.empty()) return "";
  auto [n, a] = cands[pick(rng, cands.size())];
  const std::string head = fmt::format("{}: attribute {}", describe(*n), a->name());
  switch (a->type()) {
    case AttributeProto::INT: {
      const int64_t old = a->i();
      a->set_i(other_int(rng, old));
      return fmt::format("{} {} -> {}", head, old, a->i());
    }
    case AttributeProto::FLOAT: {
      const float old = a->f();
      a->set_f(other_float(rng, old, false));  // Gemm's alpha at inf: which NaN depends on where it applies
      return fmt::format("{} {} -> {}", head, old, a->f());
    }
    case AttributeProto::STRING: {
      const std::string old = a->s();
      a->set_s(old.empty() ? "bogus" : "");
      return fmt::format("{} '{}' -> '{}'", head, old, a->s());
    }
    default: {
      auto* xs = a->mutable_ints();
      const std::string old = fmt::format("[{}]", fmt::join(*xs, ", "));
      const int64_t how = pick(rng, 4);
      if (how == 0 && xs->size() >= 2) {  // a permutation stays one; axes stay distinct
        const int64_t i = pick(rng, xs->size());
        const int64_t j = (i + 1 + pick(rng, xs->size() - 1)) % xs->size();
        std::swap(xs->at(i), xs->at(j));
      } else if (how == 1 && !xs->empty()) {
        xs->RemoveLast();
      } else if (how == 2) {
        xs->Add(0);
      } else if (!xs->empty()) {
        const int64_t k = pick(rng, xs->size());
        xs->Set(k, other_int(rng, xs->Get(k)));
      } else {
        xs->Add(-1);
      }
      return fmt::format("{} {} -> [{}]", head, old, fmt::join(*xs, ", "));
    }
  }
}

// Ops of one family take the same inputs and attributes, so a swap keeps the model valid and
// changes what it computes (and which of the planner's patterns it matches).
std::string swap_op(ModelProto& m, std::mt19937_64& rng) {
  static const std::vector<std::vector<std::string>> families{
      {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"},
      {"Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Sqrt", "Erf", "Reciprocal", "Log", "Softplus",
       "Identity"},
      {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare",
       "ReduceLogSumExp"},
      {"Softmax", "LogSoftmax"},
      {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"},
      {"And", "Or", "Xor"},
      {"ArgMax", "ArgMin"},
  };
  std::vector<std::pair<NodeProto*, const std::vector<std::string>*>> cands;
  for (auto& n : *m.mutable_graph()->mutable_node())
    for (const auto& f : families)
      if (n.domain().empty() && std::find(f.begin(), f.end(), n.op_type()) != f.end())
        cands.emplace_back(&n, &f);
  if (cands.empty()) return "";
  auto [n, f] = cands[pick(rng, cands.size())];
  const std::string old = n->op_type();
  std::string now = old;
  while (now == old) now = (*f)[pick(rng, f->size())];
  n->set_op_type(now);
  return fmt::format("node '{}' ({}) made a {}", n->name(), old, now);
}

// One input of a node reads another value defined before it (order kept, so only its shape or
// type can be wrong).
std::string rewire(ModelProto& m, std::mt19937_64& rng) {
  auto* g = m.mutable_graph();
  if (g->node_size() == 0) return "";
  std::vector<std::string> defined;
  for (const auto& i : g->input()) defined.push_back(i.name());
  for (const auto& t : g->initializer()) defined.push_back(t.name());
  const int64_t at = pick(rng, g->node_size());
  for (int64_t i = 0; i < at; ++i)
    for (const auto& o : g->node(i).output()) defined.push_back(o);
  NodeProto* n = g->mutable_node(at);
  if (n->input_size() == 0 || defined.size() < 2) return "";
  const int64_t k = pick(rng, n->input_size());
  const std::string old = n->input(k);
  std::string now = old;
  for (int tries = 0; tries < 8 && now == old; ++tries) now = defined[pick(rng, defined.size())];
  if (now == old) return "";
  n->set_input(k, now);
  return fmt::format("{}: input {} '{}' -> '{}'", describe(*n), k, old, now);
}

bool is_initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return true;
  return false;
}

std::string input_dim(ModelProto& m, std::mt19937_64& rng) {
  std::vector<onnx::TensorShapeProto_Dimension*> dims;
  std::vector<std::string> names;
  auto* g = m.mutable_graph();
  for (auto& i : *g->mutable_input()) {
    if (is_initializer(*g, i.name()) || !i.type().has_tensor_type()) continue;
    auto* s = i.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int k = 0; k < s->dim_size(); ++k) {
      dims.push_back(s->mutable_dim(k));
      names.push_back(fmt::format("input '{}' axis {}", i.name(), k));
    }
  }
  if (dims.empty()) return "";
  const int64_t k = pick(rng, dims.size());
  const int64_t old = dims[k]->has_dim_value() ? dims[k]->dim_value() : -1;
  const std::array<int64_t, 8> xs{1, 2, 3, 0, old + 1, old - 1, 37, 64};
  int64_t now = pick_of(rng, xs);
  if (now == old || now < 0) now = old + 2;
  dims[k]->set_dim_value(now);
  return fmt::format("{}: {} -> {}", names[k], old, now);
}

std::string input_type(ModelProto& m, std::mt19937_64& rng) {
  std::vector<onnx::ValueInfoProto*> cands;
  auto* g = m.mutable_graph();
  for (auto& i : *g->mutable_input())
    if (!is_initializer(*g, i.name()) && i.type().has_tensor_type()) cands.push_back(&i);
  if (cands.empty()) return "";
  auto* i = cands[pick(rng, cands.size())];
  const std::array<int, 11> types{TensorProto::FLOAT,
                                  TensorProto::FLOAT16,
                                  TensorProto::BFLOAT16,
                                  TensorProto::DOUBLE,
                                  TensorProto::INT32,
                                  TensorProto::INT64,
                                  TensorProto::INT8,
                                  TensorProto::UINT8,
                                  TensorProto::BOOL,
                                  0,
                                  99};
  const int old = i->type().tensor_type().elem_type();
  int now = old;
  while (now == old) now = pick_of(rng, types);
  i->mutable_type()->mutable_tensor_type()->set_elem_type(now);
  return fmt::format("input '{}': element type {} -> {}", i->name(), old, now);
}

// What a broken file or export carries: a value nothing defines, a node gone, an output named
// twice, an unknown op or domain, an opset the model was not written for.
std::string dangling(ModelProto& m, std::mt19937_64& rng) {
  auto* g = m.mutable_graph();
  if (g->node_size() == 0) return "";
  const int at = static_cast<int>(pick(rng, g->node_size()));
  NodeProto* n = g->mutable_node(at);
  switch (pick(rng, 7)) {
    case 0: {
      if (n->input_size() == 0) return "";
      const std::string old = n->input(0);
      n->set_input(0, "fuzz_undefined");
      return fmt::format("{}: input 0 '{}' -> 'fuzz_undefined'", describe(*n), old);
    }
    case 1: {
      const std::string what = describe(*n);
      g->mutable_node()->DeleteSubrange(at, 1);
      return fmt::format("{} removed", what);
    }
    case 2: {
      if (g->node_size() < 2 || n->output_size() == 0) return "";
      const NodeProto& other = g->node(pick(rng, g->node_size()));
      if (&other == n || other.output_size() == 0) return "";
      n->set_output(0, other.output(0));
      return fmt::format("{}: output 0 renamed '{}', which {} also writes", describe(*n), other.output(0),
                         describe(other));
    }
    case 3:
      n->set_op_type("FuzzOp");
      return fmt::format("node '{}': op type made 'FuzzOp'", n->name());
    case 4:
      n->set_domain("com.fuzz");
      return fmt::format("{}: domain made 'com.fuzz'", describe(*n));
    case 5: {
      if (g->output_size() == 0) return "";
      auto* o = g->mutable_output(pick(rng, g->output_size()));
      const std::string old = o->name();
      o->set_name("fuzz_no_such_output");
      return fmt::format("graph output '{}' renamed 'fuzz_no_such_output'", old);
    }
    default: {
      for (auto& op : *m.mutable_opset_import())
        if (op.domain().empty() || op.domain() == "ai.onnx") {
          const int64_t old = op.version();
          const std::array<int64_t, 4> xs{1, 7, 12, 99};
          op.set_version(pick_of(rng, xs));
          return fmt::format("default opset {} -> {}", old, op.version());
        }
      return "";
    }
  }
}

}  // namespace

std::string mutate(ModelProto& m, std::mt19937_64& rng) {
  // Weighted toward the kinds that keep a model valid, whose mutants reach the planner.
  static const std::vector<std::pair<Kind, int>> kinds{
      {int_constant, 3}, {float_constant, 2}, {attribute, 3},  {swap_op, 3},
      {rewire, 2},       {input_dim, 2},      {input_type, 1}, {dangling, 1},
  };
  int total = 0;
  for (const auto& [k, w] : kinds) total += w;
  for (int tries = 0; tries < 32; ++tries) {
    int64_t r = pick(rng, total);
    for (const auto& [k, w] : kinds) {
      if (r < w) {
        if (std::string what = k(m, rng); !what.empty()) return what;
        break;
      }
      r -= w;
    }
  }
  return "";
}

}  // namespace stitch::fuzz
