// Stitched kernels (stitch.h): whether a group of nodes makes one element or row kernel
// (analyze_stitch), what it stores and what its loops cost; each node's role is stitch_roles.cc.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "codegen/lower.h"
#include "codegen/node_facts.h"
#include "codegen/scalar_ops.h"
#include "codegen/stitch.h"
#include "codegen/stitch_frames.h"
#include "codegen/stitch_passes.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace stitch::codegen {
namespace {

// Gathers read their indices as well as their data (an index map through an index tensor).
bool is_gather(const Node& n) {
  return n.op_type == "Gather" || n.op_type == "GatherElements" || n.op_type == "GatherND";
}

// What one step of a fine-grained GEMM evaluates for operand `v`: views cost no operation; a
// layout op reads its data input only (its starts, shapes and sizes are compile-time constants),
// a Gather its indices too; a single-element value is loaded once, before the loop.
struct Cone {
  int64_t ops = 0, loads = 0;
  std::set<const Node*> nodes;
};
Cone operand_cone(const Value* v, const std::map<const Value*, const Node*>& producer) {
  Cone c;
  std::set<const Value*> seen;
  std::vector<const Value*> stack{v};
  while (!stack.empty()) {
    const Value* u = stack.back();
    stack.pop_back();
    if (u == nullptr || !seen.insert(u).second) continue;
    auto it = producer.find(u);
    if (it == producer.end()) {
      if (num_elements(dims(u)) > 1) ++c.loads;
      continue;
    }
    const Node& n = *it->second;
    c.nodes.insert(&n);
    const StitchRole role = stitch_role(n);
    if (role != StitchRole::kView) c.ops += op_instructions(n);
    const bool data_only =
        role == StitchRole::kView || (role == StitchRole::kLayout && n.op_type != "Concat" && !is_gather(n));
    for (size_t i = 0; i < (data_only ? 1 : n.inputs.size()); ++i) stack.push_back(n.input(i));
  }
  return c;
}

std::map<const Value*, const Node*> producers(const std::vector<const Node*>& nodes) {
  std::map<const Value*, const Node*> producer;
  for (const Node* n : nodes)
    for (const Value* v : n->outputs)
      if (v) producer[v] = n;
  return producer;
}

// Each fine-grained GEMM's loops: `evals` evaluations of its value (element kernels: the
// domain's elements, a smaller product being recomputed for each element it is broadcast to; row
// kernels: each element once per pass, counted by the cost model; a contraction inside another's
// operand: once per evaluation and step of the outer one). Each step also evaluates the operands'
// producers in the group (a head transpose's index arithmetic, a scaling, a rotary embedding) and
// loads the values they read from outside; an A operand whose row a row kernel caches
// (a_row_cached) once per row and step. A running sum or product (scan_info) counts the same way:
// (len + 1) / 2 steps an evaluation on average, each evaluating its input's producers in the group.
void count_contractions(const std::vector<const Node*>& nodes,
                        const std::map<const Value*, const Node*>& producer, int64_t domain,
                        StitchInfo& info) {
  const std::set<const Node*> a_cached(info.a_row_cached.begin(), info.a_row_cached.end());
  // Consumers first, so an outer contraction is counted before the ones in its operands.
  struct Outer {
    int64_t steps;  // evaluations x contraction length
    std::set<const Node*> inside;
  };
  std::vector<Outer> outers;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node* n = *it;
    const std::optional<int64_t> k = contraction_length(*n);
    const std::optional<ScanInfo> scan = stitch_role(*n) == StitchRole::kScan ? scan_info(*n) : std::nullopt;
    if (!k && !scan) continue;
    int64_t evals = std::max(num_elements(dims(n->output(0))), domain);
    for (const Outer& o : outers)
      if (o.inside.count(n)) evals = std::max(evals, o.steps);
    if (scan) {  // (len + 1) / 2 steps an element on average, each evaluating the input's cone
      Cone x = operand_cone(n->input(0), producer);
      const int64_t steps = evals * (scan->len + 1) / 2;
      info.contraction_macs += static_cast<double>(steps);
      info.contraction_ops += static_cast<double>(steps) * static_cast<double>(x.ops);
      info.contraction_reads += steps * dtype_size(n->input(0)->dtype) * x.loads;
      outers.push_back({steps, std::move(x.nodes)});
      continue;
    }
    Cone a = operand_cone(n->input(0), producer), b = operand_cone(n->input(1), producer);
    const int64_t es = dtype_size(n->input(0)->dtype);
    const double steps = static_cast<double>(evals) * static_cast<double>(*k);
    // A row cache evaluates A once per row of the product and step.
    const int64_t a_evals =
        a_cached.count(n) ? evals / std::max<int64_t>(dims(n->output(0)).back(), 1) : evals;
    info.contraction_macs += steps;
    info.contraction_ops += steps * static_cast<double>(b.ops) + static_cast<double>(a_evals) *
                                                                     static_cast<double>(*k) *
                                                                     static_cast<double>(a.ops);
    info.contraction_reads += evals * *k * es * b.loads + std::min(evals / 32, a_evals) * *k * es * a.loads;
    a.nodes.insert(b.nodes.begin(), b.nodes.end());
    outers.push_back({evals * *k, std::move(a.nodes)});
  }
}

