// Run-time checks of input data (kernel.h's KernelFault): an index outside its axis in a Gather,
// GatherElements, GatherND, ScatterND, ScatterElements or TensorScatter fails the run on the emu
// backend with a user error naming the step, the node and the value, as the reference interpreter
// refuses the same inputs, in single-node, stitched and packed kernels; the session refuses the
// outputs of such a run and runs again with valid inputs. Where a rewrite replaces the node by
// element-wise work (an expanded TensorScatter or ReverseSequence, an Attention's valid key
// counts, scatter_selects), its StitchIndexCheck keeps the check and the message naming the node.

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fault_test_util.h"
#include "fusion/scatter_selects.h"
#include "fusion_test_util.h"
#include "ir/legacy_forms.h"
#include "ops/index_check.h"
#include "ops/op_util.h"
#include "passes/pass.h"
#include "stitch/artifact_format.h"

namespace stitch {
namespace {

using test::node_named;
using test::parse_or_die;

using test::checked_nodes;
using test::compile_for_faults;
using test::run_error;
namespace fs = std::filesystem;

TEST_CASE("a Gather's index outside its axis fails the run naming the node and the index, alone and stitched",
          "[runtime][emu][faults]") {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %w: f32[5,3]
  input %i: i64[2,2]
  %e = Gather(%w, %i) @"emb"
  %y = Relu(%e) @"act"
  output %y
})");
  test::run_frontend_or_die(*g);
  const TensorMap base{{"w", test::random_tensor(DType::kF32, {5, 3}, 1)}};
  auto with = [&](std::vector<int64_t> idx) {
    TensorMap f = base;
    f["i"] = Tensor::from_i64(DType::kI64, {2, 2}, idx);
    return f;
  };
  const codegen::NodeGroups fused{{node_named(*g, "emb"), node_named(*g, "act")}};
  for (const bool stitched : {false, true}) {
    INFO((stitched ? "stitched" : "alone"));
    codegen::Schedule s;
    const fs::path dir =
        compile_for_faults(*g, stitched ? "gs" : "ga", stitched ? &fused : nullptr, nullptr, &s);
    CHECK(s.kernels.size() == (stitched ? 1u : 2u));
    CHECK(checked_nodes(s) == std::vector<std::string>{"emb"});  // the Relu's kernel checks nothing
    rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
    CHECK(run_error(session, *g, with({0, 4, -5, -1})) == "");
    const std::string high = run_error(session, *g, with({0, 5, 1, 2}));
    CHECK_THAT(high, Catch::Contains("(kernel k000_") &&
                         Catch::Contains("node 'emb' (Gather): index 5 of 'i', "
                                         "along axis 0 of 'w', is outside [-5, 5)") &&
                         Catch::Contains("the outputs of this run are not valid"));
    CHECK_THAT(run_error(session, *g, with({-6, 0, 0, 0})), Catch::Contains("index -6 of 'i'"));
    // A fault is cleared once reported: the next run with valid indices succeeds.
    CHECK(run_error(session, *g, with({4, 3, 2, 1})) == "");
    fs::remove_all(dir);
  }
}

