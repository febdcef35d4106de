// GridSample written out by expand_grid_sample (coordinates' arithmetic and a GatherElements per
// tap), planned by beam search and run on emu against the reference interpreter running the op,
// whose definition ONNX's node tests check (test_gridsample_*, 8 at opset 16 and 18 at opset 22).
// Here at the sizes of a deformable attention's sampling (points computed from offsets, some
// outside the image) for every mode, padding and alignment.
#include <fmt/format.h>

#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// X [2, 8, 12, 16] sampled at Tanh(offsets) * 1.2 (about a fifth of the points outside [-1, 1]),
// then Relu; `attrs` GridSample's attributes.
std::string sampling(const std::string& attrs, const char* t = "f32") {
  return fmt::format(R"(graph "g" opset 22 {{
  input %x: {0}[2,8,12,16]
  input %offsets: f32[2,10,9,2]
  const %spread: f32[] = [1.2]
  %t = Tanh(%offsets) @"squash"
  %grid = Mul(%t, %spread) @"spread"
  %y = GridSample(%x, %grid) {{{1}}} @"sample"
  %r = Relu(%y) @"after"
  output %r
}})",
                     t, attrs);
}

// `text` written out, planned and run on emu against the reference running GridSample; returns the
// plan's kernel count.
int64_t check_sampled(const std::string& text, const Tolerance& tol = kEmuF32) {
  return written_out_matches_op(text, {"GridSample"}, 11, tol).cost.kernels;
}

}  // namespace

TEST_CASE(
    "GridSample in every mode, padding and alignment: bilinear sampling and the work around it one kernel",
    "[grid_sample][emu]") {
  // Kernels (2026-11-27): nearest and linear with zeros or border padding 1 (the grid, the sampling
  // and the Relu: 62 nodes for linear); reflection 2 (a coordinate reflected far outside takes 15
  // nodes per axis, past the 64 nodes of a group); cubic 5 or 6 (16 taps: the per-point weights and
  // indices in kernels of their own, 4 of them packed into one launch).
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* pad : {"zeros", "border", "reflection"})
      for (int align : {0, 1}) {
        const std::string attrs =
            fmt::format(R"(mode = "{}", padding_mode = "{}", align_corners = {})", mode, pad, align);
        INFO(attrs);
        const int64_t kernels = check_sampled(sampling(attrs));
        const std::string m = mode, p = pad;
        CHECK(kernels <= (m == "cubic" ? 6 : p == "reflection" ? 2 : 1));
      }
}

TEST_CASE("GridSample over a volume, of float16 pixels, and at opset 16's spelling", "[grid_sample][emu]") {
  CHECK(check_sampled(R"(graph "g" opset 22 {
  input %x: f32[1,3,5,6,7]
  input %offsets: f32[1,4,3,5,3]
  %grid = Tanh(%offsets) @"squash"
  %y = GridSample(%x, %grid) {mode = "linear", padding_mode = "border", align_corners = 1} @"sample"
  output %y
})") <= 2);
  check_sampled(sampling(R"(mode = "linear", padding_mode = "zeros")", "f16"), kEmuF16Output);
  CHECK(check_sampled(R"(graph "g" opset 16 {
  input %x: f32[2,4,6,5]
  input %grid: f32[2,3,7,2]
  %y = GridSample(%x, %grid) {mode = "bicubic", padding_mode = "reflection"} @"sample"
  output %y
})") <= 6);
}

TEST_CASE("GridSample that does not fit is refused, naming the node", "[grid_sample]") {
  CHECK(frontend_error(R"(graph "g" opset 22 {
  input %x: f32[1,3,5,6]
  input %grid: f32[1,4,4,2]
  %y = GridSample(%x, %grid) {mode = "area"} @"sample"
  output %y
})") == "node 'sample' (GridSample): mode 'area' is not nearest, linear (bilinear) or cubic (bicubic)");
  CHECK(frontend_error(R"(graph "g" opset 22 {
  input %x: f32[1,3,5,6]
  input %grid: f32[1,4,4,3]
  %y = GridSample(%x, %grid) @"sample"
  output %y
})") == "node 'sample' (GridSample): grid has shape 1x4x4x3; for X of shape 1x3x5x6 it is 1 x ... x 2 (2 "
        "points' coordinates per batch row)");
  CHECK(frontend_error(R"(graph "g" opset 16 {
  input %x: f32[1,3,5,6,2]
  input %grid: f32[1,4,4,2,3]
  %y = GridSample(%x, %grid) @"sample"
  output %y
})") == "node 'sample' (GridSample): X has shape 1x3x5x6x2; before opset 20 it is 4-D (N x C x H x W)");
  CHECK(frontend_error(R"(graph "g" opset 22 {
  input %x: f32[1,3,5,6]
  input %grid: f32[1,4,4,2]
  %y = GridSample(%x, %grid) {padding_mode = "wrap"} @"sample"
  output %y
})") == "node 'sample' (GridSample): padding_mode 'wrap' is not zeros, border or reflection");
}