// Row kernels: which fine-grained GEMMs cache their A operand's row (StitchInfo::a_row_cached).
void choose_a_row_caches(const std::vector<const Node*>& nodes,
                         const std::map<const Value*, const Node*>& producer, StitchInfo& info) {
  if (!info.row || info.column) return;
  const size_t r = info.domain.size();
  for (size_t d = 0; d < r; ++d)
    if (info.reduced[d] != (d + 1 == r)) return;
  std::set<const Node*> in_operands;  // nodes some product's operands are computed from
  for (const Node* n : nodes)
    if (contraction_length(*n))
      for (const Value* v : {n->input(0), n->input(1)})
        for (const Node* m : operand_cone(v, producer).nodes) in_operands.insert(m);
  const RowMapping m = row_mapping(info);
  int64_t bytes = 0;
  for (const Node* n : nodes) {
    const std::optional<int64_t> k = contraction_length(*n);
    if (!k || dims(n->output(0)) != info.domain || in_operands.count(n)) continue;
    if (!producer.count(n->input(0)) || operand_cone(n->input(0), producer).ops == 0) continue;
    bool own_coordinates = true;
    for (const Node* u : nodes)
      for (const Value* in : u->inputs)
        if (in == n->output(0) && stitch_role(*u) != StitchRole::kPointwise &&
            stitch_role(*u) != StitchRole::kRow)
          own_coordinates = false;
    if (!own_coordinates) continue;
    const int64_t b = a_row_cache_bytes(m, *k, n->input(0)->dtype);
    if (bytes + b > kARowCacheBudget) continue;
    bytes += b;
    info.a_row_cached.push_back(n);
  }
}

}  // namespace

// ---- analysis -------------------------------------------------------------------------------

bool is_gemm_kernel(const Kernel& k) {
  bool gemm = false;
  for (const Node* n : k.nodes) {
    switch (stitch_role(*n)) {
      case StitchRole::kContraction:
      case StitchRole::kTiledGemm:
        gemm = true;
        break;
      case StitchRole::kPointwise:
      case StitchRole::kLayout:
      case StitchRole::kView:
        break;
      default:
        return false;
    }
  }
  return gemm;
}

std::set<const Value*> group_outputs(const Graph& g,
                                     const std::unordered_map<const Value*, std::vector<Node*>>& users,
                                     const std::vector<const Node*>& nodes) {
  const std::set<const Node*> members(nodes.begin(), nodes.end());
  std::set<const Value*> out;
  for (const Node* x : nodes)
    for (const Value* v : x->outputs) {
      if (!v) continue;
      bool outside = g.is_graph_output(v);
      if (auto it = users.find(v); it != users.end())
        for (const Node* u : it->second) outside |= !members.count(u);
      if (outside) out.insert(v);
    }
  return out;
}

