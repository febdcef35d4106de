// Back end: the printer, ptxas parsing, schedules of the shipped models (memory plan verified,
// every step's buffers placed, byte-stable output, launch counts), goldens, and odd-shaped
// graphs compiled and run on the emu backend against the reference interpreter.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "backend_test_util.h"
#include "codegen/artifact.h"
#include "codegen/cuda_writer.h"
#include "codegen/embedded_headers.h"
#include "codegen/library.h"
#include "codegen/lower.h"
#include "codegen/scalar_ops.h"

using namespace stitch;
using namespace stitch::codegen;
namespace fs = std::filesystem;

TEST_CASE("the printer indents scopes and closes them", "[codegen]") {
  CudaWriter w;
  w.comment("one\ntwo");
  {
    Block b(w, "if ({})", "x");
    w.line("y = {};", 1);
  }
  CHECK(w.text() == "// one\n// two\nif (x) {\n  y = 1;\n}\n");
  CHECK(w.depth() == 0);
}

TEST_CASE("literals keep their type", "[codegen]") {
  CHECK(literal(0.5, "float") == "0.5f");
  CHECK(literal(2, "float") == "2.0f");
  CHECK(literal(2, "double") == "2.0");
  CHECK(literal(3, "long long") == "3LL");
  CHECK(literal(-INFINITY, "float") == "__int_as_float(0xff800000)");
}

TEST_CASE("Pow by a constant 2 is one multiply and loads no exponent, other exponents keep pow",
          "[codegen][emu][nvcc]") {
  // RMSNorm's x^2. The square as a node alone (one thread per element, and per 4 elements with
  // 128-bit accesses) and stitched into a reduction; x^3 and an exponent from a graph input keep
  // powf. Every kernel runs on emu like the reference and goes through nvcc with warnings as
  // errors (a loaded exponent no expression reads would be one).
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[3,37]
  input %v: f32[8,16]
  input %e: f32[]
  const %two: f32[] = [2.0]
  const %three: f32[] = [3.0]
  const %ax: i64[1] = [-1]
  %sq = Pow(%x, %two) @"square"
  %sv = Pow(%v, %two) @"square_vec4"
  %cu = Pow(%x, %three) @"cube"
  %ax2 = Abs(%x) @"abs"
  %any = Pow(%ax2, %e) @"any"
  %s2 = Pow(%v, %two) @"square_in_rows"
  %ms = ReduceMean(%s2, %ax) @"mean"
  output %sq
  output %sv
  output %cu
  output %any
  output %ms
}
)");
  test::run_frontend_or_die(*g);
  std::map<std::string, const Node*> by;
  for (const auto& n : g->nodes()) by[n->name] = n.get();
  auto expr = [&](const char* name) {
    auto e = scalar_expr(*by.at(name), {"v0", "v1"});
    REQUIRE(e.is_ok());
    return *e;
  };
  CHECK(expr("square") == "(v0 * v0)");
  CHECK(expr("cube") == "powf(v0, v1)");
  CHECK(expr("any") == "powf(v0, v1)");
  CHECK_FALSE(reads_operand(*by.at("square"), 1));
  CHECK(reads_operand(*by.at("square"), 0));
  CHECK(reads_operand(*by.at("cube"), 1));
  const NodeGroups groups{{by.at("square")}, {by.at("square_vec4")},
                          {by.at("cube")},   {by.at("abs")},
                          {by.at("any")},    {by.at("square_in_rows"), by.at("mean")}};
  CHECK(test::emu_matches_reference(*g, &groups, 17) == 6);
  auto s = build_schedule(*g, &groups);
  REQUIRE(s.is_ok());
  const fs::path dir = fs::temp_directory_path() / ("stitch_unit_pow_" + std::to_string(getpid()));
  int squares = 0;
  for (const Kernel& k : s->kernels) {
    INFO(k.name << ": " << k.mapping << "\n" << k.source);
    bool square = false;
    for (const Node* n : k.nodes) square |= n->name.rfind("square", 0) == 0;
    squares += square;
    CHECK((k.source.find("powf") == std::string::npos) == (square || k.nodes.front()->name == "abs"));
    if (k.nodes.front()->name == "square_vec4")
      CHECK(k.mapping.find("one thread per 4 elements") != std::string::npos);
    test::nvcc_compiles_cleanly(k, dir);
  }
  CHECK(squares == 3);
  fs::remove_all(dir);
}

