#include "ops/value_range.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>

#include "ops/index_check.h"
#include "ops/op_util.h"

namespace stitch::ops {
namespace {

constexpr int64_t kLowest = std::numeric_limits<int64_t>::min();
constexpr int64_t kHighest = std::numeric_limits<int64_t>::max();
constexpr IntRange kAny{kLowest, kHighest};
constexpr int kMaxDepth = 32;  // producers followed from the value asked about

// The values integer type `t` holds.
IntRange type_range(DType t) {
  switch (t) {
    case DType::kI8:
      return {-128, 127};
    case DType::kI16:
      return {-32768, 32767};
    case DType::kI32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::kU8:
      return {0, 255};
    case DType::kU16:
      return {0, 65535};
    case DType::kU32:
      return {0, std::numeric_limits<uint32_t>::max()};
    case DType::kBool:
      return {0, 1};
    default:
      return kAny;  // int64, and uint64 (its values above 2^63 - 1 are not ranged)
  }
}

IntRange join(IntRange a, IntRange b) { return {std::min(a.min, b.min), std::max(a.max, b.max)}; }

// A scalar integer constant, or nothing.
std::optional<int64_t> scalar_constant(const Value* v) {
  if (!v || !v->is_constant() || v->constant->size() != 1 || !is_int(v->dtype)) return std::nullopt;
  return v->constant->to_i64()[0];
}

// One question's walk up the producers: how deep it is, and the bounds found so far, so that a
// value many paths reach (a diamond of Adds) is bounded once, not once a path.
struct Walk {
  int depth = 0;
  std::unordered_map<const Value*, IntRange> known;
  std::map<std::pair<const Value*, int>, IntRange> known_low;  // low_bits's, by value and width
};

IntRange range_of(const Value* v, Walk& w);
IntRange low_bits(const Value* v, int k, Walk& w);

// Whether `op`'s output elements are some of its input 0's, moved or copied.
bool moves_elements(const std::string& op) {
  static const char* const kMoves[] = {"Reshape",   "Expand",  "Transpose",      "Squeeze",
                                       "Unsqueeze", "Flatten", "Slice",          "Identity",
                                       "Tile",      "Gather",  "GatherElements", "GatherND"};
  return std::find(std::begin(kMoves), std::end(kMoves), op) != std::end(kMoves);
}

IntRange input_range(const Node& n, size_t i, Walk& w) {
  ++w.depth;
  const IntRange r = range_of(n.input(i), w);
  --w.depth;
  return r;
}

// The width k of mask 2^k - 1, or 0 when `v` is no such scalar constant.
int mask_width(const Value* v) {
  const auto m = scalar_constant(v);
  if (!m || *m <= 0 || (*m & (*m + 1)) != 0) return 0;
  return 64 - __builtin_clzll(static_cast<unsigned long long>(*m));
}

// A BitwiseAnd: a non-negative operand bounds it by [0, its largest], and a mask 2^k - 1 keeps the
// low k bits, whose bounds low_bits follows (the position order_keys.h packs into a key's low bits).
IntRange bitwise_and(const Node& n, Walk& w) {
  const IntRange a = input_range(n, 0, w), b = input_range(n, 1, w);
  if (a.min < 0 && b.min < 0) return kAny;
  IntRange r{0, a.min >= 0 && b.min >= 0 ? std::min(a.max, b.max) : (a.min >= 0 ? a.max : b.max)};
  for (size_t i : {0, 1}) {
    const int k = mask_width(n.input(1 - i));
    if (k == 0) continue;
    ++w.depth;
    const IntRange low = low_bits(n.input(i), k, w);
    --w.depth;
    r = {std::max(r.min, low.min), std::min(r.max, low.max)};
  }
  return r;
}

IntRange arithmetic(const Node& n, Walk& w) {
  const IntRange a = input_range(n, 0, w), b = input_range(n, 1, w);
  int64_t lo = 0, hi = 0;
  const bool add = n.op_type == "Add";
  const bool overflow =
      add ? __builtin_add_overflow(a.min, b.min, &lo) || __builtin_add_overflow(a.max, b.max, &hi)
          : __builtin_sub_overflow(a.min, b.max, &lo) || __builtin_sub_overflow(a.max, b.min, &hi);
  return overflow ? kAny : IntRange{lo, hi};
}

IntRange produced_range(const Node& n, Walk& w) {
  const std::string& op = n.op_type;
  if (op == kIndexCheck) {  // a kernel goes on with the value clamped into the bounds (stitch_dev::checked)
    const IntRange x = input_range(n, 0, w);
    const int64_t lo = n.attr_int("min", kLowest), hi = n.attr_int("max", kHighest);
    if (lo > hi) return x;
    const IntRange r{std::clamp(x.min, lo, hi), std::clamp(x.max, lo, hi)};
    // A divisor's check goes on with 1 where it found 0.
    return n.attr_int("nonzero", 0) != 0 ? join(r, {1, 1}) : r;
  }
  if (op == "Clip") {
    IntRange r = input_range(n, 0, w);
    if (const auto lo = scalar_constant(n.input(1))) r = {std::max(r.min, *lo), std::max(r.max, *lo)};
    if (const auto hi = scalar_constant(n.input(2))) r = {std::min(r.min, *hi), std::min(r.max, *hi)};
    return r;
  }
  if (op == "Max" || op == "Min") {
    IntRange r = input_range(n, 0, w);
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      const IntRange x = input_range(n, i, w);
      r = op == "Max" ? IntRange{std::max(r.min, x.min), std::max(r.max, x.max)}
                      : IntRange{std::min(r.min, x.min), std::min(r.max, x.max)};
    }
    return r;
  }
  if (op == "Where") return join(input_range(n, 1, w), input_range(n, 2, w));
  if (op == "ReduceMax" || op == "ReduceMin") {  // one of its elements, unless it has none
    const Value* x = n.input(0);
    if (!x || !x->has_static_shape() || num_elements(*x->dims) == 0) return kAny;
    return input_range(n, 0, w);
  }
  if (op == "Add" || op == "Sub") return arithmetic(n, w);
  if (op == "BitwiseAnd") return bitwise_and(n, w);
  if (op == "Mod" && n.attr_int("fmod", 0) == 0) {  // the sign of a positive divisor: [0, m - 1]
    const auto m = scalar_constant(n.input(1));
    if (!m || *m <= 0) return kAny;
    const IntRange x = input_range(n, 0, w);
    return x.min >= 0 && x.max < *m ? x : IntRange{0, *m - 1};
  }
  if (op == "Cast") {  // an integer type to one that holds every value it may have
    const Value* in = n.input(0);
    if (!in || !is_int(in->dtype)) return kAny;
    const IntRange x = input_range(n, 0, w), t = type_range(n.output(0)->dtype);
    return x.min >= t.min && x.max <= t.max ? x : kAny;
  }
  if (op == "Concat") {
    std::optional<IntRange> r;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      r = r ? join(*r, input_range(n, i, w)) : input_range(n, i, w);
    return r.value_or(kAny);
  }
  if (moves_elements(op)) return input_range(n, 0, w);
  return kAny;
}

// The positions along the axis an ArgMax, ArgMin or TopK (its indices, output 1) picks from:
// [0, n - 1], n the axis's static extent.
IntRange picked_positions(const Node& n) {
  const Value* x = n.input(0);
  if (!x || !x->has_static_shape()) return kAny;
  const int64_t rank = static_cast<int64_t>(x->dims->size());
  int64_t axis = n.attr_int("axis", n.op_type == "TopK" ? -1 : 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return kAny;
  const int64_t len = (*x->dims)[static_cast<size_t>(axis)];
  return len > 0 ? IntRange{0, len - 1} : kAny;
}

IntRange computed_range(const Value* v, Walk& w) {
  IntRange r = type_range(v->dtype);
  if (v->is_constant()) {
    const std::vector<int64_t> e = v->constant->to_i64();
    if (e.empty() || v->dtype == DType::kU64) return r;
    const auto [lo, hi] = std::minmax_element(e.begin(), e.end());
    return {*lo, *hi};
  }
  if (!v->producer) return r;
  const Node& n = *v->producer;
  if ((n.op_type == "TopK" && n.output(1) == v) ||
      ((n.op_type == "ArgMax" || n.op_type == "ArgMin") && n.output(0) == v)) {
    const IntRange p = picked_positions(n);
    return p.min >= r.min && p.max <= r.max ? p : r;
  }
  if (n.output(0) != v) return r;
  // A bound past the type's says little: a Cast wraps into the type, but a kernel computes an
  // int32 sum in 64 bits (codegen's compute_type) and may use it unwrapped.
  const IntRange p = produced_range(n, w);
  if (p.min >= r.min && p.max <= r.max) return p;
  return n.op_type == "Cast" ? r : kAny;
}

// The bounds of `v` modulo 2^k (its low k bits, a residue in [0, 2^k - 1]), for k below its type's
// width: what a wrap into the type or a sum computed in 64 bits keeps. Follows constants, a Mul by
// multiples of 2^k (no low bits), an Add without a carry out of them, and the ops whose elements
// are some of their inputs' (ReduceMax and ReduceMin, Max and Min, Where, Concat, moves: the short
// rows' maxima of fusion/short_reductions.h among them); otherwise the value's own
// bounds when they lie in [0, 2^k - 1].
IntRange low_bits(const Value* v, int k, Walk& w) {
  const IntRange all{0, static_cast<int64_t>((uint64_t{1} << k) - 1)};
  if (!v || !is_int(v->dtype) || v->dtype == DType::kU64 || w.depth > kMaxDepth ||
      k >= 8 * dtype_size(v->dtype))
    return all;
  const auto key = std::make_pair(v, k);
  if (auto it = w.known_low.find(key); it != w.known_low.end()) return it->second;
  auto residues = [&](const std::vector<int64_t>& e) {
    IntRange r{all.max, 0};
    for (int64_t x : e) {
      const int64_t low = x & all.max;
      r = {std::min(r.min, low), std::max(r.max, low)};
    }
    return e.empty() ? all : r;
  };
  auto input = [&](size_t i) {
    ++w.depth;
    const IntRange r = low_bits(v->producer->input(i), k, w);
    --w.depth;
    return r;
  };
  IntRange r = all;
  const Node* n = v->producer;
  const std::string op = n && n->output(0) == v ? n->op_type : "";
  if (v->is_constant()) {
    r = residues(v->constant->to_i64());
  } else if (op == "Mul") {
    for (size_t i : {0, 1})
      if (const Value* c = n->input(i);
          c && c->is_constant() && is_int(c->dtype) && residues(c->constant->to_i64()).max == 0)
        r = {0, 0};
  } else if (op == "Add") {
    const IntRange a = input(0), b = input(1);
    int64_t hi = 0;
    if (!__builtin_add_overflow(a.max, b.max, &hi) && hi <= all.max) r = {a.min + b.min, hi};
  } else if ((op == "ReduceMax" || op == "ReduceMin") && n->input(0) && n->input(0)->has_static_shape() &&
             num_elements(*n->input(0)->dims) > 0) {
    r = input(0);
  } else if (op == "Where") {
    r = join(input(1), input(2));
  } else if ((op == "Max" || op == "Min" || op == "Concat") && !n->inputs.empty()) {
    r = input(0);
    for (size_t i = 1; i < n->inputs.size(); ++i) r = join(r, input(i));
  } else if (moves_elements(op)) {
    r = input(0);
  }
  if (r.min == all.min && r.max == all.max) {  // the value's own bounds, when they are residues
    const IntRange own = range_of(v, w);
    if (own.min >= 0 && own.max <= all.max) r = own;
  }
  w.known_low.emplace(key, r);
  return r;
}

IntRange range_of(const Value* v, Walk& w) {
  if (!v || !is_int(v->dtype) || w.depth > kMaxDepth) return kAny;
  if (auto it = w.known.find(v); it != w.known.end()) return it->second;
  const IntRange r = computed_range(v, w);
  w.known.emplace(v, r);
  return r;
}

}  // namespace

std::optional<IntRange> int_range(const Value* v) {
  Walk w;
  const IntRange r = range_of(v, w);
  if (r.min == kLowest && r.max == kHighest) return std::nullopt;
  return r;
}

}  // namespace stitch::ops
