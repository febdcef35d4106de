// 32-bit index arithmetic in the unfused kernels (codegen::lower_node; kernel.h's kIndex32Limit):
// each op's kernel indexes with int offsets, coordinates and loop counters when its tensors fit,
// and every kernel runs on emu against the reference in both forms: as lowered (32-bit at these
// sizes) and replaced by its 64-bit text (the form a tensor past the limit gets). These kernels
// are the `--fusion none` baseline and a fused plan's groups of one node.
#include <fmt/format.h>

#include <regex>

#include "codegen/lower.h"
#include "fusion_test_util.h"

namespace stitch {
namespace {

// Lines that stay 64-bit: an index read from an index tensor until it is checked in range (`j`),
// integer reductions' initial values.
const std::vector<std::string> kWideNodeLines = {"long long j", "if (j", "9223372036854775807LL"};

// Runs `g` unfused on emu against the reference twice: as lowered, checking that every kernel
// indexes in 32 bits, and with every kernel's text replaced by its 64-bit form. Returns the
// mappings of the kernels checked in both forms.
std::string unfused_forms_match(const Graph& g, uint32_t seed) {
  int narrow = 0;
  std::string mappings;
  auto check_narrow = [&](codegen::Schedule& s) {
    for (const codegen::Kernel& k : s.kernels) {
      INFO(k.source);
      CHECK(k.scheme == "single node");
      CHECK(k.source.find("for (long long") == std::string::npos);
      CHECK_FALSE(std::regex_search(k.source, std::regex(R"(const long long \w+ =)")));
      CHECK(test::wide_literals(k.source, kWideNodeLines) == 0);
      ++narrow;
    }
  };
  auto widen = [&](codegen::Schedule& s) {
    for (codegen::Kernel& k : s.kernels) {
      REQUIRE(k.nodes.size() == 1);
      auto w = codegen::lower_node(*k.nodes.front(), std::stoi(k.name.substr(1, 3)), 0);
      INFO(w.status().message());
      REQUIRE(w.is_ok());
      REQUIRE(w->name == k.name);
      REQUIRE(w->params.size() == k.params.size());
      for (size_t i = 0; i < k.params.size(); ++i) REQUIRE(w->params[i].name == k.params[i].name);
      INFO(w->source);
      CHECK(w->source.find("long long") != std::string::npos);
      CHECK(w->source.find("for (int i") == std::string::npos);
      k.source = w->source;
      mappings += k.mapping + "\n";
    }
  };
  CHECK(test::emu_matches_reference(g, nullptr, seed, kEmuF32, nullptr, {}, check_narrow) > 0);
  CHECK(test::emu_matches_reference(g, nullptr, seed, kEmuF32, nullptr, {}, widen) > 0);
  CHECK(narrow > 0);
  return mappings;
}

}  // namespace

TEST_CASE("unfused kernels index in 32 bits when their tensors fit, the 64-bit form alike on emu",
          "[codegen][emu]") {
  SECTION("element-parallel ops: broadcast, 128-bit, transposes, slices, pads, gathers, scatters") {
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[2,6,40]
  input %b: f32[40]
  input %u: f32[3,5]
  input %sq: f32[6,6]
  input %big: f32[3,32,48]
  const %ids: i64[2,3] = [3, -1, 0, 5, 2, 2]
  const %gi: i64[2,6] = [0, 5, 1, 4, 2, 3, 5, 0, 4, 1, 3, 2]
  const %ndi: i64[3,2] = [0, 5, 5, 0, 3, 3]
  const %st: i64[1] = [1]
  const %en: i64[1] = [40]
  const %ax: i64[1] = [2]
  const %stp: i64[1] = [3]
  const %shape: i64[2] = [3, 40]
  const %reps: i64[2] = [2, 3]
  const %pads: i64[4] = [1, 2, 0, 1]
  const %fill: f32[] = [0.5]
  const %sizes: i64[2] = [15, 25]
  const %one: i64[] = [1]
  const %si: i64[2,2] = [1, 1, 2, 5]
  const %sv: f32[2,2] = [1.0, 2.0, 3.0, 4.0]
  const %snd: i64[2,1] = [4, 4]
  const %svn: f32[2,6] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
  %a = Add(%x, %b) @"bias"
  %e = Exp(%x) @"exp"
  %t = Transpose(%x) {perm = ints[0, 2, 1]} @"transpose"
  %tt = Transpose(%big) {perm = ints[0, 2, 1]} @"transpose_tiled"
  %s = Slice(%x, %st, %en, %ax, %stp) @"slice"
  %ex = Expand(%b, %shape) @"expand"
  %tl = Tile(%u, %reps) @"tile"
  %pc = Pad(%u, %pads, %fill) {mode = "constant"} @"pad_constant"
  %pe = Pad(%u, %pads) {mode = "edge"} @"pad_edge"
  %pw = Pad(%u, %pads) {mode = "wrap"} @"pad_wrap"
  %pr = Pad(%u, %pads) {mode = "reflect"} @"pad_reflect"
  %cc = Concat(%u, %u, %u) {axis = 1} @"concat"
  %s1, %s2 = Split(%x, %sizes) {axis = 2} @"split"
  %gt = Gather(%x, %ids) {axis = 1} @"gather"
  %ge = GatherElements(%sq, %gi) {axis = 0} @"gather_elements"
  %gn = GatherND(%sq, %ndi) @"gather_nd"
  %tr = Trilu(%sq, %one) {upper = 0} @"trilu"
  %sc = ScatterElements(%sq, %si, %sv) {axis = 1, reduction = "add"} @"scatter_elements"
  %sn = ScatterND(%sq, %snd, %svn) {reduction = "add"} @"scatter_nd"
  output %a
  output %e
  output %t
  output %tt
  output %s
  output %ex
  output %tl
  output %pc
  output %pe
  output %pw
  output %pr
  output %cc
  output %s1
  output %s2
  output %gt
  output %ge
  output %gn
  output %tr
  output %sc
  output %sn
}
)");
    // The scatters name one position twice (with reduction add) so that they stay kernels of their
    // own: with distinct constant indices the front end writes them as a Gather and a Where.
    test::run_frontend_or_die(*g);
    CHECK(test::count_op(*g, "ScatterElements") == 1);
    CHECK(test::count_op(*g, "ScatterND") == 1);
    const std::string m = unfused_forms_match(*g, 11);
    CHECK_THAT(m, Catch::Contains("with 128-bit loads and stores"));
    CHECK_THAT(m, Catch::Contains("tiled transpose"));
    CHECK_THAT(m, Catch::Contains("reflect padding"));
    CHECK_THAT(m, Catch::Contains("index components"));
    CHECK_THAT(m, Catch::Contains("in order by one thread (add)"));
  }
  SECTION("segment ops: every reduction mapping, arg and hard max, norms, scans, pools") {
    auto g = test::parse_or_die(R"(graph "g" opset 18 {
  input %m: f32[4,37,5]
  input %r: f32[37,770]
  input %l: f32[16,1500]
  input %c: f32[1000,37]
  input %n: f32[2,6,40]
  input %w: f32[40]
  input %img: f32[2,3,9,9]
  input %s3: f32[3]
  const %a1: i64[1] = [1]
  const %a0: i64[1] = [0]
  const %alast: i64[1] = [-1]
  const %cax: i64[] = [1]
  %rs = ReduceSum(%m, %a1) {keepdims = 0} @"sum_middle"
  %rm = ReduceMax(%r, %alast) {keepdims = 1} @"max_rows"
  %rl = ReduceMean(%l, %alast) {keepdims = 0} @"mean_long_rows"
  %rc = ReduceSum(%c, %a0) {keepdims = 0} @"sum_columns"
  %am = ArgMax(%m) {axis = 1, keepdims = 0} @"argmax"
  %hm = Hardmax(%n) {axis = -1} @"hardmax"
  %ls = LogSoftmax(%r) {axis = -1} @"log_softmax"
  %ln = LayerNormalization(%n, %w, %w) {axis = -1, epsilon = 0.00001} @"layer_norm"
  %in = InstanceNormalization(%img, %s3, %s3) {epsilon = 0.00001} @"instance_norm"
  %cs = CumSum(%m, %cax) {exclusive = 1, reverse = 1} @"cumsum"
  %mp = MaxPool(%img) {kernel_shape = ints[3, 3], strides = ints[2, 2], pads = ints[1, 1, 1, 1]} @"max_pool"
  %ap = AveragePool(%img) {kernel_shape = ints[3, 3], strides = ints[2, 2], pads = ints[1, 1, 1, 1], count_include_pad = 1} @"avg_pool"
  %gp = GlobalAveragePool(%img) @"global_pool"
  output %rs
  output %rm
  output %rl
  output %rc
  output %am
  output %hm
  output %ls
  output %ln
  output %in
  output %cs
  output %mp
  output %ap
  output %gp
}
)");
    test::run_frontend_or_die(*g);
    const std::string m = unfused_forms_match(*g, 12);
    CHECK_THAT(m, Catch::Contains("thread per segment"));
    CHECK_THAT(m, Catch::Contains("warp per segment"));
    CHECK_THAT(m, Catch::Contains("block per segment"));
    CHECK_THAT(m, Catch::Contains("tiled: 32 segments"));
    CHECK_THAT(m, Catch::Contains("running sum"));
    CHECK_THAT(m, Catch::Contains("window 3x3"));
  }
}

TEST_CASE("unfused kernels: a tensor past 2^30 elements keeps the kernel in 64 bits", "[codegen]") {
  // Text only (nothing of this size is allocated): 2^30 elements is the last size in 32 bits.
  for (const auto& [cols, wide] : {std::pair{int64_t{1} << 29, false}, {(int64_t{1} << 29) + 1, true}}) {
    INFO(cols);
    auto g = test::parse_or_die(fmt::format(R"(graph "g" opset 17 {{
  input %x: f32[2,{}]
  input %b: f32[{}]
  %y = Add(%x, %b) @"bias"
  output %y
}}
)",
                                            cols, cols));
    test::run_frontend_or_die(*g);
    auto k = codegen::lower_node(*g->nodes().front(), 0);
    REQUIRE(k.is_ok());
    INFO(k->source);
    CHECK((k->source.find(fmt::format("const long long n = {}LL;", 2 * cols)) != std::string::npos) == wide);
    CHECK((k->source.find(fmt::format("const int n = {};", 2 * cols)) != std::string::npos) == !wide);
    CHECK((k->source.find("for (long long i = ") != std::string::npos) == wide);
  }
}

}  // namespace stitch
