// Opsets 24 to 28: Attention's external KV cache (nonpad_kv_seqlen, opset 24), shorter masks (24)
// and sliding window (25), TensorScatter (24), Swish (24), CumProd (26), Range's stash_type (27),
// SwiGLU and floating-point Mod with fmod 0 (28). Each expansion computes what the op's own
// reference implementation does (the interpreter on both graphs); a decoding step that writes its
// K and V into fixed-length caches plans and runs on emu. ONNX's own node tests of these ops are in
// tests/onnx_node/upstream.
#include <fmt/format.h>

#include "fusion_test_util.h"
#include "ops/op_util.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("Attention over an external cache masks each batch's padding and aligns causality to it",
          "[frontend]") {
  // nonpad_kv_seqlen [3, 7] of 7 cached keys: batch 0 sees 3 keys, its causal bound at 3 - 2 + i;
  // with a float mask; with a sliding window (opset 25); a batch with fewer valid keys than queries
  // (its first query row sees no key and is zero).
  for (const char* attrs : {"is_causal = 1", "", "is_causal = 1, left_window_size = 1",
                            "left_window_size = 2, right_window_size = 1"}) {
    expands_to_same(fmt::format(R"(graph "attn" opset 25 {{
  input %q: f32[2,4,2,8]
  input %k: f32[2,2,7,8]
  input %v: f32[2,2,7,8]
  const %len: i64[2] = [3, 7]
  %y = Attention(%q, %k, %v, _, _, _, %len) {{{}}} @"attn"
  output %y
}})",
                                attrs),
                    "Attention", 1);
  }
  expands_to_same(R"(graph "attn" opset 24 {
  input %q: f32[2,2,3,4]
  input %k: f32[2,2,6,4]
  input %v: f32[2,2,6,4]
  input %m: f32[2,1,3,6]
  const %len: i64[2] = [2, 5]
  %y = Attention(%q, %k, %v, %m, _, _, %len) {is_causal = 1} @"attn"
  output %y
})",
                  "Attention", 2);
}

TEST_CASE("Attention's sliding window and a mask shorter than the keys", "[frontend]") {
  // The window joins the causal constant, with and without a past; a boolean mask over the first
  // 4 of 6 keys and a float one over 5 are padded with masked keys (opset 24).
  expands_to_same(R"(graph "attn" opset 25 {
  input %q: f32[1,2,5,4]
  input %k: f32[1,2,5,4]
  input %v: f32[1,2,5,4]
  %y = Attention(%q, %k, %v) {is_causal = 1, left_window_size = 2} @"attn"
  output %y
})",
                  "Attention", 3);
  expands_to_same(R"(graph "attn" opset 25 {
  input %q: f32[1,2,2,4]
  input %k: f32[1,2,2,4]
  input %v: f32[1,2,2,4]
  input %pk: f32[1,2,4,4]
  input %pv: f32[1,2,4,4]
  %y, %ko, %vo = Attention(%q, %k, %v, _, %pk, %pv) {left_window_size = 3, right_window_size = 0} @"attn"
  output %y
  output %ko
  output %vo
})",
                  "Attention", 4);
  expands_to_same(R"(graph "attn" opset 24 {
  input %q: f32[2,2,3,4]
  input %k: f32[2,2,6,4]
  input %v: f32[2,2,6,4]
  input %m: bool[2,1,3,4]
  %y = Attention(%q, %k, %v, %m) @"attn"
  output %y
})",
                  "Attention", 5);
  expands_to_same(R"(graph "attn" opset 24 {
  input %q: f32[2,2,3,4]
  input %k: f32[2,2,6,4]
  input %v: f32[2,2,6,4]
  input %m: f32[3,5]
  %y = Attention(%q, %k, %v, %m) {is_causal = 1} @"attn"
  output %y
})",
                  "Attention", 6);
}

