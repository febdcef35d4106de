// DepthToSpace and SpaceToDepth (ops/blocks.cc) and their expansion (expand_block_moves): each op's
// own evaluation against ONNX's expected outputs (ONNX's four node tests and three in
// tests/onnx_node/extra), the expansion fused with its neighbours on emu, and the errors.
#include <fmt/format.h>

#include "backend_test_util.h"
#include "fusion_test_util.h"
#include "importer/tensor_io.h"
#include "reference/compare.h"
#include "support/tolerances.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> block_tests() {
  std::vector<fs::path> d;
  for (const char* n : {"test_depthtospace_example", "test_depthtospace_crd_mode_example",
                        "test_spacetodepth", "test_spacetodepth_example"})
    d.push_back(fs::path(ONNX_TESTDATA_DIR) / "node" / n);
  for (const char* n : {"test_depthtospace_stitch_crd_blocksize3", "test_spacetodepth_stitch_blocksize3",
                        "test_spacetodepth_stitch_crd_28"})
    d.push_back(fs::path(STITCH_SOURCE_DIR) / "tests" / "onnx_node" / "extra" / n);
  return d;
}

}  // namespace

TEST_CASE("DepthToSpace and SpaceToDepth compute ONNX's expected outputs, as ops and expanded",
          "[blocks][reference][passes]") {
  for (const fs::path& dir : block_tests()) {
    INFO(dir.filename().string());
    REQUIRE(fs::exists(dir));
    auto want = read_tensor_file((dir / "test_data_set_0" / "output_0.pb").string());
    REQUIRE(want.is_ok());
    auto [raw, feed] = test::load_node_test(dir, [](size_t) { return false; });
    PassContext ctx;
    REQUIRE(infer_shapes(*raw, ctx).is_ok());  // the op itself
    auto got = run_reference(*raw, feed);
    REQUIRE(got.is_ok());
    CHECK(got->at(raw->outputs[0]->name).to_f64() == want->tensor.to_f64());
    auto [g, feed2] = test::load_node_test(dir, [](size_t) { return false; });
    test::run_frontend_or_die(*g);  // a Reshape, a Transpose and a Reshape
    CHECK(count_op(*g, "DepthToSpace") + count_op(*g, "SpaceToDepth") == 0);
    CHECK(count_op(*g, "Transpose") == 1);
    CHECK(test::emu_run(*g, nullptr, feed2).at(g->outputs[0]->name).to_f64() == want->tensor.to_f64());
  }
}

TEST_CASE("a PixelShuffle joins the kernel of the work around it", "[blocks][fusion][emu]") {
  // A super-resolution tail: a bias and ReLU, DepthToSpace (CRD, as PyTorch writes PixelShuffle),
  // a residual from the upsampled input.
  auto g = test::parse_or_die(R"(graph "sr" opset 17 {
  input %x: f32[2,12,5,7]
  input %skip: f32[2,3,10,14]
  const %bias: f32[12,1,1] = [0.1, -0.2, 0.3, 0.0, 0.5, -0.5, 0.25, 0.75, -1.0, 1.0, 0.125, -0.125]
  %b = Add(%x, %bias) @"bias"
  %r = Relu(%b) @"relu"
  %u = DepthToSpace(%r) {blocksize = 2, mode = "CRD"} @"shuffle"
  %y = Add(%u, %skip) @"residual"
  output %y
}
)");
  test::run_frontend_or_die(*g);
  uint32_t seed = 5;
  test::one_kernel_in_every_planner(*g, seed);
  // And its inverse in front of a reduction: SpaceToDepth, then a softmax over channels.
  auto s = test::parse_or_die(R"(graph "s2d" opset 17 {
  input %x: f32[1,3,8,6]
  %d = SpaceToDepth(%x) {blocksize = 2} @"unshuffle"
  %m = Softmax(%d) {axis = 1} @"softmax"
  output %m
}
)");
  test::run_frontend_or_die(*s);
  CHECK(count_op(*s, "SpaceToDepth") == 0);
  CHECK(test::fused_matches_reference(*s, seed++, test::opts("beam")) == 1);
}

TEST_CASE("DepthToSpace and SpaceToDepth errors name the node and the fault", "[blocks][passes]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"input %x: f32[1,8,2,3]\n  %y = DepthToSpace(%x) {blocksize = 3}",
       "its 8 channels are not a multiple of blocksize^2 = 3 x 3"},
      {"input %x: f32[1,8,2,3]\n  %y = DepthToSpace(%x) {blocksize = 4294967296}",
       "not a multiple of blocksize^2"},
      {"input %x: f32[1,8,2,3]\n  %y = DepthToSpace(%x) {blocksize = 0}",
       "blocksize is 0; it must be positive"},
      {"input %x: f32[1,8,2,3]\n  %y = DepthToSpace(%x) {blocksize = 2, mode = \"RDC\"}",
       "mode 'RDC' is neither DCR nor CRD"},
      {"input %x: f32[8,2,3]\n  %y = DepthToSpace(%x) {blocksize = 2}", "expects an input of rank 4"},
      {"input %x: f32[1,2,4,5]\n  %y = SpaceToDepth(%x) {blocksize = 2}",
       "its height 4 and width 5 must be multiples of blocksize 2"},
  };
  for (const auto& [body, message] : cases) {
    const std::string text = "graph \"g\" opset 17 {\n  " + body + " @\"n\"\n  output %y\n}\n";
    INFO(text);
    const std::string msg = test::frontend_error(text);
    INFO(msg);
    CHECK(msg.find("node 'n' (") != std::string::npos);
    CHECK(msg.find(message) != std::string::npos);
  }
}
