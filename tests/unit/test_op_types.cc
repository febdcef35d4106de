// Every tensor type the ONNX spec allows an element-wise, broadcast, reduction or layout op (op_types.inc,
// generated from the spec's schemas by scripts/gen_op_types.py), of those stitch has: one node per
// type, through the front end, planned by beam search and run on emu against the reference
// interpreter running the op as written. An op that refused a type the spec allows, or a kernel
// that computed one differently, fails here naming the op and the type.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "codegen/emu_build.h"
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
};

const std::vector<OpTypes> kOpTypes = {
#include "op_types.inc"
};

bool is_float_name(const std::string& t) { return t == "f32" || t == "f16" || t == "bf16" || t == "f64"; }
bool is_unsigned_name(const std::string& t) { return t[0] == 'u'; }

// Constant values of type `t` for a divisor, a shift or an exponent: no zero, negative ones only
// where the type has them.
std::string nonzero_values(const std::string& t) {
  return is_unsigned_name(t) ? "[3, 7, 1, 100, 2]" : "[3, -7, 1, 100, -2]";
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

// The IR text of one node of `op` on type `t` (inputs, constants, the node, its outputs), names
// suffixed with the type. Inputs of the varied type are 3 x 5 unless the op needs more axes.
std::string node_text(const OpTypes& e, const std::string& t) {
  const std::string op = e.op;
  const std::string x = "%x_" + t, y = "%y_" + t, node = fmt::format("@\"{}_{}\"", op, t);
  auto input = [&](const std::string& name, const std::string& type, const std::string& dims) {
    return fmt::format("  input %{}_{}: {}[{}]\n", name, t, type, dims);
  };
  auto constant = [&](const std::string& name, const std::string& type, const std::string& dims,
                      const std::string& values) {
    return fmt::format("  const %{}_{}: {}[{}] = {}\n", name, t, type, dims, values);
  };
  // x of `dims`, then `rest` (other inputs and constants), the node reading x and then `args`.
  auto with = [&](const std::string& dims, const std::string& rest, const std::string& args,
                  const std::string& attrs) {
    return input("x", t, dims) + rest +
           fmt::format("  {} = {}({}{}){} {}\n  output {}\n", y, op, x, args, attrs, node, y);
  };
  const std::string b = "%b_" + t;
  auto unary = [&](const std::string& attrs) { return with("3,5", "", "", attrs); };
  auto binary = [&](const std::string& b_text, const std::string& attrs) {
    return with("3,5", b_text, ", " + b, attrs);
  };
  auto normalization = [&](const std::string& dims, const std::string& channels, const std::string& inputs,
                           const std::string& attrs) {
    std::string text = input("x", t, dims);
    std::string args = x;
    for (const char* name : {"scale", "bias", "mean", "var"}) {
      if (inputs.find(name) == std::string::npos) continue;
      text +=
          std::string(name) == "var" ? constant(name, t, channels, "[1, 0.5, 2]") : input(name, t, channels);
      args += fmt::format(", %{}_{}", name, t);
    }
    return text + fmt::format("  {} = {}({}){} {}\n  output {}\n", y, op, args, attrs, node, y);
  };
  if (op == "BitCast") return unary(fmt::format(" {{to = {}}}", onnx_code(same_size(t))));
  if (op == "Cast") return unary(" {to = 1}");
  if (op == "CastLike") return binary(constant("b", "f32", "1", "[0]"), "");
  if (op == "Clip")
    return input("x", t, "3,5") + constant("lo", t, "", "[1]") + constant("hi", t, "", "[90]") +
           fmt::format("  {0} = Clip({1}, %lo_{2}, %hi_{2}) {3}\n  output {0}\n", y, x, t, node);
  if (op == "CumSum" || op == "CumProd") return binary(constant("b", "i64", "", "[1]"), "");
  if (op == "DequantizeLinear") return binary(constant("b", "f32", "", "[0.25]"), "");
  if (op == "QuantizeLinear") return binary(constant("b", t == "i32" ? "f32" : t, "", "[0.5]"), "");
  if (op == "DynamicQuantizeLinear")
    return input("x", t, "3,5") +
           fmt::format(
               "  {0}, %s_{1}, %z_{1} = DynamicQuantizeLinear({2}) {3}\n  output {0}\n  output %s_{1}\n"
               "  output %z_{1}\n",
               y, t, x, node);
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return with("2,3,4,5", "", "", "");
  if (op == "GroupNormalization") return normalization("2,4,3", "4", "scale bias", " {num_groups = 2}");
  if (op == "InstanceNormalization") return normalization("2,3,5", "3", "scale bias", "");
  if (op == "LayerNormalization") return normalization("3,5", "5", "scale bias", "");
  if (op == "RMSNormalization") return normalization("3,5", "5", "scale", "");
  if (op == "BatchNormalization") return normalization("2,3,4", "3", "scale bias mean var", "");
  if (op == "MeanVarianceNormalization") return with("2,3,2,5", "", "", "");
  if (op == "NegativeLogLikelihoodLoss" || op == "SoftmaxCrossEntropyLoss")
    return binary(constant("b", "i64", "3", "[0, 4, 2]"), "");
  if (op == "TopK")
    return input("x", t, "3,5") + constant("k", "i64", "1", "[2]") +
           fmt::format("  {0}, %i_{1} = TopK({2}, %k_{1}) {3}\n  output {0}\n  output %i_{1}\n", y, t, x,
                       node);
  if (op == "ArgMax" || op == "ArgMin") return unary(" {axis = 1}");
  if (op == "Where")
    return input("c", "bool", "3,5") + input("x", t, "3,5") + input("b", t, "5") +
           fmt::format("  {0} = Where(%c_{1}, {2}, %b_{1}) {3}\n  output {0}\n", y, t, x, node);
  if (op == "Div" && !is_float_name(t)) return binary(constant("b", t, "5", nonzero_values(t)), "");
  if (op == "Mod")
    return binary(constant("b", t, "5", nonzero_values(t)), is_float_name(t) ? " {fmod = 1}" : "");
  if (op == "BitShift")
    return binary(constant("b", t, "5", "[0, 1, 3, 7, 2]"), " {direction = \"RIGHT\"}") +
           fmt::format(
               "  %l_{0} = BitShift({1}, %b_{0}) {{direction = \"LEFT\"}} @\"BitShift_left_{0}\"\n"
               "  output %l_{0}\n",
               t, x);
  if (op == "Pow") return binary(constant("b", t, "5", "[2, 3, 0, 1, 2]"), "");
  if (op.rfind("Reduce", 0) == 0) return binary(constant("b", "i64", "1", "[1]"), "");
  // Layout ops: constant indices, shapes and axes, so that every index lies inside its axis.
  if (op == "Compress")
    return with("3,5", constant("b", "bool", "5", "[1, 0, 1, 1, 0]"), ", " + b, " {axis = 1}");
  if (op == "Concat") return with("3,5", input("b", t, "3,2"), ", " + b, " {axis = 1}");
  if (op == "DepthToSpace") return with("1,8,2,3", "", "", " {blocksize = 2, mode = \"CRD\"}");
  if (op == "SpaceToDepth") return with("1,2,4,6", "", "", " {blocksize = 2}");
  if (op == "Expand") return with("3,1", constant("b", "i64", "2", "[3, 5]"), ", " + b, "");
  if (op == "Flatten") return with("2,3,4", "", "", " {axis = 2}");
  if (op == "Gather") return with("5,4", constant("b", "i64", "3", "[4, -1, 0]"), ", " + b, " {axis = 0}");
  if (op == "GatherElements")
    return with("3,5", constant("b", "i64", "3,2", "[4, 0, -1, 2, 3, 3]"), ", " + b, " {axis = 1}");
  if (op == "GatherND") return with("3,5", constant("b", "i64", "2,2", "[0, 1, 2, -1]"), ", " + b, "");
  if (op == "OneHot")
    return with("4", constant("d", "i64", "", "[5]") + constant("v", "f32", "2", "[-1, 3]"),
                fmt::format(", %d_{0}, %v_{0}", t), "");
  if (op == "Pad")
    return with("3,5", constant("p", "i64", "4", "[1, 0, 0, 2]") + constant("v", t, "", "[1]"),
                fmt::format(", %p_{0}, %v_{0}", t), "");
  if (op == "Reshape") return with("3,5", constant("b", "i64", "2", "[5, 3]"), ", " + b, "");
  if (op == "ReverseSequence")
    return with("4,3", constant("b", "i64", "3", "[4, 1, 2]"), ", " + b, " {time_axis = 0, batch_axis = 1}");
  if (op == "ScatterElements")
    return with("3,5", constant("i", "i64", "2,2", "[4, 0, -1, 2]") + input("u", t, "2,2"),
                fmt::format(", %i_{0}, %u_{0}", t), " {axis = 1}");
  if (op == "ScatterND")
    return with("3,5", constant("i", "i64", "2,1", "[0, 2]") + input("u", t, "2,5"),
                fmt::format(", %i_{0}, %u_{0}", t), "");
  if (op == "Slice")
    return with("3,5",
                constant("s", "i64", "1", "[1]") + constant("e", "i64", "1", "[4]") +
                    constant("a", "i64", "1", "[1]"),
                fmt::format(", %s_{0}, %e_{0}, %a_{0}", t), "");
  if (op == "Split")
    return input("x", t, "3,6") + constant("b", "i64", "2", "[2, 4]") +
           fmt::format("  {0}, %z_{1} = Split({2}, %b_{1}) {{axis = 1}} {3}\n  output {0}\n  output %z_{1}\n",
                       y, t, x, node);
  if (op == "Squeeze") return with("3,1,5", constant("b", "i64", "1", "[1]"), ", " + b, "");
  if (op == "Unsqueeze") return with("3,5", constant("b", "i64", "1", "[1]"), ", " + b, "");
  if (op == "Tile") return with("3,5", constant("b", "i64", "2", "[2, 1]"), ", " + b, "");
  if (op == "Transpose") return with("3,5", "", "", " {perm = ints[1, 0]}");
  if (std::string_view(e.category) == "broadcast") return binary(input("b", t, "5"), "");
  return unary("");  // element-wise ops, row ops along the last axis (Softmax, Trilu, ...), Identity, Dropout
}

// The tolerance for an output of type `t`: float16 and bfloat16 outputs may differ by their
// rounding of one op (the reference rounds a float64 result, a kernel a float32 one).
Tolerance tolerance_for(DType t) {
  if (t == DType::kF16) return kEmuF16Chain;
  if (t == DType::kBF16) return kEmuBF16Chain;
  return kEmuF32;
}

}  // namespace