TEST_CASE("TensorScatter becomes a gather of the update at each cache position and a Where", "[frontend]") {
  // Into a computed cache (a cache input is written in place instead: the decoding-loop test
  // below): linear writes at per-batch indices along the default axis (-2); without indices;
  // circular writes that wrap; along axis 1 of a 3-D cache.
  expands_to_same(R"(graph "ts" opset 24 {
  input %cache: f32[2,3,8,4]
  input %u: f32[2,3,2,4]
  const %w: i64[2] = [1, 6]
  %past = Neg(%cache) @"computed"
  %y = TensorScatter(%past, %u, %w) @"ts"
  output %y
})",
                  "TensorScatter", 7);
  expands_to_same(R"(graph "ts" opset 24 {
  input %cache: f32[2,3,8,4]
  input %u: f32[2,3,3,4]
  %past = Neg(%cache) @"computed"
  %y = TensorScatter(%past, %u) @"ts"
  output %y
})",
                  "TensorScatter", 8);
  expands_to_same(R"(graph "ts" opset 24 {
  input %cache: f32[2,3,5,4]
  input %u: f32[2,3,3,4]
  const %w: i64[2] = [4, 7]
  %past = Neg(%cache) @"computed"
  %y = TensorScatter(%past, %u, %w) {mode = "circular"} @"ts"
  output %y
})",
                  "TensorScatter", 9);
  expands_to_same(R"(graph "ts" opset 24 {
  input %cache: f16[3,6,5]
  input %u: f16[3,1,5]
  const %w: i64[3] = [0, 2, 5]
  %past = Neg(%cache) @"computed"
  %y = TensorScatter(%past, %u, %w) {axis = 1} @"ts"
  output %y
})",
                  "TensorScatter", 10);
}

TEST_CASE("TensorScatter into a computed cache is stitched, and its kernel compiles without warnings",
          "[fusion][emu][nvcc]") {
  // The cache is a product, so the expansion (GatherElements of the update, a Where) stays and
  // fuses with it; an update of one position gathers along an axis of extent 1, whose index the
  // kernel then never reads (nvcc, warnings as errors, is how the node tests' kernels are checked).
  auto g = parse_or_die(R"(graph "ts" opset 24 {
  input %past: f32[2,3,6,4]
  input %scale: f32[4]
  input %u: f32[2,3,1,4]
  const %w: i64[2] = [2, 5]
  %p = Mul(%past, %scale) @"scaled_cache"
  %y = TensorScatter(%p, %u, %w) @"ts"
  output %y
})");
  run_frontend_or_die(*g);
  for (const Node* n : all_nodes(*g)) CHECK(n->op_type != "TensorScatter");
  uint32_t seed = 40;
  one_kernel_in_every_planner(*g, seed);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  const auto groups = groups_of(*plan);
  auto s = codegen::build_schedule(*g, &groups);
  REQUIRE(s.is_ok());
  const auto dir =
      std::filesystem::temp_directory_path() / ("stitch_unit_scatter_" + std::to_string(getpid()));
  for (const codegen::Kernel& k : s->kernels) nvcc_compiles_cleanly(k, dir);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a TensorScatter the schedule may not write in place gathers the whole cache", "[emu]") {
  // The front end keeps the op (its cache is an input read by nothing else); the cache input then
  // also becomes a graph output, so the schedule must not overwrite it: the kernel that writes
  // every cache position (the update where it lands, the past elsewhere) runs instead.
  auto g = parse_or_die(R"(graph "ts" opset 24 {
  input %past: f32[2,3,6,4]
  input %u: f32[2,3,2,4]
  const %w: i64[2] = [1, 5]
  %y = TensorScatter(%past, %u, %w) {mode = "circular"} @"ts"
  output %y
})");
  run_frontend_or_die(*g);
  const Node* scatter = nullptr;
  for (const Node* n : all_nodes(*g))
    if (n->op_type == "TensorScatter") scatter = n;
  REQUIRE(scatter);
  CHECK(ops::tensor_scatter_in_place(*g, *scatter));
  g->outputs.push_back(g->find_value("past"));
  CHECK_FALSE(ops::tensor_scatter_in_place(*g, *scatter));
  auto s = codegen::build_schedule(*g, nullptr);
  REQUIRE(s.is_ok());
  CHECK(s->outputs_in_inputs.empty());
  REQUIRE(s->kernels.size() == 1);
  CHECK(s->kernels[0].mapping.find("the update gathered along axis 2") != std::string::npos);
  CHECK(emu_matches_reference(*g, nullptr, 50) == 1);
}

