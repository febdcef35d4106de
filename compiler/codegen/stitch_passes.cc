// Row kernels: row ops of one pass sharing the pass of an earlier one (stitch_passes.h).
#include "codegen/stitch_passes.h"

#include <algorithm>
#include <set>
#include <string>

namespace stitch::codegen {

bool single_pass_reduction(const Node& n) {
  static const std::set<std::string> ops = {
      "ReduceSum", "ReduceMean",      "ReduceMax",    "ReduceMin",     "ReduceProd",       "ReduceL1",
      "ReduceL2",  "ReduceSumSquare", "ReduceLogSum", "GlobalMaxPool", "GlobalAveragePool"};
  if (!ops.count(n.op_type)) return false;
  StatusOr<RowOpInfo> ri = row_op_info(n);
  return ri.is_ok() && ri->passes == 1;
}

void share_passes(const std::vector<const Node*>& rows, const std::map<const Value*, const Node*>& producer,
                  StitchInfo& info) {
  std::vector<const Node*> own;  // the kernel's row ops (not outer reductions), in order
  for (const Node* n : rows)
    if (!info.is_outer(n)) own.push_back(n);
  auto position = [&](const Node* n) {
    return static_cast<int64_t>(std::find(own.begin(), own.end(), n) - own.begin());
  };
  std::vector<const Node*> leaders;  // row ops of one pass with a pass of their own
  for (const Node* n : own) {
    if (!single_pass_reduction(*n)) continue;
    // The last of the kernel's row ops that n's input is computed from, through any nodes of
    // the group (a row op's result read by an element-wise op is a dependence too).
    int64_t last = -1;
    std::set<const Value*> seen;
    std::vector<const Value*> stack{n->input(0)};
    while (!stack.empty()) {
      const Value* v = stack.back();
      stack.pop_back();
      auto it = producer.find(v);
      if (it == producer.end() || !seen.insert(v).second) continue;
      const Node* p = it->second;
      if (stitch_role(*p) == StitchRole::kRow && !info.is_outer(p)) last = std::max(last, position(p));
      for (const Value* in : p->inputs)
        if (in) stack.push_back(in);
    }
    const auto leader =
        std::find_if(leaders.begin(), leaders.end(), [&](const Node* l) { return position(l) > last; });
    if (leader == leaders.end()) {
      leaders.push_back(n);
      continue;
    }
    info.shared_pass[n] = *leader;
    --info.passes;
  }
}

}  // namespace stitch::codegen
