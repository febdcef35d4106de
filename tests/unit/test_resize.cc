// Resize: the reference implementation and the expand_resize pass against ONNX's node tests
// (Debian's libonnx-testdata, and tests/onnx_node/extra for opsets 18 and 19, whose expected
// outputs ONNX's reference implementation computed), the shape of the expansion, and bad input.
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

// Every Resize node test: ONNX's own and the project's extra ones.
std::vector<fs::path> resize_tests() {
  std::vector<fs::path> dirs;
  for (const fs::path& root :
       {fs::path(ONNX_TESTDATA_DIR) / "node", fs::path(STITCH_SOURCE_DIR) / "tests/onnx_node/extra"}) {
    if (!fs::exists(root)) continue;
    for (const auto& e : fs::directory_iterator(root))
      if (e.path().filename().string().rfind("test_resize_", 0) == 0) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// A node test with every input but the first (roi, scales, sizes) made a constant, as a model
// holds them; the graph and the data input.
std::pair<std::unique_ptr<Graph>, TensorMap> load_test(const fs::path& dir) {
  return test::load_node_test(dir, [](size_t i) { return i > 0; });
}

Tensor expected_output(const fs::path& dir) {
  auto t = read_tensor_file((dir / "test_data_set_0" / "output_0.pb").string());
  REQUIRE(t.is_ok());
  return std::move(t->tensor);
}

void check_close(const Tensor& got, const Tensor& want) {
  REQUIRE(got.dims() == want.dims());
  const Tolerance tol = want.dtype() == DType::kF16 ? kEmuF16Output : kOnnxNodeTest;
  const CompareResult r = compare_tensors(got, want, tol.rtol, tol.atol);
  INFO(fmt::format("{} mismatches, max abs err {}", r.mismatches, r.max_abs));
  CHECK(r.mismatches == 0);
}

}  // namespace

TEST_CASE("Resize's reference implementation matches ONNX's node tests", "[resize]") {
  const auto dirs = resize_tests();
  REQUIRE(dirs.size() >= 30);  // 23 of ONNX 1.12 and 9 of opsets 18 and 19
  for (const fs::path& dir : dirs) {
    INFO(dir.filename().string());
    auto [g, feed] = load_test(dir);
    PassContext ctx;
    REQUIRE(bind_shapes(*g, ctx).is_ok());
    REQUIRE(infer_shapes(*g, ctx).is_ok());
    REQUIRE(count_op(*g, "Resize") == 1);  // evaluated as one op, not expanded
    auto got = run_reference(*g, feed);
    INFO(got.status().message());
    REQUIRE(got.is_ok());
    check_close(got->at(g->outputs[0]->name), expected_output(dir));
  }
}

TEST_CASE("expand_resize writes every Resize node test as Gathers that compute the same",
          "[resize][passes]") {
  for (const fs::path& dir : resize_tests()) {
    INFO(dir.filename().string());
    auto [g, feed] = load_test(dir);
    test::run_frontend_or_die(*g);
    CHECK(count_op(*g, "Resize") == 0);
    CHECK(count_op(*g, "Gather") >= 1);
    auto got = run_reference(*g, feed);
    INFO(got.status().message());
    REQUIRE(got.is_ok());
    check_close(got->at(g->outputs[0]->name), expected_output(dir));
  }
}

namespace {

std::string resize_graph(const std::string& type, const std::string& attrs, const std::string& params,
                         const std::string& args, int opset = 18) {
  return fmt::format(R"(graph "r" opset {} {{
  input %x: {}
{}  %y = Resize(%x, {}) {{{}}} @"up"
  %z = Relu(%y) @"after"
  output %z
}}
)",
                     opset, type, params, args, attrs);
}

}  // namespace

TEST_CASE("a bilinear 2x upsample is two taps per axis, named after the Resize", "[resize][passes]") {
  const std::string text = resize_graph("f32[1,2,3,4]", R"(mode = "linear")",
                                        "  const %s: f32[4] = [1.0, 1.0, 2.0, 2.0]\n", "_, %s");
  auto g = test::parse_or_die(text);
  auto raw = test::parse_or_die(text);
  test::run_frontend_or_die(*g);
  CHECK(count_op(*g, "Resize") == 0);
  CHECK(count_op(*g, "Gather") == 4);  // two taps on each of the two axes
  CHECK(count_op(*g, "Mul") == 4);
  CHECK(count_op(*g, "Add") == 2);
  CHECK(count_op(*g, "Cast") == 0);
  CHECK(g->find_value("y")->type_string() == "f32[1x2x6x8]");  // the Resize's output keeps its name
  bool named = false;
  for (const auto& n : g->nodes()) named = named || n->name == "up/axis2_tap0";
  CHECK(named);
  // The same numbers as the op itself (the raw graph evaluates Resize directly).
  PassContext ctx;
  REQUIRE(infer_shapes(*raw, ctx).is_ok());
  TensorMap feed{{"x", test::random_tensor(DType::kF32, {1, 2, 3, 4}, 3)}};
  auto want = run_reference(*raw, feed);
  auto got = run_reference(*g, feed);
  REQUIRE(want.is_ok());
  REQUIRE(got.is_ok());
  check_close(got->at("z"), want->at("z"));
}