TEST_CASE("SwiGLU becomes Swish times its value, and Swish is an element-wise op", "[frontend]") {
  expands_to_same(R"(graph "glu" opset 28 {
  input %a: f32[2,3,16]
  input %b: f32[2,3,16]
  %y = SwiGLU(%a, %b) {alpha = 1.5} @"glu"
  output %y
})",
                  "SwiGLU", 11);
  auto g = parse_or_die(R"(graph "swish" opset 24 {
  input %x: f32[4,37]
  input %b: f32[4,37]
  %s = Swish(%x) {alpha = 0.75} @"swish"
  %y = Mul(%s, %b) @"gate"
  output %y
})");
  run_frontend_or_die(*g);
  uint32_t seed = 12;
  one_kernel_in_every_planner(*g, seed);
}

TEST_CASE("a decoding step over fixed-length KV caches plans and matches the reference on emu",
          "[fusion][emu]") {
  // The step's K and V written into caches of 8 positions at each batch's length (TensorScatter),
  // then grouped-query Attention over the whole caches with nonpad_kv_seqlen, causal and a sliding
  // window, and a SwiGLU (opset 28) of its output.
  const std::string text = R"(graph "decode" opset 28 {
  input %q: f32[2,4,1,8]
  input %k: f32[2,2,1,8]
  input %v: f32[2,2,1,8]
  input %kc: f32[2,2,8,8]
  input %vc: f32[2,2,8,8]
  const %at: i64[2] = [3, 6]
  const %len: i64[2] = [4, 7]
  %kn = TensorScatter(%kc, %k, %at) @"k_cache"
  %vn = TensorScatter(%vc, %v, %at) @"v_cache"
  %o = Attention(%q, %kn, %vn, _, _, _, %len) {is_causal = 1, left_window_size = 4} @"attn"
  %g = SwiGLU(%o, %o) @"glu"
  output %g
  output %kn
  output %vn
})";
  INFO(text);
  auto g = parse_or_die(text);
  run_frontend_or_die(*g);
  uint32_t seed = 20;
  for (const char* mode : {"greedy", "beam", "ilp"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, opts(mode));
    REQUIRE(plan.is_ok());
    INFO(fusion::explain(*plan));
    CHECK(fused_matches_reference(*g, seed++, mode) == static_cast<size_t>(plan->cost.kernels));
  }
}

