// Every tensor type the ONNX spec allows the ops stitch supports (op_types.inc, generated from the
// spec's schemas by scripts/gen_op_types.py), of those stitch has: one node per type of the op's first
// input, and one per pair of a first input's type and a type of another of its type constraints,
// through the front end and the back end's check, planned by beam search and run on emu against the
// reference interpreter running the op as written. An op that refused a type the spec allows, or a
// kernel that computed one differently, fails here naming the op and the types.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "codegen/emu_build.h"
#include "codegen/lower.h"
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

struct OpTypes {
  const char* op;
  const char* category;
  int since;
  std::vector<std::string> types;
  const char* other_types;
  // The op's other type constraints (Pow's exponent, an index input, Cast's target...), each with
  // the types stitch has.
  std::vector<std::pair<std::string, std::vector<std::string>>> constraints;
};

const std::vector<OpTypes> kOpTypes = {
#include "op_types.inc"
};

bool is_float_name(const std::string& t) { return t == "f32" || t == "f16" || t == "bf16" || t == "f64"; }
bool is_unsigned_name(const std::string& t) { return t[0] == 'u'; }
int size_of(const std::string& t) { return dtype_size(*dtype_from_name(t)); }

// One node to build: its first input's type `t` (Where's second) and, when `param` is set, the type
// `u` of another of its type constraints; the others take the test's usual types.
struct Variant {
  std::string t, param, u;
  // Suffix of the node's names.
  std::string tag() const { return param.empty() ? t : t + "_" + param + "_" + u; }
  // How messages and the list of refusals name it.
  std::string label() const { return param.empty() ? t : t + " with " + param + " " + u; }
  // `u` if this variant sets constraint `name`, else `usual`.
  std::string of(const std::string& name, const std::string& usual) const {
    return param == name ? u : usual;
  }
};

// Rules of the spec that its type constraints do not state: BitCast keeps the size, and Attention's
// mask is bool or the query's type ("a float mask of the same type as query, key, value").
bool spec_allows(const OpTypes& e, const Variant& v) {
  if (std::string_view(e.op) == "BitCast" && v.param == "T2") return size_of(v.t) == size_of(v.u);
  if (std::string_view(e.op) == "Attention" && v.param == "U") return v.u == "bool" || v.u == v.t;
  return true;
}

// Why stitch refuses graph `text`: the front end's message, or the back end's for the first node it
// cannot compile; "" when it takes it.
std::string refusal(const std::string& text) {
  if (std::string error = frontend_error(text); !error.empty()) return error;
  auto g = parse_or_die(text);
  run_frontend_or_die(*g);
  for (const auto& n : g->nodes()) {
    std::string why;
    if (codegen::classify_node(*n, &why) == codegen::NodeLowering::kUnsupported)
      return fmt::format("{}: {}", n->describe(), why);
  }
  return "";
}

// Constant values of type `t` for a divisor, a shift or an exponent: no zero, negative ones only
// where the type has them.
std::string nonzero_values(const std::string& t) {
  return is_unsigned_name(t) ? "[3, 7, 1, 100, 2]" : "[3, -7, 1, 100, -2]";
}

// Two values of type `t` for OneHot's off and on: negative where the type has them.
std::string onehot_values(const std::string& t) {
  if (t == "bool") return "[0, 1]";
  return is_unsigned_name(t) ? "[1, 3]" : "[-1, 3]";
}

// A type of the same size as `t` for BitCast.
std::string same_size(const std::string& t) {
  static const std::map<std::string, std::string> pair = {
      {"f32", "i32"}, {"i32", "f32"},  {"u32", "i32"}, {"f16", "u16"}, {"bf16", "f16"},
      {"u16", "i16"}, {"i16", "bf16"}, {"f64", "i64"}, {"i64", "u64"}, {"u64", "f64"},
      {"i8", "u8"},   {"u8", "i8"},    {"bool", "u8"}};
  return pair.at(t);
}

