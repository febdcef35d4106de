// match_activation: grow the region of element-wise nodes computing a function of one value, then
// identify the function by evaluating it (see gemm_activation.h).
#include "codegen/gemm_activation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "codegen/lower.h"

namespace stitch::codegen {
namespace {

const std::set<std::string>& region_ops() {
  static const std::set<std::string> ops = {"Add",  "Sub", "Mul", "Div",  "Pow",  "Sqrt",
                                            "Tanh", "Erf", "Neg", "Gelu", "Relu", "Max"};
  return ops;
}

bool scalar_float_constant(const Value* v) {
  return v && v->is_constant() && is_float(v->dtype) && v->constant->size() == 1;
}

// f(x) over the region's nodes (graph order) in double precision; NaN if a node is not evaluable.
double evaluate(const std::vector<const Node*>& nodes, const Value* x, const Value* out, double xv) {
  std::map<const Value*, double> val{{x, xv}};
  auto in = [&](const Node* n, int i) {
    const Value* v = n->input(i);
    if (auto it = val.find(v); it != val.end()) return it->second;
    return v->constant->get_f64(0);
  };
  for (const Node* n : nodes) {
    const std::string& op = n->op_type;
    double r = NAN;
    if (op == "Add")
      r = in(n, 0) + in(n, 1);
    else if (op == "Sub")
      r = in(n, 0) - in(n, 1);
    else if (op == "Mul")
      r = in(n, 0) * in(n, 1);
    else if (op == "Div")
      r = in(n, 0) / in(n, 1);
    else if (op == "Pow")
      r = std::pow(in(n, 0), in(n, 1));
    else if (op == "Sqrt")
      r = std::sqrt(in(n, 0));
    else if (op == "Tanh")
      r = std::tanh(in(n, 0));
    else if (op == "Erf")
      r = std::erf(in(n, 0));
    else if (op == "Neg")
      r = -in(n, 0);
    else if (op == "Relu")
      r = std::max(in(n, 0), 0.0);
    else if (op == "Max" && n->inputs.size() == 2)
      r = std::max(in(n, 0), in(n, 1));
    else if (op == "Gelu")
      r = activation_value(
          n->attr_string("approximate", "none") == "tanh" ? Activation::kGeluTanh : Activation::kGeluErf,
          in(n, 0));
    val[n->output(0)] = r;
  }
  return val.at(out);
}

// Within tol * (1 + |x|) of the function at 337 points of [-10, 10]. A float16 model's constants
// are rounded to float16 (sqrt(2 / pi) and 0.044715 to within 1.6e-4 of themselves), which moves
// its tanh-form GELU by about 1e-5, so float16 values are matched within 5e-5; the erf form and
// the tanh form are up to 4.7e-4 apart, far outside either tolerance.
Activation identify(const std::vector<const Node*>& nodes, const Value* x, const Value* out, double tol) {
  for (Activation a : {Activation::kGeluTanh, Activation::kGeluErf, Activation::kRelu}) {
    bool same = true;
    for (int i = -168; i <= 168 && same; ++i) {
      const double xv = i / 16.8;  // [-10, 10]
      const double got = evaluate(nodes, x, out, xv), want = activation_value(a, xv);
      same = std::isfinite(got) && std::abs(got - want) <= tol * (1 + std::abs(xv));
    }
    if (same) return a;
  }
  return Activation::kNone;
}

}  // namespace

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kGeluTanh:
      return "GELU (tanh form)";
    case Activation::kGeluErf:
      return "GELU (erf form)";
    case Activation::kRelu:
      return "ReLU";
    case Activation::kNone:
      break;
  }
  return "none";
}

double activation_value(Activation a, double x) {
  switch (a) {
    case Activation::kGeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::kGeluErf:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::kRelu:
      return x > 0 ? x : 0;
    case Activation::kNone:
      break;
  }
  return x;
}

std::optional<ActivationRegion> match_activation(const Graph& g, const NodeUsers& users, const Value* x,
                                                 const std::function<bool(const Node*)>& usable) {
  if (!x || !x->dims || g.is_graph_output(x) ||
      (x->dtype != DType::kF32 && x->dtype != DType::kF16 && x->dtype != DType::kBF16))
    return std::nullopt;
  auto readers = [&](const Value* v) -> const std::vector<Node*>& {
    static const std::vector<Node*> none;
    auto it = users.find(v);
    return it == users.end() ? none : it->second;
  };
  // Grow: a node joins when it is element-wise over x's shape and reads only x, region values
  // and scalar constants. At most 24 nodes (GELU takes 8 to 10).
  std::set<const Value*> inside{x};
  std::set<const Node*> region;
  std::vector<const Value*> work{x};
  while (!work.empty() && region.size() < 24) {
    const Value* v = work.back();
    work.pop_back();
    for (const Node* n : readers(v)) {
      if (region.count(n) || !region_ops().count(n->op_type) || !usable(n) || n->outputs.size() != 1 ||
          !n->output(0) || classify_node(*n) != NodeLowering::kKernel || n->output(0)->dtype != x->dtype ||
          n->output(0)->dims != x->dims)
        continue;
      const bool reads_inside = std::all_of(n->inputs.begin(), n->inputs.end(), [&](const Value* in) {
        return in && (inside.count(in) || scalar_float_constant(in));
      });
      if (!reads_inside) continue;
      region.insert(n);
      inside.insert(n->output(0));
      work.push_back(n->output(0));
    }
  }
  if (region.empty()) return std::nullopt;
  std::vector<const Node*> ordered;  // graph order
  for (const auto& np : g.nodes())
    if (region.count(np.get())) ordered.push_back(np.get());
  // The activation is the value, latest first, whose ancestors in the region read every use of x
  // and of each other (so x and the intermediates need never be stored).
  for (auto it = ordered.rbegin(); it != ordered.rend(); ++it) {
    const Value* out = (*it)->output(0);
    std::set<const Node*> sub;
    std::vector<const Value*> stack{out};
    while (!stack.empty()) {
      const Value* v = stack.back();
      stack.pop_back();
      if (v == x || !v->producer || !region.count(v->producer) || !sub.insert(v->producer).second) continue;
      for (const Value* in : v->producer->inputs) stack.push_back(in);
    }
    bool closed = true;
    for (const Value* v : inside) {
      if (v == out || (v != x && !sub.count(v->producer))) continue;
      closed &= v == x || !g.is_graph_output(v);
      for (const Node* r : readers(v)) closed &= sub.count(r) > 0;
    }
    if (!closed) continue;
    std::vector<const Node*> nodes;
    for (const Node* n : ordered)
      if (sub.count(n)) nodes.push_back(n);
    const Activation a = identify(nodes, x, out, x->dtype == DType::kF16 ? 5e-5 : 2e-6);
    if (a == Activation::kNone) continue;
    return ActivationRegion{a, nodes, out};
  }
  return std::nullopt;
}

}  // namespace stitch::codegen