TEST_CASE("bad opset-24 to 28 input is an error naming the node", "[errors]") {
  struct Case {
    int opset;
    std::string node, inputs, call, message;
  };
  const std::string qkv = "input %q: f32[2,4,3,8]\n  input %k: f32[2,2,6,8]\n  input %v: f32[2,2,6,8]\n  ";
  const std::vector<Case> cases = {
      {23, "Attention", qkv + "input %l: i64[2]", "Attention(%q, %k, %v, _, _, _, %l)",
       "nonpad_kv_seqlen (input 6) is an opset-24 input; the model's opset is 23"},
      {24, "Attention", qkv + "input %l: i32[2]", "Attention(%q, %k, %v, _, _, _, %l)",
       "nonpad_kv_seqlen must be int64 of shape [batch] = [2], got i32 2"},
      {24, "Attention", qkv + "const %l: i64[2] = [3, 7]", "Attention(%q, %k, %v, _, _, _, %l)",
       "valid key count 7 of 'l' (nonpad_kv_seqlen) is outside [0, 6], the keys' length"},
      {24, "Attention", qkv + "input %l: i64[2]\n  input %p: f32[2,2,3,8]",
       "Attention(%q, %k, %v, _, %p, %p, %l)", "must not be given with past_key and past_value"},
      {24, "Attention", qkv, "Attention(%q, %k, %v) {left_window_size = 2}",
       "left_window_size and right_window_size are opset-25 attributes; the model's opset is 24"},
      {25, "Attention", qkv, "Attention(%q, %k, %v) {right_window_size = -2}",
       "right_window_size -2 is below -1"},
      {23, "Attention", qkv + "input %m: bool[3,4]", "Attention(%q, %k, %v, %m)",
       "attn_mask 3x4 does not broadcast to the scores 2x4x3x6"},
      {24, "TensorScatter", "input %p: f32[2,8,4]\n  input %u: f32[2,9,4]", "TensorScatter(%p, %u)",
       "update 2x9x4 must match past_cache 2x8x4 except along axis 1, where it may be shorter"},
      {24, "TensorScatter", "input %p: f32[2,8,4]\n  input %u: f32[2,8,4]",
       "TensorScatter(%p, %u) {axis = 0}", "axis must not be 0 (the batch axis)"},
      {24, "TensorScatter", "input %p: f32[2,8,4]\n  input %u: f32[2,1,4]",
       "TensorScatter(%p, %u) {mode = \"ring\"}", "mode 'ring' is not 'linear' or 'circular'"},
      {24, "TensorScatter", "input %p: f32[2,8,4]\n  input %u: f32[2,1,4]\n  input %w: i64[3]",
       "TensorScatter(%p, %u, %w)", "write_indices must be int64 of shape [batch] = [2], got i64 3"},
      {28, "SwiGLU", "input %a: f32[2,8]\n  input %b: f32[1,8]", "SwiGLU(%a, %b)",
       "A 2x8 and B 1x8 must have the same shape (SwiGLU does not broadcast)"},
      {27, "Mod", "input %a: f32[4]\n  input %b: f32[4]", "Mod(%a, %b)",
       "needs fmod=1 for floating-point inputs before opset 28 (the model's is 27)"},
      {27, "Range", "const %s: f16[] = [0.0]\n  const %l: f16[] = [4.0]\n  const %d: f16[] = [1.0]",
       "Range(%s, %l, %d) {stash_type = 10}", "stash_type 10 is not supported; only 1 (float32 steps)"},
  };
  for (const Case& c : cases) {
    const std::string text = fmt::format("graph \"g\" opset {} {{\n  {}\n  %y = {} @\"n\"\n  output %y\n}}\n",
                                         c.opset, c.inputs, c.call);
    INFO(text);
    const std::string msg = frontend_error(text);
    INFO(msg);
    CHECK(msg.find(fmt::format("node 'n' ({})", c.node)) != std::string::npos);
    CHECK(msg.find(c.message) != std::string::npos);
  }
}