TEST_CASE("nearest resizes are Gathers alone, half inputs interpolate in f32", "[resize][passes]") {
  auto nearest = test::parse_or_die(resize_graph("f16[1,2,3,4]", R"(mode = "nearest")",
                                                 "  const %s: f32[4] = [1.0, 1.0, 2.0, 0.5]\n", "_, %s"));
  test::run_frontend_or_die(*nearest);
  CHECK(count_op(*nearest, "Gather") == 2);
  CHECK(count_op(*nearest, "Mul") == 0);
  CHECK(count_op(*nearest, "Cast") == 0);
  auto linear = test::parse_or_die(resize_graph("f16[1,2,3,4]", R"(mode = "linear")",
                                                "  const %s: f32[4] = [1.0, 1.0, 2.0, 1.0]\n", "_, %s"));
  test::run_frontend_or_die(*linear);
  CHECK(count_op(*linear, "Gather") == 2);  // the width is unchanged: one axis, two taps
  CHECK(count_op(*linear, "Cast") == 3);    // each tap to f32, and the sum back to f16
  CHECK(linear->find_value("y")->type_string() == "f16[1x2x6x4]");
  // A Resize that changes nothing copies its input (and then goes as a no-op).
  auto same = test::parse_or_die(resize_graph("f32[1,2,3,4]", R"(mode = "cubic")",
                                              "  const %s: f32[4] = [1.0, 1.0, 1.0, 1.0]\n", "_, %s"));
  test::run_frontend_or_die(*same);
  CHECK(count_op(*same, "Resize") == 0);
  CHECK(count_op(*same, "Gather") == 0);
  CHECK(same->nodes().size() == 1);  // the Relu
}

TEST_CASE("a bilinear upsample and the op after it are one kernel, equal to the reference on emu",
          "[resize][fusion][emu]") {
  auto g = test::parse_or_die(resize_graph("f32[2,8,16,16]", R"(mode = "linear")",
                                           "  const %s: f32[4] = [1.0, 1.0, 2.0, 2.0]\n", "_, %s"));
  test::run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, test::opts("beam"));
  REQUIRE(plan.is_ok());
  CHECK(plan->cost.kernels == 1);  // 10 nodes (4 Gathers, 4 Muls, 2 Adds) and the Relu
  CHECK(plan->unfused.kernels == 11);
  const auto groups = test::groups_of(*plan);
  CHECK(test::emu_matches_reference(*g, &groups, 5) == 1);
}

TEST_CASE("bad Resize input is an error naming the node", "[resize][errors]") {
  const std::string s4 = "  const %s: f32[4] = [1.0, 1.0, 2.0, 2.0]\n";
  const std::string z4 = "  const %n: i64[4] = [1, 2, 6, 8]\n";
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {resize_graph("f32[1,2,3,4]", R"(mode = "linear")", s4 + z4, "_, %s, %n"),
       "give either scales or sizes, not both"},
      {resize_graph("f32[1,2,3,4]", R"(mode = "linear")", "", "_, _, _"), "needs scales or sizes"},
      {resize_graph("f32[1,2,3,4]", R"(mode = "linear")", "  const %s: f32[2] = [2.0, 2.0]\n", "_, %s"),
       "scales has 2 values for 4 axes"},
      {resize_graph("f32[1,2,3,4]", R"(mode = "linear")", "  const %s: f32[4] = [1.0, 1.0, 0.0, 2.0]\n",
                    "_, %s"),
       "scale 0 of axis 2 must be positive"},
      {resize_graph("f32[1,2,3,4]", R"(mode = "area")", s4, "_, %s"), "unknown mode 'area'"},
      {resize_graph("f32[1,2,3,4]", R"(mode = "linear", coordinate_transformation_mode = "center")", s4,
                    "_, %s"),
       "unknown coordinate_transformation_mode 'center'"},
      {resize_graph("f32[1,2,3,4]", R"(mode = "nearest", nearest_mode = "round")", s4, "_, %s"),
       "unknown nearest_mode 'round'"},
      {resize_graph("f32[1,2,3,4]", R"(keep_aspect_ratio_policy = "fit")", z4, "_, _, %n"),
       "unknown keep_aspect_ratio_policy 'fit'"},
      {resize_graph("f32[1,2,3,4]", R"(axes = ints[2, 2])", "  const %s: f32[2] = [2.0, 2.0]\n", "_, %s"),
       "axis 2 is listed twice"},
      {resize_graph("f32[1,2,3,4]",
                    R"(mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize")", s4, "_, %s"),
       "tf_crop_and_resize needs roi"},
      {resize_graph("f32[1,2,3,4]", R"(mode = "nearest")", "  const %n: i64[4] = [1, 2, 0, 8]\n", "_, _, %n"),
       "size 0 of axis 2 must be positive"},
      {resize_graph("f32[1,2,3,4]", R"(mode = "nearest")", "  const %s: f32[4] = [1.0, 1.0, 0.2, 1.0]\n",
                    "_, %s"),
       "axis 2 of length 3 would be resized to 0"},
      {resize_graph("i64[1,2,3,4]", R"(mode = "linear")", s4, "_, %s"), "mode 'linear' on a i64 tensor"},
      {resize_graph("f32[1,2,3,4]", R"(mode = "linear")", "  const %s: i64[4] = [1, 1, 2, 2]\n", "_, %s"),
       "scales must be a float tensor"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const std::string msg = test::frontend_error(c.text);
    INFO(msg);
    CHECK(msg.find("node 'up' (Resize)") != std::string::npos);
    CHECK(msg.find(c.message) != std::string::npos);
  }
  // Scales computed at run time: a graph input.
  const std::string dynamic = R"(graph "r" opset 18 {
  input %x: f32[1,2,3,4]
  input %s: f32[4]
  %y = Resize(%x, _, %s) {mode = "linear"} @"up"
  output %y
}
)";
  const std::string msg = test::frontend_error(dynamic);
  INFO(msg);
  CHECK(msg.find("node 'up' (Resize): its scales (input 2 's') is computed at run time") !=
        std::string::npos);
  CHECK(msg.find("it is a graph input: make it an initializer") != std::string::npos);
}