namespace {

// A tiled GEMM's group (gemm_tile.h): the MatMul reads its operands from outside the group and its
// product has the kernel's shape, and everything computed from the product is element-wise at
// that shape (the epilogue runs on each accumulator where its thread holds it). Other nodes only
// feed the epilogue (a bias, a scale, a residual read at broadcast coordinates).
Status check_tiled(const std::vector<const Node*>& nodes, const std::set<const Value*>& made,
                   StitchInfo& info) {
  const Node* mm = nullptr;
  for (const Node* n : nodes) {
    if (stitch_role(*n) != StitchRole::kTiledGemm) continue;
    if (mm)
      return Status::user(
          fmt::format("{} and {} are both tiled GEMMs: a kernel runs one (its epilogue is the rest)",
                      mm->describe(), n->describe()));
    mm = n;
  }
  for (const Value* in : mm->inputs)
    if (made.count(in))
      return Status::user(
          fmt::format("{} would tile '{}', computed in the group: a tiled GEMM reads its operands "
                      "from memory",
                      mm->describe(), in->name));
  if (dims(mm->output(0)) != info.domain)
    return Status::user(
        fmt::format("{} makes {}, the kernel stores {}: a tiled GEMM's kernel stores its product's shape",
                    mm->describe(), dims_to_string(dims(mm->output(0))), dims_to_string(info.domain)));
  std::set<const Value*> after{mm->output(0)};
  for (const Node* n : nodes) {
    bool reads = false;
    for (const Value* in : n->inputs) reads |= in && after.count(in);
    if (!reads) continue;
    if (stitch_role(*n) != StitchRole::kPointwise || dims(n->output(0)) != info.domain)
      return Status::user(
          fmt::format("{} reads the product of tiled GEMM {} but is not element-wise at its shape {}",
                      n->describe(), mm->describe(), dims_to_string(info.domain)));
    after.insert(n->output(0));
  }
  info.tile = gemm_tile(*mm);
  return Status::ok();
}

StatusOr<StitchInfo> row_kernel(const std::vector<const Node*>& nodes, const std::vector<const Node*>& rows,
                                const Node* main, StitchInfo info);

}  // namespace

StatusOr<StitchInfo> analyze_members(const std::vector<const Node*>& nodes,
                                     const std::set<const Value*>& stored,
                                     const std::map<const Value*, const Node*>& scattered) {
  StitchInfo info;
  bool tiled = false;
  std::set<const Value*> made;
  std::vector<const Node*> rows;
  for (const Node* n : nodes) {
    const StitchRole role = stitch_role(*n);
    if (role == StitchRole::kNone) return Status::user(fmt::format("{} cannot be stitched with other ops", n->describe()));
    // A view's result is stored into a cache (an update pulled through the view's index map), or
    // as a tensor of its own in the view's shape: only of a value the kernel computes (else it would
    // be a copy) for readers in the kernel too (a router's scores flattened for its top k, which the
    // next kernel gathers from). A view read outside alone stays a view group of its own, of the
    // value the kernel stores, without a kernel.
    if (role == StitchRole::kView && stored.count(n->output(0)) && !scattered.count(n->output(0))) {
      const bool read_inside = std::any_of(nodes.begin(), nodes.end(), [&](const Node* m) {
        return std::find(m->inputs.begin(), m->inputs.end(), n->output(0)) != m->inputs.end();
      });
      if (!made.count(n->input(0)) || !read_inside)
        return Status::user(fmt::format(
            "{} is a view whose result is read outside the group: a kernel stores one only of a value it "
            "computes and reads in the view's shape itself",
            n->describe()));
    }
    if (role == StitchRole::kRow) rows.push_back(n);
    tiled |= role == StitchRole::kTiledGemm;
    for (const Value* v : n->outputs) made.insert(v);
  }
  for (const Value* v : stored) {
    if (!made.count(v)) return Status::user(fmt::format("'{}' is not computed by the group", v->name));
    info.stored.push_back(v);
  }
  std::sort(info.stored.begin(), info.stored.end(), [](const Value* a, const Value* b) { return a->name < b->name; });
  if (info.stored.empty()) return Status::user("the group stores nothing");
  if (rows.empty()) {
    info.domain = dims(info.stored.front());
    for (const Value* v : info.stored)
      if (dims(v) != info.domain)
        return Status::user(fmt::format("it would store '{}' ({}) and '{}' ({}): one element kernel stores one shape",
                                        info.stored.front()->name, dims_to_string(info.domain), v->name,
                                        dims_to_string(dims(v))));
    // Each value is evaluated once per element of the domain and coordinate set it is read at
    // (element_evaluations).
    const ElementEvaluations ev = element_evaluations(nodes, info);
    const double d = static_cast<double>(num_elements(info.domain));
    for (size_t j = 0; j < nodes.size(); ++j) {
      const Node* n = nodes[j];
      if (stitch_role(*n) == StitchRole::kView || stitch_role(*n) == StitchRole::kLayout) continue;  // no arithmetic
      // A node the kernel's coordinates do not reach (an operand of a loop) once per element.
      const double pe = ev.per_element[j] > 0 ? ev.per_element[j] : 1.0;
      const int64_t evals = static_cast<int64_t>(pe * d);
      const int64_t e = num_elements(dims(n->output(0)));
      if (e < evals) info.recompute_elements += (evals - e) * op_instructions(*n);
    }
    if (tiled) RETURN_IF_ERROR(check_tiled(nodes, made, info));
    count_contractions(nodes, producers(nodes), num_elements(info.domain), info);
    return info;
  }
  if (tiled)
    return Status::user(
        fmt::format("{} would join a row kernel: a tiled GEMM's epilogue is element-wise only",
                    rows.front()->describe()));
  for (const Node* n : nodes)
    if (stitch_role(*n) == StitchRole::kScan)
      return Status::user(
          fmt::format("{} would join a row kernel: a running sum or product runs in element kernels only",
                      n->describe()));
  info.row = true;
  // The kernel's rows are the first row op's; a row op over other rows may be an outer reduction
  // (StitchInfo::outer). When one is not, the last row op's rows are tried (an RMSNorm's
  // statistics before the per-head norms of Q or K).
  StatusOr<StitchInfo> by_first = row_kernel(nodes, rows, rows.front(), info);
  if (!by_first.is_ok() && rows.back() != rows.front()) {
    StatusOr<StitchInfo> by_last = row_kernel(nodes, rows, rows.back(), info);
    if (by_last.is_ok()) by_first = std::move(by_last);
  }
  if (!by_first.is_ok()) return by_first;
  // Each pass evaluates the element-wise nodes once per element of the rows and set of
  // coordinates they are read at (coordinate_sets): those beyond one per element of a node's value
  // are recomputation, which the cost model charges per pass like the rest. A value wider than the
  // rows (a Split's input) is spread over its sets; one smaller than the rows is computed once per
  // row or element of its own and set (a lower bound where it is broadcast as well).
  const CoordinateSets cs =
      coordinate_sets(nodes, by_first->stored, by_first->domain, std::nullopt, false, /*rows=*/true);
  const int64_t d = num_elements(by_first->domain);
  for (size_t j = 0; j < nodes.size(); ++j) {
    const StitchRole role = stitch_role(*nodes[j]);
    if (cs.sets[j] <= 1 || role == StitchRole::kView || role == StitchRole::kLayout ||
        role == StitchRole::kRow)
      continue;
    const int64_t e = num_elements(dims(nodes[j]->output(0)));
    const int64_t extra = e < d ? (cs.sets[j] - 1) * e : std::max<int64_t>(cs.sets[j] * d - e, 0);
    by_first->recompute_elements += extra * op_instructions(*nodes[j]);
  }
  return by_first;
}

