// Fused element-parallel kernels (local stitching): the nodes of a group share one iteration
// domain; each thread loads the group's external inputs at their broadcast offsets, computes
// every node's scalar expression into a named register, and stores only the values used outside
// the group. Intermediates never touch global memory.
#include <fmt/format.h>

#include <map>

#include "codegen/map_builder.h"
#include "codegen/scalar_ops.h"
#include "support/check.h"

namespace stitch::codegen {
namespace {

std::string group_name(const std::vector<const Node*>& nodes, int index) {
  std::string s = fmt::format("k{:03d}_fused_{}", index, snake(nodes.front()->op_type));
  if (nodes.size() > 2) s += "_to";
  if (nodes.size() > 1) s += "_" + snake(nodes.back()->op_type);
  return s;
}

}  // namespace

Status emit_chain(MapBuilder& b, const std::vector<const Node*>& nodes, std::map<const Value*, std::string>& reg,
                  const std::set<const Value*>& stored) {
  const Dims& domain = b.domain();
  int loads = 0;
  for (size_t j = 0; j < nodes.size(); ++j) {
    const Node& n = *nodes[j];
    const Value* out = n.output(0);
    STITCH_CHECK(*out->dims == domain, "chained node {} has shape {}, not the domain's {}", n.describe(),
                 dims_to_string(*out->dims), dims_to_string(domain));
    std::vector<std::string> args;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Value* v = n.input(k);
      if (v == nullptr || (n.op_type == "CastLike" && k == 1)) {  // CastLike reads only its target's type
        args.emplace_back();
        continue;
      }
      const bool per_channel = n.op_type == "BatchNormalization" && k > 0;
      if (!per_channel && reg.count(v)) {
        args.push_back(reg.at(v));
        continue;
      }
      Dims strides;
      if (per_channel) {  // per-channel parameters along axis 1
        strides.assign(domain.size(), 0);
        strides[1] = 1;
      } else {
        strides = ops::broadcast_strides(*v->dims, domain);
      }
      const std::string name = fmt::format("a{}", loads++);
      b.line(fmt::format("const {} {} = {};", compute_type(v->dtype), name, b.load(v, b.affine(0, strides))));
      if (!per_channel) reg[v] = name;
      args.push_back(name);
    }
    ASSIGN_OR_RETURN(std::string expr, scalar_expr(n, args));
    if (nodes.size() == 1 && stored.count(out)) {  // a single node: store the expression directly
      b.store(out, b.flat(), expr);
      continue;
    }
    const std::string t = fmt::format("t{}", j);
    b.line(fmt::format("const {} {} = {};  // {} '{}'", compute_type(out->dtype), t, expr, n.op_type, n.name));
    reg[out] = t;
    if (stored.count(out)) b.store(out, b.flat(), t);
  }
  return Status::ok();
}

StatusOr<Prologue> lower_prologue(const std::vector<const Node*>& nodes, const Value* value, int index,
                                  const Value* bound) {
  STITCH_CHECK(!nodes.empty());
  MapBuilder b("", nodes, *value->dims);
  std::map<const Value*, std::string> reg;
  if (bound) reg[bound] = "v";
  RETURN_IF_ERROR(emit_chain(b, nodes, reg, {}));
  STITCH_CHECK(reg.count(value), "the prologue does not compute {}", value->name);
  Prologue p;
  p.nodes = nodes;
  p.value = value;
  p.bound = bound;
  p.function = fmt::format("k{:03d}_{}", index, bound ? "epilogue" : "prologue");
  p.source = b.finish_function(p.function, compute_type(value->dtype), reg.at(value),
                               bound ? fmt::format("{} v", compute_type(bound->dtype)) : "");
  for (const KernelParam& kp : b.params()) p.inputs.push_back(kp.value);
  return p;
}

StatusOr<Kernel> lower_fused_map(const std::vector<const Node*>& nodes, const std::set<const Value*>& escaping,
                                 int index) {
  STITCH_CHECK(!nodes.empty());
  MapBuilder b(group_name(nodes, index), nodes, *nodes.front()->output(0)->dims);
  std::map<const Value*, std::string> reg;  // values held in registers: internal and loaded
  RETURN_IF_ERROR(emit_chain(b, nodes, reg, escaping));
  return b.finish(fmt::format(", {} nodes fused in registers (local stitching)", nodes.size()));
}

}  // namespace stitch::codegen
