// Symbolic dimension expressions. ONNX names a dynamic dimension by a dim_param string; exporters
// that trace shapes symbolically write arithmetic of other dims there (torch.export writes a
// decoder's attention mask as [batch, past + 1] next to a cache of [batch, heads, past, dim]).
// Binding `past` then fixes `past + 1` too.
//
// The grammar is integer arithmetic as sympy prints it: integers, symbols ([A-Za-z_] then
// [A-Za-z0-9_.]), + - * / // %, unary minus, parentheses, and the calls floor, ceiling (also
// FloorDiv's and CeilDiv's spelled-out forms: floor(a/b)), Max and Min. `/` is exact division
// (a rational), floor and ceiling round it; a dimension must come out a whole number.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "support/status.h"

namespace stitch {

// True when `text` is one symbol, not an expression: "batch", "unk__12", "s0".
bool is_dim_symbol(std::string_view text);

// The symbols `text` reads, when it is an expression ("past + 1" reads {past}, "4" none);
// nullopt for a plain symbol and for text that does not parse (an opaque name such as
// "sequence length"), which bind only by name.
std::optional<std::set<std::string>> dim_expr_symbols(std::string_view text);

// The value of the expression `text` with `symbols` bound. A user error when a symbol it reads
// is unbound (naming it), when it divides by zero, or when the result is not a whole number.
StatusOr<int64_t> eval_dim_expr(std::string_view text, const std::map<std::string, int64_t>& symbols);

}  // namespace stitch
