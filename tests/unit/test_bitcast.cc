// BitCast (opset 26): the reference reads the same bytes as the other type (known bit patterns of
// float32, float16 and bfloat16 values); a kernel computes exactly what the reference does for
// every pair of types of one width the IR carries, 16-bit floats included, each way and back, on
// integers over their whole range, and nvcc compiles it; a BitCast between widths is refused with
// the node named. ONNX's own BitCast node tests are in tests/onnx_node/upstream.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "fusion_test_util.h"
#include "reference/interpreter.h"

using namespace stitch;
using namespace stitch::test;

TEST_CASE("BitCast reads the same bytes as the other type", "[reference]") {
  auto g = parse_or_die(R"(graph "bits" opset 26 {
  input %x: f32[4]
  const %f: f32[4] = [1.0, -2.0, 0.0, -0.0]
  const %h: f16[2] = [1.0, -2.0]
  const %b: bf16[2] = [1.0, -2.0]
  %xz = Mul(%x, %f) @"zeroed"
  %fz = Add(%xz, %f) @"values"
  %fi = BitCast(%fz) {to = 6} @"f32_bits"
  %hi = BitCast(%h) {to = 4} @"f16_bits"
  %bi = BitCast(%b) {to = 5} @"bf16_bits"
  output %fi
  output %hi
  output %bi
})");
  run_frontend_or_die(*g);
  TensorMap feed;
  feed["x"] = Tensor::from_f64(DType::kF32, {4}, {0, 0, 0, 0});
  auto out = run_reference(*g, feed);
  REQUIRE(out.is_ok());
  // 1.0f = 0x3f800000, -2.0f = 0xc0000000; 0 * -0 + -0 keeps -0 = 0x80000000.
  CHECK(out->at("fi").to_i64() == std::vector<int64_t>{0x3f800000, -0x40000000, 0, INT32_MIN});
  CHECK(out->at("hi").to_i64() == std::vector<int64_t>{0x3c00, 0xc000});   // uint16
  CHECK(out->at("bi").to_i64() == std::vector<int64_t>{0x3f80, -0x4000});  // int16
}

TEST_CASE("BitCast in a kernel computes what the reference does, each way and back", "[emu]") {
  const std::vector<std::pair<DType, DType>> pairs = {
      {DType::kF32, DType::kI32},  {DType::kF32, DType::kU32},  {DType::kI32, DType::kU32},
      {DType::kF64, DType::kI64},  {DType::kF64, DType::kU64},  {DType::kI64, DType::kU64},
      {DType::kF16, DType::kI16},  {DType::kF16, DType::kU16},  {DType::kBF16, DType::kI16},
      {DType::kBF16, DType::kU16}, {DType::kF16, DType::kBF16}, {DType::kI16, DType::kU16},
      {DType::kI8, DType::kU8},    {DType::kU8, DType::kBool}};
  // Every pair each way is a chain of its own in one graph, its values named after its types: one
  // plan, emulation library and nvcc run for all 28 rather than for each (54 to 63 s -> about 4).
  std::string inputs, nodes, outputs;
  for (const auto& [a, b] : pairs)
    for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      // The input through a node of its own type first, so that the BitCast reads a computed value.
      const std::string tag = fmt::format("{}_to_{}", dtype_name(from), dtype_name(to));
      inputs += fmt::format("  input %x_{0}: {1}[3,37]\n  input %y_{0}: {1}[3,37]\n", tag, dtype_name(from));
      nodes += fmt::format(R"(  %s_{0} = {1}(%x_{0}, %y_{0}) @"computed_{0}"
  %c_{0} = BitCast(%s_{0}) {{to = {2}}} @"cast_{0}"
  %back_{0} = BitCast(%c_{0}) {{to = {3}}} @"back_{0}"
)",
                           tag, from == DType::kBool ? "Or" : "Max", dtype_to_onnx(to), dtype_to_onnx(from));
      outputs += fmt::format("  output %c_{0}\n  output %back_{0}\n", tag);
    }
  auto g = parse_or_die(fmt::format("graph \"bits\" opset 26 {{\n{}{}{}}}", inputs, nodes, outputs));
  run_frontend_or_die(*g);
  // Floats in [-2, 2]; integers over their type's whole range, so that sign and high bits cross
  // (64-bit ones as doubles include NaNs, which come back exactly, and so do 16-bit ones as float16
  // or bfloat16 NaNs, signaling ones too: the kernels' conversions keep a NaN's bits).
  std::mt19937_64 rng(4100);
  TensorMap feed;
  for (const Value* v : g->inputs) {
    Tensor t = random_tensor(v->dtype, *v->dims, static_cast<uint32_t>(rng()));
    if (!is_float(v->dtype) && v->dtype != DType::kBool) {
      const int bits = dtype_size(v->dtype) * 8;
      for (int64_t i = 0; i < t.size(); ++i) {
        const uint64_t r = bits == 64 ? rng() : rng() & ((uint64_t{1} << bits) - 1);
        t.set_i64(i, is_signed_int(v->dtype) && bits < 64 && r >> (bits - 1)
                         ? int64_t(r) - (int64_t{1} << bits)
                         : static_cast<int64_t>(r));
      }
    }
    feed[v->name] = std::move(t);
  }
  for (const char* mode : {"none", "beam"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, opts(mode));
    REQUIRE(plan.is_ok());
    const auto groups = groups_of(*plan);
    const auto packs = packs_of(*plan);
    CHECK(emu_matches_reference_on(*g, &groups, feed, kExact, &packs, plan->gemm_folds) >= 1);
  }
  // The same CUDA text through nvcc (sm_90, warnings as errors): every chain in one kernel.
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("stitch_unit_bitcast_{}", getpid());
  nvcc_compiles_cleanly(lower_whole_graph(*g), dir);
  std::filesystem::remove_all(dir);
}