int onnx_code(const std::string& t) { return dtype_to_onnx(*dtype_from_name(t)); }

// The IR text of one node of `op` for variant `v` (inputs, constants, the node, its outputs), names
// suffixed with the variant's tag. Inputs of the varied type are 3 x 5 unless the op needs more axes.
std::string node_text(const OpTypes& e, const Variant& v) {
  const std::string op = e.op, t = v.t, tag = v.tag();
  const std::string x = "%x_" + tag, y = "%y_" + tag, node = fmt::format("@\"{}_{}\"", op, tag);
  auto input = [&](const std::string& name, const std::string& type, const std::string& dims) {
    return fmt::format("  input %{}_{}: {}[{}]\n", name, tag, type, dims);
  };
  auto constant = [&](const std::string& name, const std::string& type, const std::string& dims,
                      const std::string& values) {
    return fmt::format("  const %{}_{}: {}[{}] = {}\n", name, tag, type, dims, values);
  };
  // x of `dims`, then `rest` (other inputs and constants), the node reading x and then `args`.
  auto with = [&](const std::string& dims, const std::string& rest, const std::string& args,
                  const std::string& attrs) {
    return input("x", t, dims) + rest +
           fmt::format("  {} = {}({}{}){} {}\n  output {}\n", y, op, x, args, attrs, node, y);
  };
  // Further inputs named `names` (each as %name_tag), after x.
  auto args = [&](std::initializer_list<const char*> names) {
    std::string text;
    for (const char* name : names) text += fmt::format(", %{}_{}", name, tag);
    return text;
  };
  const std::string b = "%b_" + tag;
  auto unary = [&](const std::string& attrs) { return with("3,5", "", "", attrs); };
  auto binary = [&](const std::string& b_text, const std::string& attrs) {
    return with("3,5", b_text, ", " + b, attrs);
  };
  // A normalization of x over `channels`, with the inputs named in `inputs` of their constraint's
  // type (scale and bias T1, mean and var T2, RMSNormalization's scale V; else x's type).
  auto normalization = [&](const std::string& dims, const std::string& channels, const std::string& inputs,
                           const std::string& attrs) {
    std::string text = input("x", t, dims);
    std::string names = x;
    for (const char* name : {"scale", "bias", "mean", "var"}) {
      if (inputs.find(name) == std::string::npos) continue;
      const std::string n = name;
      const std::string type =
          op == "RMSNormalization" ? v.of("V", t) : v.of(n == "scale" || n == "bias" ? "T1" : "T2", t);
      text += n == "var" ? constant(n, type, channels, "[1, 0.5, 2]") : input(n, type, channels);
      names += fmt::format(", %{}_{}", n, tag);
    }
    return text + fmt::format("  {} = {}({}){} {}\n  output {}\n", y, op, names, attrs, node, y);
  };
  if (op == "BitCast") return unary(fmt::format(" {{to = {}}}", onnx_code(v.of("T2", same_size(t)))));
  if (op == "Cast") return unary(fmt::format(" {{to = {}}}", onnx_code(v.of("T2", "f32"))));
  if (op == "CastLike") return binary(constant("b", v.of("T2", "f32"), "1", "[0]"), "");
  if (op == "Clip")
    return input("x", t, "3,5") + constant("lo", t, "", "[1]") + constant("hi", t, "", "[90]") +
           fmt::format("  {0} = Clip({1}, %lo_{2}, %hi_{2}) {3}\n  output {0}\n", y, x, tag, node);
  if (op == "CumSum" || op == "CumProd") return binary(constant("b", v.of("T2", "i64"), "", "[1]"), "");
  if (op == "DequantizeLinear")
    return binary(constant("b", v.of("T2", "f32"), "", "[0.25]"),
                  v.param == "T3" ? fmt::format(" {{output_dtype = {}}}", onnx_code(v.u)) : "");
  if (op == "QuantizeLinear") {
    const std::string scale = v.of("T2", t == "i32" ? "f32" : t);
    const std::string text = constant("b", scale, "", scale == "i32" ? "[2]" : "[0.5]");
    if (v.param != "T3") return binary(text, "");
    return with("3,5", text + constant("z", v.u, "", "[3]"), ", " + b + args({"z"}), "");
  }
  if (op == "Dropout" && v.param == "T1")
    return with("3,5", constant("r", v.u, "", "[0.5]"), args({"r"}), "");
  if (op == "DynamicQuantizeLinear")
    return input("x", t, "3,5") +
           fmt::format(
               "  {0}, %s_{1}, %z_{1} = DynamicQuantizeLinear({2}) {3}\n  output {0}\n  output %s_{1}\n"
               "  output %z_{1}\n",
               y, tag, x, node);
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return with("2,3,4,5", "", "", "");
  if (op == "GroupNormalization") return normalization("2,4,3", "4", "scale bias", " {num_groups = 2}");
  if (op == "InstanceNormalization") return normalization("2,3,5", "3", "scale bias", "");
  if (op == "LayerNormalization" && v.param == "U")
    return input("x", t, "3,5") + input("scale", t, "5") + input("bias", t, "5") +
           fmt::format(
               "  {0}, %m_{1}, %r_{1} = LayerNormalization({2}, %scale_{1}, %bias_{1}) {{stash_type = {3}}} "
               "{4}\n"
               "  output {0}\n  output %m_{1}\n  output %r_{1}\n",
               y, tag, x, onnx_code(v.u), node);
  if (op == "LayerNormalization") return normalization("3,5", "5", "scale bias", "");
  if (op == "RMSNormalization") return normalization("3,5", "5", "scale", "");
  if (op == "BatchNormalization") return normalization("2,3,4", "3", "scale bias mean var", "");
  if (op == "MeanVarianceNormalization") return with("2,3,2,5", "", "", "");
  if (op == "NegativeLogLikelihoodLoss" || op == "SoftmaxCrossEntropyLoss")
    return binary(constant("b", v.of("Tind", "i64"), "3", "[0, 4, 2]"), "");
  if (op == "TopK")
    return input("x", t, "3,5") + constant("k", "i64", "1", "[2]") +
           fmt::format("  {0}, %i_{1} = TopK({2}, %k_{1}) {3}\n  output {0}\n  output %i_{1}\n", y, tag, x,
                       node);
  if (op == "ArgMax" || op == "ArgMin") return unary(" {axis = 1}");
  if (op == "Where")
    return input("c", "bool", "3,5") + input("x", t, "3,5") + input("b", t, "5") +
           fmt::format("  {0} = Where(%c_{1}, {2}, %b_{1}) {3}\n  output {0}\n", y, tag, x, node);
  if (op == "Div" && !is_float_name(t)) return binary(constant("b", t, "5", nonzero_values(t)), "");
  if (op == "Mod")
    return binary(constant("b", t, "5", nonzero_values(t)), is_float_name(t) ? " {fmod = 1}" : "");
  if (op == "BitShift")
    return binary(constant("b", t, "5", "[0, 1, 3, 7, 2]"), " {direction = \"RIGHT\"}") +
           fmt::format(
               "  %l_{0} = BitShift({1}, %b_{0}) {{direction = \"LEFT\"}} @\"BitShift_left_{0}\"\n"
               "  output %l_{0}\n",
               tag, x);
  if (op == "Pow") return binary(constant("b", v.of("T1", t), "5", "[2, 3, 0, 1, 2]"), "");
  if (op.rfind("Reduce", 0) == 0) return binary(constant("b", "i64", "1", "[1]"), "");
  // GEMMs, convolutions and pools (library calls or tiled loops).
  if (op == "MatMul") return with("3,4", input("b", t, "4,5"), ", " + b, "");
  if (op == "Gemm") return with("3,4", input("b", t, "4,5") + input("c", t, "5"), args({"b", "c"}), "");
  if (op == "Einsum") return with("3,4", input("b", t, "4,5"), ", " + b, " {equation = \"ij,jk->ik\"}");
  if (op == "Conv")
    return with("1,2,5,5", input("w", t, "3,2,3,3") + input("c", t, "3"), args({"w", "c"}), "");
  if (op == "ConvTranspose")
    return with("1,2,4,4", input("w", t, "2,3,3,3") + input("c", t, "3"), args({"w", "c"}), "");
  if (op == "AveragePool" || op == "MaxPool") return with("1,2,5,5", "", "", " {kernel_shape = ints[2, 2]}");
  if (op == "MatMulInteger") return with("3,4", input("b", v.of("T2", t), "4,5"), ", " + b, "");
  if (op == "ConvInteger") return with("1,2,5,5", input("w", v.of("T2", t), "3,2,3,3"), args({"w"}), "");
  if (op == "QLinearMatMul" || op == "QLinearConv") {
    const std::string scale = v.of("TS", "f32"), w = v.of("T2", t), q = v.of("T3", t);
    const bool conv = op == "QLinearConv";
    return with(conv ? "1,2,5,5" : "3,4",
                constant("as", scale, "", "[0.5]") + constant("az", t, "", "[1]") +
                    input("w", w, conv ? "3,2,3,3" : "4,5") + constant("ws", scale, "", "[0.25]") +
                    constant("wz", w, "", "[2]") + constant("ys", scale, "", "[2]") +
                    constant("yz", q, "", "[3]"),
                args({"as", "az", "w", "ws", "wz", "ys", "yz"}), "");
  }
  if (op == "DFT") {
    if (v.param != "T2") return with("1,8,1", "", "", "");
    return with("1,8,1", constant("l", v.u, "", "[8]"), args({"l"}), "");
  }
  if (op == "STFT")
    return with("1,16,1", constant("s", v.of("T2", "i64"), "", "[4]") + input("w", t, "8"), args({"s", "w"}),
                "");
  // Ops whose outputs' shapes come from constants: their values are what stitch computes.
  auto constant_node = [&](const std::string& inputs, const std::string& names, const std::string& attrs) {
    return inputs + fmt::format("  {} = {}({}){} {}\n  output {}\n", y, op, names, attrs, node, y);
  };
  if (op == "HannWindow" || op == "HammingWindow" || op == "BlackmanWindow")
    return constant_node(constant("x", t, "", "[8]"), x,
                         fmt::format(" {{output_datatype = {}}}", onnx_code(v.of("T2", "f32"))));
  if (op == "MelWeightMatrix")
    return constant_node(constant("n", t, "", "[4]") + constant("d", t, "", "[16]") +
                             constant("r", t, "", "[8000]") + constant("lo", v.of("T2", "f32"), "", "[0]") +
                             constant("hi", v.of("T2", "f32"), "", "[4000]"),
                         fmt::format("%n_{0}, %d_{0}, %r_{0}, %lo_{0}, %hi_{0}", tag),
                         fmt::format(" {{output_datatype = {}}}", onnx_code(v.of("T3", "f32"))));
  if (op == "ConstantOfShape")
    return constant_node(constant("x", "i64", "2", "[3, 5]"), x,
                         v.param == "T2" ? fmt::format(" {{value = tensor<{}[1]>[1]}}", v.u) : "");
  if (op == "EyeLike")
    return with("3,5", "", "", v.param == "T2" ? fmt::format(" {{dtype = {}}}", onnx_code(v.u)) : "");
  if (op == "NonZero") return constant_node(constant("x", t, "2,3", "[0, 1, 0, 1, 1, 0]"), x, "");
  if (op == "Range")
    return constant_node(
        constant("a", t, "", "[1]") + constant("l", t, "", "[9]") + constant("d", t, "", "[2]"),
        fmt::format("%a_{0}, %l_{0}, %d_{0}", tag), "");
  // Ops stitch writes out into others.
  if (op == "Attention") {
    const std::string mask = v.param == "U" ? constant("m", v.u, "4,6",
                                                       v.u == "bool" ? "[1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, "
                                                                       "1, 1, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1]"
                                                                     : "[0, 2, 0, 1, 0, 0, 3, 0, 0, 1, 0, 0, "
                                                                       "0, 0, 1, 0, 2, 0, 1, 0, 0, 0, 0, 1]")
                                            : "";
    return with("1,2,4,8", input("k", t, "1,2,6,8") + input("v", v.of("T2", t), "1,2,6,8") + mask,
                v.param == "U" ? args({"k", "v", "m"}) : args({"k", "v"}), "");
  }
  if (op == "GRU" || op == "LSTM" || op == "RNN") {
    const std::string gates = op == "GRU" ? "9" : op == "LSTM" ? "12" : "3";
    return with("2,1,3", input("w", t, "1," + gates + ",3") + input("r", t, "1," + gates + ",3"),
                args({"w", "r"}), " {hidden_size = 3}");
  }
  if (op == "RotaryEmbedding")
    return with("1,4,16", input("c", t, "1,4,4") + input("s", t, "1,4,4"), args({"c", "s"}),
                " {num_heads = 2}");
  if (op == "SwiGLU") return with("3,5", input("b", t, "3,5"), ", " + b, "");
  if (op == "TensorScatter")
    return with("1,2,6,4", input("u", t, "1,2,1,4") + constant("w", "i64", "1", "[2]"), args({"u", "w"}), "");
  // Layout ops: constant indices, shapes and axes, so that every index lies inside its axis.
  if (op == "Compress")
    return with("3,5", constant("b", "bool", "5", "[1, 0, 1, 1, 0]"), ", " + b, " {axis = 1}");
  if (op == "Concat") return with("3,5", input("b", t, "3,2"), ", " + b, " {axis = 1}");
  if (op == "DepthToSpace") return with("1,8,2,3", "", "", " {blocksize = 2, mode = \"CRD\"}");
  if (op == "SpaceToDepth") return with("1,2,4,6", "", "", " {blocksize = 2}");
  if (op == "Expand") return with("3,1", constant("b", "i64", "2", "[3, 5]"), ", " + b, "");
  if (op == "Flatten") return with("2,3,4", "", "", " {axis = 2}");
  const std::string index = v.of("Tind", "i64");
  if (op == "Gather") return with("5,4", constant("b", index, "3", "[4, -1, 0]"), ", " + b, " {axis = 0}");
  if (op == "GatherElements")
    return with("3,5", constant("b", index, "3,2", "[4, 0, -1, 2, 3, 3]"), ", " + b, " {axis = 1}");
  if (op == "GatherND") return with("3,5", constant("b", "i64", "2,2", "[0, 1, 2, -1]"), ", " + b, "");
  if (op == "OneHot") {
    const std::string values = v.of("T3", "f32");
    return with(
        "4", constant("d", v.of("T2", "i64"), "", "[5]") + constant("v", values, "2", onehot_values(values)),
        args({"d", "v"}), "");
  }
  if (op == "Pad") {
    const std::string pads = constant("p", "i64", "4", "[1, 0, 0, 2]") + constant("v", t, "", "[1]");
    if (v.param != "Tind") return with("3,5", pads, args({"p", "v"}), "");
    return with("3,5", pads + constant("a", v.u, "2", "[0, -1]"), args({"p", "v", "a"}), "");
  }
  if (op == "Reshape") return with("3,5", constant("b", "i64", "2", "[5, 3]"), ", " + b, "");
  if (op == "ReverseSequence")
    return with("4,3", constant("b", "i64", "3", "[4, 1, 2]"), ", " + b, " {time_axis = 0, batch_axis = 1}");
  if (op == "ScatterElements")
    return with("3,5", constant("i", index, "2,2", "[4, 0, -1, 2]") + input("u", t, "2,2"), args({"i", "u"}),
                " {axis = 1}");
  if (op == "ScatterND")
    return with("3,5", constant("i", "i64", "2,1", "[0, 2]") + input("u", t, "2,5"), args({"i", "u"}), "");
  if (op == "Slice")
    return with("3,5",
                constant("s", index, "1", "[1]") + constant("e", index, "1", "[5]") +
                    constant("a", index, "1", "[-1]") + constant("p", index, "1", "[2]"),
                args({"s", "e", "a", "p"}), "");
  if (op == "Split")
    return input("x", t, "3,6") + constant("b", "i64", "2", "[2, 4]") +
           fmt::format("  {0}, %z_{1} = Split({2}, %b_{1}) {{axis = 1}} {3}\n  output {0}\n  output %z_{1}\n",
                       y, tag, x, node);
  if (op == "Squeeze") return with("3,1,5", constant("b", "i64", "1", "[1]"), ", " + b, "");
  if (op == "Unsqueeze") return with("3,5", constant("b", "i64", "1", "[1]"), ", " + b, "");
  if (op == "Tile") return with("3,5", constant("b", "i64", "2", "[2, 1]"), ", " + b, "");
  if (op == "Transpose") return with("3,5", "", "", " {perm = ints[1, 0]}");
  if (std::string_view(e.category) == "broadcast") return binary(input("b", t, "5"), "");
  return unary("");  // element-wise ops, row ops along the last axis (Softmax, Trilu, ...), Identity, Dropout
}

