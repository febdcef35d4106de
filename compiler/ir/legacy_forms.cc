// Upgrades nodes of opsets 1 to 10 to their opset-11 forms (legacy_forms.h). Each case follows the
// ONNX spec of the op's old version and the one in effect at opset 11.
#include "ir/legacy_forms.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <set>

namespace stitch {

namespace {

Value* add_constant(Graph& g, const Node& n, const std::string& what, Tensor t) {
  Value* v = g.add_value(g.unique_name(n.name + "/" + what));
  v->dtype = t.dtype();
  v->dims = t.dims();
  v->constant = std::move(t);
  return v;
}

void set_input(Node& n, size_t i, Value* v) {
  if (n.inputs.size() <= i) n.inputs.resize(i + 1, nullptr);
  n.inputs[i] = v;
}

Status refuse(const Node& n, const std::string& why, const std::string& what_to_do) {
  return Status::user(fmt::format("{} (opset {}): {}; {}", n.describe(), n.opset, why, what_to_do));
}

constexpr const char* kConvert =
    "convert the model to a newer opset (onnx.version_converter.convert_version(model, 17)) or re-export it";

// Opset 6 and before: with broadcast=1, B's shape matches a contiguous run of A's axes starting at
// `axis` (by default its last axes); numpy broadcasting, from opset 7, matches the last axes. B is
// given trailing 1s to line up. Without broadcast=1 the shapes are equal, which reads the same.
Status upgrade_broadcast(Graph& g, Node& n) {
  const bool broadcast = n.attr_int("broadcast", 0) != 0;
  const Dims& a = *n.input(0)->dims;
  Value* b = n.input(1);
  const auto ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b->dims->size());
  const int64_t axis_given = n.attr_int("axis", ra - rb);
  n.attrs.erase("broadcast");
  n.attrs.erase("axis");
  if (!broadcast) return Status::ok();
  if (rb > ra)
    return refuse(n,
                  fmt::format("B has shape {}, of more axes than A's {}; a legacy broadcast fits B inside A",
                              dims_to_string(*b->dims), dims_to_string(a)),
                  "correct the model");
  int64_t axis = axis_given;
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra)
    return refuse(
        n, fmt::format("axis {} places B's {} axes outside A's shape {}", axis_given, rb, dims_to_string(a)),
        "correct the model");
  for (int64_t i = 0; i < rb; ++i)
    if ((*b->dims)[i] != 1 && (*b->dims)[i] != a[axis + i])
      return refuse(n,
                    fmt::format("B's shape {} does not match A's {} from axis {}", dims_to_string(*b->dims),
                                dims_to_string(a), axis),
                    "correct the model");
  const int64_t trailing = ra - axis - rb;
  if (trailing == 0) return Status::ok();
  if (!b->constant)
    return refuse(
        n,
        fmt::format("B, computed at run time, is broadcast along A's axes from {} (a legacy broadcast "
                    "that is not numpy's)",
                    axis),
        kConvert);
  Dims d = *b->dims;
  d.insert(d.end(), trailing, 1);
  n.inputs[1] = add_constant(g, n, "B", b->constant->reshaped(d));
  return Status::ok();
}

// PRelu-6 names no broadcasting; its slope is one value or, as PyTorch's exports of opset 6 write
// it (and ONNX's tests of them expect), one per channel (X's axis 1). That slope gets trailing 1s.
Status upgrade_prelu(Graph& g, Node& n) {
  const Dims& x = *n.input(0)->dims;
  Value* slope = n.input(1);
  const Dims& s = *slope->dims;
  if (x.size() < 3 || s.size() != 1 || s[0] == 1 || s[0] != x[1]) return Status::ok();
  if (!slope->constant)
    return refuse(n, "its slope, computed at run time, holds one value per channel of X", kConvert);
  Dims d = s;
  d.insert(d.end(), x.size() - 2, 1);
  n.inputs[1] = add_constant(g, n, "slope", slope->constant->reshaped(d));
  return Status::ok();
}

