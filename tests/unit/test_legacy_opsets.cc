// Models of opsets 1 to 10: each node's old form, upgraded by the front end (ir/legacy_forms.h),
// computes what the same op written in opset 13's form computes (the reference interpreter on both,
// seeded inputs); what has no opset-11 form is refused naming the node. ONNX's node tests of those
// opsets (Debian's pytorch-converted and pytorch-operator sets among them) check the results
// against values ONNX computed.
#include "fusion_test_util.h"
#include "ir/legacy_forms.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// `legacy` through the front end computes what `modern` computes, and no node is left in an old form.
void same_as_modern(const std::string& legacy, const std::string& modern, uint32_t seed) {
  INFO(legacy);
  auto want = parse_or_die(modern);
  auto g = parse_or_die(legacy);
  CHECK(g->model_opset < kMinOpset);
  CHECK(g->opset == kMinOpset);
  run_frontend_or_die(*g);
  for (const auto& n : g->nodes()) {
    INFO(n->describe());
    CHECK(n->opset >= kMinOpset);
  }
  same_as_original(*want, *g, seed);
}

}  // namespace

TEST_CASE("attributes that became inputs: Slice, Pad, Clip, TopK", "[legacy]") {
  same_as_modern(R"(graph "g" opset 9 {
  input %x: f32[4,5,6]
  %y = Slice(%x) {starts = ints[1, 0], ends = ints[3, -1], axes = ints[0, 2]} @"s"
  output %y
})",
                 R"(graph "g" opset 13 {
  input %x: f32[4,5,6]
  const %b: i64[2] = [1, 0]
  const %e: i64[2] = [3, -1]
  const %a: i64[2] = [0, 2]
  %y = Slice(%x, %b, %e, %a) @"s"
  output %y
})",
                 1);
  same_as_modern(R"(graph "g" opset 6 {
  input %x: f32[2,3,4]
  %y = Pad(%x) {pads = ints[0, 1, 2, 0, 0, 1], value = 1.5} @"p"
  %z = Pad(%x) {pads = ints[0, 0, 2, 0, 0, 1], mode = "reflect"} @"r"
  output %y
  output %z
})",
                 R"(graph "g" opset 13 {
  input %x: f32[2,3,4]
  const %p: i64[6] = [0, 1, 2, 0, 0, 1]
  const %v: f32[] = [1.5]
  const %q: i64[6] = [0, 0, 2, 0, 0, 1]
  %y = Pad(%x, %p, %v) @"p"
  %z = Pad(%x, %q) {mode = "reflect"} @"r"
  output %y
  output %z
})",
                 3);
  same_as_modern(R"(graph "g" opset 10 {
  input %x: f32[3,7]
  %y = Clip(%x) {min = -0.5, max = 0.75} @"c"
  %z = Clip(%x) {max = 0.25} @"m"
  %w = Clip(%x) @"n"
  output %y
  output %z
  output %w
})",
                 R"(graph "g" opset 13 {
  input %x: f32[3,7]
  const %lo: f32[] = [-0.5]
  const %hi: f32[] = [0.75]
  const %h2: f32[] = [0.25]
  %y = Clip(%x, %lo, %hi) @"c"
  %z = Clip(%x, _, %h2) @"m"
  %w = Clip(%x) @"n"
  output %y
  output %z
  output %w
})",
                 5);
  same_as_modern(R"(graph "g" opset 9 {
  input %x: f32[3,8]
  %v, %i = TopK(%x) {k = 3, axis = 1} @"t"
  output %v
  output %i
})",
                 R"(graph "g" opset 13 {
  input %x: f32[3,8]
  const %k: i64[1] = [3]
  %v, %i = TopK(%x, %k) {axis = 1} @"t"
  output %v
  output %i
})",
                 7);
}

TEST_CASE("Upsample and Resize-10 read as Resize with the asymmetric mapping", "[legacy]") {
  const std::string nearest = R"(graph "g" opset 13 {
  input %x: f32[1,2,3,4]
  const %s: f32[4] = [1.0, 1.0, 2.0, 3.0]
  %y = Resize(%x, _, %s) {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"} @"u"
  output %y
})";
  same_as_modern(R"(graph "g" opset 7 {
  input %x: f32[1,2,3,4]
  %y = Upsample(%x) {scales = floats[1.0, 1.0, 2.0, 3.0]} @"u"
  output %y
})",
                 nearest, 11);
  same_as_modern(R"(graph "g" opset 10 {
  input %x: f32[1,2,3,4]
  const %s: f32[4] = [1.0, 1.0, 2.0, 3.0]
  %y = Resize(%x, %s) {mode = "nearest"} @"u"
  output %y
})",
                 nearest, 13);
  same_as_modern(R"(graph "g" opset 9 {
  input %x: f32[1,2,3,4]
  const %s: f32[4] = [1.0, 1.0, 2.0, 1.5]
  %y = Upsample(%x, %s) {mode = "linear"} @"u"
  output %y
})",
                 R"(graph "g" opset 13 {
  input %x: f32[1,2,3,4]
  const %s: f32[4] = [1.0, 1.0, 2.0, 1.5]
  %y = Resize(%x, _, %s) {mode = "linear", coordinate_transformation_mode = "asymmetric"} @"u"
  output %y
})",
                 15);
}