// The tolerance for an output of type `t`: float16 and bfloat16 outputs may differ by a half step of
// the terms they sum (the reference rounds every op's result to the half type, a kernel a float32 one).
Tolerance tolerance_for(DType t) {
  if (t == DType::kF16) return kEmuF16Sums;
  if (t == DType::kBF16) return kEmuBF16Sums;
  return kEmuF32;
}

// Types the spec allows that stitch refuses, keyed by op and variant label ("i32", or "f32 with T2 i32"
// for a pair), each with the front end's or the back end's message: one stitch comes to accept fails
// the test until it is taken off this list, and a refusal not on it fails. None at present: the last,
// integer MatMul, Gemm and Einsum, became products and their sums (expand_integer_matmuls).
const std::map<std::pair<std::string, std::string>, std::string> kRefused;

// The nodes of one op to run in one graph.
struct Batch {
  const OpTypes* op;
  std::vector<Variant> variants;
};

// One batch's graph, as written and through the front end, with its schedule (kernels renamed apart
// from the other batches') and seeded inputs.
struct BatchRun {
  std::unique_ptr<Graph> original, graph;
  codegen::Schedule schedule;
  TensorMap feed;
};

// Puts each variant alone through the front end and the back end's check of its nodes (so that one
// refusal does not hide another), then each batch's accepted variants as one graph planned by beam
// search; all the batches' kernels go into one emulation library (the host compiler's fixed cost
// once), and each batch runs on emu against the reference running its graph as written. Returns
// the number of nodes run.
size_t check_batches(const std::vector<Batch>& batches, const std::string& scratch_name) {
  uint32_t seed = 1;
  size_t nodes = 0, refused = 0;
  std::vector<BatchRun> runs;
  for (const Batch& batch : batches) {
    const OpTypes& e = *batch.op;
    std::vector<const Variant*> accepted;
    for (const Variant& v : batch.variants) {
      const std::string one = fmt::format("graph \"{}\" opset 28 {{\n{}}}\n", e.op, node_text(e, v));
      INFO(e.op << " of " << v.label() << ":\n" << one);
      const std::string error = refusal(one);
      const auto known = kRefused.find({e.op, v.label()});
      if (known == kRefused.end()) {
        CHECK(error == "");
        if (error.empty()) accepted.push_back(&v);
      } else {
        CHECK(error == known->second);
        ++refused;
      }
    }
    if (accepted.empty()) continue;
    std::string text = fmt::format("graph \"{}\" opset 28 {{\n", e.op);
    for (const Variant* v : accepted) text += node_text(e, *v);
    text += "}\n";
    INFO(text);
    BatchRun r{parse_or_die(text), parse_or_die(text), {}, {}};
    run_frontend_or_die(*r.graph);
    auto plan = fusion::make_plan(*r.graph, opts("beam"));
    INFO(plan.status().message());
    REQUIRE(plan.is_ok());
    const auto groups = groups_of(*plan);
    const auto packs = packs_of(*plan);
    auto s = codegen::build_schedule(*r.graph, &groups, &packs, plan->gemm_folds);
    INFO(s.status().message());
    REQUIRE(s.is_ok());
    r.schedule = std::move(*s);
    codegen::prefix_kernel_names(r.schedule.kernels, fmt::format("op{:03d}_", runs.size()));
    for (const Value* v : r.graph->inputs) r.feed[v->name] = random_tensor(v->dtype, *v->dims, seed++);
    runs.push_back(std::move(r));
    nodes += accepted.size();
  }
  // Every listed refusal of this sweep was met: the pairs' labels name a constraint ("f32 with T2 i32").
  const bool pairs =
      !batches.empty() && !batches.front().variants.empty() && !batches.front().variants[0].param.empty();
  CHECK(refused == static_cast<size_t>(std::count_if(kRefused.begin(), kRefused.end(), [&](const auto& k) {
          return (k.first.second.find(" with ") != std::string::npos) == pairs;
        })));

  namespace fs = std::filesystem;
  const fs::path scratch = fs::temp_directory_path() / (scratch_name + "_" + std::to_string(getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch / "lib");
  std::vector<const codegen::Kernel*> kernels;
  std::string code;
  for (const BatchRun& r : runs)
    for (const codegen::Kernel& k : r.schedule.kernels) {
      kernels.push_back(&k);
      code += k.source + "\n";
    }
  const std::string unit = codegen::emu_translation_unit(code, kernels);
  { std::ofstream(scratch / "lib" / "unit.cc") << unit; }
  const fs::path library = scratch / "lib" / "kernels.so";
  codegen::EmuBuildOptions build;
  build.cache_dir = emu_cache_dir();
  auto built = codegen::build_emu_library(scratch / "lib" / "unit.cc", unit, kernels, library, build);
  INFO(built.status().message());
  REQUIRE(built.is_ok());
  codegen::CompileOptions o;
  o.run_nvcc = false;
  o.model_path = "/dev/null";
  o.emu_library = library.string();
  for (size_t i = 0; i < runs.size(); ++i) {
    const BatchRun& r = runs[i];
    INFO(r.graph->name);
    const fs::path dir = scratch / std::to_string(i);
    codegen::ArtifactSummary summary;
    const Status st = codegen::write_artifact(*r.graph, r.schedule, o, dir.string(), &summary);
    INFO(st.message());
    REQUIRE(st.is_ok());
    const TensorMap got = run_artifact_on_emu(*r.graph, dir, r.feed);
    auto want = run_reference(*r.original, r.feed);
    INFO(want.status().message());
    REQUIRE(want.is_ok());
    for (const Value* v : r.graph->outputs) {
      const Tolerance tol = tolerance_for(v->dtype);
      const CompareResult c = compare_tensors(got.at(v->name), want->at(v->name), tol.rtol, tol.atol);
      INFO(v->name << ": max abs " << c.max_abs << ", " << c.mismatches << " outside the tolerance "
                   << c.problem);
      CHECK(c.ok);
    }
  }
  fs::remove_all(scratch);
  return nodes;
}

}  // namespace

