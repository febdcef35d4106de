// Helpers shared by the tests of onnxruntime's contrib ops (test_contrib_ops.cc,
// test_contrib_layers.cc): a model importing com.microsoft, attributes and initializers set by
// hand, importing it, and a plan's groups by node name.
#pragma once

#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fusion_test_util.h"
#include "importer/onnx_importer.h"
#include "onnx_model_util.h"

namespace stitch::test {

// A model of default-domain `opset` importing com.microsoft, with graph input x: f32[2,5,8] and
// the vectors g and b: f32[8]; the caller adds nodes and outputs.
inline onnx::ModelProto contrib_model(int opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* d = m.add_opset_import();
  d->set_version(opset);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("contrib");
  *g->add_input() = tensor_info("x", 1, {"2", "5", "8"});
  *g->add_input() = tensor_info("g", 1, {"8"});
  *g->add_input() = tensor_info("b", 1, {"8"});
  return m;
}

inline void set_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void set_float(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

inline void set_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// A float32 initializer of `dims`, element i of value `value(i)`.
inline void add_f32_initializer(onnx::GraphProto* g, const std::string& name,
                                const std::vector<int64_t>& dims, const std::function<float(int)>& value) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(1);
  int count = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    count *= static_cast<int>(d);
  }
  for (int i = 0; i < count; ++i) t->add_float_data(value(i));
}

inline StatusOr<std::unique_ptr<Graph>> import_model(const onnx::ModelProto& m) {
  return import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx");
}

// import_model(m), required to succeed (its message shown when it does not).
inline std::unique_ptr<Graph> import_ok(const onnx::ModelProto& m) {
  auto imported = import_model(m);
  INFO(imported.status().message());
  REQUIRE(imported.is_ok());
  return std::move(*imported);
}

inline std::multiset<std::string> ops_of(const Graph& g) {
  std::multiset<std::string> ops;
  for (const auto& n : g.nodes()) ops.insert(n->op_type);
  return ops;
}

// Each node's group in `graph`'s plan by `mode`, by node name (after the plan's own checks).
inline std::map<std::string, int> plan_groups(const Graph& graph, const char* mode) {
  auto plan = fusion::make_plan(graph, opts(mode));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  std::map<std::string, int> group_of;
  for (size_t i = 0; i < plan->groups.size(); ++i)
    for (const Node* node : plan->groups[i].nodes) group_of[node->name] = static_cast<int>(i);
  return group_of;
}

// A contrib form stitch refuses: `build` adds a node named 'attn' (and what it reads) to
// contrib_model(17); the import fails as a user error naming it, with `message`.
struct RefusalCase {
  const char* what;
  std::function<void(onnx::GraphProto*)> build;
  const char* message;
};

inline void check_refusals(const std::vector<RefusalCase>& cases) {
  for (const auto& c : cases) {
    SECTION(c.what) {
      onnx::ModelProto m = contrib_model(17);
      c.build(m.mutable_graph());
      *m.mutable_graph()->add_output() = tensor_info("y", 1, {});
      auto imported = import_model(m);
      REQUIRE(!imported.is_ok());
      CHECK(imported.status().code() == Code::kUser);
      CHECK_THAT(imported.status().message(),
                 Catch::Contains("node 'attn' (com.microsoft::") && Catch::Contains(c.message));
    }
  }
}

}  // namespace stitch::test
