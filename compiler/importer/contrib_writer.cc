// The shared pieces of the contrib-op expansions (contrib_writer.h).
#include "importer/contrib_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>

namespace stitch::contrib {

Status refuse(const Node& n, const std::string& why) {
  return Status::user(
      fmt::format("{}: {}; stitch reads this onnxruntime contrib op only in the forms "
                  "onnxruntime's transformer optimizer and onnxruntime-genai's model builder "
                  "write (or export the model "
                  "without those optimizations)",
                  n.describe(), why));
}

namespace {

// The count of axes a Squeeze, Unsqueeze or ReduceSum names (its attribute or constant input).
std::optional<size_t> axes_count(const Node& p) {
  if (p.has_attr("axes")) return p.attr_ints("axes").size();
  if (p.input(1) && p.input(1)->constant) return static_cast<size_t>(p.input(1)->constant->size());
  return std::nullopt;
}

using Ranks = std::unordered_map<const Value*, std::optional<size_t>>;

std::optional<size_t> rank_of(const Value* v, Ranks& memo);

// known_rank of a value not yet in `memo`.
std::optional<size_t> compute_rank(const Value* v, Ranks& memo) {
  auto known_rank = [&](const Value* x) { return rank_of(x, memo); };
  if (v->dims) return v->dims->size();
  const Node* p = v->producer;
  if (!p || !p->domain.empty() || !p->input(0)) return std::nullopt;
  const std::string& op = p->op_type;
  const auto r = known_rank(p->input(0));
  static const std::set<std::string, std::less<>> same_rank = {
      "Cast",    "CastLike",   "Identity", "Transpose",          "Slice",           "Concat",
      "Softmax", "LogSoftmax", "Gelu",     "LayerNormalization", "RMSNormalization"};
  const OpCategory category = p->def ? p->def->category : OpCategory::kOpaque;
  if (same_rank.count(op) || category == OpCategory::kElementwise) return r;
  if (category == OpCategory::kBroadcast || op == "MatMul") {  // the inputs' largest rank
    size_t most = 0;
    for (const Value* in : p->inputs) {
      if (!in) continue;
      const auto ri = known_rank(in);
      if (!ri || (op == "MatMul" && *ri < 2)) return std::nullopt;
      most = std::max(most, *ri);
    }
    return most;
  }
  if (op == "Gather") {
    const auto ri = p->input(1) ? known_rank(p->input(1)) : std::nullopt;
    if (r && ri && *r >= 1) return *r - 1 + *ri;
    return std::nullopt;
  }
  if (op == "Shape") return 1;
  if (op == "Attention") return v == p->output(0) ? r : std::optional<size_t>(4);  // Q's; present K and V 4-D
  // As many axes as a shape operand has values: a constant's, or Shape(x)'s.
  auto shape_length = [&](const Value* shape) -> std::optional<size_t> {
    if (!shape) return std::nullopt;
    if (shape->constant) return static_cast<size_t>(shape->constant->size());
    const Node* sp = shape->producer;
    if (sp && sp->domain.empty() && sp->op_type == "Shape" && sp->input(0) && !sp->has_attr("start") &&
        !sp->has_attr("end"))
      return known_rank(sp->input(0));
    return std::nullopt;
  };
  if (op == "ConstantOfShape") return shape_length(p->input(0));
  if (op == "Reshape") return shape_length(p->input(1));
  if (op == "Unsqueeze") {
    const auto axes = axes_count(*p);
    if (r && axes) return *r + *axes;
    return std::nullopt;
  }
  if (op != "ReduceSum" && op != "Squeeze") return std::nullopt;
  if (op == "ReduceSum" && p->attr_int("keepdims", 1) != 0) return r;
  const auto axes = axes_count(*p);
  if (r && axes && *axes <= *r) return *r - *axes;
  return std::nullopt;
}

// Each value's rank computed once: a residual stream reaches every earlier layer by two paths.
std::optional<size_t> rank_of(const Value* v, Ranks& memo) {
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  const auto r = compute_rank(v, memo);
  memo[v] = r;
  return r;
}

}  // namespace

std::optional<size_t> known_rank(const Value* v) {
  Ranks memo;
  return rank_of(v, memo);
}

StatusOr<size_t> rank_or_refuse(const Node& c, const Value* v, const std::string& what) {
  if (const auto r = known_rank(v)) return *r;
  return refuse(c, fmt::format("the rank of its {} '{}' is not known before shape inference (a graph input "
                               "with a declared shape, or a MatMul, element-wise op, norm, Gather or Reshape "
                               "of one, is)",
                               what, v->name));
}

}  // namespace stitch::contrib