TEST_CASE("opset 6's broadcasts: along an axis, and PRelu's slope per channel", "[legacy]") {
  uint32_t state = 3;
  const std::string c = lcg_values(state, 20);
  same_as_modern(R"(graph "g" opset 6 {
  input %x: f32[2,3,4,5]
  const %b: f32[3] = [0.5, -1.0, 2.0]
  const %c: f32[4,5] = )" +
                     c + R"(
  %y = Add(%x, %b) {broadcast = 1, axis = 1} @"bias"
  %z = Mul(%y, %c) {broadcast = 1} @"scale"
  %w = PRelu(%z, %b) @"prelu"
  output %w
})",
                 R"(graph "g" opset 13 {
  input %x: f32[2,3,4,5]
  const %b: f32[3,1,1] = [0.5, -1.0, 2.0]
  const %c: f32[4,5] = )" +
                     c + R"(
  %y = Add(%x, %b) @"bias"
  %z = Mul(%y, %c) @"scale"
  %w = PRelu(%z, %b) @"prelu"
  output %w
})",
                 17);
}

TEST_CASE("renamed ops and attributes inference does without", "[legacy]") {
  same_as_modern(R"(graph "g" opset 10 {
  input %x: f32[3,4]
  input %u: f32[2,4]
  const %i: i64[2,4] = [0, 2, 1, 0, 2, 1, 0, 2]
  %y = Scatter(%x, %i, %u) {axis = 0} @"s"
  output %y
})",
                 R"(graph "g" opset 13 {
  input %x: f32[3,4]
  input %u: f32[2,4]
  const %i: i64[2,4] = [0, 2, 1, 0, 2, 1, 0, 2]
  %y = ScatterElements(%x, %i, %u) {axis = 0} @"s"
  output %y
})",
                 19);
  same_as_modern(R"(graph "g" opset 6 {
  input %x: f32[2,3,4]
  input %w: f32[5,4]
  const %s: f32[3] = [1.0, 0.5, 2.0]
  const %b: f32[3] = [0.0, 1.0, -1.0]
  const %m: f32[3] = [0.1, 0.2, 0.3]
  const %v: f32[3] = [1.0, 2.0, 0.5]
  const %c: f32[5] = [1.0, 2.0, 3.0, 4.0, 5.0]
  %y = BatchNormalization(%x, %s, %b, %m, %v) {is_test = 1, spatial = 1, epsilon = 0.001} @"bn"
  %d = Dropout(%y) {is_test = 1, ratio = 0.25} @"drop"
  %f = Flatten(%d) {axis = 2} @"flat"
  %g = Gemm(%f, %w, %c) {transB = 1, broadcast = 1} @"fc"
  output %g
})",
                 R"(graph "g" opset 13 {
  input %x: f32[2,3,4]
  input %w: f32[5,4]
  const %s: f32[3] = [1.0, 0.5, 2.0]
  const %b: f32[3] = [0.0, 1.0, -1.0]
  const %m: f32[3] = [0.1, 0.2, 0.3]
  const %v: f32[3] = [1.0, 2.0, 0.5]
  const %c: f32[5] = [1.0, 2.0, 3.0, 4.0, 5.0]
  %y = BatchNormalization(%x, %s, %b, %m, %v) {epsilon = 0.001} @"bn"
  %f = Flatten(%y) {axis = 2} @"flat"
  %g = Gemm(%f, %w, %c) {transB = 1} @"fc"
  output %g
})",
                 23);
}

