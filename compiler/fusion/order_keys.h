// Order keys: one int64 per element of a float32 tensor, so that the largest key along the last
// axis is the row's largest value (or smallest) at its first position. One ReduceMax over the keys
// then does what a reduction of the values and a second one of the positions holding the extreme
// did: TopK's rounds (topk_rounds.h) and ArgMax/ArgMin (arg_reductions.h) pick with them.
//
// A key is the value's order in the high bits above 2^24 - 1 - its position in the low 24. The
// order is the float32's bits (BitCast to int32) with the magnitude bits flipped when negative, so
// the int32s order as the floats do; -0 is first made +0 (the ops tie them) and, for the smallest,
// the order is reversed. A NaN keeps its bits: callers first make it what their op reads it as.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace stitch::fusion {

// Rows up to this long: their positions fit the keys' low bits.
inline constexpr int64_t kMaxKeyedRow = int64_t{1} << 24;
// Below every key (those are at least -2^31 * 2^24): a pick masked for the next round.
inline constexpr int64_t kKeyBelowAll = -(int64_t{1} << 62);

struct OrderKeys {
  Value* keys = nullptr;  // int64, the dims of the input
  bool largest = true;
  // Constants the decoding nodes share.
  Value* mask = nullptr;       // 2^24 - 1
  Value* unit = nullptr;       // 2^24
  Value* minus_one = nullptr;  // -1
  Value* zero32 = nullptr;
  Value* magnitude = nullptr;  // 0x7fffffff
};

// The keys of `y` (float32, rows along the last axis of at most kMaxKeyedRow), named after `hint`.
OrderKeys add_order_keys(Graph& g, const std::string& hint, Value* y, bool largest);

// The low bits of a row's largest key `best`: its position's part, which key_position and
// key_value read.
Value* key_low_bits(Graph& g, const OrderKeys& k, const std::string& hint, Value* best);

// A row's first position holding its extreme, from `low` (key_low_bits), written into `out` when
// given (an int64 value the caller's replaced node wrote), else into a new value.
Value* key_position(Graph& g, const OrderKeys& k, const std::string& hint, Value* low, Value* out = nullptr);

// A row's extreme (float32; -0 reads +0) from its largest key `best` and `low`.
Value* key_value(Graph& g, const OrderKeys& k, const std::string& hint, Value* best, Value* low);

// A new node `op` of an opset past the graph's when `since` is (BitCast is opset 26's, the bitwise
// ops 18's): the node carries its own opset.
Value* add_op_since(Graph& g, const char* op, int since, const std::string& hint, std::vector<Value*> inputs,
                    DType t, const Dims& d);

}  // namespace stitch::fusion
