#include "reference/interpreter.h"

#include <fmt/format.h>

#include <unordered_map>

#include "ir/op_table.h"
#include "support/check.h"

namespace stitch {

StatusOr<std::vector<Tensor>> eval_node(const Node& n, std::span<const Tensor* const> inputs) {
  STITCH_CHECK(n.def, "{} has no op row", n.describe());
  std::vector<Tensor> outs(n.outputs.size());
  RETURN_IF_ERROR(n.def->eval(n, inputs, outs));
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const Value* v = n.outputs[i];
    if (!v || v->dtype == DType::kUndefined || !v->dims || !v->has_static_shape()) continue;
    STITCH_CHECK(outs[i].dtype() == v->dtype && outs[i].dims() == *v->dims,
                 "{} output {} evaluated to {}[{}] but shape inference said {}", n.describe(), i,
                 dtype_name(outs[i].dtype()), dims_to_string(outs[i].dims()), v->type_string());
  }
  return outs;
}

Status check_input(const Value& input, const Tensor& t) {
  if (t.dtype() != input.dtype)
    return Status::user(fmt::format("input '{}' must be {}, got {}", input.name,
                                    dtype_name(input.dtype), dtype_name(t.dtype())));
  if (input.dims) {
    const Dims& want = *input.dims;
    bool ok = want.size() == t.dims().size();
    for (size_t i = 0; ok && i < want.size(); ++i) ok = want[i] < 0 || want[i] == t.dims()[i];
    if (!ok)
      return Status::user(fmt::format("input '{}' must have shape {}, got {}", input.name,
                                      input.type_string(), dims_to_string(t.dims())));
  }
  return Status::ok();
}

StatusOr<TensorMap> run_reference(const Graph& g, const TensorMap& inputs) {
  std::unordered_map<const Value*, Tensor> env;
  for (const Value* in : g.inputs) {
    auto it = inputs.find(in->name);
    if (it == inputs.end())
      return Status::user(fmt::format("no data for model input '{}' ({})", in->name, in->type_string()));
    RETURN_IF_ERROR(check_input(*in, it->second));
    env[in] = it->second;
  }
  for (const auto& [name, t] : inputs) {
    Value* v = g.find_value(name);
    if (!v || std::find(g.inputs.begin(), g.inputs.end(), v) == g.inputs.end())
      return Status::user(fmt::format("'{}' is not an input of the model", name));
  }
  // Last reader of every value, so intermediates are freed early.
  std::unordered_map<const Value*, size_t> last_use;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (const Value* v : g.nodes()[i]->inputs)
      if (v) last_use[v] = i;
  auto lookup = [&](const Value* v) -> const Tensor* {
    if (v->constant) return &*v->constant;
    auto it = env.find(v);
    return it == env.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = *g.nodes()[i];
    std::vector<const Tensor*> ins;
    for (const Value* v : n.inputs) {
      const Tensor* t = v ? lookup(v) : nullptr;
      STITCH_CHECK(!v || t, "{} reads '{}' before it is computed", n.describe(), v->name);
      ins.push_back(t);
    }
    auto outs = eval_node(n, ins);
    if (!outs.is_ok()) return outs.status();
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (n.outputs[k]) env[n.outputs[k]] = std::move((*outs)[k]);
    for (const Value* v : n.inputs)
      if (v && last_use[v] == i && !g.is_graph_output(v) && !v->constant) env.erase(v);
  }
  TensorMap result;
  for (const Value* v : g.outputs) {
    const Tensor* t = lookup(v);
    STITCH_CHECK(t, "graph output '{}' was never computed", v->name);
    result[v->name] = *t;
  }
  return result;
}

}  // namespace stitch