// Upsample (7 to 10) and Resize-10 as Resize-11: the output coordinate divided by the scale, the
// nearest pixel at or below it (ONNX's converter from Resize-10 to 11 writes the same), and an
// empty region of interest.
Status upgrade_resize(Graph& g, Node& n) {
  const std::string mode = n.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return refuse(n, fmt::format("mode '{}' is not one of nearest and linear", mode), "correct the model");
  if (n.op_type == "Upsample" && n.opset < 7)
    return refuse(n, "Upsample before opset 7 is ONNX's experimental version", kConvert);
  Value* scales = n.input(1);
  if (n.op_type == "Upsample" && n.opset < 9) {
    const std::vector<float> s = n.attr_floats("scales");
    std::vector<double> v(s.begin(), s.end());
    scales = add_constant(g, n, "scales", Tensor::from_f64(DType::kF32, {static_cast<int64_t>(v.size())}, v));
    n.attrs.erase("scales");
  }
  if (!scales) return refuse(n, "has no scales", "correct the model");
  n.inputs = {n.input(0), add_constant(g, n, "roi", Tensor(DType::kF32, {0})), scales};
  n.op_type = "Resize";
  n.attrs["coordinate_transformation_mode"] = std::string("asymmetric");
  if (mode == "nearest") n.attrs["nearest_mode"] = std::string("floor");
  return Status::ok();
}

// Cast-1 names its type as TensorProto's enum value name ("FLOAT"); from opset 6 it is the code.
Status upgrade_cast(Node& n) {
  static const std::map<std::string, int64_t> kCodes = {
      {"FLOAT", 1},   {"UINT8", 2},   {"INT8", 3},   {"UINT16", 4}, {"INT16", 5},
      {"INT32", 6},   {"INT64", 7},   {"STRING", 8}, {"BOOL", 9},   {"FLOAT16", 10},
      {"DOUBLE", 11}, {"UINT32", 12}, {"UINT64", 13}};
  std::string name = n.attr_string("to", "");
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto it = kCodes.find(name);
  if (it == kCodes.end())
    return refuse(n,
                  fmt::format("'to' names '{}', not a type of TensorProto (FLOAT, INT64, ...)",
                              n.attr_string("to", "")),
                  "correct the model");
  n.attrs["to"] = it->second;
  return Status::ok();
}

// Split-1 takes its sizes as an attribute or as a second input; from opset 2 only the attribute.
Status upgrade_split(Node& n) {
  if (n.inputs.size() < 2 || !n.input(1)) return Status::ok();
  const Value* split = n.input(1);
  if (!split->constant) return refuse(n, "its sizes are a second input computed at run time", kConvert);
  n.attrs["split"] = split->constant->to_i64();
  n.inputs.resize(1);
  return Status::ok();
}

// Tile-1 repeats along one axis: `tiles` copies along `axis`, both one value. From opset 6 a
// vector of repeats, one per axis.
Status upgrade_tile(Graph& g, Node& n) {
  const Value *tiles = n.input(1), *axis = n.input(2);
  if (!tiles || !axis || !tiles->constant || !axis->constant || tiles->constant->size() != 1 ||
      axis->constant->size() != 1)
    return refuse(n, "its tiles and axis are not one constant value each", kConvert);
  const auto rank = static_cast<int64_t>(n.input(0)->dims->size());
  int64_t a = axis->constant->get_i64(0);
  if (a < 0) a += rank;
  if (a < 0 || a >= rank)
    return refuse(n, fmt::format("axis {} is outside the input's {} axes", axis->constant->get_i64(0), rank),
                  "correct the model");
  std::vector<int64_t> repeats(static_cast<size_t>(rank), 1);
  repeats[static_cast<size_t>(a)] = tiles->constant->get_i64(0);
  n.inputs = {n.input(0), add_constant(g, n, "repeats", Tensor::vector_i64(repeats))};
  return Status::ok();
}

}  // namespace

const OpDef* find_model_op(std::string_view domain, std::string_view op, int opset) {
  const OpDef* d = nullptr;
  if (!domain.empty() || opset >= kMinOpset) {
    d = find_op(domain, op, opset);
  } else if (opset >= kMinModelOpset) {
    if (op == "Upsample") op = "Resize";
    if (op == "Scatter") op = "ScatterElements";
    d = find_op("", op, kMinOpset);
  }
  return d && !d->internal ? d : nullptr;  // the compiler's own ops are not the model's to use
}