TEST_CASE("GatherElements and GatherND check every index component, alone and stitched",
          "[runtime][emu][faults]") {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %d: f32[3,4]
  input %j: i64[3,2]
  input %k: i64[2,2]
  %ge = GatherElements(%d, %j) {axis = 1} @"ge"
  %gn = GatherND(%d, %k) @"gnd"
  %a = Neg(%ge) @"neg"
  %b = Neg(%gn) @"neg2"
  output %a
  output %b
})");
  test::run_frontend_or_die(*g);
  auto feed = [](std::vector<int64_t> j, std::vector<int64_t> k) {
    return TensorMap{{"d", test::random_tensor(DType::kF32, {3, 4}, 2)},
                     {"j", Tensor::from_i64(DType::kI64, {3, 2}, j)},
                     {"k", Tensor::from_i64(DType::kI64, {2, 2}, k)}};
  };
  const codegen::NodeGroups fused{{node_named(*g, "ge"), node_named(*g, "neg")},
                                  {node_named(*g, "gnd"), node_named(*g, "neg2")}};
  for (const bool stitched : {false, true}) {
    INFO((stitched ? "stitched" : "alone"));
    codegen::Schedule s;
    const fs::path dir =
        compile_for_faults(*g, stitched ? "es" : "ea", stitched ? &fused : nullptr, nullptr, &s);
    std::vector<std::string> nodes = checked_nodes(s);
    std::sort(nodes.begin(), nodes.end());
    CHECK(nodes == std::vector<std::string>{"ge", "gnd", "gnd"});  // GatherND: one check per component
    rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
    CHECK(run_error(session, *g, feed({0, 3, -4, 1, 2, 2}, {2, 3, -3, -4})) == "");
    CHECK_THAT(run_error(session, *g, feed({0, 3, 4, 1, 2, 2}, {2, 3, 0, 0})),
               Catch::Contains(
                   "node 'ge' (GatherElements): index 4 of 'j', along axis 1 of 'd', is outside [-4, 4)"));
    CHECK_THAT(
        run_error(session, *g, feed({0, 0, 0, 0, 0, 0}, {2, 3, 0, -5})),
        Catch::Contains("node 'gnd' (GatherND): index -5 of 'k' (component 1 of a tuple), along axis 1 of "
                        "'d', is outside [-4, 4)"));
    CHECK_THAT(
        run_error(session, *g, feed({0, 0, 0, 0, 0, 0}, {3, 0, 0, 0})),
        Catch::Contains("index 3 of 'k' (component 0 of a tuple), along axis 0 of 'd', is outside [-3, 3)"));
    fs::remove_all(dir);
  }
}

TEST_CASE("ScatterND and ScatterElements skip an update whose index is outside its axis and fail the run",
          "[runtime][emu][faults]") {
  auto g = parse_or_die(R"(graph "s" opset 18 {
  input %x: f32[4,3]
  input %i: i64[2,1]
  input %u: f32[2,3]
  input %e: i64[4,1]
  input %v: f32[4,1]
  %y = ScatterND(%x, %i, %u) @"put"
  %z = ScatterElements(%x, %e, %v) {axis = 1, reduction = "add"} @"add"
  output %y
  output %z
})");
  test::run_frontend_or_die(*g);
  REQUIRE(test::count_op(*g, "ScatterND") == 1);
  REQUIRE(test::count_op(*g, "ScatterElements") == 1);
  auto feed = [](std::vector<int64_t> i, std::vector<int64_t> e) {
    return TensorMap{{"x", test::random_tensor(DType::kF32, {4, 3}, 3)},
                     {"i", Tensor::from_i64(DType::kI64, {2, 1}, i)},
                     {"u", test::random_tensor(DType::kF32, {2, 3}, 4)},
                     {"e", Tensor::from_i64(DType::kI64, {4, 1}, e)},
                     {"v", test::random_tensor(DType::kF32, {4, 1}, 5)}};
  };
  codegen::Schedule s;
  const fs::path dir = compile_for_faults(*g, "sc", nullptr, nullptr, &s);
  std::vector<std::string> nodes = checked_nodes(s);
  std::sort(nodes.begin(), nodes.end());
  CHECK(nodes == std::vector<std::string>{"add", "put"});
  rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
  CHECK(run_error(session, *g, feed({3, -4}, {0, 2, -3, 1})) == "");
  CHECK_THAT(
      run_error(session, *g, feed({1, 4}, {0, 0, 0, 0})),
      Catch::Contains("node 'put' (ScatterND): index 4 of 'i' (component 0 of a tuple), along axis 0 of 'x', "
                      "is outside [-4, 4): its update was not written"));
  CHECK_THAT(run_error(session, *g, feed({0, 1}, {0, 0, 3, 0})),
             Catch::Contains(
                 "node 'add' (ScatterElements): index 3 of 'e', along axis 1 of 'x', is outside [-3, 3)"));
  fs::remove_all(dir);
}

