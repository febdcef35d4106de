#include "ops/index_check.h"

#include <fmt/format.h>

#include <limits>
#include <map>
#include <memory>

#include "ir/op_table.h"
#include "ops/value_range.h"

namespace stitch::ops {

std::optional<int64_t> IndexBounds::first_refused(std::span<const int64_t> values) const {
  for (int64_t v : values)
    if (!admits(v)) return v;
  return std::nullopt;
}

std::string with_value(std::string message, int64_t value) {
  if (const size_t at = message.find("{value}"); at != std::string::npos)
    message.replace(at, 7, std::to_string(value));
  return message;
}

std::pair<std::string, std::string> checked_node(const Node& n) {
  if (n.op_type != kIndexCheck) return {n.name, n.op_type};
  return {n.attr_string("node", n.name), n.attr_string("op", n.op_type)};
}

Status refuse_outside(const Node& n, const IndexBounds& b, std::span<const int64_t> values) {
  const std::optional<int64_t> v = b.first_refused(values);
  if (!v) return Status::ok();
  const auto [name, op] = checked_node(n);
  return Status::user(fmt::format("node '{}' ({}): {}", name, op, with_value(b.message, *v)));
}

namespace {

// The attributes of a StitchIndexCheck of `b` made for `replaced`.
std::map<std::string, AttrValue> index_check_attrs(const Node& replaced, const IndexBounds& b) {
  std::map<std::string, AttrValue> a{{"min", b.min},
                                     {"max", b.max},
                                     {"node", replaced.name},
                                     {"op", replaced.op_type},
                                     {"message", b.message}};
  if (b.nonzero) a["nonzero"] = int64_t{1};
  return a;
}

}  // namespace

IndexBounds index_check_bounds(const Node& check) {
  return {check.attr_int("min", 0), check.attr_int("max", 0), check.attr_string("message", ""),
          check.attr_int("nonzero", 0) != 0};
}

bool proven_admitted(const Value* v, const IndexBounds& b) {
  const std::optional<IntRange> r = int_range(v);
  return r && r->min >= b.min && r->max <= b.max && !(b.nonzero && r->min <= 0 && r->max >= 0);
}

StatusOr<Value*> checked_index(Graph& g, const Node& replaced, Value* v, const IndexBounds& b,
                               const std::string& name) {
  if (v->is_constant()) {
    const std::vector<int64_t> values = v->constant->to_i64();
    RETURN_IF_ERROR(refuse_outside(replaced, b, values));
    return v;
  }
  if (proven_admitted(v, b)) return v;
  for (const auto& np : g.nodes()) {
    const Node& c = *np;
    if (c.op_type != kIndexCheck || c.input(0) != v || !c.output(0) ||
        checked_node(c).second != replaced.op_type)
      continue;
    const IndexBounds has = index_check_bounds(c);
    if (has.min == b.min && has.max == b.max && has.nonzero == b.nonzero && has.message == b.message)
      return c.output(0);
  }
  auto n = std::make_unique<Node>();
  n->name = g.unique_name(replaced.name + "/" + name);
  n->op_type = kIndexCheck;
  n->opset = std::max(g.opset, replaced.opset);
  n->def = find_op("", kIndexCheck, n->opset);
  n->inputs = {v};
  n->attrs = index_check_attrs(replaced, b);
  Value* y = g.add_value(g.unique_name(n->name + "_output"));
  y->dtype = v->dtype;
  y->dims = v->dims;
  n->outputs = {y};
  g.add_node(std::move(n));
  return y;
}

IndexBounds tensor_scatter_bounds(const Node& n, int64_t len, int64_t count) {
  const std::string name = n.input(2) ? n.input(2)->name : "write_indices";
  if (n.attr_string("mode", "linear") == "circular")
    return {0, std::numeric_limits<int64_t>::max(),
            fmt::format("write index {{value}} of '{}' is negative (mode circular)", name)};
  return {
      0, len - count,
      fmt::format("write index {{value}} of '{}' puts the {} updates outside the cache's {} positions (mode "
                  "linear)",
                  name, count, len)};
}

IndexBounds valid_keys_bounds(const Node& n, int64_t total) {
  const std::string name = n.input(6) ? n.input(6)->name : "nonpad_kv_seqlen";
  return {
      0, total,
      fmt::format("valid key count {{value}} of '{}' (nonpad_kv_seqlen) is outside [0, {}], the keys' length",
                  name, total)};
}

IndexBounds sequence_lens_bounds(int64_t steps) {
  return {0, steps,
          fmt::format("a sequence length of {{value}} lies outside [0, {}], the time axis's length", steps)};
}

IndexBounds position_ids_bounds(int64_t rows) {
  return {0, rows - 1, fmt::format("position id {{value}} is outside the caches' {} positions", rows)};
}

}  // namespace stitch::ops
