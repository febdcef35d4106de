// ScatterND and ScatterElements of constant indices (expand_scatter_nd, expand_scatter_elements):
// ONNX's node tests with their indices made constants, as exported models hold them, against
// ONNX's expected outputs; each form of the expansion against the op itself; the fused kernel on
// emu; and the cases that keep the op.
#include <fmt/format.h>

#include "backend_test_util.h"
#include "fusion_test_util.h"
#include "importer/onnx_importer.h"
#include "importer/tensor_io.h"
#include "reference/compare.h"
#include "support/tolerances.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;

namespace {

namespace fs = std::filesystem;

// A scatter graph: `data` an input of `type`, its indices a constant, its updates an input; a
// Relu before and after, so that a fused plan has neighbours to join. `attrs` the op's attributes
// ("" for none), `op` ScatterND or ScatterElements.
std::string scatter_graph(const std::string& type, const std::string& indices, const std::string& updates,
                          const std::string& attrs = "", const std::string& op = "ScatterND") {
  return fmt::format(R"(graph "s" opset 18 {{
  input %x: {}
  input %u: {}
  const %i: {}
  %d = Relu(%x) @"before"
  %y = {}(%d, %i, %u) {} @"put"
  %z = Relu(%y) @"after"
  output %z
}}
)",
                     type, updates, indices, op, attrs.empty() ? "" : "{" + attrs + "}");
}
std::string elements_graph(const std::string& type, const std::string& indices, const std::string& updates,
                           const std::string& attrs) {
  return scatter_graph(type, indices, updates, attrs, "ScatterElements");
}

// `text` parsed and through the front end (the scatter passes among it).
std::unique_ptr<Graph> expanded(const std::string& text) {
  auto g = test::parse_or_die(text);
  test::run_frontend_or_die(*g);
  return g;
}

// Reference results of the op itself (the raw graph) and of the expansion, on the same inputs.
void check_same_as_op(const std::string& text, uint32_t seed) {
  const test::RewriteRun r = test::run_rewrite(text, seed);
  CHECK(r.got.at("z").to_f64() == r.want.at("z").to_f64());
}

}  // namespace

namespace {

// ONNX's node test `name` with its indices (input 1) made a constant, through the front end and
// on emu against ONNX's expected output; returns how many nodes of `op` are left.
int node_test_left(const char* name, const std::string& op) {
  const fs::path dir = fs::path(ONNX_TESTDATA_DIR) / "node" / name;
  INFO(name);
  auto [g, feed] = test::load_node_test(dir, [](size_t i) { return i == 1; });  // the indices
  test::run_frontend_or_die(*g);
  auto want = read_tensor_file((dir / "test_data_set_0" / "output_0.pb").string());
  REQUIRE(want.is_ok());
  const TensorMap got = test::emu_run(*g, nullptr, feed);
  const CompareResult r =
      compare_tensors(got.at(g->outputs[0]->name), want->tensor, kOnnxNodeTest.rtol, kOnnxNodeTest.atol);
  INFO(r.mismatches << " mismatches, max abs " << r.max_abs);
  CHECK(r.ok);
  return count_op(*g, op);
}

}  // namespace

TEST_CASE(
    "ONNX's ScatterND and ScatterElements node tests with constant indices compute the expected outputs",
    "[scatter][passes]") {
  REQUIRE(fs::exists(fs::path(ONNX_TESTDATA_DIR) / "node" / "test_scatternd"));
  // test_scatternd writes two distinct slices; the add and multiply tests write one slice twice,
  // which the op accumulates in order and the expansion does not take.
  CHECK(node_test_left("test_scatternd", "ScatterND") == 0);
  CHECK(node_test_left("test_scatternd_add", "ScatterND") == 1);
  CHECK(node_test_left("test_scatternd_multiply", "ScatterND") == 1);
  // Along axis 1 of a 1x5 (one slice per index), along axis 0 with indices differing across the
  // other axis (every element its own position), negative indices, and one position named twice.
  CHECK(node_test_left("test_scatter_elements_with_axis", "ScatterElements") == 0);
  CHECK(node_test_left("test_scatter_elements_without_axis", "ScatterElements") == 0);
  CHECK(node_test_left("test_scatter_elements_with_negative_indices", "ScatterElements") == 0);
  CHECK(node_test_left("test_scatter_elements_with_duplicate_indices", "ScatterElements") == 1);
}