TEST_CASE("ptxas resource lines are parsed per kernel", "[codegen]") {
  const std::string log =
      "ptxas info    : Compiling entry function 'k000_map_add' for 'sm_90'\n"
      "ptxas info    : Function properties for k000_map_add\n"
      "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 30 registers, used 1 barriers, 128 bytes smem, 372 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'k001_row_softmax' for 'sm_80'\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 18 registers, 368 bytes cmem[0]\n";
  auto r = parse_ptxas(log);
  REQUIRE(r.size() == 2);
  CHECK(r[0].kernel == "k000_map_add");
  CHECK(r[0].arch == "sm_90");
  CHECK(r[0].registers == 30);
  CHECK(r[0].spill_stores == 4);
  CHECK(r[0].spill_loads == 12);
  CHECK(r[0].smem_bytes == 128);
  CHECK(r[0].stack_bytes == 8);
  CHECK(r[1].registers == 18);
  CHECK(r[1].smem_bytes == 0);
}

TEST_CASE("schedules of the shipped models: plan verified, buffers placed, output byte-stable", "[codegen][models]") {
  // Unfused launch counts at the shipped test data's shapes: a change that adds launches shows here.
  // seg_small's 6 calls are its convolutions (its pools are kernels).
  // (A Gemm's bias vector is added in the GEMM's epilogue: no broadcast kernel.)
  const std::map<std::string, std::pair<size_t, size_t>> expected = {
      {"bert_tiny", {61, 17}},
      {"gpt2_tiny", {94, 12}},
      {"llama_tiny", {104, 18}},
      {"cnn_small", {17, 10}},
      {"seg_small", {67, 6}}};  // seg_small: its 4 Resizes as 56 Gathers, Muls and Adds, one kernel each
  for (const auto& [name, counts] : expected) {
    INFO(name);
    auto g = test::prepared_model(name);
    auto a = build_schedule(*g);
    INFO(a.status().message());
    REQUIRE(a.is_ok());
    CHECK(a->kernels.size() == counts.first);
    CHECK(a->calls.size() == counts.second);
    Status st = verify_memory_plan(a->requests, a->plan);
    INFO(st.message());
    CHECK(st.is_ok());
    CHECK(a->plan.arena_bytes < a->plan.total_bytes);
    for (const Kernel& k : a->kernels)
      for (const KernelParam& p : k.params) CHECK(a->buffers.count(p.value) == 1);
    // A second build from a fresh import emits identical text.
    auto g2 = test::prepared_model(name);
    auto b = build_schedule(*g2);
    REQUIRE(b.is_ok());
    REQUIRE(a->kernels.size() == b->kernels.size());
    for (size_t i = 0; i < a->kernels.size(); ++i) CHECK(a->kernels[i].source == b->kernels[i].source);
    CHECK(a->plan.offsets == b->plan.offsets);
  }
}

TEST_CASE("golden kernels: layer norm and softmax of bert_tiny", "[codegen][golden]") {
  // To accept an intended change: stitchc compile models/bert_tiny/model.onnx -o /tmp/b
  //   --shape batch=2 --shape sequence=16 --no-nvcc --no-emu --fusion none, then copy the two files
  //   here.
  auto g = test::prepared_model("bert_tiny");
  auto s = build_schedule(*g);
  REQUIRE(s.is_ok());
  const fs::path golden = fs::path(STITCH_SOURCE_DIR) / "tests" / "codegen" / "golden";
  int compared = 0;
  for (const Kernel& k : s->kernels) {
    const fs::path p = golden / (k.name + ".cu");
    if (!fs::exists(p)) continue;
    INFO(k.name);
    CHECK(k.source == test::read_text_file(p));
    ++compared;
  }
  CHECK(compared == 2);
}

