// Importer: every bad input gets a user error that names what is at fault.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "importer/onnx_importer.h"
#include "importer/tensor_io.h"
#include "onnx_model_util.h"
#include "passes/pass.h"
#include "reference/interpreter.h"

using namespace stitch;
namespace fs = std::filesystem;
using test::add_node;
using test::tensor_info;

namespace {

// One scratch directory per test process, removed when the process exits.
fs::path temp_dir() {
  struct Scratch {
    fs::path path = fs::temp_directory_path() / fmt::format("stitch_importer_{}", ::getpid());
    Scratch() { fs::create_directories(path); }
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Scratch scratch;
  return scratch.path;
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

// x: f32[batch,4] -> Relu -> y
onnx::ModelProto base_model(int opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("t");
  *g->add_input() = tensor_info("x", 1, {"batch", "4"});
  add_node(g, "Relu", {"x"}, {"y"}, "relu");
  *g->add_output() = tensor_info("y", 1, {"batch", "4"});
  return m;
}

Status import_model(const onnx::ModelProto& m) {
  return import_onnx_bytes(m.SerializeAsString(), temp_dir().string(), "m.onnx").status();
}

}  // namespace

TEST_CASE("a well-formed model imports with its symbolic dims") {
  auto g = import_onnx_bytes(base_model().SerializeAsString(), ".", "m.onnx");
  REQUIRE(g.is_ok());
  CHECK((*g)->inputs[0]->type_string() == "f32[batch,4]");
  CHECK((*g)->opset == 17);
}

TEST_CASE("file-level problems") {
  fs::path d = temp_dir();
  SECTION("missing file") {
    auto st = import_onnx_file((d / "nope.onnx").string()).status();
    CHECK(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("nope.onnx") && Catch::Contains("no such file"));
  }
  SECTION("a directory") {
    CHECK_THAT(import_onnx_file(d.string()).status().message(), Catch::Contains("directory"));
  }
  SECTION("empty file") {
    write_file(d / "empty.onnx", "");
    CHECK_THAT(import_onnx_file((d / "empty.onnx").string()).status().message(), Catch::Contains("empty"));
  }
  SECTION("not ONNX") {
    write_file(d / "text.onnx", "this is a text file, not a model\n");
    auto st = import_onnx_file((d / "text.onnx").string()).status();
    CHECK(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("not") && Catch::Contains("ONNX"));
  }
  SECTION("truncated model") {
    onnx::ModelProto m = base_model();
    auto* w = m.mutable_graph()->add_initializer();
    w->set_name("w");
    w->set_data_type(1);
    w->add_dims(64);
    w->set_raw_data(std::string(256, '\1'));
    std::string bytes = m.SerializeAsString();
    for (size_t cut : {bytes.size() / 2, bytes.size() - 3}) {
      write_file(d / "cut.onnx", bytes.substr(0, cut));
      auto st = import_onnx_file((d / "cut.onnx").string()).status();
      INFO("cut at " << cut << ": " << st.message());
      CHECK(st.code() == Code::kUser);
    }
  }
}

TEST_CASE("opset outside the supported range") {
  auto st = import_model(base_model(29));
  CHECK(st.code() == Code::kUser);
  CHECK_THAT(st.message(), Catch::Contains("opset 29") && Catch::Contains("version_converter"));
  CHECK(import_model(base_model(28)).is_ok());
  CHECK_THAT(import_model(base_model(0)).message(),
             Catch::Contains("opset 0") && Catch::Contains("opsets 1 to 28"));
  // Opsets 1 to 10 are read in their own forms (ir/legacy_forms.h), the graph in opset 11's.
  for (int opset : {1, 5, 7}) {
    auto g = import_onnx_bytes(base_model(opset).SerializeAsString(), temp_dir().string(), "m.onnx");
    REQUIRE(g.is_ok());
    CHECK((*g)->model_opset == opset);
    CHECK((*g)->opset == 11);
    CHECK((*g)->nodes()[0]->opset == opset);
  }
}

TEST_CASE("an op newer than the model's opset is refused, not read in a later form", "[importer][legacy]") {
  onnx::ModelProto m = base_model(8);
  auto* g = m.mutable_graph();
  *g->add_input() = tensor_info("c", 9, {"batch", "4"});
  add_node(g, "Where", {"c", "x", "y"}, {"z"}, "pick");
  *g->add_output() = tensor_info("z", 1, {"batch", "4"});
  CHECK(import_model(m).message() ==
        "m.onnx: node 'pick' (Where): Where was added to ONNX at opset 9, and the model declares opset 8; "
        "declare the "
        "opset the model was written for");
  m.mutable_opset_import(0)->set_version(9);
  CHECK(import_model(m).is_ok());
}

TEST_CASE("an attribute the op lost at the model's opset is refused, not read as nothing") {
  // ReduceMean-18 takes its axes as input 1; an exporter that still writes the attribute would
  // otherwise get every axis reduced (onnx.checker: "Unrecognized attribute: axes").
  onnx::ModelProto m = base_model(18);
  auto* g = m.mutable_graph();
  g->clear_node();
  g->clear_output();
  auto* n = add_node(g, "ReduceMean", {"x"}, {"y"}, "row_mean");
  auto* axes = n->add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(-1);
  *g->add_output() = tensor_info("y", 1, {"batch", "1"});
  Status st = import_model(m);
  CHECK(st.code() == Code::kUser);
  CHECK_THAT(st.message(),
             Catch::Contains("node 'row_mean' (ReduceMean)") &&
                 Catch::Contains("'axes' is an attribute of ReduceMean only up to version 13") &&
                 Catch::Contains("opset 18 takes version 18"));
  // The same node at opset 17 is well formed.
  m.mutable_opset_import(0)->set_version(17);
  CHECK(import_model(m).is_ok());
}

namespace {
onnx::AttributeProto* add_attr(onnx::NodeProto* n, const std::string& name,
                               onnx::AttributeProto::AttributeType t) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}
}  // namespace

TEST_CASE("nodes are checked against the ONNX schema of the model's opset") {
  using A = onnx::AttributeProto;
  onnx::ModelProto m = base_model(17);
  auto* g = m.mutable_graph();
  SECTION("an attribute of the wrong kind is not read as absent") {
    // Softmax's axis as a float would otherwise be the default axis -1.
    add_attr(add_node(g, "Softmax", {"x"}, {"s"}, "sm"), "axis", A::FLOAT)->set_f(0);
    CHECK_THAT(import_model(m).message(),
               Catch::Contains("node 'sm' (Softmax): attribute 'axis' is a float") &&
                   Catch::Contains("Softmax (version 13, in effect at opset 17) takes an int"));
  }
  SECTION("an unknown attribute lists the op's attributes") {
    add_attr(add_node(g, "Softmax", {"x"}, {"s"}, "sm"), "axes", A::INT)->set_i(0);
    CHECK_THAT(import_model(m).message(), Catch::Contains("'axes' is not an attribute of Softmax") &&
                                              Catch::Contains("which takes axis;"));
  }
  SECTION("an op without attributes says so") {
    add_attr(add_node(g, "Relu", {"x"}, {"r"}, "r2"), "alpha", A::FLOAT)->set_f(1);
    CHECK_THAT(import_model(m).message(),
               Catch::Contains("node 'r2' (Relu)") && Catch::Contains("which takes none;"));
  }
  SECTION("a required attribute that is missing") {
    add_node(g, "Cast", {"x"}, {"c"}, "cast");
    CHECK_THAT(import_model(m).message(),
               Catch::Contains("node 'cast' (Cast): the attribute 'to' (an int) is "
                               "required by Cast (version 13"));
  }
  SECTION("too many or too few inputs, and too many outputs") {
    add_node(g, "Relu", {"x", "x"}, {"r"}, "two");
    CHECK_THAT(import_model(m).message(),
               Catch::Contains("node 'two' (Relu) has 2 input(s)") && Catch::Contains("takes 1"));
    g->mutable_node()->RemoveLast();
    add_node(g, "Where", {"x", "x"}, {"w"}, "where");
    CHECK_THAT(import_model(m).message(),
               Catch::Contains("node 'where' (Where) has 2 input(s)") && Catch::Contains("takes 3"));
    g->mutable_node()->RemoveLast();
    add_node(g, "Relu", {"x"}, {"r", "r2"}, "outs");
    CHECK_THAT(import_model(m).message(),
               Catch::Contains("node 'outs' (Relu) has 2 output(s)") && Catch::Contains("gives 1"));
  }
  SECTION("a required input left empty; an optional one may be") {
    add_node(g, "Add", {"", "x"}, {"a"}, "add");
    CHECK_THAT(import_model(m).message(),
               Catch::Contains("node 'add' (Add): input 0 is empty") && Catch::Contains("requires it"));
    g->mutable_node()->RemoveLast();
    add_node(g, "Clip", {"x", "", ""}, {"c"}, "clip");
    CHECK(import_model(m).is_ok());
  }
  SECTION("a Constant's value of the wrong kind") {
    add_attr(add_node(g, "Constant", {}, {"k"}, "konst"), "value", A::FLOAT)->set_f(1);
    CHECK_THAT(import_model(m).message(),
               Catch::Contains("node 'konst' (Constant): attribute 'value' is a float") &&
                   Catch::Contains("takes a tensor"));
  }
  SECTION("a flag outside 0 and 1 is refused, not read as true") {
    add_attr(add_node(g, "ReduceMax", {"x"}, {"m"}, "max"), "keepdims", A::INT)->set_i(2);
    CHECK_THAT(import_model(m).message(),
               Catch::Contains("node 'max' (ReduceMax): attribute 'keepdims' is 2") &&
                   Catch::Contains("defines it as a flag, 0 or 1"));
    g->mutable_node()->RemoveLast();
    add_attr(add_node(g, "Softmax", {"x"}, {"s"}, "sm"), "axis", A::INT)->set_i(-1);  // not a flag
    auto* mm = add_node(g, "Gemm", {"x", "x"}, {"g"}, "gemm");
    add_attr(mm, "transB", A::INT)->set_i(1);
    CHECK(import_model(m).is_ok());
    mm->mutable_attribute(0)->set_i(-1);
    CHECK_THAT(import_model(m).message(), Catch::Contains("node 'gemm' (Gemm): attribute 'transB' is -1"));
  }
  SECTION("the schema follows the model's opset") {
    // Split's num_outputs exists from version 18.
    auto* split = add_node(g, "Split", {"x"}, {"p", "q"}, "split");
    add_attr(split, "axis", A::INT)->set_i(1);
    add_attr(split, "num_outputs", A::INT)->set_i(2);
    CHECK_THAT(import_model(m).message(),
               Catch::Contains("'num_outputs' is not an attribute of Split (version 13"));
    m.mutable_opset_import(0)->set_version(18);
    CHECK(import_model(m).is_ok());
  }
}

TEST_CASE("every unsupported op is listed at once with counts and examples") {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  add_node(g, "Loop", {"x"}, {"l1"}, "loop_a");
  add_node(g, "Loop", {"x"}, {"l2"}, "loop_b");
  add_node(g, "FusedGemm", {"x"}, {"f"}, "fg", "com.microsoft");
  add_node(g, "NoSuchOp", {"x"}, {"n"}, "mystery");
  add_node(g, "RMSNormalization", {"x"}, {"ln"}, "ln");  // exists only from opset 23
  add_node(g, "StitchIndexCheck", {"x"}, {"c"}, "own");  // the compiler's own op, not a model's
  m.mutable_opset_import(0)->set_version(13);
  auto st = import_model(m);
  REQUIRE(st.code() == Code::kUser);
  const std::string& msg = st.message();
  CHECK_THAT(msg, Catch::Contains("Loop x2") && Catch::Contains("'loop_a'") && Catch::Contains("'loop_b'"));
  CHECK_THAT(msg,
             Catch::Contains("com.microsoft::FusedGemm x1 (e.g. 'fg'): an onnxruntime contrib op stitch does "
                             "not read (it reads Attention, BiasGelu") &&
                 Catch::Contains("export with standard ONNX ops"));
  CHECK_THAT(msg, Catch::Contains("NoSuchOp x1") && Catch::Contains("'mystery'"));
  CHECK_THAT(msg, Catch::Contains("RMSNormalization x1") && Catch::Contains("opsets 23-"));
  CHECK_THAT(msg,
             Catch::Contains("StitchIndexCheck x1 (e.g. 'own')") && !Catch::Contains("'own'): supported"));
  CHECK_THAT(msg, Catch::Contains("control flow"));
}

TEST_CASE("graph structure problems") {
  SECTION("dangling input names the node and the value") {
    onnx::ModelProto m = base_model();
    add_node(m.mutable_graph(), "Add", {"y", "ghost"}, {"z"}, "adder");
    auto st = import_model(m);
    CHECK(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("node 'adder' (Add)") && Catch::Contains("'ghost'"));
  }
  SECTION("cycle") {
    onnx::ModelProto m = base_model();
    auto* g = m.mutable_graph();
    add_node(g, "Neg", {"b"}, {"a"}, "n1");
    add_node(g, "Neg", {"a"}, {"b"}, "n2");
    auto st = import_model(m);
    CHECK(st.code() == Code::kUser);
    CHECK_THAT(st.message(), Catch::Contains("cycle") && Catch::Contains("'n1'"));
  }
  SECTION("two producers of one value") {
    onnx::ModelProto m = base_model();
    add_node(m.mutable_graph(), "Neg", {"x"}, {"y"}, "again");
    CHECK_THAT(import_model(m).message(), Catch::Contains("'y' is produced twice"));
  }
  SECTION("undefined graph output") {
    onnx::ModelProto m = base_model();
    *m.mutable_graph()->add_output() = tensor_info("nowhere", 1, {"1"});
    CHECK_THAT(import_model(m).message(), Catch::Contains("graph output 'nowhere'"));
  }
  SECTION("unsupported input element type") {
    onnx::ModelProto m = base_model();
    m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(8);
    CHECK_THAT(import_model(m).message(), Catch::Contains("input 'x'") && Catch::Contains("STRING"));
  }
}

TEST_CASE("initializers: inline, external and broken") {
  fs::path d = temp_dir();
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  add_node(g, "Add", {"y", "w"}, {"z"}, "add");
  g->mutable_output(0)->set_name("z");
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(1);
  w->add_dims(4);
  SECTION("typed float_data") {
    for (float f : {1.f, 2.f, 3.f, 4.f}) w->add_float_data(f);
    auto r = import_onnx_bytes(m.SerializeAsString(), d.string(), "m.onnx");
    REQUIRE(r.is_ok());
    CHECK((*r)->find_value("w")->constant->get_f64(3) == 4.0);
  }
  SECTION("absurd dims are refused before any allocation") {
    w->clear_dims();
    w->add_dims(int64_t{1} << 40);
    w->add_dims(int64_t{1} << 40);
    CHECK_THAT(import_model(m).message(), Catch::Contains("initializer 'w'") && Catch::Contains("corrupt"));
    w->clear_dims();
    w->add_dims(int64_t{1} << 36);  // 256 GiB of floats with no data behind it
    CHECK_THAT(import_model(m).message(), Catch::Contains("holds 0 values"));
  }
  SECTION("raw data of the wrong size") {
    w->set_raw_data(std::string(12, '\0'));
    CHECK_THAT(import_model(m).message(), Catch::Contains("initializer 'w'") && Catch::Contains("12 bytes"));
  }
  SECTION("external data") {
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = w->add_external_data();
    loc->set_key("location");
    loc->set_value("weights.bin");
    float vals[4] = {1, 2, 3, 4};
    write_file(d / "weights.bin", std::string(reinterpret_cast<char*>(vals), sizeof vals));
    auto r = import_onnx_bytes(m.SerializeAsString(), d.string(), "m.onnx");
    REQUIRE(r.is_ok());
    CHECK((*r)->find_value("w")->constant->get_f64(2) == 3.0);
    write_file(d / "weights.bin", std::string(8, '\0'));  // truncated
    CHECK_THAT(import_model(m).message(), Catch::Contains("weights.bin") && Catch::Contains("truncated"));
    fs::remove(d / "weights.bin");
    CHECK_THAT(import_model(m).message(), Catch::Contains("cannot be opened"));
    loc->set_value("../../etc/passwd");
    CHECK_THAT(import_model(m).message(), Catch::Contains("outside the model's directory"));
  }
}

TEST_CASE("tensor files: round trip and bad files") {
  fs::path d = temp_dir();
  Tensor t = Tensor::from_f64(DType::kBF16, {2}, {1.5, -2});
  REQUIRE(write_tensor_file((d / "t.pb").string(), t, "t").is_ok());
  auto back = read_tensor_file((d / "t.pb").string());
  REQUIRE(back.is_ok());
  CHECK(back->name == "t");
  CHECK(back->tensor.same_as(t));
  write_file(d / "junk.pb", "\xff\xff\xff");
  CHECK_THAT(read_tensor_file((d / "junk.pb").string()).status().message(), Catch::Contains("junk.pb"));
  CHECK_THAT(read_tensor_file((d / "none.pb").string()).status().message(), Catch::Contains("cannot open"));
}

namespace {

onnx::TensorProto float_tensor(const std::string& name, std::vector<float> v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(1);
  t.add_dims(static_cast<int64_t>(v.size()));
  for (float f : v) t.add_float_data(f);
  return t;
}

// z = If(flag) + c, c = [100, 100, 100]. then_branch: its own initializer also named 'c' = [1, 2, 3],
// t = x + c, and an If on a Constant inside it whose branch reads t (an outer-scope name that must
// follow t's renaming): n = t * 2. else_branch: -x.
onnx::ModelProto if_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("if");
  *g->add_input() = tensor_info("x", 1, {"3"});
  *g->add_input() = tensor_info("flag", 9, {"1"});
  *g->add_initializer() = float_tensor("c", {100, 100, 100});
  onnx::GraphProto inner_then;
  inner_then.set_name("inner_then");
  auto* two = add_node(&inner_then, "Constant", {}, {"two"}, "two");
  auto* a = two->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = float_tensor("", {2, 2, 2});
  add_node(&inner_then, "Mul", {"t", "two"}, {"u"}, "twice");
  *inner_then.add_output() = tensor_info("u", 1, {"3"});
  onnx::GraphProto inner_else = inner_then;  // never taken
  onnx::GraphProto then_g;
  then_g.set_name("then");
  *then_g.add_initializer() = float_tensor("c", {1, 2, 3});
  add_node(&then_g, "Add", {"x", "c"}, {"t"}, "shift");
  auto* k = add_node(&then_g, "Constant", {}, {"k"}, "k");
  auto* ka = k->add_attribute();
  ka->set_name("value");
  ka->set_type(onnx::AttributeProto::TENSOR);
  ka->mutable_t()->set_data_type(9);
  ka->mutable_t()->add_int32_data(1);
  auto* inner = add_node(&then_g, "If", {"k"}, {"n"}, "inner");
  for (auto [name, body] : {std::pair{"then_branch", &inner_then}, std::pair{"else_branch", &inner_else}}) {
    auto* b = inner->add_attribute();
    b->set_name(name);
    b->set_type(onnx::AttributeProto::GRAPH);
    *b->mutable_g() = *body;
  }
  *then_g.add_output() = tensor_info("n", 1, {"3"});
  onnx::GraphProto else_g;
  else_g.set_name("else");
  add_node(&else_g, "Neg", {"x"}, {"e"}, "neg");
  *else_g.add_output() = tensor_info("e", 1, {"3"});
  auto* outer = add_node(g, "If", {"flag"}, {"r"}, "choose");
  for (auto [name, body] : {std::pair{"then_branch", &then_g}, std::pair{"else_branch", &else_g}}) {
    auto* b = outer->add_attribute();
    b->set_name(name);
    b->set_type(onnx::AttributeProto::GRAPH);
    *b->mutable_g() = *body;
  }
  add_node(g, "Add", {"r", "c"}, {"z"}, "plus_c");
  *g->add_output() = tensor_info("z", 1, {"3"});
  return m;
}

std::vector<double> run_if_model(const std::string& flag) {
  auto g = import_onnx_bytes(if_model().SerializeAsString(), temp_dir().string(), "m.onnx", {{flag}});
  INFO(g.status().message());
  REQUIRE(g.is_ok());
  REQUIRE((*g)->inputs.size() == 1);  // the flag is no longer an input
  REQUIRE((*g)->fixed_inputs.size() == 1);
  CHECK((*g)->fixed_inputs[0].name == "flag");
  for (const auto& n : (*g)->nodes()) CHECK(n->op_type != "If");
  PassContext ctx;
  REQUIRE(run_frontend(**g, ctx).is_ok());
  auto out = run_reference(**g, {{"x", Tensor::from_f64(DType::kF32, {3}, {1, -2, 0.5})}});
  INFO(out.status().message());
  REQUIRE(out.is_ok());
  return out->at("z").to_f64();
}

}  // namespace