TEST_CASE("a ScatterND writing every position in order is a Reshape of its updates", "[scatter][passes]") {
  // An attention mask's `mask[..., :n] = ...` where n is the whole row: indices enumerate [2,1,1,3].
  std::string idx = "[";
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 3; ++c) idx += fmt::format("{}{}, 0, 0, {}", a + c ? ", " : "", a, c);
  idx += "]";
  const std::string text = scatter_graph("f32[2,1,1,3]", "i64[2,1,1,3,4] = " + idx, "f32[2,1,1,3]");
  auto g = expanded(text);
  CHECK(count_op(*g, "ScatterND") == 0);
  CHECK(count_op(*g, "Gather") == 0);
  CHECK(count_op(*g, "Where") == 0);
  CHECK(count_op(*g, "Relu") == 1);  // the data's Relu is read by nothing now
  check_same_as_op(text, 5);
}

TEST_CASE("a ScatterND of some rows, out of order and from the end, is a Gather and a Where",
          "[scatter][passes]") {
  // [4,3,5] data, k = 2: rows (3,1), (0,-1) = (0,2) and (-2,0) = (2,0) replaced by update rows 0..2.
  const std::string text = scatter_graph("f32[4,3,5]", "i64[3,2] = [3, 1, 0, -1, -2, 0]", "f32[3,5]");
  auto g = expanded(text);
  CHECK(count_op(*g, "ScatterND") == 0);
  CHECK(count_op(*g, "Gather") == 1);
  CHECK(count_op(*g, "Where") == 1);
  bool named = false;
  for (const auto& n : g->nodes()) named = named || n->name == "put/written";
  CHECK(named);
  CHECK(g->find_value("y")->type_string() == "f32[4x3x5]");  // the ScatterND's output keeps its name
  check_same_as_op(text, 7);
  for (const char* red : {"add", "mul", "max", "min"}) {
    INFO(red);
    const std::string r = scatter_graph("f32[4,3,5]", "i64[3,2] = [3, 1, 0, -1, -2, 0]", "f32[3,5]",
                                        fmt::format("reduction = \"{}\"", red));
    auto rg = expanded(r);
    CHECK(count_op(*rg, "ScatterND") == 0);
    check_same_as_op(r, 9);
  }
  // Every row, out of order: a Gather alone (nothing is left of the data to keep).
  const std::string all = scatter_graph("f32[3,4]", "i64[3,1] = [2, 0, -2]", "f32[3,4]");
  auto ag = expanded(all);
  CHECK(count_op(*ag, "ScatterND") == 0);
  CHECK(count_op(*ag, "Gather") == 1);
  CHECK(count_op(*ag, "Where") == 0);
  check_same_as_op(all, 13);
  // Per element (k = rank): two single elements of a [2,3] data.
  check_same_as_op(scatter_graph("f32[2,3]", "i64[2,2] = [1, 2, 0, 0]", "f32[2]"), 11);
}

TEST_CASE("an expanded ScatterND joins its neighbours in one kernel that matches on emu",
          "[scatter][fusion]") {
  const std::string text = scatter_graph("f32[4,3,5]", "i64[3,2] = [3, 1, 0, -1, -2, 0]", "f32[3,5]");
  auto g = expanded(text);
  CHECK(test::fused_matches_reference(*g, 3, test::opts("beam")) == 1);
  // The op itself is a kernel of its own, between the two Relus' kernels.
  auto raw = test::parse_or_die(text);
  PassContext ctx;
  REQUIRE(infer_shapes(*raw, ctx).is_ok());
  CHECK(test::fused_matches_reference(*raw, 3, test::opts("beam")) == 3);
}

TEST_CASE(
    "ScatterND keeps its kernel for indices named twice or known only at run time, and a constant index "
    "out of range is an error naming the node",
    "[scatter][passes]") {
  auto twice = expanded(scatter_graph("f32[4,3]", "i64[2,1] = [1, -3]", "f32[2,3]"));
  CHECK(count_op(*twice, "ScatterND") == 1);

  auto runtime = test::parse_or_die(R"(graph "s" opset 18 {
  input %x: f32[4,3]
  input %i: i64[2,1]
  input %u: f32[2,3]
  %y = ScatterND(%x, %i, %u) @"put"
  output %y
}
)");
  test::run_frontend_or_die(*runtime);
  CHECK(count_op(*runtime, "ScatterND") == 1);

  auto bad = test::parse_or_die(scatter_graph("f32[4,3]", "i64[2,1] = [1, 4]", "f32[2,3]"));
  PassContext ctx;
  const Status st = run_frontend(*bad, ctx);
  CHECK(st.code() == Code::kUser);
  CHECK_THAT(st.message(), Catch::Contains("node 'put' (ScatterND)") && Catch::Contains("index 4") &&
                               Catch::Contains("out of range for axis 0 of size 4"));
}

