// Running sums and products (CumSum, CumProd) in stitched element kernels: which scans qualify,
// the loop the stitcher writes for each element, the same bits as the op's own kernel, the cost
// model's steps, row kernels' refusal, and the gated delta rule's cumulative gates planned into
// the kernels that read them.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <limits>

#include "codegen/stitch.h"
#include "fusion_test_util.h"

namespace stitch {
namespace {

using test::node_named;

// Exp of x, its running sum or product along `axis`, plus y (or times y): three ops, one element
// kernel.
std::string scan_text(const char* op, int64_t axis, int exclusive, int reverse, const char* type = "f32",
                      const char* shape = "2,5,7", const char* then = "Add") {
  return fmt::format(R"(graph "g" opset 26 {{
  input %x: {4}[{5}]
  input %y: {4}[{5}]
  const %axis: i64[] = [{1}]
  %e = Exp(%x) @"exp"
  %s = {0}(%e, %axis) {{exclusive = {2}, reverse = {3}}} @"scan"
  %z = {6}(%s, %y) @"then"
  output %z
}})",
                     op, axis, exclusive, reverse, type, shape, then);
}

// Inputs with values of both signs, and a NaN, an infinity and a negative zero in x.
TensorMap special_feed(const Graph& g, uint32_t seed) {
  TensorMap feed;
  for (const Value* v : g.inputs) feed[v->name] = test::random_tensor(v->dtype, *v->dims, seed++);
  Tensor& x = feed.at("x");
  x.set_f64(3, std::numeric_limits<double>::quiet_NaN());
  x.set_f64(11, std::numeric_limits<double>::infinity());
  x.set_f64(20, -0.0);
  return feed;
}

// Every node its own group: the op's own kernels.
codegen::NodeGroups singletons(const Graph& g) {
  codegen::NodeGroups groups;
  for (const Node* n : test::all_nodes(g)) groups.push_back({n});
  return groups;
}

}  // namespace

TEST_CASE("a running sum or product is a scan of floats along a constant axis of at most 256", "[stitch]") {
  auto g = test::parse_or_die(R"(graph "g" opset 26 {
  input %x: f32[3,4,300]
  input %i: i32[3,4]
  input %h: f16[3,4]
  const %one: i64[] = [1]
  const %last: i64[] = [-1]
  %a = CumSum(%x, %one) {reverse = 1} @"sum"
  %b = CumSum(%x, %last) @"long"
  %c = CumSum(%i, %one) @"ints"
  %d = CumProd(%h, %one) {exclusive = 1} @"prod16"
  output %a
  output %b
  output %c
  output %d
})");
  test::run_frontend_or_die(*g);
  const auto sum = codegen::scan_info(*node_named(*g, "sum"));
  REQUIRE(sum);
  CHECK(sum->axis == 1);
  CHECK(sum->len == 4);
  CHECK(sum->reverse);
  CHECK_FALSE(sum->exclusive);
  CHECK_FALSE(sum->product);
  CHECK(codegen::stitch_role(*node_named(*g, "sum")) == codegen::StitchRole::kScan);
  const auto prod = codegen::scan_info(*node_named(*g, "prod16"));
  REQUIRE(prod);
  CHECK(prod->product);
  CHECK(prod->exclusive);
  // 300 elements along the axis, or integers: the op's own kernel.
  for (const char* name : {"long", "ints"}) {
    INFO(name);
    CHECK_FALSE(codegen::scan_info(*node_named(*g, name)));
    CHECK(codegen::stitch_role(*node_named(*g, name)) != codegen::StitchRole::kScan);
  }
}

TEST_CASE("a scan in an element kernel gives the bits of its own kernel, on emu", "[stitch][emu]") {
  // [2,5,7]: a thread an element; [3,2,16]: a thread per 4 elements, each lane its own loop.
  uint32_t seed = 40;
  for (const char* shape : {"2,5,7", "3,2,16"})
    for (const char* op : {"CumSum", "CumProd"})
      for (int64_t axis : {0, 1, -1})
        for (int exclusive : {0, 1})
          for (int reverse : {0, 1}) {
            INFO(shape << " " << op << " axis " << axis << " exclusive " << exclusive << " reverse "
                       << reverse);
            auto g = test::parse_or_die(scan_text(op, axis, exclusive, reverse, "f32", shape));
            test::run_frontend_or_die(*g);
            const codegen::Kernel k = test::lower_whole_graph(*g);
            INFO(k.source);
            CHECK_THAT(k.mapping,
                       Catch::Contains(std::string(shape) == "2,5,7" ? "one thread per element"
                                                                     : "one thread per 4 elements"));
            CHECK_THAT(k.source, Catch::Contains(fmt::format(
                                     "// {} 'scan': {} of ", op,
                                     exclusive ? "those before this one" : "those up to this one")));
            CHECK(test::one_group_matches_reference(*g, seed));
            const TensorMap feed = special_feed(*g, seed++);
            const codegen::NodeGroups whole{test::all_nodes(*g)};
            const codegen::NodeGroups alone = singletons(*g);
            size_t fused_kernels = 0, unfused_kernels = 0;
            const TensorMap fused = test::emu_run(*g, &whole, feed, &fused_kernels);
            const TensorMap unfused = test::emu_run(*g, &alone, feed, &unfused_kernels);
            CHECK(fused_kernels == 1);
            CHECK(unfused_kernels == 3);
            CHECK(fused.at("z").same_as(unfused.at("z")));
          }
}

