// Stitched kernels (stitch.h): the integer a Round takes of a float32 quotient, without the
// division where a product with the reciprocal decides it (stitch_dev::round_quotient).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "codegen/stitcher.h"

namespace stitch::codegen::detail {

StatusOr<std::optional<SExpr>> Stitcher::round_quotient(const Node& n, const Coords& c,
                                                        const std::string& k) {
  const std::optional<SExpr> none;
  const Value* q = n.input(0);
  if (q == nullptr || q->dtype != DType::kF32 || n.output(0)->dtype != DType::kF32) return none;
  auto pit = producer_.find(q);
  if (pit == producer_.end() || pit->second->op_type != "Div") return none;
  const Node& div = *pit->second;
  const Value* x = div.input(0);
  const Value* s = div.input(1);
  if (x == nullptr || s == nullptr || x->dtype != DType::kF32 || s->dtype != DType::kF32) return none;
  // The Div's operands at the Round's coordinates (the same shape), broadcast as the Div reads them.
  // Once pulled, they are used here whatever the form: a second pull through the general path
  // would name new index variables for some index maps and leave these unused.
  ASSIGN_OR_RETURN(SExpr a, at(x, broadcast_coords(c, dims(x))));
  ASSIGN_OR_RETURN(SExpr b, at(s, broadcast_coords(c, dims(s))));
  std::string r;
  if (b.level < a.level && s->is_constant() && s->constant->size() == 1) {  // rounded once, here
    const float rc = 1.0f / static_cast<float>(s->constant->get_f64(0));
    if (std::isnormal(rc)) r = literal(rc, "float");
  } else if (b.level < a.level) {
    const std::string rk = "quotient_reciprocal:" + b.s;
    const SExpr* found = find(rk);
    r = found ? found->s
              : bind(rk, "float", fmt::format("stitch_dev::quotient_reciprocal({})", b.s), b.level,
                     "reciprocal, NaN where not a normal number")
                    .s;
  }
  // A divisor per element (its reciprocal would cost the division), or a constant without a normal
  // reciprocal: the division and the Round as the general path writes them.
  if (r.empty())
    return std::optional<SExpr>(bind(k, "float", fmt::format("rintf({} / {})", a.s, b.s),
                                     std::max(a.level, b.level),
                                     fmt::format("Round '{}' of Div '{}'", n.name, div.name)));
  const std::string note = fmt::format(
      "Round '{}' of Div '{}': the reciprocal's product where it decides the integer", n.name, div.name);
  const SExpr v =
      bind(k, "float", fmt::format("stitch_dev::round_quotient({}, {}, {})", a.s, b.s, r), a.level, note);
  return std::optional<SExpr>(v);
}

}  // namespace stitch::codegen::detail