TEST_CASE("odd shapes and every thread mapping run on the emu backend like the reference", "[codegen][emu]") {
  SECTION("row softmax over 3x100000 (each row split over blocks) and 37x770 (warp per row)") {
    auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[3,100000]
  input %z: f32[37,770]
  %y = Softmax(%x) {axis = -1} @"sm"
  %w = LogSoftmax(%z) {axis = 1} @"lsm"
  output %y
  output %w
}
)");
    test::run_frontend_or_die(*g);
    test::emu_matches_reference(*g, nullptr, 1);
  }
  SECTION("column reduction 1000x37 (tiled), 1x1, keepdims off, middle axis") {
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[1000,37]
  input %o: f32[1,1]
  input %m: f32[4,33,5]
  const %a0: i64[1] = [0]
  const %a1: i64[1] = [1]
  %s = ReduceSum(%x, %a0) {keepdims = 0} @"col"
  %t = ReduceMax(%o, %a1) @"one"
  %u = ReduceMean(%m, %a1) @"mid"
  %v = ArgMax(%m) {axis = 1} @"arg"
  output %s
  output %t
  output %u
  output %v
}
)");
    test::run_frontend_or_die(*g);
    test::emu_matches_reference(*g, nullptr, 1);
  }
  SECTION("TopK: largest and smallest, an inner axis, ties to the lower index, NaN, float16 and int64") {
    // %t holds the integers 0 to 2 (random floats times 3, floored): most of each row ties, so the
    // indices show the order ONNX sets (equal values, the lower index first). %q is NaN where %x
    // is negative: NaN orders above every number.
    auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[6,37]
  input %m: f32[4,9,5]
  input %h: f16[3,20]
  input %i: i64[5,8]
  const %three: f32[] = [3.0]
  const %k2: i64[1] = [2]
  const %k3: i64[1] = [3]
  const %k9: i64[1] = [9]
  %f = Mul(%x, %three)
  %t = Floor(%f)
  %v1, %i1 = TopK(%t, %k9) {axis = 1} @"ties"
  %v2, %i2 = TopK(%m, %k3) {axis = 1, largest = 0} @"inner"
  %v3, %i3 = TopK(%h, %k2) @"half"
  %v4, %i4 = TopK(%i, %k3) {axis = 0} @"ints"
  %q = Sqrt(%x)
  %v5, %i5 = TopK(%q, %k9) @"nan_largest"
  %v6, %i6 = TopK(%q, %k9) {largest = 0} @"nan_smallest"
  output %v5
  output %i5
  output %v6
  output %i6
  output %v1
  output %i1
  output %v2
  output %i2
  output %v3
  output %i3
  output %v4
  output %i4
}
)");
    test::run_frontend_or_die(*g);
    test::emu_matches_reference(*g, nullptr, 1);
  }
  SECTION("Col2Im: overlapping blocks with dilation and padding, strided blocks, float16") {
    // 2 channels of 3x3 blocks over a 9x11 image, dilation 2, pads 1 and 2, stride 1: positions
    // (9 + 1 + 1 - 5) + 1 = 7 by (11 + 2 + 2 - 5) + 1 = 11; and 2x2 blocks at stride 2 (MobileViTV2's
    // fold) in float16.
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[2,18,77]
  input %h: f16[1,12,16]
  const %im: i64[2] = [9, 11]
  const %bl: i64[2] = [3, 3]
  const %im2: i64[2] = [8, 8]
  const %bl2: i64[2] = [2, 2]
  %y = Col2Im(%x, %im, %bl) {dilations = ints[2, 2], pads = ints[1, 2, 1, 2]} @"overlap"
  %z = Col2Im(%h, %im2, %bl2) {strides = ints[2, 2]} @"fold"
  output %y
  output %z
}
)");
    test::run_frontend_or_die(*g);
    test::emu_matches_reference(*g, nullptr, 1);
  }
  SECTION("layer norm 37x770 with broadcast scale, bias add with every broadcast kind, transpose, slice, concat") {
    auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[37,770]
  input %s: f32[770]
  input %b: f32[37,1]
  input %c: f32[1,770]
  input %k: f32[1]
  const %st: i64[1] = [5]
  const %en: i64[1] = [700]
  const %ax: i64[1] = [1]
  const %sp: i64[1] = [3]
  %n = LayerNormalization(%x, %s) {axis = -1, epsilon = 0.00001} @"ln"
  %p = Add(%n, %b) @"col_bcast"
  %q = Mul(%p, %c) @"row_bcast"
  %r = Sub(%q, %k) @"scalar_bcast"
  %t = Transpose(%r) {perm = ints[1, 0]} @"tr"
  %l = Slice(%r, %st, %en, %ax, %sp) @"sl"
  %j = Concat(%l, %l) {axis = 0} @"cat"
  output %t
  output %j
}
)");
    test::run_frontend_or_die(*g);
    test::emu_matches_reference(*g, nullptr, 1);
  }
}