TEST_CASE(
    "a scatter update whose index is out of range is skipped and reported, never written outside the output",
    "[runtime][emu][faults]") {
  // The reference refuses such an update; the kernel must not write past its output into another
  // buffer of the arena, and reports it (as the other kinds do above). In-range updates (a negative index
  // counts from the end) land.
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[2,4]
  input %ie: i64[2,2]
  input %ue: f32[2,2]
  input %in: i64[3,2]
  input %un: f32[3]
  %ye = ScatterElements(%x, %ie, %ue) {axis = 1} @"scatter_elements"
  %yn = ScatterND(%x, %in, %un) @"scatter_nd"
  output %ye
  output %yn
})");
  test::run_frontend_or_die(*g);
  const fs::path dir = compile_for_faults(*g, "sk");
  const Tensor x = Tensor::from_f64(DType::kF32, {2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  const Tensor ue = Tensor::from_f64(DType::kF32, {2, 2}, {10, 11, 12, 13});
  const Tensor un = Tensor::from_f64(DType::kF32, {3}, {20, 21, 22});
  rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
  auto run = [&](const Tensor& ie, const Tensor& in) {
    for (const auto& [name, t] : std::vector<std::pair<std::string, const Tensor*>>{
             {"x", &x}, {"ie", &ie}, {"ue", &ue}, {"in", &in}, {"un", &un}})
      session.set_input(name, std::string(dtype_name(t->dtype())), t->dims(), t->data(), t->byte_size());
    session.run();
  };
  // Row 0: column 1 and column 4 (out of range): reported.
  CHECK_THROWS_WITH(run(Tensor::from_i64(DType::kI64, {2, 2}, {1, 4, -1, -4}),
                        Tensor::from_i64(DType::kI64, {3, 2}, {1, 2, 1, 0, 0, -4})),
                    Catch::Contains("node 'scatter_elements' (ScatterElements): index 4 of 'ie'"));
  // [2, 0]: row out of range.
  CHECK_THROWS_WITH(run(Tensor::from_i64(DType::kI64, {2, 2}, {1, 2, -1, -4}),
                        Tensor::from_i64(DType::kI64, {3, 2}, {1, 2, 2, 0, 0, -4})),
                    Catch::Contains("node 'scatter_nd' (ScatterND): index 2 of 'in'"));
  // Row 0: columns 1 and 2; row 1: columns -1 (3) and -4 (0). [1, 2], [1, 0], [0, -4] (column 0).
  run(Tensor::from_i64(DType::kI64, {2, 2}, {1, 2, -1, -4}),
      Tensor::from_i64(DType::kI64, {3, 2}, {1, 2, 1, 0, 0, -4}));
  Tensor ye(DType::kF32, {2, 4}), yn(DType::kF32, {2, 4});
  session.get_output("ye", ye.data(), ye.byte_size());
  session.get_output("yn", yn.data(), yn.byte_size());
  CHECK(ye.to_f64() == std::vector<double>{0, 10, 11, 3, 13, 5, 6, 12});
  CHECK(yn.to_f64() == std::vector<double>{22, 1, 2, 3, 21, 5, 20, 7});
  fs::remove_all(dir);
}

TEST_CASE("a TensorScatter's write index outside its cache fails the run, alone and packed",
          "[runtime][emu][faults]") {
  // As a decoding loop has it (test_opset24.cc): caches that are graph inputs read by nothing else,
  // written in place, the plan packing the writes into one launch.
  auto g = parse_or_die(R"(graph "decode" opset 24 {
  input %k: f32[2,2,1,8]
  input %v: f32[2,2,1,8]
  input %kc: f32[2,2,6,8]
  input %vc: f32[2,2,6,8]
  input %rc: f32[2,2,6,8]
  input %at: i64[2]
  %kn = TensorScatter(%kc, %k, %at) @"k_cache"
  %vn = TensorScatter(%vc, %v, %at) @"v_cache"
  %rn = TensorScatter(%rc, %k, %at) {mode = "circular"} @"ring"
  output %kn
  output %vn
  output %rn
})");
  test::run_frontend_or_die(*g);
  REQUIRE(test::count_op(*g, "TensorScatter") == 3);
  auto plan = fusion::make_plan(*g, test::opts("beam"));
  REQUIRE(plan.is_ok());
  const auto groups = test::groups_of(*plan);
  const auto packs = test::packs_of(*plan);
  auto feed = [&](std::vector<int64_t> at) {
    TensorMap f;
    uint32_t seed = 10;
    for (const char* name : {"k", "v", "kc", "vc", "rc"})
      f[name] = test::random_tensor(DType::kF32, *g->find_value(name)->dims, seed++);
    f["at"] = Tensor::from_i64(DType::kI64, {2}, at);
    return f;
  };
  for (const bool packed : {false, true}) {
    INFO((packed ? "packed" : "alone"));
    codegen::Schedule s;
    const fs::path dir = compile_for_faults(*g, packed ? "tp" : "ta", packed ? &groups : nullptr,
                                            packed ? &packs : nullptr, &s);
    std::vector<std::string> nodes = checked_nodes(s);
    std::sort(nodes.begin(), nodes.end());
    CHECK(nodes == std::vector<std::string>{"k_cache", "ring", "v_cache"});
    CHECK(s.kernels.size() == (packed ? 1u : 3u));  // packed: one launch, one fault word
    rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
    CHECK(run_error(session, *g, feed({5, 0})) == "");
    CHECK_THAT(
        run_error(session, *g, feed({0, 6})),
        Catch::Contains("(TensorScatter): write index 6 of 'at' puts the 1 updates outside the cache's 6 "
                        "positions (mode linear)"));
    CHECK_THAT(run_error(session, *g, feed({-1, 0})), Catch::Contains("write index -1 of 'at'"));
    // Circular: 6 wraps to position 0, which the linear caches refuse; only a negative index is refused.
    CHECK_THAT(run_error(session, *g, feed({6, 0})), !Catch::Contains("node 'ring'"));
    fs::remove_all(dir);
  }
}

