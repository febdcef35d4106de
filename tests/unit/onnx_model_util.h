// Helpers for unit tests that build ONNX models as protobufs (the importer's tests).
#pragma once

#include <onnx/onnx_pb.h>

#include <cctype>
#include <string>
#include <vector>

namespace stitch::test {

// A tensor's value info: `elem` an onnx::TensorProto element type, each dim a number or a name.
inline onnx::ValueInfoProto tensor_info(const std::string& name, int elem, std::vector<std::string> dims) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
  return v;
}

inline onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                                 std::vector<std::string> out, const std::string& name = "",
                                 const std::string& domain = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  n->set_domain(domain);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

}  // namespace stitch::test
