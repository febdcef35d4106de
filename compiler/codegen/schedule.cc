// build_schedule: node order is schedule order (the graph is topologically sorted); each node
// becomes zero (view, or work a GEMM call takes over: find_gemm_folds), one (kernel, library
// call) or two (Gemm with a C that is not a bias vector: broadcast + call) steps.
// Graph outputs are written in place by the step that produces them when possible, else copied
// at the end (an output that is a view, a graph input, a constant, or another output).
#include "codegen/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "codegen/lower.h"
#include "codegen/nan_bits.h"
#include "codegen/scalar_ops.h"
#include "codegen/stitch.h"
#include "ops/op_util.h"
#include "support/check.h"

namespace stitch::codegen {

const char* storage_name(Storage s) {
  switch (s) {
    case Storage::kArena: return "arena";
    case Storage::kWeights: return "weights";
    case Storage::kInput: return "input";
    case Storage::kOutput: return "output";
    case Storage::kFault: return "fault";
  }
  return "?";
}

const BufferRef& buffer_of(const Schedule& s, const Value* v) {
  auto it = s.buffers.find(v);
  STITCH_CHECK(it != s.buffers.end(), "value '{}' has no buffer", v->name);
  return it->second;
}

namespace {

int64_t bytes_of(const Value* v) { return num_elements(*v->dims) * dtype_size(v->dtype); }
int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// A row op alone whose rows are so few and long that the stitcher splits each over blocks; the
// single-node segment kernels (lower_reduce.cc) would give each row one block.
bool split_row_op(const Node& n) {
  if (stitch_role(n) != StitchRole::kRow) return false;
  auto ri = row_op_info(n);
  return ri.is_ok() && !ri->column && row_mapping(ri->rows, ri->cols).split();
}

}  // namespace

StatusOr<Schedule> build_schedule(const Graph& g, const NodeGroups* groups, const std::vector<int>* packs,
                                  const FoldOptions& fold_gemms, const RegisterRoom* room) {
  // 1. Everything the back end cannot do, at once.
  std::vector<std::string> problems;
  for (const auto& np : g.nodes()) {
    std::string why;
    if (classify_node(*np, &why) == NodeLowering::kUnsupported) problems.push_back(fmt::format("{}: {}", np->describe(), why));
  }
  if (!problems.empty()) {
    std::string msg = fmt::format("the back end cannot compile {} node(s):", problems.size());
    for (const auto& p : problems) msg += "\n  " + p;
    return Status::user(msg);
  }

  Schedule s;
  std::map<const Value*, const Value*> root;  // view -> value whose storage it shares
  auto root_of = [&](const Value* v) {
    while (root.count(v)) v = root.at(v);
    return v;
  };
  std::map<const Value*, int> producer_step;  // root values written by a step
  std::map<const Value*, int> last_use;       // root values: last step reading them
  int kernel_index = 0;
  auto reads = [&](const Value* v) {
    const Value* r = root_of(v);
    last_use[r] = std::max(last_use.count(r) ? last_use[r] : 0, static_cast<int>(s.steps.size()));
  };
  std::map<int, const Value*> in_place_input;  // step -> input it may overwrite (scalar kernels)
  std::set<const Value*> written_in_place;     // outputs sharing a graph input's storage
  // A TensorScatter's update written into past_cache's storage (a graph input), which present_cache
  // then shares: the cache is not copied.
  auto written_into_input = [&](const Node& n) {
    producer_step.erase(n.output(0));
    root[n.output(0)] = n.input(0);
    written_in_place.insert(n.output(0));
  };

  NodeGroups units;
  if (groups) units = *groups;
  else
    for (const auto& np : g.nodes()) units.push_back({np.get()});
  STITCH_CHECK(!packs || packs->size() == units.size(), "one pack id per fusion group");
  const auto users = g.users();
  auto escaping_of = [&](const std::vector<const Node*>& unit) { return group_outputs(g, users, unit); };
  auto push_kernel = [&](Kernel k) {
    if (room && k.nodes.size() > 1) {
      std::set<std::string> names;
      for (const Node* n : k.nodes) names.insert(n->name);
      if (std::find(room->kernels.begin(), room->kernels.end(), names) != room->kernels.end())
        give_register_room(k, room->registers);
    }
    for (const KernelParam& p : k.params) {
      if (p.value == fault_word())
        s.buffers[p.value] = {Storage::kFault, 0, 0};  // the session's, not the arena
      else if (!p.output)
        reads(p.value);
    }
    for (const KernelParam& p : k.params)
      if (p.output && p.value != fault_word()) producer_step[p.value] = static_cast<int>(s.steps.size());
    use_plain_conversions_where_bits_cannot_show(k);
    s.steps.push_back({Step::kKernel, static_cast<int>(s.kernels.size())});
    s.kernels.push_back(std::move(k));
  };
  // Work the GEMM calls take over from their neighbours (bias epilogues, output and operand
  // layouts, scalars into alpha); members of fused groups keep their kernels.
  std::set<const Node*> grouped;
  for (const auto& unit : units)
    if (unit.size() > 1) grouped.insert(unit.begin(), unit.end());
  const GemmFolds folds = fold_gemms ? find_gemm_folds(g, grouped, fold_gemms) : GemmFolds{};
  for (size_t ui = 0; ui < units.size(); ++ui) {
    const auto& unit = units[ui];
    STITCH_CHECK(!unit.empty(), "empty fusion group");
    if (unit.size() == 1 && folds.folded.count(unit.front())) {
      ++s.folded;
      continue;
    }
    if (packs && (*packs)[ui] >= 0) {  // consecutive groups of one pack: one launch
      std::vector<StitchPart> parts;
      size_t end = ui;
      for (; end < units.size() && (*packs)[end] == (*packs)[ui]; ++end) {
        const auto& u = units[end];
        parts.push_back({u, escaping_of(u), u.size() == 1 && ops::tensor_scatter_in_place(g, *u.front())});
      }
      if (parts.size() > 1) {
        ASSIGN_OR_RETURN(Kernel k, lower_packed(parts, kernel_index++));
        push_kernel(std::move(k));
        for (const StitchPart& part : parts)
          for (const Node* n : part.nodes)
            if (ops::tensor_scatter_in_place(g, *n)) written_into_input(*n);
        ui = end - 1;
        continue;
      }
    }
    if (unit.size() > 1) {
      ASSIGN_OR_RETURN(Kernel k, lower_stitched(unit, escaping_of(unit), kernel_index++));
      push_kernel(std::move(k));
      for (const Node* n : unit)  // a cache's update stored into the cache input by the kernel
        if (ops::tensor_scatter_in_place(g, *n)) written_into_input(*n);
      continue;
    }
    const Node& n = *unit.front();
    switch (classify_node(n)) {
      case NodeLowering::kView:
        root[n.output(0)] = n.input(0);
        ++s.views;
        break;
      case NodeLowering::kKernel: {
        if (ops::tensor_scatter_in_place(g, n)) {
          ASSIGN_OR_RETURN(Kernel k, lower_tensor_scatter(n, kernel_index++, true));
          push_kernel(std::move(k));
          written_into_input(n);
          break;
        }
        if (split_row_op(n)) {  // few long rows: the stitcher's split mapping (global stitching)
          ASSIGN_OR_RETURN(Kernel k, lower_stitched(unit, escaping_of(unit), kernel_index++));
          push_kernel(std::move(k));
          break;
        }
        ASSIGN_OR_RETURN(Kernel k, lower_node(n, kernel_index++));
        const int step = static_cast<int>(s.steps.size());
        push_kernel(std::move(k));
        // In place: a per-element kernel reads element i of a same-shaped input before writing
        // element i, unless another parameter reads the same storage at other offsets.
        if (has_scalar_expr(n) && n.output(0))
          for (const Value* in : n.inputs) {
            if (!in || in->is_constant() || *in->dims != *n.output(0)->dims || in->dtype != n.output(0)->dtype) continue;
            int sharing = 0;
            for (const Value* other : n.inputs) sharing += other && root_of(other) == root_of(in);
            if (sharing != 1) continue;
            in_place_input[step] = root_of(in);
            break;
          }
        break;
      }
      case NodeLowering::kLibrary: {
        auto fit = folds.by_matmul.find(&n);
        ASSIGN_OR_RETURN(LibraryLowering lib,
                         lower_library(n, kernel_index, fit == folds.by_matmul.end() ? nullptr : &fit->second));
        for (Kernel& k : lib.kernels) {
          ++kernel_index;
          push_kernel(std::move(k));
        }
        const Value* out = lib.call.args[2];
        for (size_t i = 0; i < lib.call.args.size(); ++i)
          if (i != 2) reads(lib.call.args[i]);
        if (!producer_step.count(out)) producer_step[out] = static_cast<int>(s.steps.size());
        else reads(out);  // accumulates onto the bias fill
        s.steps.push_back({Step::kLibrary, static_cast<int>(s.calls.size())});
        s.calls.push_back(std::move(lib.call));
        break;
      }
      case NodeLowering::kUnsupported:
        STITCH_UNREACHABLE();
    }
  }

  // 2. Storage of graph inputs, outputs, constants.
  for (size_t i = 0; i < g.inputs.size(); ++i) s.buffers[g.inputs[i]] = {Storage::kInput, 0, static_cast<int>(i)};
  std::set<const Value*> in_output_slot;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const Value* v = g.outputs[i];
    const bool produced = !root.count(v) && producer_step.count(v) && !in_output_slot.count(v);
    if (produced) {
      s.buffers[v] = {Storage::kOutput, 0, static_cast<int>(i)};
      in_output_slot.insert(v);
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const Value* v = g.outputs[i];
    if (written_in_place.count(v) && !in_output_slot.count(v)) {  // the input's storage is the slot
      const auto at = std::find(g.inputs.begin(), g.inputs.end(), root_of(v));
      STITCH_CHECK(at != g.inputs.end(), "value '{}' written in place of no graph input", v->name);
      s.outputs_in_inputs[static_cast<int>(i)] = static_cast<int>(at - g.inputs.begin());
      in_output_slot.insert(v);
      continue;
    }
    auto it = s.buffers.find(v);
    if (it != s.buffers.end() && it->second.storage == Storage::kOutput && it->second.index == static_cast<int>(i))
      continue;
    reads(v);
    Step c{Step::kCopy, 0, v, v, static_cast<int>(i)};
    s.steps.push_back(c);
  }
  const int end = static_cast<int>(s.steps.size());

  // 3. Constants used by steps go to the weights blob, in first-use order.
  auto place_const = [&](const Value* v) {
    const Value* r = root_of(v);
    if (!r->is_constant() || s.buffers.count(r)) return;
    s.buffers[r] = {Storage::kWeights, s.weights_bytes, 0};
    s.weights.push_back(r);
    s.weights_bytes = round_up(s.weights_bytes + std::max<int64_t>(1, bytes_of(r)), kArenaAlignment);
  };
  for (const Step& st : s.steps) {
    if (st.kind == Step::kKernel)
      for (const KernelParam& p : s.kernels[st.item].params) place_const(p.value);
    if (st.kind == Step::kLibrary)
      for (const Value* v : s.calls[st.item].args) place_const(v);
    if (st.kind == Step::kCopy) place_const(st.src);
  }

  // 4. Arena: every root written by a step and not in an output slot.
  std::map<const Value*, int> request_of;
  for (const auto& [v, step] : producer_step) {
    if (s.buffers.count(v)) continue;
    BufferRequest r;
    r.name = v->name;
    r.bytes = std::max<int64_t>(1, bytes_of(v));
    r.first = step;
    r.last = std::max(step, last_use.count(v) ? last_use[v] : step);
    if (g.is_graph_output(v)) r.last = end;
    request_of[v] = static_cast<int>(s.requests.size());
    s.requests.push_back(r);
  }
  // Deterministic order: by first step then name (the map above is pointer-ordered).
  std::vector<std::pair<const Value*, int>> order(request_of.begin(), request_of.end());
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    const BufferRequest& ra = s.requests[a.second];
    const BufferRequest& rb = s.requests[b.second];
    return std::tie(ra.first, ra.name) < std::tie(rb.first, rb.name);
  });
  std::vector<BufferRequest> sorted;
  std::map<const Value*, int> index;
  for (const auto& [v, old] : order) {
    index[v] = static_cast<int>(sorted.size());
    sorted.push_back(s.requests[old]);
  }
  for (const auto& [step, in] : in_place_input) {
    // The writer of this step may take `in`'s storage when `in` dies here.
    for (const auto& [v, i] : index) {
      if (sorted[i].first != step || !index.count(in)) continue;
      const BufferRequest& src = sorted[index.at(in)];
      if (src.last == step && src.bytes == sorted[i].bytes && !g.is_graph_output(in)) sorted[i].reuse_of = index.at(in);
    }
  }
  s.requests = std::move(sorted);
  s.plan = plan_memory(s.requests);
  RETURN_IF_ERROR(verify_memory_plan(s.requests, s.plan));
  for (const auto& [v, i] : index) s.buffers[v] = {Storage::kArena, s.plan.offsets[i], 0};

  // 5. Views share their root's buffer.
  for (const auto& [v, r] : root) {
    const Value* base = root_of(v);
    if (!s.buffers.count(base)) place_const(base);
    if (s.buffers.count(base)) s.buffers[v] = s.buffers.at(base);
  }
  // Everything a step touches must have storage now.
  for (const Step& st : s.steps) {
    if (st.kind == Step::kKernel)
      for (const KernelParam& p : s.kernels[st.item].params)
        STITCH_CHECK(s.buffers.count(p.value), "kernel {} param {} has no storage", s.kernels[st.item].name, p.name);
    if (st.kind == Step::kLibrary)
      for (const Value* v : s.calls[st.item].args) STITCH_CHECK(s.buffers.count(v), "call arg {} has no storage", v->name);
    if (st.kind == Step::kCopy) STITCH_CHECK(s.buffers.count(st.src), "copy source {} has no storage", st.src->name);
  }
  return s;
}

}  // namespace stitch::codegen
