#include "ir/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_set>

#include "support/check.h"

namespace stitch {

bool Value::has_static_shape() const {
  if (!dims) return false;
  return std::all_of(dims->begin(), dims->end(), [](int64_t d) { return d >= 0; });
}

std::string Value::type_string() const {
  std::string s(dtype_name(dtype));
  if (!dims) return s + "[?]";
  // "2x3" when static (the --shape syntax), "batch,4" when symbolic.
  const char* sep = has_static_shape() ? "x" : ",";
  s += '[';
  for (size_t i = 0; i < dims->size(); ++i) {
    if (i) s += sep;
    int64_t d = (*dims)[i];
    if (d >= 0) s += std::to_string(d);
    else if (i < dim_params.size() && !dim_params[i].empty()) s += dim_params[i];
    else s += '?';
  }
  return s + ']';
}

namespace {
template <typename T>
const T* get_attr(const Node& n, const std::string& k) {
  auto it = n.attrs.find(k);
  if (it == n.attrs.end()) return nullptr;
  return std::get_if<T>(&it->second);
}
}  // namespace

int64_t Node::attr_int(const std::string& k, int64_t dflt) const {
  const int64_t* v = get_attr<int64_t>(*this, k);
  return v ? *v : dflt;
}
float Node::attr_float(const std::string& k, float dflt) const {
  const float* v = get_attr<float>(*this, k);
  return v ? *v : dflt;
}
std::string Node::attr_string(const std::string& k, const std::string& dflt) const {
  const std::string* v = get_attr<std::string>(*this, k);
  return v ? *v : dflt;
}
std::vector<int64_t> Node::attr_ints(const std::string& k, std::vector<int64_t> dflt) const {
  const auto* v = get_attr<std::vector<int64_t>>(*this, k);
  return v ? *v : dflt;
}
std::vector<float> Node::attr_floats(const std::string& k, std::vector<float> dflt) const {
  const auto* v = get_attr<std::vector<float>>(*this, k);
  return v ? *v : dflt;
}
const Tensor* Node::attr_tensor(const std::string& k) const { return get_attr<Tensor>(*this, k); }

std::string Node::describe() const {
  std::string op = domain.empty() ? op_type : domain + "::" + op_type;
  return fmt::format("node '{}' ({})", name, op);
}

Value* Graph::add_value(const std::string& name) {
  STITCH_CHECK(!by_name_.count(name), "duplicate value name '{}'", name);
  auto v = std::make_unique<Value>();
  v->name = name;
  Value* raw = v.get();
  values_.push_back(std::move(v));
  by_name_[name] = raw;
  return raw;
}

std::string Graph::unique_name(const std::string& hint) {
  if (!by_name_.count(hint)) return hint;
  for (int i = 1;; ++i) {
    std::string n = fmt::format("{}_{}", hint, i);
    if (!by_name_.count(n)) return n;
  }
}

Value* Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Node* Graph::add_node(std::unique_ptr<Node> node) {
  Node* raw = node.get();
  for (Value* o : raw->outputs)
    if (o) o->producer = raw;
  nodes_.push_back(std::move(node));
  return raw;
}

std::unordered_map<const Value*, std::vector<Node*>> Graph::users() const {
  std::unordered_map<const Value*, std::vector<Node*>> u;
  for (const auto& n : nodes_) {
    for (Value* in : n->inputs) {
      if (!in) continue;
      auto& list = u[in];
      if (list.empty() || list.back() != n.get()) list.push_back(n.get());
    }
  }
  return u;
}

bool Graph::is_graph_output(const Value* v) const {
  return std::find(outputs.begin(), outputs.end(), v) != outputs.end();
}

void Graph::replace_uses(Value* from, Value* to) {
  for (auto& n : nodes_)
    for (Value*& in : n->inputs)
      if (in == from) in = to;
}

void Graph::remove_nodes(const std::vector<Node*>& dead) {
  std::unordered_set<const Node*> set(dead.begin(), dead.end());
  for (auto& n : nodes_) {
    if (!set.count(n.get())) continue;
    for (Value* o : n->outputs)
      if (o && o->producer == n.get()) o->producer = nullptr;
  }
  std::erase_if(nodes_, [&](const std::unique_ptr<Node>& n) { return set.count(n.get()) != 0; });
}

size_t Graph::remove_dead_nodes(const std::unordered_set<const Node*>* only) {
  std::unordered_map<const Value*, size_t> readers;
  for (const auto& n : nodes_)
    for (const Value* v : n->inputs)
      if (v) ++readers[v];
  std::unordered_set<const Value*> exported(outputs.begin(), outputs.end());
  const auto unread = [&](const Node* n) {
    return std::all_of(n->outputs.begin(), n->outputs.end(), [&](const Value* o) {
      return o == nullptr || (readers[o] == 0 && !exported.count(o));
    });
  };
  std::unordered_set<const Node*> dead;
  std::vector<const Node*> work;
  for (const auto& n : nodes_)
    if (only == nullptr || only->count(n.get())) work.push_back(n.get());
  while (!work.empty()) {
    const Node* n = work.back();
    work.pop_back();
    if (dead.count(n) || !unread(n)) continue;
    dead.insert(n);
    for (const Value* v : n->inputs) {
      if (v == nullptr || --readers[v] != 0 || v->producer == nullptr) continue;
      if (only == nullptr || only->count(v->producer)) work.push_back(v->producer);
    }
  }
  for (auto& n : nodes_)
    if (dead.count(n.get()))
      for (Value* o : n->outputs)
        if (o && o->producer == n.get()) o->producer = nullptr;
  std::erase_if(nodes_, [&](const std::unique_ptr<Node>& n) { return dead.count(n.get()) != 0; });
  return dead.size();
}

void Graph::remove_unused_values() {
  std::unordered_set<const Value*> live(inputs.begin(), inputs.end());
  live.insert(outputs.begin(), outputs.end());
  for (const auto& n : nodes_) {
    for (Value* v : n->inputs) live.insert(v);
    for (Value* v : n->outputs) live.insert(v);
  }
  std::erase_if(values_, [&](const std::unique_ptr<Value>& v) {
    if (live.count(v.get())) return false;
    by_name_.erase(v->name);
    return true;
  });
}

Status Graph::topo_sort() {
  // Kahn's algorithm, stable: among ready nodes keep the original order.
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i].get()] = i;
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<std::vector<size_t>> consumers(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::set<size_t> deps;
    for (Value* in : nodes_[i]->inputs)
      if (in && in->producer) deps.insert(index.at(in->producer));
    pending[i] = static_cast<int>(deps.size());
    for (size_t d : deps) consumers[d].push_back(i);
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (pending[i] == 0) ready.insert(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (size_t c : consumers[i])
      if (--pending[c] == 0) ready.insert(c);
  }
  if (order.size() != nodes_.size()) {
    std::vector<std::string> names;
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (pending[i] > 0 && names.size() < 8) names.push_back("'" + nodes_[i]->name + "'");
    return Status::user(fmt::format(
        "the graph has a cycle through {} node(s), including {}; an ONNX graph must be acyclic "
        "(re-export the model)",
        nodes_.size() - order.size(), fmt::join(names, ", ")));
  }
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back(std::move(nodes_[i]));
  nodes_ = std::move(sorted);
  return Status::ok();
}

