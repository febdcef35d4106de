#include <fmt/format.h>

#include <cmath>

#include "ir/dim_expr.h"
#include "ir/text.h"

namespace stitch {
namespace {

bool bare_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-';
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out + "\"";
}

std::string name_ref(const Value* v) {
  if (!v) return "_";
  const std::string& n = v->name;
  bool bare = !n.empty() && std::all_of(n.begin(), n.end(), bare_char);
  return "%" + (bare ? n : quote(n));
}

std::string float_text(double v, bool is_f64) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = is_f64 ? fmt::format("{}", v) : fmt::format("{}", static_cast<float>(v));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string type_text(const Value& v) {
  std::string s(dtype_name(v.dtype));
  s += '[';
  if (!v.dims) return s + "*]";
  for (size_t i = 0; i < v.dims->size(); ++i) {
    if (i) s += ',';
    int64_t d = (*v.dims)[i];
    if (d >= 0) s += std::to_string(d);
    else if (i < v.dim_params.size() && !v.dim_params[i].empty())
      s += is_dim_symbol(v.dim_params[i]) ? v.dim_params[i] : quote(v.dim_params[i]);
    else s += '?';
  }
  return s + ']';
}

std::string tensor_values(const Tensor& t, int64_t max_elems) {
  if (max_elems >= 0 && t.size() > max_elems) return fmt::format("<{} elements>", t.size());
  std::string s = "[";
  for (int64_t i = 0; i < t.size(); ++i) {
    if (i) s += ", ";
    if (is_float(t.dtype())) s += float_text(t.get_f64(i), t.dtype() == DType::kF64);
    else if (t.dtype() == DType::kU64) s += std::to_string(static_cast<uint64_t>(t.get_i64(i)));
    else s += std::to_string(t.get_i64(i));
  }
  return s + "]";
}

std::string tensor_type(const Tensor& t) {
  return fmt::format("{}[{}]", dtype_name(t.dtype()), fmt::join(t.dims(), ","));
}

std::string attr_text(const AttrValue& a, int64_t max_elems) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) return std::to_string(v);
        else if constexpr (std::is_same_v<T, float>) return float_text(v, false);
        else if constexpr (std::is_same_v<T, std::string>) return quote(v);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return fmt::format("ints[{}]", fmt::join(v, ", "));
        else if constexpr (std::is_same_v<T, std::vector<float>>) {
          std::vector<std::string> parts;
          for (float f : v) parts.push_back(float_text(f, false));
          return fmt::format("floats[{}]", fmt::join(parts, ", "));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::vector<std::string> parts;
          for (const auto& s : v) parts.push_back(quote(s));
          return fmt::format("strings[{}]", fmt::join(parts, ", "));
        } else {
          return fmt::format("tensor<{}>{}", tensor_type(v), tensor_values(v, max_elems));
        }
      },
      a);
}

}  // namespace

std::string print_graph(const Graph& g, const PrintOptions& opts) {
  std::string out = fmt::format("graph {} opset {} {{\n", quote(g.name), g.opset);
  for (const Value* v : g.inputs) out += fmt::format("  input {}: {}\n", name_ref(v), type_text(*v));
  for (const auto& v : g.values()) {
    if (!v->constant || v->producer) continue;
    out += fmt::format("  const {}: {} = {}\n", name_ref(v.get()), tensor_type(*v->constant),
                       tensor_values(*v->constant, opts.max_constant_elements));
  }
  for (const auto& n : g.nodes()) {
    std::vector<std::string> outs, ins;
    for (const Value* v : n->outputs) {
      if (v && v->dtype != DType::kUndefined) outs.push_back(name_ref(v) + ": " + type_text(*v));
      else outs.push_back(name_ref(v));
    }
    for (const Value* v : n->inputs) ins.push_back(name_ref(v));
    std::string op = n->domain.empty() ? n->op_type : n->domain + "::" + n->op_type;
    out += fmt::format("  {} = {}({})", fmt::join(outs, ", "), op, fmt::join(ins, ", "));
    if (!n->attrs.empty()) {
      std::vector<std::string> as;
      for (const auto& [k, a] : n->attrs) as.push_back(k + " = " + attr_text(a, opts.max_constant_elements));
      out += fmt::format(" {{{}}}", fmt::join(as, ", "));
    }
    // A node of another opset than the graph's: an older model's before infer_shapes upgrades it,
    // or one the importer wrote for an onnxruntime contrib op.
    if (n->opset != g.opset) out += fmt::format(" opset {}", n->opset);
    out += " @" + quote(n->name) + "\n";
  }
  for (const Value* v : g.outputs) out += fmt::format("  output {}\n", name_ref(v));
  return out + "}\n";
}

}  // namespace stitch