// Types the spec allows that stitch refuses (none now), each with the front end's message: one the front end
// comes to accept fails the test until it is taken off this list, and a refusal not on it fails.
const std::map<std::pair<std::string, std::string>, std::string> kRefused = {};

// One op's graph, as written and through the front end, with its schedule (kernels renamed apart
// from the other ops') and seeded inputs.
struct OpRun {
  std::unique_ptr<Graph> original, graph;
  codegen::Schedule schedule;
  TensorMap feed;
};

TEST_CASE(
    "every type the ONNX spec allows an element-wise, broadcast, reduction or layout op runs on emu as the "
    "reference",
    "[op_types][emu]") {
  REQUIRE(kOpTypes.size() >= 120);
  uint32_t seed = 1;
  size_t nodes = 0, refused = 0;
  std::vector<OpRun> runs;
  for (const OpTypes& e : kOpTypes) {
    // Each type alone through the front end first, so that one refusal does not hide the others.
    std::vector<std::string> accepted;
    for (const std::string& t : e.types) {
      const std::string one = fmt::format("graph \"{}\" opset 28 {{\n{}}}\n", e.op, node_text(e, t));
      INFO(one);
      const std::string error = frontend_error(one);
      const auto known = kRefused.find({e.op, t});
      if (known == kRefused.end()) {
        CHECK(error == "");
        if (error.empty()) accepted.push_back(t);
      } else {
        CHECK(error == known->second);
        ++refused;
      }
    }
    if (accepted.empty()) continue;
    // Then one graph of the op's accepted types, planned by beam search.
    std::string text = fmt::format("graph \"{}\" opset 28 {{\n", e.op);
    for (const std::string& t : accepted) text += node_text(e, t);
    text += "}\n";
    INFO(text);
    OpRun r{parse_or_die(text), parse_or_die(text), {}, {}};
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
  CHECK(refused == kRefused.size());
  CHECK(nodes >= 950);

  // Every op's kernels in one emulation library (the host compiler's fixed cost once, not per op),
  // then each op's artifact on emu against the reference running its graph as written.
  namespace fs = std::filesystem;
  const fs::path scratch = fs::temp_directory_path() / ("stitch_unit_op_types_" + std::to_string(getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch / "lib");
  std::vector<const codegen::Kernel*> kernels;
  std::string code;
  for (const OpRun& r : runs)
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
    const OpRun& r = runs[i];
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