TEST_CASE(
    "every type the ONNX spec allows an op's first input runs on emu as the reference",
    "[op_types][emu]") {
  REQUIRE(kOpTypes.size() >= 150);
  std::vector<Batch> batches;
  for (const OpTypes& e : kOpTypes) {
    Batch batch{&e, {}};
    for (const std::string& t : e.types) batch.variants.push_back({t, "", ""});
    batches.push_back(std::move(batch));
  }
  CHECK(check_batches(batches, "stitch_unit_op_types") >= 1125);
}

namespace {

// One batch per op and constraint: each type of the constraint with each type of the first input, the
// op's other constraints at the test's usual types. Every other batch from `part` (0 or 1) on, so that
// two test cases share them (each builds one emulation library of its part's kernels, most of the
// time; the ops at the end of the list, GEMMs, convolutions and recurrences, have the largest kernels).
std::vector<Batch> pair_batches(int part) {
  std::vector<Batch> all;
  size_t total = 0;
  for (const OpTypes& e : kOpTypes)
    for (const auto& [param, types] : e.constraints) {
      Batch batch{&e, {}};
      for (const std::string& t : e.types)
        for (const std::string& u : types) {
          const Variant v{t, param, u};
          if (spec_allows(e, v)) batch.variants.push_back(v);
        }
      total += batch.variants.size();
      all.push_back(std::move(batch));
    }
  CHECK(all.size() >= 40);
  CHECK(total >= 1385);
  std::vector<Batch> mine;
  for (size_t i = static_cast<size_t>(part); i < all.size(); i += 2) mine.push_back(std::move(all[i]));
  return mine;
}

}  // namespace

