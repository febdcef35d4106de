// The graph IR: a mutable graph that owns its nodes and values.
//
// Values are SSA-like: each has at most one producer (a node, or none for
// graph inputs and constants). A value may carry a compile-time constant
// (initializers, Constant nodes, folded results). Shapes are static after
// binding: before binding, graph inputs may hold -1 dims with symbolic names.
// Nodes are kept in topological order; passes that add nodes keep it so.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "ir/tensor.h"
#include "support/status.h"

namespace stitch {

struct OpDef;
struct Node;

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor>;

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;
  std::optional<Dims> dims;             // nullopt until known; -1 marks an unbound dim
  std::vector<std::string> dim_params;  // graph inputs: symbolic dim names ("" if none)
  Node* producer = nullptr;             // null for graph inputs and constants
  std::optional<Tensor> constant;       // compile-time value, if known
  // The element type the model declares for a node's output (graph outputs and value_info), or
  // kUndefined; infer_shapes checks it against the op's rule once and then clears it.
  DType declared = DType::kUndefined;

  bool has_static_shape() const;
  bool is_constant() const { return constant.has_value(); }
  std::string type_string() const;  // "f32[2x3]", "f32[batch,3]", "f32[?,3]", "f32[?]" (rank unknown)
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int opset = 0;       // version of the node's domain imported by the model
  std::vector<Value*> inputs;   // nullptr: omitted optional input
  std::vector<Value*> outputs;  // nullptr: omitted optional output
  std::map<std::string, AttrValue> attrs;
  const OpDef* def = nullptr;

  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  int64_t attr_int(const std::string& k, int64_t dflt) const;
  float attr_float(const std::string& k, float dflt) const;
  std::string attr_string(const std::string& k, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& k, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attr_floats(const std::string& k, std::vector<float> dflt = {}) const;
  const Tensor* attr_tensor(const std::string& k) const;

  Value* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs.size() ? outputs[i] : nullptr; }
  // "node 'name' (OpType)", the form every message about a node uses.
  std::string describe() const;
};

// A graph input of the model fixed to a value at compile time (stitchc compile --constant-input):
// a constant of the graph, no longer an input; kept for the artifact's manifest, so that a caller
// that feeds it anyway is checked against it.
struct FixedInput {
  std::string name;
  Tensor value;
};

class Graph {
 public:
  std::string name = "main";
  int opset = 0;        // default-domain opset of the graph's forms: the model's, or 11 for an older model
  int model_opset = 0;  // the default-domain opset the model declares (ir/legacy_forms.h)
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  std::vector<FixedInput> fixed_inputs;
  // What the importer decided at compile time (an If's branch taken, and why), one line each, for
  // `stitchc inspect` and the artifact's plan.txt.
  std::vector<std::string> import_log;

  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<std::unique_ptr<Value>>& values() const { return values_; }

  // Creates a value; the name must be unique in the graph.
  Value* add_value(const std::string& name);
  // A fresh value name derived from `hint`.
  std::string unique_name(const std::string& hint);
  Value* find_value(const std::string& name) const;
  // Appends a node (callers keep topological order or call topo_sort()).
  Node* add_node(std::unique_ptr<Node> node);

  // For every value, the nodes that read it (in node order, once per node).
  std::unordered_map<const Value*, std::vector<Node*>> users() const;
  bool is_graph_output(const Value* v) const;
  // Rewires every reader of `from`, node inputs only (not graph outputs).
  void replace_uses(Value* from, Value* to);
  // Removes the given nodes; their output values stay (callers clean up).
  void remove_nodes(const std::vector<Node*>& dead);
  // Removes every node none of whose outputs is read by another node or exported, and then
  // the nodes that only those read, until none is left: a chain read by nothing goes whole.
  // With `only`, just the nodes in it are candidates. Their output values stay (callers
  // clean up, as after remove_nodes). Returns how many nodes went.
  size_t remove_dead_nodes(const std::unordered_set<const Node*>* only = nullptr);
  // Drops values that nothing produces, reads or exports.
  void remove_unused_values();
  // Orders nodes so every input is defined before use. On a cycle returns a
  // user error naming the nodes on it.
  Status topo_sort();

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> values_;
  std::unordered_map<std::string, Value*> by_name_;
};

// Deep copy (values, nodes, constants); op defs are shared.
std::unique_ptr<Graph> clone_graph(const Graph& g);

}  // namespace stitch
