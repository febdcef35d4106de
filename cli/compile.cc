// stitchc compile: ONNX model -> artifact directory (schedule, kernels, weights, binaries, report).
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/common.h"
#include "cli/subcommands.h"
#include "codegen/artifact.h"
#include "codegen/schedule.h"
#include "fusion/plan.h"
#include "importer/onnx_importer.h"

namespace stitch::cli {

int run_compile(const CompileArgs& a) {
  auto t0 = std::chrono::steady_clock::now();
  codegen::CompileOptions o;
  o.archs.clear();
  std::stringstream ss(a.arch);
  for (std::string arch; std::getline(ss, arch, ',');)
    if (!arch.empty()) o.archs.push_back(arch);
  if (o.archs.empty()) return report(Status::user("--arch needs at least one target, for example sm_90"));
  o.run_nvcc = !a.no_nvcc;
  o.build_emu = !a.no_emu;
  o.fusion = a.fusion;
  o.model_path = a.model;
  o.shape_bindings = a.shapes;

  auto g = import_onnx_file(a.model);
  if (!g.is_ok()) return report(g.status());
  Status prepared = prepare_model(**g, a.model, a.shapes, {}, a.dump_dir);
  if (!prepared.is_ok()) return report(prepared);
  for (const Value* v : (*g)->inputs)
    if (!v->has_static_shape())
      return report(Status::user(fmt::format("input '{}' has dynamic shape {}: an artifact has static shapes; bind it "
                                             "with --shape {}=... or bind its symbolic dims (--shape NAME=N)",
                                             v->name, v->type_string(), v->name)));
  fusion::FusionOptions fo;
  fo.mode = a.fusion;
  fo.no_fuse = std::set<std::string>(a.no_fuse.begin(), a.no_fuse.end());
  fo.max_group_size = a.max_group_size;
  auto plan = fusion::make_plan(**g, fo);
  if (!plan.is_ok()) return report(plan.status());
  codegen::NodeGroups groups;
  for (const auto& grp : plan->groups) {
    groups.push_back(grp.nodes);
    o.group_reasons[grp.nodes.front()->name] = grp.reason;
  }
  o.plan_text = fusion::explain(*plan);
  if (a.explain) fmt::print("{}", o.plan_text);
  auto sched = codegen::build_schedule(**g, &groups);
  if (!sched.is_ok()) return report(sched.status().with_context(a.model));
  codegen::ArtifactSummary summary;
  Status st = codegen::write_artifact(**g, *sched, o, a.out, &summary);
  if (!st.is_ok()) return report(st);
  if (!a.report_json.empty()) {
    std::ofstream f(a.report_json);
    f << summary.report_json;
    if (!f) return report(Status::user(fmt::format("cannot write --report-json '{}'", a.report_json)));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& s = *sched;
  fmt::print("compiled {} -> {}\n", a.model, a.out);
  fmt::print("  steps: {} kernel launches, {} library calls, {} copies; {} view nodes need no step\n",
             s.kernels.size(), s.calls.size(),
             std::count_if(s.steps.begin(), s.steps.end(), [](const codegen::Step& x) { return x.kind == codegen::Step::kCopy; }),
             s.views);
  fmt::print("  memory: arena {} for {} intermediate buffers (sum {}, live peak {}, {} in place); weights {}\n",
             human_bytes(s.plan.arena_bytes), s.requests.size(), human_bytes(s.plan.total_bytes),
             human_bytes(s.plan.peak_live_bytes), s.plan.in_place, human_bytes(s.weights_bytes));
  if (o.run_nvcc) {
    int max_regs = 0, spills = 0;
    for (const auto& r : summary.resources) {
      max_regs = std::max(max_regs, r.registers);
      spills += r.spill_stores + r.spill_loads;
    }
    fmt::print("  nvcc ({}): {:.1f} s, {} kernel binaries, at most {} registers, {} bytes spilled\n",
               fmt::join(o.archs, ","), summary.nvcc_seconds, summary.resources.size(), max_regs, spills);
  } else {
    fmt::print("  nvcc: skipped (--no-nvcc); the artifact has sources only and cannot run on --backend cuda\n");
  }
  if (o.build_emu) fmt::print("  emulation library: {:.1f} s\n", summary.emu_seconds);
  fmt::print("  total {:.1f} s\n", secs);
  return 0;
}

}  // namespace stitch::cli