TEST_CASE(
    "every type the ONNX spec allows an op's other type constraints, with each of its first input's, runs on "
    "emu as the reference (first part)",
    "[op_types][emu]") {
  CHECK(check_batches(pair_batches(0), "stitch_unit_op_types_pairs0") >= 600);
}

TEST_CASE(
    "every type the ONNX spec allows an op's other type constraints, with each of its first input's, runs on "
    "emu as the reference (second part)",
    "[op_types][emu]") {
  CHECK(check_batches(pair_batches(1), "stitch_unit_op_types_pairs1") >= 600);
}

TEST_CASE("ReduceMax and ReduceMin of bool are any and all, from opset 20, on the reference and on emu",
          "[op_types][emu]") {
  // Rows with some, none and every value true; the expected values are what onnx 1.23.2's
  // reference evaluator gives for this input.
  auto g = parse_or_die(R"(graph "g" opset 20 {
  input %x: bool[3,4]
  const %axes: i64[1] = [1]
  %any = ReduceMax(%x, %axes) {keepdims = 0} @"any"
  %all = ReduceMin(%x, %axes) @"all"
  output %any
  output %all
})");
  run_frontend_or_die(*g);
  CHECK(count_op(*g, "Cast") == 4);  // each through uint8 and back
  const TensorMap feed{{"x", Tensor::from_i64(DType::kBool, {3, 4}, {1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1})}};
  auto ref = run_reference(*g, feed);
  REQUIRE(ref.is_ok());
  const TensorMap got = planned_emu_run(*g, feed);
  for (const TensorMap* out : {static_cast<const TensorMap*>(&*ref), &got}) {
    CHECK(out->at("any").dtype() == DType::kBool);
    CHECK(out->at("any").to_i64() == std::vector<int64_t>{1, 0, 1});
    CHECK(out->at("all").dims() == Dims{3, 1});
    CHECK(out->at("all").to_i64() == std::vector<int64_t>{0, 0, 1});
  }
  CHECK(frontend_error(R"(graph "g" opset 19 {
  input %x: bool[3,4]
  %y = ReduceMax(%x) @"any"
  output %y
})") == "node 'any' (ReduceMax): takes bool inputs from opset 20 (the model's is 19): raise the model's "
        "opset or "
        "cast them to uint8");
  CHECK(frontend_error(R"(graph "g" opset 20 {
  input %x: bool[3,4]
  %y = ReduceSum(%x) @"sum"
  output %y
})") == "node 'sum' (ReduceSum): does not take bool inputs");
}