TEST_CASE("column reductions with few long segments are tiled: 32 segments x 8 threads per block",
          "[codegen][emu]") {
  // Segment counts that do not fill the last tile (37, 50, 130), f16 and i64 inputs, softmax and
  // a mean over a middle axis (a sentence embedding's mean over the sequence).
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[1000,37]
  input %h: f16[300,50]
  input %i: i64[500,130]
  input %e: f32[2,128,96]
  input %w: f32[40,6]
  const %a0: i64[1] = [0]
  const %a1: i64[1] = [1]
  %s = ReduceSum(%x, %a0) {keepdims = 0} @"colsum"
  %m = ReduceMax(%h, %a0) @"colmax_f16"
  %k = ReduceMin(%i, %a0) @"colmin_i64"
  %p = ReduceMean(%e, %a1) {keepdims = 0} @"seq_mean"
  %q = Softmax(%x) {axis = 0} @"col_softmax"
  %r = ReduceLogSumExp(%x, %a0) @"col_lse"
  %t = ReduceSum(%w, %a0) @"short_colsum"
  output %s
  output %m
  output %k
  output %p
  output %q
  output %r
  output %t
}
)");
  test::run_frontend_or_die(*g);
  auto s = build_schedule(*g);
  REQUIRE(s.is_ok());
  REQUIRE(s->kernels.size() == 7);
  for (const Kernel& k : s->kernels) {
    INFO(k.name << ": " << k.mapping);
    const bool tiled = k.mapping.rfind("tiled", 0) == 0;
    // 40 rows of 6 columns: segments shorter than kTileMinLength stay thread per segment.
    CHECK(tiled == (k.nodes[0]->name != "short_colsum"));
    if (!tiled) continue;
    CHECK(k.block[0] == kTileBlock);
    CHECK_THAT(k.source, Catch::Contains("tile_column_reduce("));
    CHECK_THAT(k.source, Catch::Contains("if (live)"));
  }
  CHECK(s->kernels[0].grid[0] == 2);  // 37 segments: two tiles, the second 5 live
  CHECK(s->kernels[3].grid[0] == 6);  // 2 x 96 segments of 128
  test::emu_matches_reference(*g, nullptr, 23, kEmuF16Output);

  // Many segments keep a thread each: they fill the GPU already.
  auto wide = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[100,20000]
  const %a0: i64[1] = [0]
  %s = ReduceSum(%x, %a0) @"colsum"
  output %s
}
)");
  test::run_frontend_or_die(*wide);
  auto ws = build_schedule(*wide);
  REQUIRE(ws.is_ok());
  CHECK(ws->kernels[0].mapping.rfind("thread per segment", 0) == 0);
  CHECK_FALSE(column_tiled(20000, 100));
  CHECK(column_tiled(kTileMaxSegments - 1, kTileMinLength));
}