TEST_CASE(
    "opsets 1 to 5: consumed_inputs, Cast-1's type name, Reshape-1's shape, Concat-1's axis, Split-1, "
    "Tile-1, Pad-1",
    "[legacy]") {
  same_as_modern(R"(graph "g" opset 1 {
  input %x: f32[2,3,4]
  input %z: f32[2,3,4]
  %r = Relu(%x) {consumed_inputs = ints[0]} @"relu"
  %a = Add(%r, %z) {consumed_inputs = ints[0, 0]} @"add"
  %c = Cast(%a) {to = "int32"} @"cast"
  %s = Reshape(%c) {shape = ints[6, 4]} @"reshape"
  %k = Concat(%s, %s) @"concat"
  %p = Pad(%x) {paddings = ints[0, 1, 0, 0, 2, 0], value = 0.5} @"pad"
  output %k
  output %p
})",
                 R"(graph "g" opset 13 {
  input %x: f32[2,3,4]
  input %z: f32[2,3,4]
  const %shape: i64[2] = [6, 4]
  const %pads: i64[6] = [0, 1, 0, 0, 2, 0]
  const %v: f32[] = [0.5]
  %r = Relu(%x) @"relu"
  %a = Add(%r, %z) @"add"
  %c = Cast(%a) {to = 6} @"cast"
  %s = Reshape(%c, %shape) @"reshape"
  %k = Concat(%s, %s) {axis = 1} @"concat"
  %p = Pad(%x, %pads, %v) @"pad"
  output %k
  output %p
})",
                 29);
  same_as_modern(R"(graph "g" opset 1 {
  input %x: f32[6,5]
  const %sizes: i64[2] = [2, 4]
  const %tiles: i64[] = [3]
  const %axis: i64[] = [-1]
  %a, %b = Split(%x, %sizes) {axis = 0} @"split"
  %t = Tile(%b, %tiles, %axis) @"tile"
  output %a
  output %t
})",
                 R"(graph "g" opset 13 {
  input %x: f32[6,5]
  const %sizes: i64[2] = [2, 4]
  const %reps: i64[2] = [1, 3]
  %a, %b = Split(%x, %sizes) {axis = 0} @"split"
  %t = Tile(%b, %reps) @"tile"
  output %a
  output %t
})",
                 31);
  CHECK(frontend_error(R"(graph "g" opset 5 {
  input %x: f32[2,3]
  %y = Cast(%x) {to = "FLOAT128"} @"cast"
  output %y
})") == "node 'cast' (Cast) (opset 5): 'to' names 'FLOAT128', not a type of TensorProto (FLOAT, INT64, ...); "
        "correct the model");
  CHECK(frontend_error(R"(graph "g" opset 3 {
  input %x: f32[2,3]
  input %n: i64[]
  const %axis: i64[] = [1]
  %y = Tile(%x, %n, %axis) @"tile"
  output %y
})") == "node 'tile' (Tile) (opset 3): its tiles and axis are not one constant value each; convert the model "
        "to a newer opset (onnx.version_converter.convert_version(model, 17)) or re-export it");
}

TEST_CASE("old forms with no opset-11 form are refused naming the node", "[legacy]") {
  CHECK(frontend_error(R"(graph "g" opset 6 {
  input %x: f32[2,3,4]
  input %b: f32[3]
  %y = Add(%x, %b) {broadcast = 1, axis = 1} @"bias"
  output %y
})") == "node 'bias' (Add) (opset 6): B, computed at run time, is broadcast along A's axes from 1 (a legacy "
        "broadcast that is not numpy's); convert the model to a newer opset "
        "(onnx.version_converter.convert_version(model, 17)) or re-export it");
  CHECK(frontend_error(R"(graph "g" opset 6 {
  input %x: f32[2,3,4]
  const %b: f32[4] = [1.0, 2.0, 3.0, 4.0]
  %y = Add(%x, %b) {broadcast = 1, axis = 1} @"bias"
  output %y
})") == "node 'bias' (Add) (opset 6): B's shape 4 does not match A's 2x3x4 from axis 1; correct the model");
  constexpr const char* bn = R"(graph "g" opset {} {{
  input %x: f32[2,3,4]
  const %s: f32[3] = [1.0, 0.5, 2.0]
  %y = BatchNormalization(%x, %s, %s, %s, %s) {{{}}} @"bn"
  output %y
}})";
  CHECK(
      frontend_error(fmt::format(fmt::runtime(bn), 6, "")) ==
      "node 'bn' (BatchNormalization) (opset 6): is_test=0 asks for training mode (batch statistics); export "
      "the model in eval mode");
  CHECK(frontend_error(fmt::format(fmt::runtime(bn), 8, "spatial = 0")) ==
        "node 'bn' (BatchNormalization) (opset 8): spatial=0 (statistics per activation rather than per "
        "channel) "
        "has no form from opset 9; re-export the model with BatchNorm statistics per channel");
  CHECK(frontend_error(fmt::format(fmt::runtime(bn), 8, "spatial = 1")).empty());
  CHECK(frontend_error(R"(graph "g" opset 9 {
  input %x: f32[2,3]
  %y, %m = Dropout(%x) @"drop"
  output %y
  output %m
})") == "node 'drop' (Dropout) (opset 9): its mask output has the data's type before opset 10 (bool after); "
        "convert the model to a newer opset (onnx.version_converter.convert_version(model, 17)) or re-export "
        "it");
  CHECK(frontend_error(R"(graph "g" opset 7 {
  input %x: f32[1,1,2,2]
  %y = Upsample(%x) {scales = floats[1.0, 1.0, 2.0, 2.0], mode = "cubic"} @"up"
  output %y
})") == "node 'up' (Upsample) (opset 7): mode 'cubic' is not one of nearest and linear; correct the model");
}
