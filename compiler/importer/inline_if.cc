#include "importer/inline_if.h"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <set>

#include "importer/tensor_proto.h"

namespace stitch {
namespace {

// One value of a --constant-input list in the input's type: bools as 0, 1, true or false,
// integers exactly, floats as written.
StatusOr<double> parse_value(const std::string& s, DType t, const std::string& spec) {
  if (t == DType::kBool) {
    if (s == "1" || s == "true") return 1.0;
    if (s == "0" || s == "false") return 0.0;
    return Status::user(
        fmt::format("--constant-input '{}': '{}' is not a bool (use 0, 1, true or false)", spec, s));
  }
  char* end = nullptr;
  if (is_float(t)) {
    double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
    if (s.empty() || *end)
      return Status::user(fmt::format("--constant-input '{}': '{}' is not a number", spec, s));
    return v;
  }
  long long v = s.empty() ? 0 : std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end)
    return Status::user(fmt::format("--constant-input '{}': '{}' is not an integer (the input is {})", spec,
                                    s, dtype_name(t)));
  return static_cast<double>(v);
}

// Renames the values `names` maps inside a nested graph (a Loop's body, an If's branch inside a
// taken branch), where they are outer-scope references, except where the nested graph defines a
// value of the same name itself.
void rename_outer_refs(onnx::GraphProto& g, std::map<std::string, std::string> names) {
  for (const auto& i : g.input()) names.erase(i.name());
  for (const auto& i : g.initializer()) names.erase(i.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.erase(o);
  if (names.empty()) return;
  for (auto& n : *g.mutable_node()) {
    for (auto& in : *n.mutable_input())
      if (auto it = names.find(in); it != names.end()) in = it->second;
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) rename_outer_refs(*a.mutable_g(), names);
      for (auto& sub : *a.mutable_graphs()) rename_outer_refs(sub, names);
    }
  }
  for (auto& o : *g.mutable_output())
    if (auto it = names.find(o.name()); it != names.end()) o.set_name(it->second);
}

// The condition's value when it is a constant: an initializer or a Constant node's tensor.
StatusOr<std::optional<bool>> known_condition(const onnx::GraphProto& g, const std::string& cond,
                                              const std::string& base_dir, const std::string& node) {
  const onnx::TensorProto* p = nullptr;
  for (const auto& init : g.initializer())
    if (init.name() == cond) p = &init;
  for (const auto& n : g.node())
    if (n.op_type() == "Constant" && n.output_size() == 1 && n.output(0) == cond)
      for (const auto& a : n.attribute())
        if (a.name() == "value" && a.has_t()) p = &a.t();
  if (!p) return std::optional<bool>();
  ASSIGN_OR_RETURN(Tensor t,
                   tensor_from_proto(*p, base_dir, fmt::format("the condition '{}' of If '{}'", cond, node)));
  if (t.size() != 1)
    return Status::user(fmt::format("If '{}': its condition '{}' has {} elements; ONNX's If takes one", node,
                                    cond, t.size()));
  return std::optional<bool>(t.get_f64(0) != 0);
}

}  // namespace

Status fix_inputs(onnx::GraphProto& g, const std::vector<std::string>& specs,
                  std::vector<FixedInput>* fixed) {
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::user(
          fmt::format("--constant-input '{}' must look like NAME=VALUE or NAME=V1,V2,... (e.g. "
                      "use_cache_branch=1)",
                      spec));
    const std::string name = spec.substr(0, eq);
    for (const FixedInput& f : *fixed)
      if (f.name == name) return Status::user(fmt::format("--constant-input fixes '{}' twice", name));
    int at = -1;
    for (int i = 0; i < g.input_size(); ++i)
      if (g.input(i).name() == name) at = i;
    bool initializer = false;
    for (const auto& init : g.initializer()) initializer |= init.name() == name;
    if (at < 0 || initializer) {
      std::string names;
      for (const auto& i : g.input()) names += (names.empty() ? "'" : ", '") + i.name() + "'";
      return Status::user(
          fmt::format("--constant-input '{}': the model has no graph input named '{}' (its inputs: {})", spec,
                      name, names));
    }
    const auto& tt = g.input(at).type().tensor_type();
    const auto dt = dtype_from_onnx(tt.elem_type());
    if (!g.input(at).type().has_tensor_type() || !dt)
      return Status::user(
          fmt::format("--constant-input '{}': input '{}' is not a tensor of a supported type", spec, name));
    std::vector<double> values;
    for (size_t pos = eq + 1;;) {
      const size_t comma = spec.find(',', pos);
      ASSIGN_OR_RETURN(
          double v,
          parse_value(spec.substr(pos, comma == std::string::npos ? comma : comma - pos), *dt, spec));
      values.push_back(v);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    Dims dims;
    bool is_static = tt.has_shape();
    for (const auto& d : tt.shape().dim()) {
      is_static &= d.has_dim_value();
      dims.push_back(d.dim_value());
    }
    if (!is_static) {
      if (tt.has_shape() && tt.shape().dim_size() > 1)
        return Status::user(
            fmt::format("--constant-input '{}': input '{}' has rank {} with dynamic dimensions; fix "
                        "only inputs of static shape or of rank 0 or 1",
                        spec, name, tt.shape().dim_size()));
      dims =
          tt.has_shape() && tt.shape().dim_size() == 0 ? Dims{} : Dims{static_cast<int64_t>(values.size())};
    }
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    if (count != static_cast<int64_t>(values.size()))
      return Status::user(
          fmt::format("--constant-input '{}': input '{}' has shape {} ({} element(s)); {} value(s) "
                      "given",
                      spec, name, dims_to_string(dims), count, values.size()));
    Tensor t = Tensor::from_f64(*dt, dims, values);
    *g.add_initializer() = tensor_to_proto(t, name);
    g.mutable_input()->DeleteSubrange(at, 1);
    fixed->push_back({name, std::move(t)});
  }
  return Status::ok();
}

