// KV caches written in place by a stitched kernel (StitchInfo::scattered): a group holding an
// in-place TensorScatter is analysed as storing the scatter's update (analyze_stitch), and the
// kernel stores each update element at the cache position instead of a tensor of its own
// (Stitcher::store_at, as lower_tensor_scatter's in-place form does).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "codegen/stitch.h"
#include "codegen/stitcher.h"
#include "ops/op_params.h"

namespace stitch::codegen {

StatusOr<StitchInfo> analyze_stitch(const std::vector<const Node*>& nodes,
                                    const std::set<const Value*>& stored) {
  // In-place TensorScatters: the group computes each update and stores it into the cache; the
  // rest of the group is analysed as storing the update.
  std::vector<const Node*> members;
  std::set<const Value*> store = stored;
  std::map<const Value*, const Node*> scattered;
  std::set<const Value*> made;
  for (const Node* n : nodes)
    for (const Value* v : n->outputs) made.insert(v);
  for (const Node* n : nodes) {
    if (n->op_type != "TensorScatter") {
      members.push_back(n);
      continue;
    }
    const Value *cache = n->input(0), *update = n->input(1), *present = n->output(0);
    if (!update || !made.count(update) || !present)
      return Status::user(
          fmt::format("{} writes an update the group does not compute: it runs alone", n->describe()));
    if (stored.count(update))
      return Status::user(fmt::format("{} writes '{}' in place, which is also read outside the group",
                                      n->describe(), update->name));
    for (const Node* m : nodes)
      for (const Value* v : m->inputs)
        if (m != n && v && (v == cache || v == present))
          return Status::user(
              fmt::format("{} reads the cache '{}' that {} writes in place in the same kernel", m->describe(),
                          v->name, n->describe()));
    if (!present->dims || !update->dims || present->dims->size() < 2)
      return Status::user(fmt::format("{} has no static shape", n->describe()));
    store.erase(present);
    store.insert(update);
    scattered[update] = n;
  }
  if (scattered.empty()) return analyze_members(nodes, stored, {});
  ASSIGN_OR_RETURN(StitchInfo info, analyze_members(members, store, scattered));
  if (info.tile || info.column)
    return Status::user(
        fmt::format("{} writes its update in place: not from a tiled GEMM's or a column kernel",
                    scattered.begin()->second->describe()));
  info.scattered = std::move(scattered);
  return info;
}

namespace detail {

Status Stitcher::store_at(const Value* v, const Coords& c, const std::string& off, const std::string& val,
                          int level) {
  auto it = info_.scattered.find(v);
  if (it == info_.scattered.end()) {
    store(v, off, val, level);
    return Status::ok();
  }
  // The update's element at c goes to the cache at c with the write position (the batch's write
  // index plus c along the axis) in place of c's coordinate along the axis (lower_tensor_scatter's
  // in-place form).
  const Node& t = *it->second;
  const Value *cache = t.output(0), *start = t.inputs.size() > 2 ? t.input(2) : nullptr;
  const Dims& cd = dims(cache);
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(t, t.attr_int("axis", -2), static_cast<int64_t>(cd.size())));
  const bool circular = t.attr_string("mode", "linear") == "circular";
  const int64_t len = cd[static_cast<size_t>(axis)];
  std::string first = "0LL";
  if (start) {
    ASSIGN_OR_RETURN(SExpr w, at(start, Coords{c[0]}));
    first = fmt::format("(long long)({})", w.s);
  }
  const bool fresh_param = std::none_of(k_.params.begin(), k_.params.end(),
                                        [&](const KernelParam& p) { return p.value == cache && p.output; });
  const std::string pos = fresh("pos");
  line(level, fmt::format("{{  // '{}' written into '{}' in place ({})", v->name, cache->name, t.describe()));
  if (start) {  // a write index the reference refuses: reported
    const auto [message, bad] =
        tensor_scatter_check(t, first, len, dims(t.input(1))[static_cast<size_t>(axis)]);
    if (!bad.empty()) line(level, fmt::format("  if ({}) {}", bad, fault(t, message, first)));
  }
  line(level,
       fmt::format("  long long {} = (long long)({}) + {};", pos, c[static_cast<size_t>(axis)].s, first));
  if (circular) line(level, fmt::format("  {0} %= {1}LL; if ({0} < 0) {0} += {1}LL;", pos, len));
  Coords cc = c;
  cc[static_cast<size_t>(axis)] = {fmt::format("(({}){})", ix(), pos), level};
  const SExpr flat = flat_index(cc, cd);  // never the domain's own: the position moved along the axis
  const std::string at_cache = flat.s.empty() ? std::string("0") : flat.s;
  if (!circular)
    line(level, fmt::format("  if ({0} >= 0 && {0} < {1}LL)  // past the cache: dropped", pos, len));
  store(cache, at_cache, val, level);
  line(level, "}");
  if (fresh_param)  // only the update's elements of the cache move
    k_.bytes_moved -= (num_elements(cd) - num_elements(dims(v))) * dtype_size(cache->dtype);
  return Status::ok();
}

}  // namespace detail
}  // namespace stitch::codegen