TEST_CASE("a decoding loop writes its KV caches in place and carries them between steps without copies",
          "[runtime][emu]") {
  // TensorScatter into cache inputs read by nothing else: one packed kernel writes the step's K and
  // V into the inputs' buffers, the present caches are those buffers (manifest: in_place_of_input), and
  // Session::carry of them costs nothing. Three steps, each against the reference interpreter
  // given the reference's caches of the step before.
  auto g = parse_or_die(R"(graph "decode" opset 24 {
  input %q: f32[2,4,1,8]
  input %k: f32[2,2,1,8]
  input %v: f32[2,2,1,8]
  input %kc: f32[2,2,6,8]
  input %vc: f32[2,2,6,8]
  input %at: i64[2]
  const %one: i64[] = [1]
  %len = Add(%at, %one) @"lengths"
  %kn = TensorScatter(%kc, %k, %at) @"k_cache"
  %vn = TensorScatter(%vc, %v, %at) @"v_cache"
  %y = Attention(%q, %kn, %vn, _, _, _, %len) {is_causal = 1} @"attn"
  output %y
  output %kn
  output %vn
})");
  run_frontend_or_die(*g);
  size_t scatters = 0;
  for (const Node* n : all_nodes(*g)) scatters += n->op_type == "TensorScatter";
  CHECK(scatters == 2);  // kept for the back end, not expanded
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  const auto groups = groups_of(*plan);
  const auto packs = packs_of(*plan);
  auto s = codegen::build_schedule(*g, &groups, &packs, plan->gemm_folds);
  REQUIRE(s.is_ok());
  CHECK(s->outputs_in_inputs == std::map<int, int>{{1, 3}, {2, 4}});
  for (const codegen::Step& st : s->steps) CHECK(st.kind != codegen::Step::kCopy);
  // Both writes in one launch: the two scatters have no path between them and pack.
  int in_place = 0, packed = 0;
  for (const codegen::Kernel& k : s->kernels) {
    int here = 0;
    for (size_t at = k.mapping.find("written in place"); at != std::string::npos;
         at = k.mapping.find("written in place", at + 1))
      ++here;
    in_place += here;
    packed += here == 2 && k.scheme == "independent";
  }
  CHECK(in_place == 2);
  CHECK(packed == 1);
  codegen::CompileOptions o;
  o.run_nvcc = false;
  o.model_path = "/dev/null";
  const auto dir = std::filesystem::temp_directory_path() / ("stitch_unit_carry_" + std::to_string(getpid()));
  codegen::ArtifactSummary summary;
  REQUIRE(codegen::write_artifact(*g, *s, o, dir.string(), &summary).is_ok());
  {
    rt::Session session(rt::Model::load(dir.string()), rt::Backend::kEmu);
    CHECK_THROWS_WITH(session.carry("kn", "kc"), Catch::Contains("before any run()"));
    TensorMap feed{{"kc", Tensor(DType::kF32, {2, 2, 6, 8})}, {"vc", Tensor(DType::kF32, {2, 2, 6, 8})}};
    uint32_t seed = 30;
    for (int64_t step = 0; step < 3; ++step) {
      INFO("step " << step);
      for (const char* name : {"q", "k", "v"})
        feed[name] = random_tensor(DType::kF32, *g->find_value(name)->dims, seed++);
      feed["at"] = Tensor::from_i64(DType::kI64, {2}, {step, 2 + step});
      for (const char* name : {"q", "k", "v", "at"})
        session.set_input(name, std::string(dtype_name(feed[name].dtype())), feed[name].dims(),
                          feed[name].data(), feed[name].byte_size());
      if (step == 0) {
        for (const char* name : {"kc", "vc"})
          session.set_input(name, "f32", feed[name].dims(), feed[name].data(), feed[name].byte_size());
      } else {
        session.carry("kn", "kc");
        session.carry("vn", "vc");
      }
      session.run();
      auto want = run_reference(*g, feed);
      REQUIRE(want.is_ok());
      for (const char* name : {"y", "kn", "vn"}) {
        Tensor got(DType::kF32, *g->find_value(name)->dims);
        session.get_output(name, got.data(), got.byte_size());
        const CompareResult r = compare_tensors(got, want->at(name), kEmuF32.rtol, kEmuF32.atol);
        INFO(name << ": max abs " << r.max_abs << " " << r.problem);
        CHECK(r.ok);
      }
      feed["kc"] = want->at("kn");
      feed["vc"] = want->at("vn");
    }
    CHECK_THROWS_WITH(session.carry("y", "kc"), Catch::Contains("dtype and shape must match"));
  }
  std::filesystem::remove_all(dir);
}

namespace {

// A decoding step's K and V computed by a row kernel (an RMSNorm of the step's hidden x [2, S, 16],
// its heads moved in front of the sequence) and written into fixed-length caches of 6 positions
// read by nothing else, K's at positions 3 and 2, V's circular at 5 and 4 (a chunk wraps around).
// `also_k` makes K a graph output too.
std::string cache_write_step(int s, bool also_k) {
  return fmt::format(R"(graph "cache_writes" opset 24 {{
  input %x: f32[2,{0},16]
  input %kc: f32[2,2,6,8]
  input %vc: f32[2,2,6,8]
  const %at: i64[2] = [3, 2]
  const %atv: i64[2] = [5, 4]
  const %two: f32[] = [2.0]
  const %eps: f32[] = [0.000001]
  const %last: i64[1] = [-1]
  const %heads: i64[4] = [2, {0}, 2, 8]
  const %half: f32[] = [0.5]
  %p = Pow(%x, %two) @"pow"
  %m = ReduceMean(%p, %last) {{keepdims = 1}} @"mean"
  %a = Add(%m, %eps) @"add_eps"
  %q = Sqrt(%a) @"sqrt"
  %r = Reciprocal(%q) @"rsqrt"
  %n = Mul(%x, %r) @"norm"
  %kh = Reshape(%n, %heads) @"k_heads_split"
  %k = Transpose(%kh) {{perm = ints[0, 2, 1, 3]}} @"k_heads"
  %xv = Mul(%x, %half) @"v_scale"
  %vh = Reshape(%xv, %heads) @"v_heads_split"
  %v = Transpose(%vh) {{perm = ints[0, 2, 1, 3]}} @"v_heads"
  %kn = TensorScatter(%kc, %k, %at) @"k_cache"
  %vn = TensorScatter(%vc, %v, %atv) {{mode = "circular"}} @"v_cache"
  output %kn
  output %vn{1}
}})",
                     s, also_k ? "\n  output %k" : "");
}

}  // namespace

