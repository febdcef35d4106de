#include "importer/op_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace stitch {

namespace {

constexpr int kMany = std::numeric_limits<int>::max();

const std::vector<OpSchema>& schemas() {
  static const std::vector<OpSchema> table = {
#include "importer/onnx_schemas.inc"
  };
  return table;
}

AttrKind kind_of(const AttrValue& v) {
  switch (v.index()) {
    case 0:
      return AttrKind::kInt;
    case 1:
      return AttrKind::kFloat;
    case 2:
      return AttrKind::kString;
    case 3:
      return AttrKind::kInts;
    case 4:
      return AttrKind::kFloats;
    case 5:
      return AttrKind::kStrings;
    default:
      return AttrKind::kTensor;
  }
}

std::string_view kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::kInt:
      return "an int";
    case AttrKind::kFloat:
      return "a float";
    case AttrKind::kString:
      return "a string";
    case AttrKind::kInts:
      return "a list of ints";
    case AttrKind::kFloats:
      return "a list of floats";
    case AttrKind::kStrings:
      return "a list of strings";
    case AttrKind::kTensor:
      return "a tensor";
    case AttrKind::kGraph:
      return "a graph";
    case AttrKind::kGraphs:
      return "a list of graphs";
    case AttrKind::kOther:
      return "a sparse tensor or type";
  }
  return "?";
}

std::string count_range(int lo, int hi) {
  if (lo == hi) return std::to_string(lo);
  if (hi == kMany) return fmt::format("{} or more", lo);
  return fmt::format("{} to {}", lo, hi);
}

// Int attributes that ONNX defines as flags, 0 or 1, in every op that has them (keepdims, Gemm's
// transA, Reshape's allowzero, TopK's largest...). The schemas say only "int"; a model holding 2
// or -1 is malformed, and reading it as true would be a guess.
bool is_flag(std::string_view name) {
  static const std::vector<std::string_view> flags = {"align_corners",
                                                      "allowzero",
                                                      "broadcast",
                                                      "ceil_mode",
                                                      "count_include_pad",
                                                      "detect_negative",
                                                      "detect_positive",
                                                      "exclusive",
                                                      "fmod",
                                                      "input_forget",
                                                      "interleaved",
                                                      "inverse",
                                                      "is_causal",
                                                      "is_test",
                                                      "keepdims",
                                                      "largest",
                                                      "layout",
                                                      "linear_before_reset",
                                                      "noop_with_empty_axes",
                                                      "onesided",
                                                      "periodic",
                                                      "reverse",
                                                      "saturate",
                                                      "select_last_index",
                                                      "sorted",
                                                      "spatial",
                                                      "storage_order",
                                                      "training_mode",
                                                      "transA",
                                                      "transB",
                                                      "upper"};
  return std::find(flags.begin(), flags.end(), name) != flags.end();
}

// The newest version of `op` older than `since` that has attribute `name`; null if none.
const OpSchema* last_version_with(std::string_view op, const std::string& name, int since) {
  const OpSchema* best = nullptr;
  for (const OpSchema& s : schemas()) {
    if (s.op != op || s.since >= since || (best && s.since < best->since)) continue;
    for (const AttrSpec& a : s.attrs)
      if (a.name == name) best = &s;
  }
  return best;
}

}  // namespace

const OpSchema* find_schema(std::string_view op, int opset) {
  const OpSchema* best = nullptr;
  for (const OpSchema& s : schemas())
    if (s.op == op && s.since <= opset && (!best || s.since > best->since)) best = &s;
  return best;
}

Status check_node_schema(const Node& n, size_t num_inputs, size_t num_outputs) {
  if (!n.domain.empty()) return Status::ok();
  const OpSchema* s = find_schema(n.op_type, n.opset);
  if (!s) {
    // An op the table knows only from a later opset than the model's (Where at opset 7, say).
    const OpSchema* later = nullptr;
    for (const OpSchema& x : schemas())
      if (x.op == n.op_type && (!later || x.since < later->since)) later = &x;
    if (later)
      return Status::user(
          fmt::format("{}: {} was added to ONNX at opset {}, and the model declares opset {}; "
                      "declare the opset the model was written for",
                      n.describe(), n.op_type, later->since, n.opset));
    return Status::ok();
  }
  const std::string version =
      fmt::format("{} (version {}, in effect at opset {})", n.op_type, s->since, n.opset);
  for (const auto& [name, value] : n.attrs) {
    auto it =
        std::find_if(s->attrs.begin(), s->attrs.end(), [&](const AttrSpec& a) { return a.name == name; });
    if (it == s->attrs.end()) {
      if (const OpSchema* before = last_version_with(n.op_type, name, s->since))
        return Status::user(fmt::format(
            "{}: '{}' is an attribute of {} only up to version {}, and the model's opset {} takes "
            "version {}; write the model for that version (onnx.version_converter converts one) or "
            "re-export it",
            n.describe(), name, n.op_type, before->since, n.opset, s->since));
      std::vector<std::string_view> known;
      for (const AttrSpec& a : s->attrs) known.push_back(a.name);
      return Status::user(fmt::format(
          "{}: '{}' is not an attribute of {}, which takes {}; remove it or correct its name", n.describe(),
          name, version, known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))));
    }
    if (kind_of(value) != it->kind)
      return Status::user(fmt::format("{}: attribute '{}' is {}, but {} takes {}; write it as {}",
                                      n.describe(), name, kind_name(kind_of(value)), version,
                                      kind_name(it->kind), kind_name(it->kind)));
    if (const int64_t* v = std::get_if<int64_t>(&value); v && *v != 0 && *v != 1 && is_flag(name))
      return Status::user(
          fmt::format("{}: attribute '{}' is {}, but {} defines it as a flag, 0 or 1; write 0 "
                      "or 1",
                      n.describe(), name, *v, version));
  }
  for (const AttrSpec& a : s->attrs)
    if (a.required && !n.attrs.count(std::string(a.name)))
      return Status::user(fmt::format("{}: the attribute '{}' ({}) is required by {} and missing",
                                      n.describe(), a.name, kind_name(a.kind), version));
  const auto inputs = static_cast<int64_t>(num_inputs);
  if (inputs < s->min_inputs || inputs > s->max_inputs)
    return Status::user(fmt::format("{} has {} input(s) (omitted optional ones counted), but {} takes {}",
                                    n.describe(), num_inputs, version,
                                    count_range(s->min_inputs, s->max_inputs)));
  const auto outputs = static_cast<int64_t>(num_outputs);
  if (outputs < s->min_outputs || outputs > s->max_outputs)
    return Status::user(fmt::format("{} has {} output(s), but {} gives {}", n.describe(), num_outputs,
                                    version, count_range(s->min_outputs, s->max_outputs)));
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i]) continue;
    const char formal =
        s->formal_inputs.empty() ? 'r' : s->formal_inputs[std::min(i, s->formal_inputs.size() - 1)];
    if (formal != 'o')
      return Status::user(fmt::format("{}: input {} is empty, but {} requires it", n.describe(), i, version));
  }
  return Status::ok();
}

}  // namespace stitch