Status upgrade_legacy_node(Graph& g, Node& n) {
  if (!n.domain.empty() || n.opset >= kMinOpset) return Status::ok();
  static const std::set<std::string, std::less<>> kLegacyBroadcast = {
      "Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"};
  const std::string& op = n.op_type;
  if (n.opset < 6) n.attrs.erase("consumed_inputs");  // which inputs an op may overwrite in place
  if (op == "Cast" && n.opset < 6) {
    RETURN_IF_ERROR(upgrade_cast(n));
  } else if (op == "Reshape" && n.opset < 5) {
    n.inputs.resize(1);
    set_input(n, 1, add_constant(g, n, "shape", Tensor::vector_i64(n.attr_ints("shape"))));
    n.attrs.erase("shape");
  } else if (op == "Concat" && n.opset < 4) {
    if (!n.has_attr("axis")) n.attrs["axis"] = int64_t{1};  // Concat-1's default
  } else if (op == "Split" && n.opset < 2) {
    RETURN_IF_ERROR(upgrade_split(n));
  } else if (op == "Tile" && n.opset < 6) {
    RETURN_IF_ERROR(upgrade_tile(g, n));
  }
  if (op == "Pad" && n.opset < 2 && n.has_attr("paddings")) {
    n.attrs["pads"] = n.attr_ints("paddings");  // renamed at opset 2
    n.attrs.erase("paddings");
  }
  if (kLegacyBroadcast.count(op) && n.opset < 7) {
    RETURN_IF_ERROR(upgrade_broadcast(g, n));
  } else if (op == "PRelu" && n.opset < 7) {
    RETURN_IF_ERROR(upgrade_prelu(g, n));
  } else if (op == "Gemm" && n.opset < 7) {
    n.attrs.erase("broadcast");  // C broadcasts to A x B either way (unidirectionally from opset 7)
  } else if (op == "BatchNormalization" && n.opset < 9) {
    if (n.attr_int("spatial", 1) == 0)
      return refuse(n,
                    "spatial=0 (statistics per activation rather than per channel) has no form from opset 9",
                    "re-export the model with BatchNorm statistics per channel");
    if (n.opset < 7 && n.attr_int("is_test", 0) == 0)
      return refuse(n, "is_test=0 asks for training mode (batch statistics)",
                    "export the model in eval mode");
    n.attrs.erase("spatial");
    n.attrs.erase("is_test");
  } else if (op == "Dropout" && n.opset < 10) {
    if (n.opset < 7 && n.attr_int("is_test", 0) == 0)
      return refuse(n, "is_test=0 asks for training mode (random masking)", "export the model in eval mode");
    if (n.output(1))
      return refuse(n, "its mask output has the data's type before opset 10 (bool after)", kConvert);
    n.attrs.erase("is_test");
  } else if ((op == "LSTM" || op == "GRU" || op == "RNN") && n.opset < 7) {
    n.attrs.erase("output_sequence");  // whether Y is written, which its presence already says
  } else if (op == "Clip") {
    const DType t = n.input(0)->dtype;
    std::optional<float> lo, hi;
    if (n.has_attr("min")) lo = n.attr_float("min", 0);
    if (n.has_attr("max")) hi = n.attr_float("max", 0);
    n.inputs.resize(1);
    if (lo) set_input(n, 1, add_constant(g, n, "min", Tensor::from_f64(t, {}, {*lo})));
    if (hi) set_input(n, 2, add_constant(g, n, "max", Tensor::from_f64(t, {}, {*hi})));
    n.attrs.erase("min");
    n.attrs.erase("max");
  } else if (op == "Pad") {
    const DType t = n.input(0)->dtype;
    n.inputs.resize(1);
    set_input(n, 1, add_constant(g, n, "pads", Tensor::vector_i64(n.attr_ints("pads"))));
    if (n.attr_string("mode", "constant") == "constant")
      set_input(n, 2, add_constant(g, n, "value", Tensor::from_f64(t, {}, {n.attr_float("value", 0)})));
    n.attrs.erase("pads");
    n.attrs.erase("value");
  } else if (op == "Slice" && n.opset < 10) {
    n.inputs.resize(1);
    set_input(n, 1, add_constant(g, n, "starts", Tensor::vector_i64(n.attr_ints("starts"))));
    set_input(n, 2, add_constant(g, n, "ends", Tensor::vector_i64(n.attr_ints("ends"))));
    if (n.has_attr("axes"))
      set_input(n, 3, add_constant(g, n, "axes", Tensor::vector_i64(n.attr_ints("axes"))));
    n.attrs.erase("starts");
    n.attrs.erase("ends");
    n.attrs.erase("axes");
  } else if (op == "TopK" && n.opset < 10) {
    set_input(n, 1, add_constant(g, n, "k", Tensor::vector_i64({n.attr_int("k", 0)})));
    n.attrs.erase("k");
  } else if (op == "Upsample" || op == "Resize") {
    RETURN_IF_ERROR(upgrade_resize(g, n));
  } else if (op == "Scatter") {
    n.op_type = "ScatterElements";  // the same op, renamed at opset 11
  }
  n.opset = kMinOpset;
  return Status::ok();
}

}  // namespace stitch