TEST_CASE("a kernel that computes a cache's update writes it into the cache in place", "[fusion][emu]") {
  // The step's norm, K's and V's head layouts and both caches' writes: one launch (one token, whose
  // head split is a view, and a chunk of 3, whose transposes move the rows); V's writes past the
  // cache's end wrap around. The present caches are the inputs' buffers, with no copy.
  uint32_t seed = 40;
  for (int s : {1, 3}) {
    INFO("S = " << s);
    auto g = parse_or_die(cache_write_step(s, false));
    run_frontend_or_die(*g);
    for (const char* mode : {"greedy", "beam", "ilp"}) {
      INFO(mode);
      auto plan = fusion::make_plan(*g, opts(mode));
      REQUIRE(plan.is_ok());
      INFO(fusion::explain(*plan));
      CHECK(plan->cost.kernels == 1);
      CHECK(fused_matches_reference(*g, seed++, mode) == 1);
    }
    auto plan = fusion::make_plan(*g, opts("beam"));
    REQUIRE(plan.is_ok());
    auto sched = schedule_of(*g, *plan);
    REQUIRE(sched.is_ok());
    CHECK(sched->outputs_in_inputs == std::map<int, int>{{0, 1}, {1, 2}});
    for (const codegen::Step& st : sched->steps) CHECK(st.kind != codegen::Step::kCopy);
    REQUIRE(sched->kernels.size() == 1);
    const std::string& src = sched->kernels.front().source;
    INFO(src);
    CHECK(src.find("written into 'kn' in place (node 'k_cache' (TensorScatter))") != std::string::npos);
    CHECK(src.find("written into 'vn' in place (node 'v_cache' (TensorScatter))") != std::string::npos);
    CHECK(src.find("%= 6LL") != std::string::npos);  // V's circular cache
  }
  // K's update also returned: it is stored as a tensor of its own, and its cache written by a
  // kernel of its own, as before.
  auto g = parse_or_die(cache_write_step(1, true));
  run_frontend_or_die(*g);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  INFO(fusion::explain(*plan));
  CHECK(fusion::explain(*plan).find(
            "node 'k_cache' (TensorScatter) writes 'k' in place, which is also read outside "
            "the group") != std::string::npos);
  CHECK(fused_matches_reference(*g, seed, "beam") == static_cast<size_t>(plan->cost.kernels));
}

TEST_CASE("a row kernel writes a per-row value into a cache in place", "[fusion][emu]") {
  // Each row's mean (one value per row of 8) written into a cache of 6 positions at each batch's
  // index, next to the centered rows: the per-row store path of a row kernel, into the cache.
  auto g = parse_or_die(R"(graph "row_cache" opset 24 {
  input %x: f32[2,3,1,8]
  input %c: f32[2,3,6,1]
  const %at: i64[2] = [4, 0]
  const %last: i64[1] = [-1]
  %m = ReduceMean(%x, %last) {keepdims = 1} @"mean"
  %y = Sub(%x, %m) @"centered"
  %cn = TensorScatter(%c, %m, %at) @"cache"
  output %y
  output %cn
})");
  run_frontend_or_die(*g);
  uint32_t seed = 60;
  one_kernel_in_every_planner(*g, seed);
  auto plan = fusion::make_plan(*g, opts("beam"));
  REQUIRE(plan.is_ok());
  auto sched = schedule_of(*g, *plan);
  REQUIRE(sched.is_ok());
  CHECK(sched->outputs_in_inputs == std::map<int, int>{{1, 1}});
  REQUIRE(sched->kernels.size() == 1);
  const std::string& src = sched->kernels.front().source;
  INFO(src);
  // Once per row, by its first lane, after the row's store pass.
  const size_t guard = src.find("if (lane == 0) {"),
               write = src.find("written into 'cn' in place (node 'cache' (TensorScatter))");
  REQUIRE(write != std::string::npos);
  CHECK(guard < write);
}