TEST_CASE("an Attention's valid key count outside its keys fails the run, alone and stitched",
          "[runtime][emu][faults]") {
  // nonpad_kv_seqlen (opset 24) over a whole cache: the front end computes the mask from it, and
  // its StitchIndexCheck refuses a count the op refuses, naming the Attention.
  auto g = parse_or_die(R"(graph "g" opset 25 {
  input %q: f32[2,2,2,4]
  input %k: f32[2,2,6,4]
  input %v: f32[2,2,6,4]
  input %len: i64[2]
  %y = Attention(%q, %k, %v, _, _, _, %len) {is_causal = 1, left_window_size = 2} @"attn"
  output %y
})");
  test::run_frontend_or_die(*g);
  REQUIRE(test::count_op(*g, "Attention") == 0);
  auto plan = fusion::make_plan(*g, test::opts("beam"));
  REQUIRE(plan.is_ok());
  const auto groups = test::groups_of(*plan);
  auto feed = [&](std::vector<int64_t> len) {
    TensorMap f;
    uint32_t seed = 30;
    for (const char* name : {"q", "k", "v"})
      f[name] = test::random_tensor(DType::kF32, *g->find_value(name)->dims, seed++);
    f["len"] = Tensor::from_i64(DType::kI64, {2}, len);
    return f;
  };
  for (const bool stitched : {false, true}) {
    INFO((stitched ? "stitched" : "alone"));
    codegen::Schedule s;
    const fs::path dir =
        compile_for_faults(*g, stitched ? "ns" : "na", stitched ? &groups : nullptr, nullptr, &s);
    CHECK(checked_nodes(s) == std::vector<std::string>{"attn"});
    rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
    CHECK(run_error(session, *g, feed({3, 6}), kEmuF32) == "");
    CHECK(run_error(session, *g, feed({0, 6}), kEmuF32) == "");  // no valid key: batch 0's rows are zero
    CHECK_THAT(
        run_error(session, *g, feed({3, 7})),
        Catch::Contains("node 'attn' (Attention): valid key count 7 of 'len' (nonpad_kv_seqlen) is outside "
                        "[0, 6], the keys' length"));
    CHECK_THAT(run_error(session, *g, feed({-1, 2})), Catch::Contains("valid key count -1 of 'len'"));
    fs::remove_all(dir);
  }
}