TEST_CASE("16-bit float NaNs keep their bits through kernels that move or convert them", "[emu]") {
  // Transposes move float16 and bfloat16 values (a load and a store in float), Casts convert between
  // the three float types, and BitCasts read the bits moved. Every input element is one of a few
  // patterns: NaNs quiet and signaling, of either sign, with payloads in high and in low bits, among
  // ordinary values, infinities and a subnormal.
  auto g = parse_or_die(R"(graph "nan_bits" opset 26 {
  input %h: f16[3,37]
  input %b: bf16[3,37]
  input %f: f32[3,37]
  %ht = Transpose(%h) {perm = ints[1, 0]} @"move_f16"
  %bt = Transpose(%b) {perm = ints[1, 0]} @"move_bf16"
  %hbits = BitCast(%ht) {to = 5} @"f16_bits"
  %bbits = BitCast(%bt) {to = 4} @"bf16_bits"
  %fh = Cast(%f) {to = 10} @"f32_to_f16"
  %fb = Cast(%f) {to = 16} @"f32_to_bf16"
  %hf = Cast(%h) {to = 1} @"f16_to_f32"
  %bf = Cast(%b) {to = 1} @"bf16_to_f32"
  %hb = Cast(%h) {to = 16} @"f16_to_bf16"
  output %ht
  output %bt
  output %hbits
  output %bbits
  output %fh
  output %fb
  output %hf
  output %bf
  output %hb
})");
  run_frontend_or_die(*g);
  const std::vector<uint16_t> h = {0x7c01, 0x7dff, 0x7e00, 0xfe55, 0xfc02, 0x3c00, 0x7c00, 0x8001, 0x7fff};
  const std::vector<uint16_t> b = {0x7f81, 0x7fc1, 0xffaa, 0x7f80, 0x3f80, 0xff81, 0x7fff};
  const std::vector<uint32_t> f = {0x7f800001, 0xffc12345, 0x7fa00000, 0x3fc00000, 0xff800000, 0x7fc00000};
  TensorMap feed;
  auto fill = [&](const std::string& name, DType t, const auto& patterns) {
    Tensor x(t, {3, 37});
    for (int64_t i = 0; i < x.size(); ++i) {
      const auto bits = patterns[static_cast<size_t>(i) % patterns.size()];
      std::memcpy(x.data() + i * dtype_size(t), &bits, static_cast<size_t>(dtype_size(t)));
    }
    feed[name] = std::move(x);
  };
  fill("h", DType::kF16, h);
  fill("b", DType::kBF16, b);
  fill("f", DType::kF32, f);
  auto want = run_reference(*g, feed);
  REQUIRE(want.is_ok());
  auto bits16 = [](const Tensor& t, int64_t i) { return t.data_as<uint16_t>()[i]; };
  auto bits32 = [](const Tensor& t, int64_t i) { return t.data_as<uint32_t>()[i]; };
  // The reference's bits, by the rule (a NaN keeps its sign and its payload's top bits, and is quiet
  // only where none is left): element i of a Cast reads pattern i % count.
  const Tensor &fh = want->at("fh"), &fb = want->at("fb"), &hf = want->at("hf"), &bf = want->at("bf");
  CHECK(bits16(fh, 0) == 0x7e00);  // payload in the low 13 bits only: a quiet NaN
  CHECK(bits16(fh, 1) == 0xfe09);  // 0x412345 >> 13
  CHECK(bits16(fh, 2) == 0x7d00);  // signaling, kept so
  CHECK(bits16(fb, 0) == 0x7fc0);
  CHECK(bits16(fb, 1) == 0xffc1);
  CHECK(bits16(fb, 2) == 0x7fa0);
  CHECK(bits32(hf, 0) == 0x7f802000u);
  CHECK(bits32(hf, 3) == 0xffcaa000u);
  CHECK(bits32(bf, 0) == 0x7f810000u);
  CHECK(bits32(bf, 2) == 0xffaa0000u);
  CHECK(bits16(want->at("hb"), 0) == 0x7fc0);  // 0x7f802000: no payload bit left in 16 bits
  // The transposes move bits: element (j, i) of the result is element (i, j) of the input.
  CHECK(bits16(want->at("ht"), 1 * 3 + 0) == h[1]);
  CHECK(want->at("hbits").data_as<uint16_t>()[1 * 3 + 0] == h[1]);
  for (const char* mode : {"none", "beam"}) {
    INFO(mode);
    auto plan = fusion::make_plan(*g, opts(mode));
    REQUIRE(plan.is_ok());
    const auto groups = groups_of(*plan);
    const auto packs = packs_of(*plan);
    const TensorMap got = emu_run(*g, &groups, feed, nullptr, &packs, plan->gemm_folds);
    for (const Value* v : g->outputs) {
      INFO(v->name);
      const Tensor &x = got.at(v->name), &y = want->at(v->name);
      REQUIRE(x.byte_size() == y.byte_size());
      CHECK(std::memcmp(x.data(), y.data(), static_cast<size_t>(x.byte_size())) == 0);
    }
  }
  // The conversions each way through nvcc (sm_90, warnings as errors): the Casts, of one shape, as
  // one element kernel.
  std::vector<const Node*> casts;
  std::set<const Value*> stored;
  for (const auto& n : g->nodes())
    if (n->op_type == "Cast") casts.push_back(n.get()), stored.insert(n->output(0));
  auto k = codegen::lower_stitched(casts, stored, 0, true);
  INFO(k.status().message());
  REQUIRE(k.is_ok());
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("stitch_unit_nan_bits_{}", getpid());
  nvcc_compiles_cleanly(*k, dir);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "kernels whose outputs only arithmetic computes convert 16-bit floats plainly, those that move them by "
    "bits",
    "[emu]") {
  // A layer norm and a softmax compute their outputs (a NaN among their inputs gives the canonical
  // NaN whatever its bits), and so does a Where choosing between the softmax and a constant 0: the
  // first graph's kernels convert plainly. A Transpose and a Where choosing an input element pass
  // elements on unchanged, and so do Max and Min (a NaN operand with its bits, b between zeros of
  // opposite signs, in the reference as in the kernels): the second graph's kernels keep a NaN's
  // bits. Each graph as the beam
  // search plans it, checked on emu against the reference with NaNs of several payloads among the
  // inputs (the computed outputs compared as NaN, the moved ones by their bits).
  const char* computed = R"(graph "computed" opset 18 {
  input %h: f16[4,64]
  input %s: f16[64]
  input %b: f16[64]
  const %zero: f16[] = [0]
  %ln = LayerNormalization(%h, %s, %b) {axis = -1} @"ln"
  %sm = Softmax(%h) {axis = -1} @"sm"
  %isn = IsNaN(%sm) @"isnan"
  %w = Where(%isn, %zero, %sm) @"fill"
  output %ln
  output %w
})";
  const char* moved = R"(graph "moved" opset 18 {
  input %h: f16[4,64]
  input %s: f16[64]
  input %b: f16[64]
  const %zero: f16[] = [0]
  %t = Transpose(%h) {perm = ints[1, 0]} @"move"
  %m = Greater(%h, %zero) @"positive"
  %p = Where(%m, %h, %s) @"pick"
  %x = Max(%h, %zero) @"max"
  %n = Min(%zero, %h, %s) @"min"
  output %t
  output %p
  output %x
  output %n
})";
  TensorMap feed;
  Tensor h(DType::kF16, {4, 64}), sc(DType::kF16, {64}), bi(DType::kF16, {64});
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  const uint16_t nans[] = {0x7c01, 0xfe55, 0x7dff};
  for (int64_t i = 0; i < h.size(); ++i) {
    h.set_f32(i, u(rng));
    if (i % 50 == 7) std::memcpy(h.data() + i * 2, &nans[i % 3], 2);
    if (i % 50 == 11) h.set_f32(i, i % 100 == 11 ? -0.0f : 0.0f);
  }
  for (int64_t i = 0; i < 64; ++i) sc.set_f32(i, u(rng)), bi.set_f32(i, u(rng));
  feed["h"] = h, feed["s"] = sc, feed["b"] = bi;
  for (const char* text : {computed, moved}) {
    auto g = parse_or_die(text);
    run_frontend_or_die(*g);
    const bool plain = g->name == "computed";
    INFO(g->name);
    auto plan = fusion::make_plan(*g, opts("beam"));
    REQUIRE(plan.is_ok());
    auto s = schedule_of(*g, *plan);
    REQUIRE(s.is_ok());
    for (const codegen::Kernel& k : s->kernels) {
      INFO(k.name);
      CHECK((k.source.find("stitch_dev::cvt_plain<") != std::string::npos) == plain);
      CHECK((k.source.find("stitch_dev::cvt<") != std::string::npos) == !plain);
    }
    auto want = run_reference(*g, feed);
    REQUIRE(want.is_ok());
    const auto groups = groups_of(*plan);
    const auto packs = packs_of(*plan);
    const TensorMap got = emu_run(*g, &groups, feed, nullptr, &packs, plan->gemm_folds);
    int nans_out = 0;
    for (const Value* v : g->outputs) {
      INFO(v->name);
      const Tensor &x = got.at(v->name), &y = want->at(v->name);
      REQUIRE(x.byte_size() == y.byte_size());
      if (!plain) {
        CHECK(std::memcmp(x.data(), y.data(), static_cast<size_t>(x.byte_size())) == 0);
        continue;
      }
      for (int64_t i = 0; i < x.size(); ++i) {
        const double a = x.get_f64(i), b = y.get_f64(i);
        CHECK(std::isnan(a) == std::isnan(b));
        if (!std::isnan(b)) CHECK(std::fabs(a - b) <= 0.02 + 0.02 * std::fabs(b));
        nans_out += std::isnan(b);
      }
    }
    if (plain) CHECK(nans_out > 0);  // the NaNs reached the arithmetic
  }
}

TEST_CASE("a BitCast between types of different widths is refused with the node named", "[frontend]") {
  const std::string err = frontend_error(R"(graph "bits" opset 26 {
  input %x: f32[4]
  %y = BitCast(%x) {to = 7} @"widen"
  output %y
})");
  CHECK(err.find("'widen'") != std::string::npos);
  CHECK(err.find("f32 (4 bytes) to i64 (8 bytes)") != std::string::npos);
}