namespace {

// analyze_stitch's row kernels, whose rows are those of row op `main`.
StatusOr<StitchInfo> row_kernel(const std::vector<const Node*>& nodes, const std::vector<const Node*>& rows,
                                const Node* main, StitchInfo info) {
  ASSIGN_OR_RETURN(RowOpInfo first, row_op_info(*main));
  info.domain = first.in;
  info.axes = first.axes;
  info.column = first.column;
  info.reduced = first.reduced;
  info.rows = first.rows;
  info.cols = first.cols;
  const int64_t r = static_cast<int64_t>(info.domain.size());
  info.passes = 0;
  auto axes_text = [](const std::vector<bool>& red) {
    std::string t;
    for (size_t d = 0; d < red.size(); ++d)
      if (red[d]) t += (t.empty() ? "" : ",") + std::to_string(d);
    return "[" + t + "]";
  };
  const std::map<const Value*, const Node*> producer = producers(nodes);
  std::vector<std::string> other_rows;  // the message for each row op over other rows
  bool ints = false, floats = false;
  for (const Node* n : rows) {
    ASSIGN_OR_RETURN(RowOpInfo ri, row_op_info(*n));
    if (ri.in != info.domain || ri.reduced != info.reduced) {
      const std::string why = fmt::format("{} reduces {} over axes {}, the group's rows are {} over axes {}",
                                          n->describe(), dims_to_string(ri.in), axes_text(ri.reduced),
                                          dims_to_string(info.domain), axes_text(info.reduced));
      if (!outer_candidate(*n, ri, info, producer)) return Status::user(why);
      info.outer.push_back({n, ri.rows, ri.cols, ri.passes});
      other_rows.push_back(why);
      continue;
    }
    info.passes += ri.passes;
    (is_float(n->input(0)->dtype) ? floats : ints) = true;
  }
  info.mixed_partials = ints && floats;
  Dims kept;
  for (int64_t k = 0; k < r; ++k)
    if (!info.reduced[k]) kept.push_back(info.domain[k]);
  auto per_row = [&](const Dims& d) {
    if (d == kept) return true;
    if (d.size() != info.domain.size()) return false;
    for (int64_t k = 0; k < r; ++k)
      if (d[k] != (info.reduced[k] ? 1 : info.domain[k])) return false;
    return true;
  };
  // Wide values: computed at the current row with the rows' kept extents but other extents
  // along the reduced axes (a row scale applied to a GEMM product wider than the row it was
  // reduced over: RMSNorm moved past its GEMM, fusion/hoist_scales.h). A store pass of their own
  // loops over each; not in column kernels. A row kernel with wide values never splits its rows
  // over blocks (it replicates them instead: row_mapping).
  const bool wide_ok = !info.column;
  auto wide = [&](const Dims& v) {
    if (!wide_ok || v.size() != info.domain.size() || v == info.domain) return false;
    bool longer = false;
    for (int64_t k = 0; k < r; ++k) {
      if (!info.reduced[k] && v[k] != info.domain[k]) return false;
      longer |= info.reduced[k] && v[k] != 1;
    }
    return longer;
  };
  // Values computed from a row op's result are read at the current row only (stitch_frames.h).
  ASSIGN_OR_RETURN(info.permuted, moved_rows(nodes, info));
  bool full = false;
  std::set<int64_t> widths;  // one store pass per width of wide values
  for (const Value* v : info.stored) {
    if (info.permuted.count(v)) {
      const int64_t width = info.moved_width(v);
      if (info.full_row(v)) {
        full = true;
      } else {
        if (info.column)
          return Status::user(fmt::format("it would store '{}' moved in a column kernel", v->name));
        widths.insert(width);
      }
      continue;
    }
    if (dims(v) == info.domain) {
      full = true;
      continue;
    }
    if (wide(dims(v)) && !per_row(dims(v))) {
      int64_t width = 1;
      for (int64_t k = 0; k < r; ++k)
        if (info.reduced[k]) width *= dims(v)[static_cast<size_t>(k)];
      widths.insert(width);
      continue;
    }
    if (!per_row(dims(v)))
      return Status::user(fmt::format("it would store '{}' ({}), neither the rows' shape {} nor one value per row",
                                      v->name, dims_to_string(dims(v)), dims_to_string(info.domain)));
  }
  if (full) ++info.passes;
  info.wide_widths.assign(widths.begin(), widths.end());
  // A value with axes of its own reads the row's values it broadcasts once per element of its own:
  // its wide loop evaluates them again for each (a routing weight per activation of its expert).
  for (const Value* v : info.stored) {
    if (!info.has_own_axes(v)) continue;
    const int64_t e = num_elements(dims(v));
    std::set<const Value*> seen;
    std::vector<const Value*> stack{v};
    while (!stack.empty()) {
      const Value* u = stack.back();
      stack.pop_back();
      auto it = producer.find(u);
      if (it == producer.end() || !seen.insert(u).second || info.is_outer(it->second)) continue;
      const Node& p = *it->second;
      const StitchRole role = stitch_role(p);
      if (role == StitchRole::kRow && !row_op_keeps_shape(p)) continue;  // a register of the row
      const int64_t pe = num_elements(dims(p.output(0)));
      if (role != StitchRole::kView && role != StitchRole::kLayout && pe < e)
        info.recompute_elements += (e - pe) * op_instructions(p);
      for (const Value* in : p.inputs)
        if (in) stack.push_back(in);
    }
  }
  for (const Node* n : nodes) {  // row kernels evaluate each value once per element and pass
    if (!contraction_length(*n)) continue;
    const int64_t e = num_elements(dims(n->output(0)));
    if (e < num_elements(info.domain))
      return Status::user(
          fmt::format("{} would be broadcast into the rows {}: its loop would run again for every "
                      "element it is broadcast to",
                      n->describe(), dims_to_string(info.domain)));
  }
  RETURN_IF_ERROR(outer_reductions(nodes, other_rows, info));
  share_passes(rows, producer, info);
  choose_a_row_caches(nodes, producer, info);
  count_contractions(nodes, producer, 0, info);
  return info;
}

}  // namespace

}  // namespace stitch::codegen