TEST_CASE(
    "a TensorScatter into a computed cache, written as a GatherElements and a Where, still fails the "
    "run on a write index outside the cache",
    "[runtime][emu][faults]") {
  // The caches are computed (a Relu of the input), so the front end writes each TensorScatter as a
  // GatherElements and a Where; its write indices go through a StitchIndexCheck, which the
  // reference refuses and the kernel reports, naming the TensorScatter.
  auto g = parse_or_die(R"(graph "decode" opset 24 {
  input %k: f32[2,2,1,8]
  input %kc: f32[2,2,6,8]
  input %at: i64[2]
  %c = Relu(%kc)
  %kn = TensorScatter(%c, %k, %at) @"k_cache"
  %rn = TensorScatter(%c, %k, %at) {mode = "circular"} @"ring"
  output %kn
  output %rn
})");
  test::run_frontend_or_die(*g);
  REQUIRE(test::count_op(*g, "TensorScatter") == 0);
  REQUIRE(test::count_op(*g, ops::kIndexCheck) == 2);
  auto plan = fusion::make_plan(*g, test::opts("beam"));
  REQUIRE(plan.is_ok());
  const auto groups = test::groups_of(*plan);
  auto feed = [&](std::vector<int64_t> at) {
    return TensorMap{{"k", test::random_tensor(DType::kF32, {2, 2, 1, 8}, 20)},
                     {"kc", test::random_tensor(DType::kF32, {2, 2, 6, 8}, 21)},
                     {"at", Tensor::from_i64(DType::kI64, {2}, at)}};
  };
  for (const bool stitched : {false, true}) {
    INFO((stitched ? "stitched" : "alone"));
    codegen::Schedule s;
    const fs::path dir =
        compile_for_faults(*g, stitched ? "cs" : "ca", stitched ? &groups : nullptr, nullptr, &s);
    std::vector<std::string> nodes = checked_nodes(s);
    std::sort(nodes.begin(), nodes.end());
    CHECK(nodes == std::vector<std::string>{"k_cache", "ring"});
    if (stitched) CHECK(s.kernels.size() < g->nodes().size());
    rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
    CHECK(run_error(session, *g, feed({5, 0})) == "");
    CHECK_THAT(
        run_error(session, *g, feed({0, 6})),
        Catch::Contains("node 'k_cache' (TensorScatter): write index 6 of 'at' puts the 1 updates outside "
                        "the cache's 6 positions (mode linear)"));
    CHECK_THAT(run_error(session, *g, feed({-1, 0})), Catch::Contains("write index -1 of 'at'"));
    CHECK(run_error(session, *g, feed({1, 2})) == "");  // a valid run after faults
    fs::remove_all(dir);
  }
  SECTION("the reference names the TensorScatter, and a constant write index outside is refused at once") {
    auto at = run_reference(*g, feed({0, 6}));
    REQUIRE_FALSE(at.is_ok());
    CHECK(at.status().code() == Code::kUser);
    CHECK_THAT(at.status().message(), Catch::StartsWith("node 'k_cache' (TensorScatter): write index 6"));
    auto c = parse_or_die(R"(graph "decode" opset 24 {
  input %k: f32[2,2,1,8]
  input %kc: f32[2,2,6,8]
  const %at: i64[2] = [0, 7]
  %c = Relu(%kc)
  %kn = TensorScatter(%c, %k, %at) @"k_cache"
  output %kn
})");
    PassContext ctx;
    const Status st = run_frontend(*c, ctx);
    CHECK(st.code() == Code::kUser);
    CHECK_THAT(st.message(),
               Catch::Contains("node 'k_cache' (TensorScatter): write index 7 of 'at' puts the 1 "
                               "updates outside the cache's 6 positions (mode linear)"));
  }
}