TEST_CASE("transposes that move the inner axis copy through padded shared-memory tiles", "[codegen][emu]") {
  // 2-D, reversed 3-D, NHWC -> NCHW, f16, i64, bool, unit axes, partial tiles on every side;
  // more tiles than blocks (u8, a grid-stride loop over 4100 planes). Not tiled: the inner axis
  // kept in place, a side shorter than 16.
  auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %a: f32[64,48]
  input %b: f32[40,3,50]
  input %c: f32[2,20,30,24]
  input %d: f16[33,70]
  input %e: i64[17,65]
  input %f: f32[1,37,1,45]
  input %h: u8[4100,32,17]
  input %k: f32[4,33,70,5]
  input %m: f32[100,8]
  %ta = Transpose(%a) {perm = ints[1, 0]} @"t2d"
  %tb = Transpose(%b) {perm = ints[2, 1, 0]} @"reversed"
  %tc = Transpose(%c) {perm = ints[0, 3, 1, 2]} @"nhwc_to_nchw"
  %td = Transpose(%d) {perm = ints[1, 0]} @"half"
  %te = Transpose(%e) {perm = ints[1, 0]} @"int64"
  %g1 = Greater(%a, %a) @"cmp"
  %tg = Transpose(%g1) {perm = ints[1, 0]} @"bools"
  %tf = Transpose(%f) {perm = ints[3, 2, 1, 0]} @"unit_axes"
  %th = Transpose(%h) {perm = ints[0, 2, 1]} @"many_planes"
  %tk = Transpose(%k) {perm = ints[0, 2, 1, 3]} @"inner_kept"
  %tm = Transpose(%m) {perm = ints[1, 0]} @"short_side"
  output %ta
  output %tb
  output %tc
  output %td
  output %te
  output %tg
  output %tf
  output %th
  output %tk
  output %tm
}
)");
  test::run_frontend_or_die(*g);
  auto s = build_schedule(*g);
  REQUIRE(s.is_ok());
  int tiled = 0;
  for (const Kernel& k : s->kernels) {
    if (k.nodes[0]->op_type != "Transpose") continue;
    INFO(k.nodes[0]->name << ": " << k.mapping);
    const bool want = k.nodes[0]->name != "inner_kept" && k.nodes[0]->name != "short_side";
    CHECK((k.mapping.rfind("tiled transpose", 0) == 0) == want);
    if (!want) continue;
    ++tiled;
    CHECK_THAT(k.source, Catch::Contains("tile[32][33]"));
    if (k.nodes[0]->name == "many_planes") CHECK(k.grid[0] == kMaxMapBlocks);  // 4100 tiles
    if (k.nodes[0]->name == "half") CHECK_THAT(k.source, Catch::Contains("unsigned short"));
    if (k.nodes[0]->name == "nhwc_to_nchw") CHECK_THAT(k.mapping, Catch::Contains("40 planes of 24 x 30"));
  }
  CHECK(tiled == 8);
  test::emu_matches_reference(*g, nullptr, 29, kEmuF16Output);
}