TEST_CASE(
    "a ScatterElements writing slices along an axis is a Gather along it and a Where, and an unrolled "
    "scan's chain of them fuses",
    "[scatter][passes][fusion]") {
  // PyTorch's select_scatter (out[:, 2] = u): the index is 2 at every position of the update.
  const std::string one =
      elements_graph("f32[2,4,3]", "i64[2,1,3] = [2, 2, 2, 2, 2, 2]", "f32[2,1,3]", "axis = 1");
  auto g = expanded(one);
  CHECK(count_op(*g, "ScatterElements") == 0);
  CHECK(count_op(*g, "Gather") == 1);
  CHECK(count_op(*g, "Where") == 1);
  bool small = false;  // the index runs along the axis only: 4 elements, not the data's 24
  for (const auto& n : g->nodes())
    if (n->op_type == "Gather") small = n->input(1)->constant && n->input(1)->constant->size() == 4;
  CHECK(small);
  check_same_as_op(one, 3);
  // Every slice, in order, from the end: the updates themselves.
  const std::string all = elements_graph(
      "f32[2,2,3]", "i64[2,2,3] = [-2, -2, -2, -1, -1, -1, 0, 0, 0, 1, 1, 1]", "f32[2,2,3]", "axis = 1");
  auto ag = expanded(all);
  CHECK(count_op(*ag, "ScatterElements") == 0);
  CHECK(count_op(*ag, "Gather") == 0);
  CHECK(count_op(*ag, "Where") == 0);
  check_same_as_op(all, 5);

  // A scan unrolled over 4 steps (RecurrentGemma's RG-LRU as exported): each step's state written
  // into its row of the output, one ScatterElements after another; they become one kernel.
  std::string text = R"(graph "scan" opset 18 {
  input %x: f32[2,4,3]
  input %h: f32[2,1,3]
)";
  std::string prev = "%x", h = "%h";
  for (int t = 0; t < 4; ++t) {
    text += fmt::format("  const %i{0}: i64[2,1,3] = [{0}, {0}, {0}, {0}, {0}, {0}]\n", t);
    text += fmt::format("  %h{0} = Tanh({1}) @\"step{0}\"\n", t, h);
    text += fmt::format("  %s{0} = ScatterElements({1}, %i{0}, %h{0}) {{axis = 1}} @\"put{0}\"\n", t, prev);
    prev = fmt::format("%s{}", t);
    h = fmt::format("%h{}", t);
  }
  text += "  output " + prev + "\n}\n";
  auto scan = expanded(text);
  CHECK(count_op(*scan, "ScatterElements") == 0);
  CHECK(test::fused_matches_reference(*scan, 7, test::opts("beam")) == 1);
  auto raw = test::parse_or_die(text);
  PassContext ctx;
  REQUIRE(infer_shapes(*raw, ctx).is_ok());
  CHECK(test::fused_matches_reference(*raw, 7, test::opts("beam")) >= 4);  // a kernel per scatter
}

TEST_CASE(
    "a ScatterElements whose indices differ across the other axes maps every element, with each reduction",
    "[scatter][passes]") {
  // [3,4] data, axis 1: row 0 writes columns 0 and 2, row 1 columns 1 and 3, row 2 columns 3 and 0.
  const std::string idx = "i64[3,2] = [0, 2, 1, -1, 3, 0]";
  auto g = expanded(elements_graph("f32[3,4]", idx, "f32[3,2]", "axis = 1"));
  CHECK(count_op(*g, "ScatterElements") == 0);
  CHECK(count_op(*g, "Where") == 1);
  check_same_as_op(elements_graph("f32[3,4]", idx, "f32[3,2]", "axis = 1"), 9);
  for (const char* red : {"add", "mul", "max", "min"}) {
    INFO(red);
    check_same_as_op(
        elements_graph("f32[3,4]", idx, "f32[3,2]", fmt::format("axis = 1, reduction = \"{}\"", red)), 11);
  }
  // One position twice keeps the op; an index out of range is an error naming the node.
  auto twice =
      test::parse_or_die(elements_graph("f32[3,4]", "i64[3,2] = [0, 2, 1, 1, 3, 0]", "f32[3,2]", "axis = 1"));
  test::run_frontend_or_die(*twice);
  CHECK(count_op(*twice, "ScatterElements") == 1);
  auto bad = test::parse_or_die(
      elements_graph("f32[3,4]", "i64[3,2] = [0, 2, 1, -5, 3, 0]", "f32[3,2]", "axis = 1"));
  PassContext ctx;
  const Status st = run_frontend(*bad, ctx);
  CHECK(st.code() == Code::kUser);
  CHECK_THAT(st.message(), Catch::Contains("node 'put' (ScatterElements)") && Catch::Contains("index -5") &&
                               Catch::Contains("out of range for axis 1 of size 4"));
}
