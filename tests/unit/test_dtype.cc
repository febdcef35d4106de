#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "ir/dtype.h"
#include "ir/graph.h"
#include "ir/tensor.h"

using namespace stitch;

TEST_CASE("half conversion matches IEEE binary16") {
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(float_to_half_bits(-2.0f) == 0xc000);
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);                 // largest finite
  CHECK(float_to_half_bits(65536.0f) == 0x7c00);                 // overflows to inf
  CHECK(float_to_half_bits(5.960464477539063e-08f) == 0x0001);   // smallest subnormal
  CHECK(float_to_half_bits(1.0f + 1.0f / 2048) == 0x3c00);       // tie rounds to even
  CHECK(float_to_half_bits(1.0f + 3.0f / 2048) == 0x3c02);       // tie rounds to even (up)
  CHECK(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
  for (uint32_t h = 0; h < 0x7c00; ++h)  // every finite positive half survives a round trip
    REQUIRE(float_to_half_bits(half_bits_to_float(static_cast<uint16_t>(h))) == h);
}

TEST_CASE("bfloat16 conversion rounds to nearest even") {
  CHECK(float_to_bf16_bits(1.0f) == 0x3f80);
  CHECK(bf16_bits_to_float(0x3f80) == 1.0f);
  CHECK(float_to_bf16_bits(1.0f + 1.0f / 256) == 0x3f80);   // tie, even stays
  CHECK(float_to_bf16_bits(1.0f + 3.0f / 256) == 0x3f82);   // tie, odd rounds up
  CHECK(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
}

TEST_CASE("tensor widened access converts like C casts") {
  Tensor t = Tensor::from_f64(DType::kF32, {3}, {1.75, -1.75, 3e10});
  CHECK(t.get_i64(0) == 1);
  CHECK(t.get_i64(1) == -1);
  Tensor u8(DType::kU8, {1});
  u8.set_i64(0, 300);  // wraps like a store to uint8
  CHECK(u8.get_i64(0) == 44);
  Tensor b(DType::kBool, {1});
  b.set_f64(0, 0.5);
  CHECK(b.get_i64(0) == 1);
}

TEST_CASE("tensor copies share their bytes until one is written") {
  const Tensor a = Tensor::from_f64(DType::kF32, {2, 2}, {1, 2, 3, 4});
  Tensor b = a;
  CHECK(b.shares_bytes_with(a));
  CHECK(b.reshaped({4}).shares_bytes_with(a));
  b.set_f64(1, 20);  // a private copy first: the original keeps its value
  CHECK_FALSE(b.shares_bytes_with(a));
  CHECK(a.get_f64(1) == 2);
  CHECK(b.get_f64(1) == 20);
  CHECK(b.get_f64(3) == 4);
  Tensor c = a;
  c.data_as<float>()[0] = 10;  // the same through a pointer
  CHECK(a.get_f64(0) == 1);
  CHECK(c.get_f64(0) == 10);
  Tensor d = a;
  d.set_i64(2, 7);
  CHECK(a.get_i64(2) == 3);
  // Equality reads the values, shared or not.
  CHECK(Tensor(a).same_as(a));
  CHECK(Tensor::from_f64(DType::kF32, {2, 2}, {1, 2, 3, 4}).same_as(a));
  CHECK_FALSE(b.same_as(a));
  CHECK(Tensor().same_as(Tensor()));
  CHECK(Tensor().data() == nullptr);
  CHECK(Tensor(DType::kF32, {0}).same_as(Tensor(DType::kF32, {0})));
}

TEST_CASE("a cloned graph shares its constants' bytes until it writes them") {
  Graph g;
  Value* w = g.add_value("w");
  w->dtype = DType::kF32;
  w->dims = Dims{3};
  w->constant = Tensor::from_f64(DType::kF32, {3}, {1, 2, 3});
  auto copy = clone_graph(g);
  Value* cw = copy->values().front().get();
  REQUIRE(cw->constant);
  CHECK(cw->constant->shares_bytes_with(*w->constant));
  cw->constant->set_f64(0, -1);
  CHECK(w->constant->get_f64(0) == 1);
  CHECK(cw->constant->get_f64(0) == -1);
}

TEST_CASE("a deferred tensor computes its bytes once, when first read") {
  std::atomic<int> runs{0};
  const Tensor src = Tensor::from_f64(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto doubled = [&runs, src] {
    ++runs;
    std::vector<double> v = src.to_f64();
    for (double& x : v) x *= 2;
    return Tensor::from_f64(DType::kF32, {2, 3}, v);
  };
  SECTION("shape and size without computing; copies share the result") {
    const Tensor d = Tensor::deferred(DType::kF32, {2, 3}, doubled);
    const Tensor copy = d;
    const Tensor flat = d.reshaped({6});
    CHECK(d.pending());
    CHECK(d.dims() == Dims{2, 3});
    CHECK(d.byte_size() == 24);
    CHECK(copy.shares_bytes_with(d));
    CHECK(runs == 0);
    CHECK(flat.get_f64(5) == 12);  // through a copy of other dims: the bytes of the dims it was made with
    CHECK(runs == 1);
    CHECK_FALSE(d.pending());
    CHECK_FALSE(copy.pending());
    CHECK(d.get_f64(0) == 2);
    CHECK(copy.to_f64() == std::vector<double>{2, 4, 6, 8, 10, 12});
    CHECK(d.same_as(Tensor::from_f64(DType::kF32, {2, 3}, {2, 4, 6, 8, 10, 12})));
    CHECK(runs == 1);
  }
  SECTION("writing a copy computes first, then takes a private copy") {
    const Tensor d = Tensor::deferred(DType::kF32, {2, 3}, doubled);
    Tensor w = d;
    w.set_f64(0, -1);
    CHECK(runs == 1);
    CHECK(w.get_f64(0) == -1);
    CHECK(w.get_f64(1) == 4);
    CHECK(d.get_f64(0) == 2);
    CHECK(runs == 1);
  }
  SECTION("threads reading at once compute it once and read the same values") {
    const Tensor d = Tensor::deferred(DType::kF32, {2, 3}, doubled);
    std::vector<double> sums(4, 0.0);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < sums.size(); ++i)
      threads.emplace_back([&d, &sums, i] {
        for (int64_t j = 0; j < 6; ++j) sums[i] += d.get_f64(j);
      });
    for (std::thread& t : threads) t.join();
    CHECK(runs == 1);
    CHECK(sums == std::vector<double>(4, 42.0));
  }
  SECTION("a deferred tensor may read another, and a cloned graph's constant shares it") {
    const Tensor first = Tensor::deferred(DType::kF32, {2, 3}, doubled);
    Graph g;
    Value* w = g.add_value("w");
    w->dtype = DType::kF32;
    w->dims = Dims{3, 2};
    w->constant = Tensor::deferred(DType::kF32, {3, 2}, [first] { return first.reshaped({3, 2}); });
    auto copy = clone_graph(g);
    const Value* cw = copy->values().front().get();
    REQUIRE(cw->constant);
    CHECK(cw->constant->pending());
    CHECK(runs == 0);
    CHECK(cw->constant->get_f64(3) == 8);
    CHECK_FALSE(w->constant->pending());
    CHECK_FALSE(first.pending());
    CHECK(w->constant->get_f64(5) == 12);
    CHECK(runs == 1);
  }
}

TEST_CASE("dtype names and ONNX codes round-trip") {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI64, DType::kI32, DType::kI16,
                  DType::kI8, DType::kU64, DType::kU32, DType::kU16, DType::kU8, DType::kBool}) {
    CHECK(dtype_from_name(dtype_name(t)) == t);
    CHECK(dtype_from_onnx(dtype_to_onnx(t)) == t);
  }
  CHECK_FALSE(dtype_from_onnx(8).has_value());  // STRING
  CHECK(onnx_dtype_name(8) == "STRING");
}