TEST_CASE("a Gemm's bias vector goes to the GEMM epilogue, any other C is broadcast by a kernel first",
          "[codegen][emu]") {
  // C of [n] and [1,n] with beta 1: one call with the bias epilogue and no kernel. C of [m,1],
  // or beta 0.5: a broadcast kernel, then the call accumulates with beta. Each matches the
  // reference on the emu backend (transB and alpha on the way).
  struct Case {
    const char* c;
    const char* beta;
    bool epilogue;
  };
  for (const Case& t : {Case{"f32[6]", "1.0", true}, Case{"f32[1,6]", "1.0", true}, Case{"f32[5,1]", "1.0", false},
                        Case{"f32[6]", "0.5", false}}) {
    INFO(t.c << " beta " << t.beta);
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 17 {{
  input %a: f32[5,4]
  input %b: f32[6,4]
  input %c: {}
  %y = Gemm(%a, %b, %c) {{transB = 1, alpha = 0.5, beta = {}}} @"gemm"
  %z = Relu(%y) @"relu"
  output %z
}}
)", t.c, t.beta));
    test::run_frontend_or_die(*g);
    auto s = build_schedule(*g);
    REQUIRE(s.is_ok());
    REQUIRE(s->calls.size() == 1);
    CHECK((s->calls[0].gemm.epilogue == "bias") == t.epilogue);
    CHECK(s->calls[0].args.size() == (t.epilogue ? 4u : 3u));
    CHECK(s->kernels.size() == (t.epilogue ? 1u : 2u));  // Relu, and the broadcast when no epilogue
    CHECK(codegen::gemm_bias_epilogue(*g->nodes().front()) == t.epilogue);
    test::emu_matches_reference(*g, nullptr, 17);
  }
}

TEST_CASE("batched MatMuls become fewer, larger GEMMs with the same result", "[codegen][emu]") {
  // A batch dim over which B is broadcast and A's and C's rows continue becomes rows (a linear
  // layer over [batch, seq, k] is one GEMM); dims whose strides compose in A, B and C merge; size-1
  // dims go; the largest dim left is the last (the strided-batched one). Each matches the
  // reference on the emu backend.
  struct Case {
    const char *a, *b;
    int64_t m;
    Dims batch;
  };
  for (const Case& t :
       {Case{"f32[2,3,5,4]", "f32[4,6]", 30, {}}, Case{"f32[2,3,5,4]", "f32[2,3,4,6]", 5, {6}},
        Case{"f32[1,4,5,4]", "f32[4,6]", 20, {}}, Case{"f32[2,3,5,4]", "f32[3,4,6]", 5, {2, 3}},
        Case{"f32[3,2,5,4]", "f32[2,4,6]", 5, {2, 3}}, Case{"f32[2,1,5,4]", "f32[3,4,6]", 5, {2, 3}},
        Case{"f32[5,4]", "f32[3,4,6]", 5, {3}}}) {
    INFO(t.a << " x " << t.b);
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 17 {{
  input %a: {}
  input %b: {}
  %y = MatMul(%a, %b) @"mm"
  %z = Relu(%y) @"relu"
  output %z
}}
)",
                                            t.a, t.b));
    test::run_frontend_or_die(*g);
    auto s = build_schedule(*g);
    REQUIRE(s.is_ok());
    REQUIRE(s->calls.size() == 1);
    const GemmParams& p = s->calls[0].gemm;
    CHECK(p.m == t.m);
    CHECK(p.batch == t.batch);
    CHECK(p.stride_a.size() == t.batch.size());
    test::emu_matches_reference(*g, nullptr, 31);
  }
}

TEST_CASE("stitchc carries every device and emulation header as the source tree has it", "[codegen]") {
  // Each header under the two include directories, by its path there, with the same bytes; and
  // nothing else. An artifact's kernels/ holds the device headers from this copy.
  std::map<std::string, std::string> tree;
  for (const char* root : {"runtime/emu/include", "runtime/device/include"}) {
    const fs::path dir = fs::path(STITCH_SOURCE_DIR) / root;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && (e.path().extension() == ".h" || e.path().extension() == ".cuh"))
        tree[fs::relative(e.path(), dir).string()] = test::read_text_file(e.path());
  }
  std::map<std::string, std::string> carried;
  for (const EmbeddedFile& h : embedded_headers()) {
    INFO(h.path);
    CHECK(carried.emplace(std::string(h.path), std::string(h.text)).second);  // no path twice
  }
  CHECK(tree.size() >= 9);
  CHECK(tree.count("stitch/emu/emu.h") == 1);
  CHECK(tree.count("stitch/device/stitch_device.cuh") == 1);
  CHECK(carried == tree);
  CHECK(embedded_headers_digest().size() == 64);
}

