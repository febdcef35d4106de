// Where a product's row factors can go when a GEMM of two computed operands reads the product
// through ops that are linear in it row by row (attention: Q and K through rotary embeddings to
// Q.K^T, V to P.V). Each op's output, for every row of the product, is the row's values times
// constants or moved: Mul or Div by a value the product does not reach, Neg, Add or Sub of two
// such values with the same rows, Concat, Slice, Transpose, Reshape, Expand. A row factor r
// therefore passes through to the GEMM: Q.K^T with Q's rows and K's rows scaled is the product
// scaled along its rows and columns, and P.V with V's rows scaled is P scaled along its columns.
//
// Each axis of a value on those paths is a list of parts, major first: a row axis of the product
// (its index) or -1 for an extent along which every row factor is one value, with their sizes. A
// reshape may merge a row axis with others and split it back (attention's batch and heads merged
// for a batched GEMM and split again). Used by fusion::hoist_row_scales (hoist_scales.h).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace stitch::fusion {

using Part = std::pair<int, int64_t>;  // the product's row axis or -1, extent
using Axis = std::vector<Part>;
using Axes = std::vector<Axis>;
using Users = std::unordered_map<const Value*, std::vector<Node*>>;

// A GEMM of two computed operands at the end of a path: which input the product reaches, and
// that input's axes.
struct GemmEnd {
  Node* matmul = nullptr;
  int operand = 0;
  Axes axes;
};

// The values the product `y` reaches through its readers (y too).
std::unordered_set<const Value*> reached_from(const Users& users, const Value* y);

// The paths from `entry`, a reader of the product `y`, to GEMMs of two computed operands, when
// every node on them is linear in the product row by row (above), none is in `keep`, and no value
// on them is a graph output or read off them.
// `reached`: reached_from(users, y); a value among them but not on the paths makes a node not
// linear.
std::optional<std::vector<GemmEnd>> track_rows(const Graph& g, const Users& users,
                                               const std::set<std::string>& keep,
                                               const std::unordered_set<const Value*>& reached, Node* entry,
                                               const Value* y);

// Where row factor `f` (right-aligned to the product `y`) goes at a GEMM end: the GEMM's output
// (Q's rows and K's columns reach its rows and columns) or its other operand (V's rows reach P's
// columns, the contraction). `target` and the factor's dims there; nothing when the product's row
// axes that f varies along do not all reach one of them, in their order, at the same sizes.
struct Placement {
  Value* target = nullptr;
  bool output = false;
  Dims dims;
};

std::optional<Placement> place(const Value* f, const Value* y, const GemmEnd& e);

}  // namespace stitch::fusion