TEST_CASE("an If decided by --constant-input keeps the branch it takes", "[importer][if]") {
  // then: (x + [1, 2, 3]) * 2 + 100, through the branch's own 'c' and the nested If on a Constant
  CHECK(run_if_model("flag=1") == std::vector<double>{104, 100, 107});
  CHECK(run_if_model("flag=true") == std::vector<double>{104, 100, 107});
  // else: -x + 100
  CHECK(run_if_model("flag=0") == std::vector<double>{99, 102, 99.5});
  auto g = import_onnx_bytes(if_model().SerializeAsString(), temp_dir().string(), "m.onnx", {{"flag=1"}});
  REQUIRE(g.is_ok());
  CHECK((*g)->find_value("choose/t") != nullptr);  // branch values carry the If's name
  CHECK((*g)->import_log ==
        std::vector<std::string>{
            "If 'choose': its condition 'flag' is true at compile time, so its then_branch (3 "
            "node(s)) is inlined",
            "If 'choose/inner': its condition 'choose/k' is true at compile time, so its "
            "then_branch (2 node(s)) is inlined"});
  CHECK((*g)->find_value("choose/c")->constant->get_f64(2) == 3.0);
  CHECK((*g)->find_value("c")->constant->get_f64(2) == 100.0);
}

TEST_CASE("Ifs stitch cannot decide, and bad --constant-input values, name what to do", "[importer][if]") {
  auto message = [](const onnx::ModelProto& m, std::vector<std::string> fixed) {
    return import_onnx_bytes(m.SerializeAsString(), temp_dir().string(), "m.onnx", {fixed})
        .status()
        .message();
  };
  const onnx::ModelProto m = if_model();
  CHECK_THAT(message(m, {}), Catch::Contains("If x1 (e.g. 'choose')") &&
                                 Catch::Contains("graph input 'flag': compile the branch you need with "
                                                 "--constant-input flag=1 (then_branch) or flag=0"));
  onnx::ModelProto computed = m;
  auto* g = computed.mutable_graph();
  add_node(g, "Not", {"flag"}, {"not_flag"}, "not");
  g->mutable_node(0)->set_input(0, "not_flag");
  CHECK_THAT(message(computed, {}), Catch::Contains("its condition 'not_flag' is computed by the graph"));
  CHECK_THAT(message(m, {"nosuch=1"}),
             Catch::Contains("no graph input named 'nosuch' (its inputs: 'x', 'flag')"));
  CHECK_THAT(message(m, {"flag=2"}), Catch::Contains("'2' is not a bool"));
  CHECK_THAT(message(m, {"flag=1,0"}), Catch::Contains("shape 1 (1 element(s)); 2 value(s) given"));
  CHECK_THAT(message(m, {"flag"}), Catch::Contains("must look like NAME=VALUE"));
  CHECK_THAT(message(m, {"flag=1", "flag=0"}), Catch::Contains("fixes 'flag' twice"));
  CHECK_THAT(message(m, {"x=1,2"}), Catch::Contains("shape 3 (3 element(s)); 2 value(s) given"));
  CHECK_THAT(message(m, {"x=1,2,a"}), Catch::Contains("'a' is not a number"));
  auto both =
      import_onnx_bytes(m.SerializeAsString(), temp_dir().string(), "m.onnx", {{"flag=1", "x=1,-2,0.5"}});
  REQUIRE(both.is_ok());
  CHECK((*both)->inputs.empty());
  CHECK((*both)->find_value("x")->constant->get_f64(1) == -2.0);
}

