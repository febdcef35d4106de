// Stitched kernels (stitch.h): the loops an element of a kernel runs on its own (stitcher.h): a
// fine-grained MatMul's contraction, with A's row cached once per row where the kernel allows, and a
// running sum or product (CumSum, CumProd) over the elements up to the element's own.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "codegen/stitcher.h"

namespace stitch::codegen {
namespace detail {

StatusOr<std::optional<std::string>> Stitcher::a_row(const Node& n, const Coords& aco, int64_t len) {
  const auto& cached = info_.a_row_cached;
  if (!cache_allowed_ || scopes_.size() != 2 || std::find(cached.begin(), cached.end(), &n) == cached.end())
    return std::optional<std::string>();
  for (size_t x = 0; x + 1 < aco.size(); ++x)
    if (aco[x].level != 0) return std::optional<std::string>();  // not at the row's own coordinates
  const Value* a = n.input(0);
  const std::string k = key(a, Coords(aco.begin(), aco.end() - 1));
  if (auto it = a_rows_.find(k); it != a_rows_.end()) return std::optional<std::string>(it->second);
  const std::string ct = compute_type(a->dtype), buf = fmt::format("arow{}", a_rows_.size());
  const std::string q = fresh("q");
  const std::string off = map_.warp_per_row ? fmt::format("(threadIdx.x >> 5) * {} + ", len) : "";
  Coords co = aco;
  co.back() = {q, static_cast<int>(scopes_.size())};
  scopes_.emplace_back();
  auto ea = at(a, co);
  std::vector<std::string> body = std::move(scopes_.back().lines);
  scopes_.pop_back();
  if (!ea.is_ok()) return ea.status();
  const int64_t bytes = a_row_cache_bytes(map_, len, a->dtype);
  cache_decl_.push_back(fmt::format("__shared__ {} {}[{}];", ct, buf, bytes / (ct == "double" ? 8 : 4)));
  k_.static_smem_bytes += bytes;
  line(0,
       fmt::format("for (int {0} = lane; {0} < {1}; {0} += step) {{  // MatMul '{2}': A's row, once per row",
                   q, len, n.name));
  for (const std::string& l : body) line(0, "  " + l);
  line(0, fmt::format("  {}[{}{}] = {};", buf, off, q, ea->s));
  line(0, "}");
  line(0, map_.warp_per_row ? "__syncwarp();" : "__syncthreads();");
  a_rows_[k] = buf + "[" + off;
  return std::optional<std::string>(a_rows_[k]);
}

std::optional<std::string> Stitcher::lane_key(const Node& n, const Coords& c) const {
  const Dims& od = dims(n.output(0));
  const std::optional<Coords> c0 = lane0_coords(c, static_cast<int>(c.size()) - 1, od.back());
  if (!c0) return std::nullopt;
  std::string key = fmt::format("{}@", static_cast<const void*>(&n));
  for (const SExpr& e : *c0) key += e.s + ",";
  return key;
}

StatusOr<SExpr> Stitcher::contraction(const Node& n, const Coords& c, const std::string& k) {
  const Value *a = n.input(0), *b = n.input(1);
  const Dims &ad = dims(a), &bd = dims(b), &od = dims(n.output(0));
  const int64_t len = ad.back();
  const std::string ct = compute_type(n.output(0)->dtype);
  const std::string note = fmt::format("MatMul '{}'", n.name);
  const int level = static_cast<int>(scopes_.size());
  // The 4 lanes of a vectorised element kernel share one loop where they can (lane_dots_).
  if (vec_ && lane_ > 0)
    if (auto key = lane_key(n, c); key && lane_dots_.count(*key))
      return bind(k, ct, lane_dots_.at(*key)[lane_], 1, note);
  std::optional<std::string> shared;
  if (vec_ && lane_ == 0 && level == 2 && !producer_.count(b) && b->dtype == DType::kF32 && ct == "float" &&
      bd.size() >= 2 && bd.back() == od.back())
    shared = lane_key(n, c);
  const std::string step = fresh("kk");
  const SExpr kk{step, level};
  auto operand = [&](const Dims& d, bool is_a) {
    Coords co(d.size(), SExpr{"0", 0});
    const size_t r = d.size(), off = od.size() - r;
    for (size_t x = 0; x + 2 < r; ++x) co[x] = d[x] == 1 ? SExpr{"0", 0} : c[x + off];
    co[r - 2] = is_a ? (d[r - 2] == 1 ? SExpr{"0", 0} : c[od.size() - 2]) : kk;
    co[r - 1] = is_a ? kk : (d[r - 1] == 1 ? SExpr{"0", 0} : c[od.size() - 1]);
    return co;
  };
  const Coords aco = operand(ad, true);
  ASSIGN_OR_RETURN(std::optional<std::string> arow, a_row(n, aco, len));
  scopes_.emplace_back();
  auto ea = arow ? StatusOr<SExpr>(SExpr{fmt::format("{}{}]", *arow, step), level}) : at(a, aco);
  // Shared by the lanes: B's 4 columns of this step as one float4 (lane 0's column is a multiple
  // of 4, and so is every row's start: B's rows are the product's columns, a multiple of 4 long).
  auto eb = !ea.is_ok() ? ea
            : shared    ? StatusOr<SExpr>(SExpr{flat_index(operand(bd, false), bd).s, level})
                        : at(b, operand(bd, false));
  std::vector<std::string> body = std::move(scopes_.back().lines);
  scopes_.pop_back();
  if (!ea.is_ok()) return ea.status();
  if (!eb.is_ok()) return eb.status();
  // The loop sits at the level of the output coordinates or of a hoisted operand, whichever is
  // deeper.
  int outer = level_of(c);
  for (const SExpr* e : {&*ea, &*eb})
    if (e->level < level) outer = std::max(outer, e->level);
  const std::string acc = fresh("dot");
  if (shared) {
    STITCH_CHECK(outer == 1, "the lanes' shared loop of {} is not in the element loop", n.describe());
    const std::array<std::string, 4> sums{acc + "x", acc + "y", acc + "z", acc + "w"};
    line(1, fmt::format(
                "float {} = 0.0f, {} = 0.0f, {} = 0.0f, {} = 0.0f;  // {}: {} steps, the 4 lanes' columns",
                sums[0], sums[1], sums[2], sums[3], note, len));
    line(1, fmt::format("for ({0} {1} = 0; {1} < {2}; ++{1}) {{", ix(), step, lit(len)));
    for (const std::string& l : body) line(1, "  " + l);
    const std::string av = fresh("a"), bv = fresh("b");
    line(1, fmt::format("  const float {} = {};", av, ea->s));
    line(1, fmt::format("  const float4 {} = reinterpret_cast<const float4*>({})[({}) >> 2];", bv,
                        param(b, false), eb->s));
    for (int l = 0; l < 4; ++l) line(1, fmt::format("  {} += {} * {}.{};", sums[l], av, bv, "xyzw"[l]));
    line(1, "}");
    lane_dots_[*shared] = sums;
    return bind(k, ct, sums[0], 1, note);
  }
  line(outer, fmt::format("{} {} = ({})0;  // {}: {} steps", ct, acc, ct, note, len));
  // In a vectorised element kernel whose lanes cannot share a loop, each of the 4 runs its own
  // loop over the same A row: unrolled, the compiler loads each A element once for the 4 (sm_90
  // PTX of bert_tiny's Q/K/V kernel: 835 loads for 768 multiply-adds unrolled, 2 per multiply-add
  // as 16-step loops).
  if (vec_ && len <= kUnrolledLaneContraction) line(outer, "#pragma unroll");
  line(outer, fmt::format("for ({0} {1} = 0; {1} < {2}; ++{1}) {{", ix(), step, lit(len)));
  for (const std::string& l : body) line(outer, "  " + l);
  line(outer, fmt::format("  {} += {} * {};", acc, ea->s, eb->s));
  line(outer, "}");
  return bind(k, ct, acc, outer, note);
}

StatusOr<SExpr> Stitcher::scan(const Node& n, const Coords& c, const std::string& k) {
  const std::optional<ScanInfo> s = scan_info(n);
  if (!s) return Status::internal(fmt::format("{} is not a running sum or product", n.describe()));
  const std::string ct = compute_type(n.output(0)->dtype);
  const int level = static_cast<int>(scopes_.size());
  const std::string step = fresh("kk");
  const std::string pos = c[static_cast<size_t>(s->axis)].s;
  // Step t reads element t of the axis (len - 1 - t reversed); the element at `pos` runs pos + 1
  // steps (len - pos reversed), one fewer when exclusive.
  Coords cx = c;
  cx[static_cast<size_t>(s->axis)] =
      SExpr{s->reverse ? fmt::format("({} - {})", lit(s->len - 1), step) : step, level};
  const std::string count = s->reverse ? fmt::format("{} - ({})", lit(s->len - (s->exclusive ? 1 : 0)), pos)
                                       : fmt::format("({}){}", pos, s->exclusive ? "" : " + 1");
  scopes_.emplace_back();
  StatusOr<SExpr> ex = at(n.input(0), cx);
  std::vector<std::string> body = std::move(scopes_.back().lines);
  scopes_.pop_back();
  if (!ex.is_ok()) return ex.status();
  int outer = level_of(c);
  if (ex->level < level) outer = std::max(outer, ex->level);
  const std::string acc = fresh("run");
  const std::string note = fmt::format("{} '{}'", n.op_type, n.name);
  line(outer, fmt::format("{} {} = ({}){};  // {}: {} of {} elements", ct, acc, ct, s->product ? 1 : 0, note,
                          s->exclusive ? "those before this one" : "those up to this one", s->len));
  line(outer, fmt::format("for ({0} {1} = 0; {1} < {2}; ++{1}) {{", ix(), step, count));
  for (const std::string& l : body) line(outer, "  " + l);
  line(outer, fmt::format("  {} {}= {};", acc, s->product ? "*" : "+", ex->s));
  line(outer, "}");
  return bind(k, ct, acc, outer, note);
}

}  // namespace detail
}  // namespace stitch::codegen