TEST_CASE("a ScatterElements written as Wheres still fails the run on an index outside its axis",
          "[runtime][emu][faults]") {
  // fusion::scatter_selects puts a StitchIndexCheck on the indices: without it an index out of range
  // would match no position and its update would vanish without a word.
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,6]
  input %e: i64[4,2]
  input %v: f32[4,2]
  %r = Relu(%x)
  %y = ScatterElements(%r, %e, %v) {axis = 1, reduction = "add"} @"put"
  output %y
})");
  test::run_frontend_or_die(*g);
  auto lines = fusion::scatter_selects(*g);
  REQUIRE(lines.is_ok());
  REQUIRE(lines->size() == 1);
  REQUIRE(test::count_op(*g, "ScatterElements") == 0);
  REQUIRE(test::count_op(*g, ops::kIndexCheck) == 1);
  auto plan = fusion::make_plan(*g, test::opts("beam"));
  REQUIRE(plan.is_ok());
  const auto groups = test::groups_of(*plan);
  auto feed = [](std::vector<int64_t> e) {
    return TensorMap{{"x", test::random_tensor(DType::kF32, {4, 6}, 30)},
                     {"e", Tensor::from_i64(DType::kI64, {4, 2}, e)},
                     {"v", test::random_tensor(DType::kF32, {4, 2}, 31)}};
  };
  for (const bool stitched : {false, true}) {
    INFO((stitched ? "stitched" : "alone"));
    codegen::Schedule s;
    const fs::path dir =
        compile_for_faults(*g, stitched ? "ws" : "wa", stitched ? &groups : nullptr, nullptr, &s);
    CHECK(checked_nodes(s) == std::vector<std::string>{"put"});
    if (stitched) CHECK(s.kernels.size() == 1);
    rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
    CHECK(run_error(session, *g, feed({0, 5, -6, -1, 2, 2, 3, -3})) == "");
    CHECK_THAT(
        run_error(session, *g, feed({0, 5, 6, 1, 2, 2, 3, 3})),
        Catch::Contains("node 'put' (ScatterElements): index 6 of 'e', along axis 1 of 'r', is outside "
                        "[-6, 6)"));
    CHECK_THAT(run_error(session, *g, feed({0, 5, 1, 1, 2, -7, 3, 3})), Catch::Contains("index -7 of 'e'"));
    fs::remove_all(dir);
  }
  SECTION("indices a TopK picked along the axis need no check") {
    auto t = parse_or_die(R"(graph "g" opset 18 {
  input %x: f32[4,6]
  input %v: f32[4,2]
  const %two: i64[1] = [2]
  %best, %at = TopK(%x, %two) {axis = 1}
  %y = ScatterElements(%x, %at, %v) {axis = 1} @"put"
  output %y
})");
    test::run_frontend_or_die(*t);
    auto picked = fusion::scatter_selects(*t);
    REQUIRE(picked.is_ok());
    REQUIRE(picked->size() == 1);
    CHECK(test::count_op(*t, ops::kIndexCheck) == 0);
  }
}

TEST_CASE("a ReverseSequence's run-time length outside its time axis fails the run, naming it",
          "[runtime][emu][faults]") {
  // The front end writes it as a GatherElements of computed indices; its lengths go through a
  // StitchIndexCheck (before, a length past the axis was clamped without a word), and the indices
  // are inside the axis by their bounds, so the GatherElements takes no check of its own.
  auto g = parse_or_die(R"(graph "g" opset 13 {
  input %x: f32[7,3,5]
  input %lens: i64[3]
  %r = ReverseSequence(%x, %lens) @"rev"
  output %r
})");
  test::run_frontend_or_die(*g);
  REQUIRE(test::count_op(*g, "ReverseSequence") == 0);
  codegen::Schedule s;
  const fs::path dir = compile_for_faults(*g, "rs", nullptr, nullptr, &s);
  std::vector<std::string> nodes = checked_nodes(s);
  CHECK(nodes == std::vector<std::string>{"rev"});
  auto feed = [](std::vector<int64_t> lens) {
    return TensorMap{{"x", test::random_tensor(DType::kF32, {7, 3, 5}, 40)},
                     {"lens", Tensor::from_i64(DType::kI64, {3}, lens)}};
  };
  rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
  CHECK(run_error(session, *g, feed({7, 0, 3})) == "");
  CHECK_THAT(run_error(session, *g, feed({8, 0, 3})),
             Catch::Contains("node 'rev' (ReverseSequence): a sequence length of 8 lies outside [0, 7], the "
                             "time axis's length"));
  CHECK_THAT(run_error(session, *g, feed({1, -1, 3})), Catch::Contains("a sequence length of -1"));
  fs::remove_all(dir);
}

TEST_CASE("a RotaryEmbedding's position id outside its caches fails the run, naming it, negative ones too",
          "[runtime][emu][faults]") {
  // The front end gathers the caches' rows at the ids; a Gather alone would take -1 as the last
  // row. The ids go through a StitchIndexCheck with the op's bounds, and the Gathers, whose ids are
  // then inside by their bounds, take no check of their own.
  auto g = parse_or_die(R"(graph "rope" opset 23 {
  input %x: f32[2,5,12]
  input %c: f32[7,2]
  input %s: f32[7,2]
  input %p: i64[2,5]
  %y = RotaryEmbedding(%x, %c, %s, %p) {num_heads = 3} @"rope"
  output %y
})");
  test::run_frontend_or_die(*g);
  REQUIRE(test::count_op(*g, "RotaryEmbedding") == 0);
  codegen::Schedule s;
  const fs::path dir = compile_for_faults(*g, "re", nullptr, nullptr, &s);
  CHECK(checked_nodes(s) == std::vector<std::string>{"rope"});
  auto feed = [](std::vector<int64_t> p) {
    return TensorMap{{"x", test::random_tensor(DType::kF32, {2, 5, 12}, 50)},
                     {"c", test::random_tensor(DType::kF32, {7, 2}, 51)},
                     {"s", test::random_tensor(DType::kF32, {7, 2}, 52)},
                     {"p", Tensor::from_i64(DType::kI64, {2, 5}, p)}};
  };
  rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
  CHECK(run_error(session, *g, feed({0, 1, 2, 3, 4, 6, 5, 4, 3, 2})) == "");
  CHECK_THAT(
      run_error(session, *g, feed({0, 1, 2, 3, 4, 6, 5, 4, 3, -1})),
      Catch::Contains("node 'rope' (RotaryEmbedding): position id -1 is outside the caches' 7 positions"));
  CHECK_THAT(run_error(session, *g, feed({7, 1, 2, 3, 4, 6, 5, 4, 3, 2})), Catch::Contains("position id 7"));
  fs::remove_all(dir);
}

