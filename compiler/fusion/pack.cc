// Independent (horizontal) packing of the finished plan's stitched kernels into shared launches.
#include <algorithm>
#include <queue>

#include "codegen/lower.h"
#include "fusion/planner.h"
#include "ops/op_util.h"
#include "support/check.h"

namespace stitch::fusion {

int64_t Planner::stitched_block(const std::vector<int>& m) {
  if (m.size() > 1) {
    const Eval& e = eval(m);
    if (!e.ok || e.info.tile) return 0;  // a tiled GEMM's grid is its tiles
    if (!e.info.row) return codegen::kMapBlock;
    const codegen::RowMapping rm = codegen::row_mapping(e.info);
    return rm.split() ? 0 : rm.block;  // a cooperative kernel's grid barriers admit no other parts
  }
  const Node* n = nodes_[m[0]];
  // A KV cache's update written into the cache input: a grid-stride loop over the update.
  if (ops::tensor_scatter_in_place(g_, *n)) return codegen::kMapBlock;
  if (!fusible_[m[0]] || codegen::classify_node(*n) != codegen::NodeLowering::kKernel) return 0;
  auto info = codegen::analyze_stitch({n}, escaping({n}));
  if (!info.is_ok()) return 0;
  if (!info->row) return codegen::kMapBlock;
  const codegen::RowMapping rm = codegen::row_mapping(*info);
  return rm.split() ? 0 : rm.block;
}

std::vector<int> Planner::packed_order(const Part& p, const std::vector<int>& order,
                                       const std::map<int, int>& pack_of) const {
  std::map<int, int> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
  auto rep = [&](int id) {  // a pack is represented by its first member in `order`
    auto it = pack_of.find(id);
    return it == pack_of.end() ? id : it->second;
  };
  std::map<int, std::vector<int>> members;
  for (int id : order) members[rep(id)].push_back(id);
  std::map<int, std::set<int>> out;
  std::map<int, int> indeg;
  for (const auto& [r, ms] : members) indeg[r] += 0;
  for (const auto& [r, ms] : members)
    for (int id : ms)
      for (int x : p.groups.at(id))
        for (int sx : succ_[x]) {
          const int t = rep(p.gid[sx]);
          if (t != r && out[r].insert(t).second) ++indeg[t];
        }
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
  for (auto [r, d] : indeg)
    if (d == 0) ready.push({pos.at(members.at(r).front()), r});
  std::vector<int> result;
  while (!ready.empty()) {
    const int r = ready.top().second;
    ready.pop();
    for (int id : members.at(r)) result.push_back(id);
    for (int t : out[r])
      if (--indeg[t] == 0) ready.push({pos.at(members.at(t).front()), t});
  }
  if (result.size() != order.size()) result.clear();
  return result;
}

std::vector<int> Planner::pack(const Part& p, std::vector<int> order, std::map<int, int>& pack_of) {
  constexpr size_t kPackWindow = 8, kPackMax = 8;
  std::map<int, int> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
  std::map<int, int64_t> block;
  for (int id : order) {
    block[id] = stitched_block(p.groups.at(id));
    for (int x : p.groups.at(id))
      if (o_.no_pack.count(nodes_[x]->name)) block[id] = 0;  // ptxas feedback: stays alone
  }
  // Is there a path from group a to group b (b later in `order`)?
  auto reaches = [&](int a, int b) {
    std::set<int> seen{a};
    std::vector<int> stack{a};
    while (!stack.empty()) {
      const int gi = stack.back();
      stack.pop_back();
      for (int x : p.groups.at(gi))
        for (int sx : succ_[x]) {
          const int t = p.gid[sx];
          if (t == b) return true;
          if (pos.at(t) < pos.at(b) && seen.insert(t).second) stack.push_back(t);
        }
    }
    return false;
  };
  for (size_t i = 0; i < order.size(); ++i) {
    const int a = order[i];
    if (pack_of.count(a) || block[a] == 0) continue;
    std::vector<int> members{a};
    size_t seen =
        0;  // stitched kernels looked at after a (views, library calls and folded nodes not counted)
    for (size_t j = i + 1; j < order.size() && seen < kPackWindow && members.size() < kPackMax; ++j) {
      const int b = order[j];
      if (block[b] == 0) continue;
      ++seen;
      if (pack_of.count(b) || block[b] != block[a]) continue;
      if (std::any_of(members.begin(), members.end(), [&](int m) { return reaches(m, b); })) continue;
      for (int m : members) pack_of[m] = a;
      pack_of[b] = a;
      if (packed_order(p, order, pack_of).empty()) {  // would interlock with an earlier pack
        pack_of.erase(b);
        continue;
      }
      members.push_back(b);
    }
    if (members.size() < 2) pack_of.erase(a);
  }
  if (pack_of.empty()) return order;
  auto packed = packed_order(p, order, pack_of);
  STITCH_CHECK(!packed.empty(), "fusion: packing made a cycle");
  return packed;
}

}  // namespace stitch::fusion
