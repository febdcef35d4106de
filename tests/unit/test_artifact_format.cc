// The artifact format's checksum is XXH3-64 with seed 0, as docs/artifact-format.md says: checked
// against values computed by another implementation of XXH3 (LLVM's, in its xxhash unit test, over
// the same xorshift64 bytes), at lengths that reach each of XXH3's input-size paths, and fed in
// uneven pieces as the artifact writer feeds the weights.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "stitch/artifact_format.h"

namespace {

// xorshift64 (13, 7, 17) from 1, the low byte of each step.
std::vector<uint8_t> xorshift_bytes(size_t n) {
  std::vector<uint8_t> a(n);
  uint64_t x = 1;
  for (uint8_t& b : a) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return a;
}

// Length -> XXH3-64 of the first `length` bytes: 0, 1-3, 4-8, 9-16, 17-128, 129-240 bytes and
// longer inputs take different paths; 2048 and past are more than one 1024-byte block.
const std::vector<std::pair<size_t, uint64_t>> kExpected = {
    {0, 0x2d06800538d394c2ull},    {1, 0xd0d496e05c553485ull},    {3, 0x6ea2d59aca5c3778ull},
    {8, 0xabc1413da6cd0209ull},    {16, 0x7e46916754d7c9b8ull},   {17, 0xed4be912ba5f836dull},
    {128, 0x06a146ee9a2da378ull},  {129, 0xbc7138129bf065daull},  {403, 0xcefeb3ffa532ad8cull},
    {2048, 0x330ce110cbb79eaeull}, {2049, 0x3ba6afa0249fef9aull}, {2243, 0x0979f786a24edde7ull},
};

}  // namespace

TEST_CASE("the artifact checksum is XXH3-64 with another implementation's values", "[artifact]") {
  const std::vector<uint8_t> a = xorshift_bytes(2243);
  for (const auto& [n, want] : kExpected) {
    INFO("length " << n);
    CHECK(stitch::artifact::checksum(a.data(), n) == want);
  }
}

TEST_CASE("the artifact checksum is the same fed in pieces", "[artifact]") {
  const std::vector<uint8_t> a = xorshift_bytes(2243);
  for (const size_t piece : {size_t{1}, size_t{7}, size_t{256}, size_t{1000}}) {
    for (const auto& [n, want] : kExpected) {
      INFO("length " << n << " in pieces of " << piece);
      stitch::artifact::Checksum h;
      for (size_t at = 0; at < n; at += piece) h.update(a.data() + at, std::min(piece, n - at));
      CHECK(h.digest() == want);
    }
  }
  stitch::artifact::Checksum h;
  h.update(a.data(), 100);
  CHECK(h.digest() == stitch::artifact::checksum(a.data(), 100));  // a digest does not end the stream
  h.update(a.data() + 100, 29);
  CHECK(h.digest() == 0xbc7138129bf065daull);
}