TEST_CASE("scan loops compile with nvcc for sm_90", "[stitch][nvcc]") {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("stitch_unit_scan_{}", getpid());
  for (const char* shape : {"2,5,7", "3,2,16"}) {
    auto g = test::parse_or_die(scan_text("CumSum", 1, 1, 1, "f16", shape));
    test::run_frontend_or_die(*g);
    test::nvcc_compiles_cleanly(test::lower_whole_graph(*g), dir);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a float16 scan accumulates in float within the float16 tolerance, on emu", "[stitch][emu]") {
  for (const char* op : {"CumSum", "CumProd"}) {
    INFO(op);
    // Times y, not plus: a sum that cancels to near zero would measure the float16 rounding of
    // the terms, not the scan.
    auto g = test::parse_or_die(scan_text(op, 2, 0, 1, "f16", "3,2,12", "Mul"));
    test::run_frontend_or_die(*g);
    const codegen::Kernel k = test::lower_whole_graph(*g);
    INFO(k.source);
    CHECK_THAT(k.source, Catch::Contains("float run"));
    CHECK(test::one_group_matches_reference(*g, 77, kEmuF16Chain));
  }
}

TEST_CASE("the cost model counts a scan's steps: len (len + 1) / 2 a line of its axis", "[stitch][cost]") {
  auto g = test::parse_or_die(scan_text("CumSum", 2, 0, 0));
  test::run_frontend_or_die(*g);
  const codegen::StitchInfo info = test::whole_graph_info(*g);
  // 70 elements, each running (7 + 1) / 2 steps on average; each step evaluates the Exp.
  CHECK(info.contraction_macs == Approx(70.0 * 8 / 2));
  CHECK(info.contraction_ops > 0);
}

TEST_CASE("a row kernel does not take a scan", "[stitch]") {
  auto g = test::parse_or_die(R"(graph "g" opset 26 {
  input %x: f32[4,16]
  const %axis: i64[] = [1]
  const %axes: i64[1] = [1]
  %s = CumSum(%x, %axis) @"scan"
  %r = ReduceSum(%s, %axes) {keepdims = 1} @"sum"
  output %r
})");
  test::run_frontend_or_die(*g);
  CHECK_THAT(test::whole_graph_refusal(*g),
             Catch::Contains("node 'scan' (CumSum) would join a row kernel: a "
                             "running sum or product runs in element kernels only"));
  // Planned, the scan joins no row kernel and the result still matches.
  CHECK(test::fused_matches_reference(*g, 5) >= 1);
}

TEST_CASE("the delta rule's cumulative gates are computed in a kernel that reads them",
          "[stitch][fusion][emu]") {
  // Qwen3.5's chunked gated delta rule: the gates' running sum over a chunk, read as exp(g) per
  // position, as the chunk's last gate, and as the decay exp(g_i - g_j) below the diagonal.
  const std::string text = R"(graph "delta" opset 18 {
  input %g: f32[2,3,16]
  const %axis: i64[] = [-1]
  const %col: i64[1] = [-1]
  const %row: i64[1] = [-2]
  const %start: i64[1] = [-1]
  const %end: i64[1] = [16]
  %gc = CumSum(%g, %axis) @"cumsum"
  %ge = Exp(%gc) @"gate_exp"
  %gi = Unsqueeze(%gc, %col) @"rows"
  %gj = Unsqueeze(%gc, %row) @"cols"
  %d = Sub(%gi, %gj) @"diff"
  %t = Trilu(%d) {upper = 0} @"tril"
  %dm = Exp(%t) @"decay"
  %gl = Slice(%gc, %start, %end, %col) @"last"
  %gle = Exp(%gl) @"last_exp"
  output %ge
  output %dm
  output %gle
})";
  test::written_out_matches_op(text, {"Trilu"}, 11);
  auto g = test::parse_or_die(text);
  test::run_frontend_or_die(*g);
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, test::opts(mode));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    // No kernel holds the running sum alone: it is computed in a kernel that reads it, which
    // stores it for the decay's kernel (the two views of it are read there).
    const auto with_scan = test::groups_with(*plan, {"CumSum"});
    REQUIRE(with_scan.size() == 1);
    CHECK(with_scan.front()->nodes.size() > 1);
  }
}

}  // namespace stitch