TEST_CASE("the emulation library builds on the precompiled header when it can, and on the header when not",
          "[codegen][emu]") {
  auto g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[3,37]
  %e = Exp(%x) @"exp"
  %y = Softmax(%e) @"softmax"
  output %y
}
)");
  test::run_frontend_or_die(*g);
  auto s = build_schedule(*g);
  REQUIRE(s.is_ok());
  const fs::path scratch = fs::temp_directory_path() / ("stitch_unit_pch_" + std::to_string(getpid()));
  fs::create_directories(scratch);
  const Tensor x = test::random_tensor(DType::kF32, {3, 37}, 7);
  auto want = run_reference(*g, {{"x", x}});
  REQUIRE(want.is_ok());
  // Compiles with `pch` as CompileOptions::emu_pch, runs on emu against the reference, and says
  // whether the precompiled header was used.
  auto build_and_run = [&](const std::optional<std::string>& pch) {
    CompileOptions o;
    o.run_nvcc = false;
    o.model_path = "/dev/null";
    o.emu_pch = pch;
    const fs::path dir = scratch / "artifact";
    ArtifactSummary summary;
    const Status st = write_artifact(*g, *s, o, dir.string(), &summary);
    INFO(st.message());
    REQUIRE(st.is_ok());
    const TensorMap got = test::run_artifact_on_emu(*g, dir, {{"x", x}});
    CHECK(compare_tensors(got.at("y"), want->at("y"), kEmuF32.rtol, kEmuF32.atol).ok);
    CHECK(test::read_text_file(dir / "report.json")
              .find(fmt::format("\"emu_precompiled_header\": {}", summary.emu_precompiled_header)) !=
          std::string::npos);
    fs::remove_all(dir);
    return summary.emu_precompiled_header;
  };
  const fs::path built = default_emu_pch_header();
  REQUIRE(fs::exists(fs::path(built).concat(".gch")));
  CHECK(build_and_run(std::nullopt));  // the build's
  CHECK_FALSE(build_and_run(""));      // none asked for
  // A copy elsewhere is used from there (an installed stitchc's, under PREFIX/lib/stitch); made
  // from other headers than those stitchc carries (its digest is theirs), or with no digest, it is
  // not.
  const fs::path copy = scratch / "copy" / "stitch" / "emu" / "emu.h";
  const fs::path digest = fs::path(copy).concat(".gch.digest");
  fs::create_directories(copy.parent_path());
  fs::copy_file(built, copy);
  fs::copy_file(fs::path(built).concat(".gch"), fs::path(copy).concat(".gch"));
  fs::copy_file(fs::path(built).concat(".gch.digest"), digest);
  CHECK(test::read_text_file(digest) == std::string(embedded_headers_digest()) + "\n");
  CHECK(build_and_run(copy.string()));
  { std::ofstream(digest, std::ios::trunc) << std::string(64, '0') << "\n"; }
  CHECK_FALSE(build_and_run(copy.string()));
  fs::remove(digest);
  CHECK_FALSE(build_and_run(copy.string()));
  fs::copy_file(fs::path(built).concat(".gch.digest"), digest);
  // One that is not a precompiled header the compiler skips; one cut short fails the compiler, and
  // the library is built again on the header itself.
  { std::ofstream(fs::path(copy).concat(".gch"), std::ios::trunc) << "not a precompiled header"; }
  CHECK_FALSE(build_and_run(copy.string()));
  {
    std::ifstream whole(fs::path(built).concat(".gch"), std::ios::binary);
    std::string head(4096, '\0');
    whole.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(fs::path(copy).concat(".gch"), std::ios::binary | std::ios::trunc) << head;
  }
  CHECK_FALSE(build_and_run(copy.string()));
  fs::remove_all(scratch);
}
