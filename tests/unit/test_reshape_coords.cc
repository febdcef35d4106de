// Reshapes inside stitched kernels: an input's coordinates are taken apart digit by digit from
// the output's (Stitcher::reshape_coords), so a merge of axes is a multiply-add, a split one
// division of that axis, and a merge split back again no arithmetic at all. Checked on emu
// against the reference over seeded chains of Reshapes and Transposes of every factorisation of
// a few sizes (size-1 axes, mixed blocks that must still divide, element, vectorised and row
// kernels), and on the text of attention's head split and merge.
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "fusion_test_util.h"

namespace stitch {
namespace {

// A random shape of `total` elements: its prime factors shuffled and cut into 1 to 4 axes,
// sometimes with a size-1 axis put in.
std::vector<int64_t> random_shape(int64_t total, std::mt19937& rng) {
  std::vector<int64_t> primes;
  for (int64_t p = 2, n = total; n > 1; ++p)
    for (; n % p == 0; n /= p) primes.push_back(p);
  std::shuffle(primes.begin(), primes.end(), rng);
  const size_t axes = std::min<size_t>(primes.size(), 1 + rng() % 4);
  std::vector<int64_t> shape(axes, 1);
  for (size_t i = 0; i < primes.size(); ++i) shape[i < axes ? i : rng() % axes] *= primes[i];
  if (rng() % 3 == 0) shape.insert(shape.begin() + static_cast<long>(rng() % (shape.size() + 1)), 1);
  return shape;
}

std::string shape_text(const std::vector<int64_t>& s) { return fmt::format("{}", fmt::join(s, ",")); }

// `chains` inputs of `out`'s element count, each through Reshape, Transpose, Reshape, Transpose
// and a last Reshape to `out` (random shapes and permutations from `seed`), negated; every chain
// is an output, and `tail` (IR text over %o0 ... ) may add more nodes and outputs.
std::unique_ptr<Graph> reshape_chains(const std::vector<int64_t>& out, int chains, uint32_t seed,
                                      const std::string& tail = "") {
  std::mt19937 rng(seed);
  const int64_t total = std::accumulate(out.begin(), out.end(), int64_t{1}, std::multiplies<>());
  std::string body;
  std::string outputs;
  auto reshape = [&](const std::string& from, const std::string& to, const std::vector<int64_t>& s) {
    body += fmt::format("  const %{0}_s: i64[{1}] = [{2}]\n  %{0} = Reshape(%{3}, %{0}_s) @\"{0}\"\n", to,
                        s.size(), shape_text(s), from);
  };
  auto transpose = [&](const std::string& from, const std::string& to, size_t rank) {
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    body +=
        fmt::format("  %{0} = Transpose(%{1}) {{perm = ints[{2}]}} @\"{0}\"\n", to, from, shape_text(perm));
  };
  std::string inputs;
  for (int c = 0; c < chains; ++c) {
    const std::vector<int64_t> in = random_shape(total, rng), mid = random_shape(total, rng),
                               mid2 = random_shape(total, rng);
    inputs += fmt::format("  input %x{}: f32[{}]\n", c, shape_text(in));
    transpose(fmt::format("x{}", c), fmt::format("t{}", c), in.size());
    reshape(fmt::format("t{}", c), fmt::format("a{}", c), mid);
    transpose(fmt::format("a{}", c), fmt::format("b{}", c), mid.size());
    reshape(fmt::format("b{}", c), fmt::format("m{}", c), mid2);
    transpose(fmt::format("m{}", c), fmt::format("n{}", c), mid2.size());
    reshape(fmt::format("n{}", c), fmt::format("r{}", c), out);
    body += fmt::format("  %o{0} = Neg(%r{0}) @\"o{0}\"\n", c);
    outputs += fmt::format("  output %o{}\n", c);
  }
  auto g = test::parse_or_die(
      fmt::format("graph \"chains\" opset 17 {{\n{}{}{}{}}}\n", inputs, body, tail, outputs));
  test::run_frontend_or_die(*g);
  return g;
}

}  // namespace

TEST_CASE("reshape coordinates: seeded Reshape and Transpose chains in one kernel match the reference",
          "[stitch][emu]") {
  // 240 = 2^4 x 3 x 5 into [24, 10]: scalar element kernels; 480 into [8, 5, 12]: 4 elements a
  // thread with 128-bit accesses where an operand's inner axis allows.
  for (uint32_t seed : {1u, 2u, 3u}) {
    INFO("seed " << seed);
    auto scalar = reshape_chains({24, 10}, 6, seed);
    CHECK(test::one_group_matches_reference(*scalar, seed));
    auto vec = reshape_chains({8, 5, 12}, 6, seed + 100);
    CHECK(test::one_group_matches_reference(*vec, seed));
  }
}

TEST_CASE("reshape coordinates: chains feeding a softmax row kernel match the reference", "[stitch][emu]") {
  // The chains' sum normalised over rows of 10 (warp per row) and of 1440 (block per row).
  for (const auto& [out, seed] : {std::pair{std::vector<int64_t>{24, 10}, 7u}, {{2, 1440}, 8u}}) {
    INFO("rows of " << out.back());
    const std::string tail = R"(  %s01 = Add(%o0, %o1) @"add01"
  %s = Add(%s01, %o2) @"add2"
  %p = Softmax(%s) {axis = -1} @"softmax"
  output %p
)";
    auto g = reshape_chains(out, 3, seed, tail);
    CHECK_THAT(test::lower_whole_graph(*g).mapping,
               Catch::Contains(out.back() == 10 ? "warp per row" : "block per row"));
    CHECK(test::one_group_matches_reference(*g, seed));
  }
}