TEST_CASE("an output type the model declares must be the op's, checked once the types are known",
          "[importer]") {
  // x: f32 -> Relu -> y, Cast to int64 -> z (both graph outputs), with y declared in value_info too.
  auto model = [](int y_declared, int z_declared) {
    onnx::ModelProto m = base_model();
    auto* g = m.mutable_graph();
    g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(y_declared);
    auto* cast = add_node(g, "Cast", {"y"}, {"z"}, "cast");
    auto* to = cast->add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(7);
    *g->add_output() = tensor_info("z", z_declared, {"batch", "4"});
    return m;
  };
  auto frontend = [](const onnx::ModelProto& m) {
    auto g = import_onnx_bytes(m.SerializeAsString(), temp_dir().string(), "m.onnx");
    REQUIRE(g.is_ok());
    PassContext ctx;
    REQUIRE(parse_shape_binding("batch=2", ctx.bindings).is_ok());
    return run_frontend(**g, ctx);
  };
  CHECK(frontend(model(1, 7)).is_ok());
  CHECK(frontend(model(0, 0)).is_ok());  // undeclared types are the op's to give
  Status st = frontend(model(1, 6));
  CHECK(st.code() == Code::kUser);
  CHECK(st.message() ==
        "node 'cast' (Cast): output 'z' is i64 by the op's type rule, but the model declares it i32; correct "
        "the "
        "model's declaration, or Cast the op's inputs or output to the types the model means");
  // A value_info entry counts too.
  onnx::ModelProto m = model(0, 7);
  *m.mutable_graph()->add_value_info() = tensor_info("y", 10, {"batch", "4"});
  st = frontend(m);
  CHECK_THAT(st.message(),
             Catch::StartsWith("node 'relu' (Relu): output 'y' is f32 by the op's type rule, but "
                               "the model declares it f16"));
}