TEST_CASE("a model cannot hold the compiler's own StitchIndexCheck", "[importer]") {
  // The op is the compiler's; a model naming it meets the unsupported-op error, and `stitchc ops`
  // leaves it out. The text form (a dump after the passes) still reads it.
  CHECK(find_model_op("", ops::kIndexCheck, 18) == nullptr);
  CHECK(find_model_op("", ops::kIndexCheck, 7) == nullptr);
  REQUIRE(find_op("", ops::kIndexCheck, 18) != nullptr);
  CHECK(find_op("", ops::kIndexCheck, 18)->internal);
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %i: i64[3]
  %j = StitchIndexCheck(%i) {min = 0, max = 4, node = "gather", op = "Gather", message = "index {value} is bad"}
  output %j
})");
  test::run_frontend_or_die(*g);
  const auto bad = run_reference(*g, {{"i", Tensor::from_i64(DType::kI64, {3}, {0, 4, 5})}});
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message() == "node 'gather' (Gather): index 5 is bad");
  const auto good = run_reference(*g, {{"i", Tensor::from_i64(DType::kI64, {3}, {0, 4, 1})}});
  REQUIRE(good.is_ok());
  CHECK(good->at("j").to_i64() == std::vector<int64_t>{0, 4, 1});
}

TEST_CASE("a damaged fault table or fault word in schedule.json is refused at load", "[runtime][faults]") {
  auto g = parse_or_die(R"(graph "g" opset 18 {
  input %w: f32[5,3]
  input %i: i64[2]
  %e = Gather(%w, %i) @"emb"
  output %e
})");
  test::run_frontend_or_die(*g);
  const fs::path dir = compile_for_faults(*g, "dm");
  const fs::path file = dir / "schedule.json";
  const nlohmann::json good = nlohmann::json::parse(test::read_text_file(file));
  auto load_with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    const std::string text = j.dump();
    std::ofstream(file) << text;
    // The manifest's checksum made to match, as a damaged or hand-edited artifact could have it.
    nlohmann::json m = nlohmann::json::parse(test::read_text_file(dir / "manifest.json"));
    m["files"]["schedule.json"] = {
        {"bytes", text.size()},
        {"xxh3", fmt::format("{:016x}", artifact::checksum(text.data(), text.size()))}};
    std::ofstream(dir / "manifest.json") << m.dump();
    try {
      rt::Model::load(dir.string());
    } catch (const rt::Error& e) {
      CHECK(e.code() == 2);
      return std::string(e.what());
    }
    return std::string();
  };
  REQUIRE(good.at("kernels").at(0).at("faults").size() == 1);
  CHECK(load_with([](nlohmann::json&) {}) == "");
  CHECK_THAT(load_with([](nlohmann::json& j) { j["kernels"][0]["faults"][0]["code"] = "zz"; }),
             Catch::Contains("fault code 'zz' that is not a nonzero hex number"));
  CHECK_THAT(load_with([](nlohmann::json& j) { j["kernels"][0]["faults"][0]["code"] = "0"; }),
             Catch::Contains("not a nonzero hex number"));
  CHECK_THAT(load_with([](nlohmann::json& j) {
               for (auto& b : j["buffers"])
                 if (b["storage"] == "fault") b["bytes"] = 8;
             }),
             Catch::Contains("lies outside its storage"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stitch