Status inline_decided_ifs(onnx::GraphProto& g, const std::string& base_dir, std::vector<std::string>* log) {
  for (int round = 0;; ++round) {
    int at = -1;
    std::optional<bool> take;
    for (int i = 0; i < g.node_size() && at < 0; ++i) {
      const auto& n = g.node(i);
      if (n.op_type() != "If" || !(n.domain().empty() || n.domain() == "ai.onnx") || n.input_size() != 1)
        continue;
      ASSIGN_OR_RETURN(take, known_condition(g, n.input(0), base_dir, n.name()));
      if (take) at = i;
    }
    if (at < 0) return Status::ok();
    const onnx::NodeProto node = g.node(at);
    const std::string branch_name = *take ? "then_branch" : "else_branch";
    const onnx::GraphProto* branch = nullptr;
    for (const auto& a : node.attribute())
      if (a.name() == branch_name && a.has_g()) branch = &a.g();
    if (!branch)
      return Status::user(
          fmt::format("If '{}' has no {} graph; the model is corrupt", node.name(), branch_name));
    if (branch->output_size() != node.output_size())
      return Status::user(fmt::format("If '{}': its {} has {} outputs, the node {}; the model is corrupt",
                                      node.name(), branch_name, branch->output_size(), node.output_size()));
    if (branch->sparse_initializer_size() > 0)
      return Status::user(fmt::format("If '{}': its {} has a sparse initializer; densify it before export",
                                      node.name(), branch_name));
    // Every name the graph defines, so that the branch's own names get a fresh prefix.
    std::set<std::string> taken;
    for (const auto& i : g.input()) taken.insert(i.name());
    for (const auto& i : g.initializer()) taken.insert(i.name());
    for (const auto& n : g.node())
      for (const auto& o : n.output()) taken.insert(o);
    const std::string shown = node.name().empty() ? fmt::format("If_{}", round) : node.name();
    const std::string prefix = shown + "/";
    std::map<std::string, std::string> names;
    auto rename = [&](const std::string& v) {
      std::string to = prefix + v;
      for (int k = 1; taken.count(to); ++k) to = fmt::format("{}{}_{}", prefix, v, k);
      taken.insert(to);
      names[v] = to;
    };
    for (const auto& i : branch->initializer()) rename(i.name());
    for (const auto& n : branch->node())
      for (const auto& o : n.output())
        if (!o.empty()) rename(o);
    std::vector<onnx::NodeProto> inlined;
    for (onnx::NodeProto n : branch->node()) {
      n.set_name(prefix + n.name());
      for (auto& in : *n.mutable_input())
        if (auto it = names.find(in); it != names.end()) in = it->second;
      for (auto& o : *n.mutable_output())
        if (auto it = names.find(o); it != names.end()) o = it->second;
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) rename_outer_refs(*a.mutable_g(), names);
        for (auto& sub : *a.mutable_graphs()) rename_outer_refs(sub, names);
      }
      inlined.push_back(std::move(n));
    }
    for (int k = 0; k < node.output_size(); ++k) {
      if (node.output(k).empty()) continue;
      onnx::NodeProto id;
      id.set_op_type("Identity");
      id.set_name(fmt::format("{}output_{}", prefix, k));
      const std::string& from = branch->output(k).name();
      auto it = names.find(from);
      id.add_input(it == names.end() ? from : it->second);
      id.add_output(node.output(k));
      inlined.push_back(std::move(id));
    }
    for (onnx::TensorProto init : branch->initializer()) {
      init.set_name(names.at(init.name()));
      *g.add_initializer() = std::move(init);
    }
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int i = 0; i < g.node_size(); ++i) {
      if (i != at) {
        *nodes.Add() = g.node(i);
        continue;
      }
      for (auto& n : inlined) *nodes.Add() = std::move(n);
    }
    g.mutable_node()->Swap(&nodes);
    log->push_back(
        fmt::format("If '{}': its condition '{}' is {} at compile time, so its {} ({} node(s)) is inlined",
                    shown, node.input(0), *take ? "true" : "false", branch_name, branch->node_size()));
  }
}

std::string undecided_if_reason(const onnx::NodeProto& n, const onnx::GraphProto& g) {
  const std::string cond = n.input_size() > 0 ? n.input(0) : "";
  for (const auto& i : g.input())
    if (i.name() == cond)
      return fmt::format(
          "its condition is the graph input '{}': compile the branch you need with --constant-input "
          "{}=1 (then_branch) or {}=0 (else_branch), an artifact per branch",
          cond, cond, cond);
  return fmt::format(
      "its condition '{}' is computed by the graph; stitch compiles an If only when its condition is a "
      "constant (an initializer, a Constant node, or an input fixed with --constant-input)",
      cond);
}

}  // namespace stitch