std::unique_ptr<Graph> clone_graph(const Graph& g) {
  auto out = std::make_unique<Graph>();
  out->name = g.name;
  out->opset = g.opset;
  out->model_opset = g.model_opset;
  out->fixed_inputs = g.fixed_inputs;
  out->import_log = g.import_log;
  std::unordered_map<const Value*, Value*> map;
  for (const auto& v : g.values()) {
    Value* nv = out->add_value(v->name);
    nv->dtype = v->dtype;
    nv->dims = v->dims;
    nv->dim_params = v->dim_params;
    nv->constant = v->constant;
    map[v.get()] = nv;
  }
  auto m = [&](Value* v) -> Value* { return v ? map.at(v) : nullptr; };
  for (const auto& n : g.nodes()) {
    auto nn = std::make_unique<Node>();
    nn->name = n->name;
    nn->op_type = n->op_type;
    nn->domain = n->domain;
    nn->opset = n->opset;
    nn->attrs = n->attrs;
    nn->def = n->def;
    for (Value* v : n->inputs) nn->inputs.push_back(m(v));
    for (Value* v : n->outputs) nn->outputs.push_back(m(v));
    out->add_node(std::move(nn));
  }
  for (Value* v : g.inputs) out->inputs.push_back(m(v));
  for (Value* v : g.outputs) out->outputs.push_back(m(v));
  return out;
}

}  // namespace stitch