TEST_CASE("reshape coordinates: attention's head split and merge need no division of the heads' axes",
          "[stitch]") {
  // BERT's heads: [2, 16, 64] split into 4 heads of 16, moved before the sequence, negated, moved
  // back and merged. Every reshape is a split or a merge along block boundaries, so x is read at the
  // kernel's own coordinates: no flat index is divided, and x's load is a 128-bit one.
  auto g = test::parse_or_die(R"(graph "heads" opset 17 {
  input %x: f32[2,16,64]
  input %y: f32[2,16,64]
  const %heads: i64[4] = [2, 16, 4, 16]
  const %flat: i64[3] = [2, 16, 64]
  %h = Reshape(%x, %heads) @"split_heads"
  %t = Transpose(%h) {perm = ints[0, 2, 1, 3]} @"to_heads"
  %n = Neg(%t) @"neg"
  %b = Transpose(%n) {perm = ints[0, 2, 1, 3]} @"back"
  %m = Reshape(%b, %flat) @"merge_heads"
  %o = Add(%m, %y) @"add"
  output %o
})");
  test::run_frontend_or_die(*g);
  const codegen::Kernel k = test::lower_whole_graph(*g);
  INFO(k.source);
  CHECK(k.source.find("const long long f") == std::string::npos);
  CHECK(k.mapping.find("128-bit loads of 2 operands") != std::string::npos);
  CHECK(test::one_group_matches_reference(*g, 5));

  // Grouped-query attention's K heads: 4 query heads read 2 K heads (head / 2), through an
  // Expand of a size-1 axis and a Reshape merging it: the head's digit is divided, not the flat
  // index.
  auto gqa = test::parse_or_die(R"(graph "gqa" opset 17 {
  input %k: f32[2,2,16,16]
  const %shape5: i64[5] = [2, 2, 1, 16, 16]
  const %rep: i64[5] = [2, 2, 2, 16, 16]
  const %heads: i64[4] = [2, 4, 16, 16]
  %k5 = Reshape(%k, %shape5) @"unsqueeze"
  %ke = Expand(%k5, %rep) @"repeat"
  %kh = Reshape(%ke, %heads) @"merge_repeat"
  %kt = Transpose(%kh) {perm = ints[0, 1, 3, 2]} @"k_t"
  output %kt
})");
  test::run_frontend_or_die(*gqa);
  const codegen::Kernel kg = test::lower_whole_graph(*gqa);
  INFO(kg.source);
  CHECK(kg.source.find("const long long f") == std::string::npos);
  CHECK(test::one_group_matches_reference(*gqa, 6));
}

}  // namespace stitch
