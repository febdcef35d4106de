// stitchc inspect / stitchc ops.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/common.h"
#include "cli/subcommands.h"
#include "codegen/memory_plan.h"
#include "codegen/schedule.h"
#include "importer/onnx_importer.h"
#include "ir/op_table.h"

namespace stitch::cli {
namespace {

struct Summary {
  std::map<std::string, int> histogram;
  int64_t nodes = 0, constants = 0, constant_bytes = 0;
};

Summary summarize(const Graph& g) {
  Summary s;
  for (const auto& n : g.nodes()) {
    ++s.histogram[n->domain.empty() ? n->op_type : n->domain + "::" + n->op_type];
    ++s.nodes;
  }
  for (const auto& v : g.values())
    if (v->constant && !v->producer) {
      ++s.constants;
      s.constant_bytes += v->constant->byte_size();
    }
  return s;
}

nlohmann::json value_json(const Value& v) {
  return {{"name", v.name}, {"dtype", std::string(dtype_name(v.dtype))}, {"type", v.type_string()}};
}

}  // namespace

int run_inspect(const InspectArgs& a) {
  auto imported = import_onnx_file(a.model, {a.constant_inputs});
  if (!imported.is_ok()) return report(imported.status());
  const Graph& raw = **imported;
  Summary before = summarize(raw);
  bool dynamic = false;
  for (const Value* in : raw.inputs) dynamic |= !in->has_static_shape();

  std::unique_ptr<Graph> folded;
  std::string fold_note;
  if (!dynamic || !a.shapes.empty()) {
    folded = clone_graph(raw);
    Status st = prepare_model(*folded, a.model, a.shapes, {}, a.dump_dir);
    if (!st.is_ok()) return report(st);
  } else {
    fold_note = "inputs have dynamic dimensions: bind them with --shape to fold and see static shapes";
  }
  const Graph& shown = folded ? *folded : raw;
  // The unfused schedule's arena: the back end's schedule (views share storage, outputs live in
  // the session's buffers) when it can lower every node, else one buffer per node output.
  std::optional<MemoryPlan> memory;
  std::vector<BufferRequest> buffers;
  if (folded) {
    auto sched = codegen::build_schedule(*folded);
    if (sched.is_ok()) {
      buffers = sched->requests;
      memory = sched->plan;
    } else {
      buffers = graph_buffer_requests(*folded);
      memory = plan_memory(buffers);
    }
    Status st = verify_memory_plan(buffers, *memory);
    if (!st.is_ok()) return report(st);
  }

  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["opset"] = raw.model_opset;
    for (const Value* v : shown.inputs) j["inputs"].push_back(value_json(*v));
    for (const Value* v : shown.outputs) j["outputs"].push_back(value_json(*v));
    j["decided_at_import"] = raw.import_log;
    j["nodes_imported"] = before.nodes;
    j["parameter_bytes"] = before.constant_bytes;
    j["parameter_tensors"] = before.constants;
    j["histogram_imported"] = before.histogram;
    if (folded) {
      Summary after = summarize(*folded);
      j["nodes_folded"] = after.nodes;
      j["histogram_folded"] = after.histogram;
      j["constant_bytes_folded"] = after.constant_bytes;
      j["memory_unfused"] = {{"buffers", buffers.size()},
                             {"arena_bytes", memory->arena_bytes},
                             {"sum_of_buffers_bytes", memory->total_bytes},
                             {"peak_live_bytes", memory->peak_live_bytes},
                             {"in_place", memory->in_place}};
    } else {
      j["note"] = fold_note;
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }

  fmt::print("model {}  (graph '{}', opset {}{})\n", a.model, raw.name, raw.model_opset,
             raw.model_opset < raw.opset ? fmt::format(", read in opset {}'s forms", raw.opset) : "");
  fmt::print("inputs:\n");
  for (size_t i = 0; i < shown.inputs.size(); ++i) {
    const Value* v = shown.inputs[i];
    std::string declared = raw.inputs[i]->type_string();
    std::string now = v->type_string();
    fmt::print("  {:<24} {}{}\n", v->name, declared, declared == now ? "" : "  bound to " + now);
  }
  for (const FixedInput& f : raw.fixed_inputs)
    fmt::print("  {:<24} fixed by --constant-input: {} {}\n", f.name, dtype_name(f.value.dtype()),
               dims_to_string(f.value.dims()));
  for (const std::string& line : raw.import_log) fmt::print("decided at import: {}\n", line);
  fmt::print("outputs:\n");
  for (const Value* v : shown.outputs)
    fmt::print("  {:<24} {}\n", v->name, v->dtype == DType::kUndefined ? "(type known after binding)" : v->type_string());
  fmt::print("parameters: {} tensors, {}\n", before.constants, human_bytes(before.constant_bytes));
  if (folded) {
    Summary after = summarize(*folded);
    fmt::print("nodes: {} imported, {} after folding and clean-up\n", before.nodes, after.nodes);
    fmt::print("op histogram after folding:\n");
    for (const auto& [op, count] : after.histogram) {
      const OpDef* d = find_op("", op, raw.opset);
      fmt::print("  {:<24} {:>5}  {}\n", op, count, d ? category_name(d->category) : "");
    }
    // Per op type: fewer after the passes counts as folded or removed, more as written by a pass
    // (expand_resize's Gathers, relabel_transposes' Reshapes).
    int removed = 0, added = 0;
    for (const auto& [op, count] : before.histogram) {
      const int now = after.histogram.count(op) ? after.histogram.at(op) : 0;
      removed += std::max(0, count - now);
    }
    for (const auto& [op, count] : after.histogram) {
      const int was = before.histogram.count(op) ? before.histogram.at(op) : 0;
      added += std::max(0, count - was);
    }
    fmt::print("folded or removed: {} nodes\n", removed);
    if (added > 0)
      fmt::print("written by the passes (a Resize as Gathers, a Transpose as a Reshape...): {} nodes\n",
                 added);
    fmt::print("memory, unfused schedule: arena {} for {} intermediate buffers (sum {}, live peak {}, {} in place)\n",
               human_bytes(memory->arena_bytes), buffers.size(), human_bytes(memory->total_bytes),
               human_bytes(memory->peak_live_bytes), memory->in_place);
  } else {
    fmt::print("nodes: {} imported\n", before.nodes);
    fmt::print("op histogram as imported:\n");
    for (const auto& [op, count] : before.histogram) fmt::print("  {:<24} {:>5}\n", op, count);
    fmt::print("note: {}\n", fold_note);
  }
  return 0;
}

int run_ops() {
  fmt::print("{:<24} {:<8} {}\n", "op", "opsets", "category");
  size_t count = 0;
  for (const OpDef& d : all_ops()) {
    if (d.internal) continue;  // the compiler's own, never a model's
    fmt::print("{:<24} {:<8} {}\n", d.name, fmt::format("{}-{}", d.since, d.until), category_name(d.category));
    ++count;
  }
  fmt::print("{} ops\n", count);
  return 0;
}

}  // namespace stitch::cli
