// stitchc compile: ONNX model -> artifact directory (schedule, kernels, weights, binaries, report).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "cli/common.h"
#include "cli/subcommands.h"
#include "codegen/artifact.h"
#include "codegen/build_tools.h"
#include "codegen/lower.h"
#include "codegen/schedule.h"
#include "codegen/stitch.h"
#include "fusion/plan.h"
#include "fusion/rewrites.h"
#include "importer/onnx_importer.h"

namespace stitch::cli {
namespace {

// Splits kernel `k` at the next plan, as a budget checked after planning asks: a packed kernel's
// groups are no longer packed, another kernel's nodes are kept apart. What was done, or nothing
// when the same was asked before.
std::optional<std::string> keep_kernel_apart(const codegen::Kernel& k, fusion::FusionOptions& fo) {
  std::set<std::string> names;
  for (const Node* n : k.nodes) names.insert(n->name);
  const bool packed = k.name.find("_pack") != std::string::npos;
  if (packed ? std::includes(fo.no_pack.begin(), fo.no_pack.end(), names.begin(), names.end())
             : std::find(fo.keep_apart.begin(), fo.keep_apart.end(), names) != fo.keep_apart.end())
    return std::nullopt;
  if (packed)
    fo.no_pack.insert(names.begin(), names.end());
  else
    fo.keep_apart.push_back(names);
  return packed ? "its groups are no longer packed" : "its nodes are kept apart";
}

// Fused kernels of `sched` whose code computes their nodes more than `budget` times
// (codegen::Kernel::evaluations) are planned again with fewer copies, each with a line in
// `replans`. Copies multiply where a value is read at other positions than its readers' own (a
// resampling's taps): the most copied node with readers copied fewer times is kept apart from
// those readers, so that it is stored once and read. A kernel without such a node (or packed
// parts, each within the budget) is split as ptxas's re-plans split (keep_kernel_apart). Whether
// any kernel was.
bool keep_large_kernels_apart(const codegen::Schedule& sched, int64_t budget, fusion::FusionOptions& fo,
                              std::vector<std::string>& replans) {
  const size_t before = replans.size();
  for (const codegen::Kernel& k : sched.kernels) {
    if (k.evaluations <= budget || k.nodes.size() < 2) continue;
    auto copies = [&](const Node* n) {
      auto it = k.node_evaluations.find(n);
      return it == k.node_evaluations.end() ? int64_t{0} : it->second;
    };
    // The kernel's readers of each node's value, through views (which compute nothing).
    auto readers = [&](const Node* p) {
      std::vector<const Node*> out;
      std::vector<const Value*> values(p->outputs.begin(), p->outputs.end());
      for (size_t i = 0; i < values.size(); ++i)
        for (const Node* r : k.nodes)
          if (values[i] && std::find(r->inputs.begin(), r->inputs.end(), values[i]) != r->inputs.end()) {
            if (codegen::stitch_role(*r) == codegen::StitchRole::kView)
              values.push_back(r->output(0));
            else if (std::find(out.begin(), out.end(), r) == out.end())
              out.push_back(r);
          }
      return out;
    };
    const Node* most = nullptr;
    std::vector<const Node*> cut;
    for (const Node* p : k.nodes) {
      if (most && copies(p) <= copies(most)) continue;
      std::vector<const Node*> fewer;
      for (const Node* r : readers(p))
        if (copies(r) < copies(p)) fewer.push_back(r);
      if (fewer.empty()) continue;
      most = p;
      cut = fewer;
    }
    if (most) {
      std::vector<std::set<std::string>> pairs;
      for (const Node* r : cut)
        if (std::set<std::string> pair{most->name, r->name};
            std::find(fo.keep_apart.begin(), fo.keep_apart.end(), pair) == fo.keep_apart.end())
          pairs.push_back(pair);
      if (!pairs.empty()) {
        fo.keep_apart.insert(fo.keep_apart.end(), pairs.begin(), pairs.end());
        replans.push_back(fmt::format(
            "kernel {} ({} nodes) computes its nodes {} times in its code, over --max-evaluations {}: {} is "
            "computed {} times, more than {} reader{} in the kernel; it is kept apart from {}",
            k.name, k.nodes.size(), k.evaluations, budget, most->describe(), copies(most),
            cut.size() == 1 ? "its" : fmt::format("{} of its", cut.size()), cut.size() == 1 ? "" : "s",
            cut.size() == 1 ? "it" : "them"));
        continue;
      }
    }
    if (const std::optional<std::string> done = keep_kernel_apart(k, fo))
      replans.push_back(fmt::format(
          "kernel {} ({} nodes) computes its nodes {} times in its code, over --max-evaluations {}: {}",
          k.name, k.nodes.size(), k.evaluations, budget, *done));
  }
  return replans.size() != before;
}

}  // namespace

int run_compile(const CompileArgs& a) {
  namespace fs = std::filesystem;
  auto t0 = std::chrono::steady_clock::now();
  codegen::CompileOptions o;
  o.archs.clear();
  std::stringstream ss(a.arch);
  for (std::string arch; std::getline(ss, arch, ',');)
    if (!arch.empty()) o.archs.push_back(arch);
  if (o.archs.empty()) return report(Status::user("--arch needs at least one target, for example sm_90"));
  o.run_nvcc = !a.no_nvcc;
  o.build_emu = !a.no_emu;
  if (!(a.build_cache_max_mb > 0))
    return report(Status::user("--build-cache-max-size must be more than 0 MB"));
  if (!a.build_cache.empty()) {
    std::error_code ec;
    fs::create_directories(a.build_cache, ec);
    if (!fs::is_directory(a.build_cache, ec) || access(a.build_cache.c_str(), W_OK) != 0)
      return report(Status::user(fmt::format(
          "--build-cache '{}': not a directory stitchc can write; give a writable directory, or leave it out",
          a.build_cache)));
    o.nvcc_cache_dir = (fs::path(a.build_cache) / "nvcc").string();
    o.emu_cache_dir = (fs::path(a.build_cache) / "emu").string();
  }
  o.fusion = a.fusion;
  o.model_path = a.model;
  o.shape_bindings = a.shapes;

  auto g = import_onnx_file(a.model, {a.constant_inputs});
  if (!g.is_ok()) return report(g.status());
  Status prepared = prepare_model(**g, a.model, a.shapes, {}, a.dump_dir, a.conv_transpose);
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
  fo.beam_width = a.beam_width;
  fo.horizontal = !a.no_pack;
  fo.approximate_gelu = a.approximate_gelu;
  fo.stitch_matmul = !a.no_stitch_matmul;
  fo.work_limit = a.plan_budget;
  fo.time_limit_s = a.plan_time_limit;
  {
    // The cost model's device: a spec file, a named arch, or the newest --arch target.
    // Without --device-spec: sm_90 for sm_90 and newer targets, sm_80 below (the --arch value itself
    // is validated with the artifact).
    const std::string newest = *std::max_element(o.archs.begin(), o.archs.end());
    const std::string spec = !a.device_spec.empty() ? a.device_spec : (newest < "sm_90" && newest.rfind("sm_", 0) == 0 ? "sm_80" : "sm_90");
    auto dev = spec.find(".json") != std::string::npos ? fusion::load_device_spec(spec) : fusion::device_spec(spec);
    if (!dev.is_ok()) return report(dev.status());
    fo.device = *dev;
    fo.device.tf32 = a.tf32;
  }
  o.tf32 = a.tf32;
  if (a.max_registers < 16 || a.max_registers > 255)
    return report(Status::user(fmt::format("--max-registers {}: give a per-thread budget from 16 to 255", a.max_registers)));
  if (a.max_evaluations < 1)
    return report(
        Status::user(fmt::format("--max-evaluations {}: give a count of at least 1", a.max_evaluations)));
  // Plan, build, and check ptxas's report against the budget: a fused kernel that spills or uses
  // more than --max-registers is planned again with its nodes kept apart (a packed one with its
  // groups unpacked first), at most kMaxReplans times. Before that, and with --no-nvcc too, a fused
  // kernel whose code computes its nodes more than --max-evaluations times is planned again
  // (keep_large_kernels_apart), at most kMaxReplans times: chains of reads at other positions
  // (resamplings' taps through gathers) multiply the copies of the values before them, and nvcc's
  // time with them (seg_small's resamplings: 2809 evaluations and 370 KB of source in one kernel;
  // the largest kernel of the other shipped models has 379).
  // The unfused baseline of --report-json is the graph as imported; then the rewrites before
  // planning (fusion/rewrites.h: GroupNorms with their channels apart, Gemms as MatMuls, flattened GEMMs
  // unflattened, constant scales
  // folded into GEMM weights, sibling GEMMs merged, Splits and constant Gathers as Slices, shared relayouts
  // copied per reader, row scales and LayerNorms past GEMMs, graph outputs computed again for their readers),
  // each named in the plan.
  const fusion::FusionPlan none_plan = fusion::plan_none(**g, fo);
  fusion::RewriteSwitches switches;
  switches.gemms_as_matmuls = !a.no_gemms_as_matmuls;
  switches.merge_gemms = !a.no_merge_gemms;
  switches.unflatten_gemms = !a.no_unflatten_gemms;
  switches.fold_scales = !a.no_fold_scales;
  switches.split_slices = !a.no_split_slices;
  switches.all_expert_gemms = !a.no_all_expert_gemms;
  switches.expert_sums = !a.no_expert_sums;
  switches.topk_rounds = !a.no_topk_rounds;
  switches.short_reductions = !a.no_short_reductions;
  switches.short_maxima = !a.no_short_reductions;
  switches.pool_taps = !a.no_pool_taps;
  switches.shared_duplicates = !a.no_shared_duplicates;
  switches.arg_reductions = !a.no_arg_reductions;
  switches.relayout_copies = !a.no_relayout_copies;
  switches.output_copies = !a.no_output_copies;
  switches.hoist_row_scales = !a.no_hoist_row_scales;
  switches.hoist_layer_norms = !a.no_hoist_layer_norms;
  switches.split_group_norms = !a.no_split_group_norms;
  switches.split_head_rows = !a.no_split_head_rows;
  // Planning time: the rewrites (each judged one plans the graph with it and without) and the plan.
  const auto rewrite_start = std::chrono::steady_clock::now();
  const int64_t computed_before = Tensor::deferred_computed();
  int64_t computed_while_planning = 0;  // deferred weights (ir/tensor.h): planning reads shapes
  auto rewrites = fusion::rewrite_for_planning(*g, fo, switches);
  if (!rewrites.is_ok()) return report(rewrites.status().with_context(a.model));
  const double rewrite_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - rewrite_start).count();
  constexpr int kMaxReplans = 3;
  StatusOr<fusion::FusionPlan> plan = Status::internal("not planned");
  StatusOr<codegen::Schedule> sched = Status::internal("not scheduled");
  codegen::ArtifactSummary summary;
  std::vector<std::string> replans, code_replans;
  codegen::RegisterRoom room;
  room.registers = a.max_registers;
  // nvcc's build of the round that stands: the artifact (weights, emulation library) is written
  // once, after the last round, with it. Every nvcc run's seconds, for the summary.
  std::optional<codegen::KernelBuild> built;
  double nvcc_seconds = 0;
  int nvcc_runs = 0;
  // Rounds re-planned for ptxas and for code size, each at most kMaxReplans. A round that only
  // gives kernels room for the budget keeps its plan: the options the plan depends on are the same.
  int ptxas_rounds = 0, code_rounds = 0;
  // The budget is for occupancy: a kernel over it that does not spill, whose every block the
  // device holds at once at the registers it uses, would run no more of its blocks at a time
  // with fewer, so it is kept as it is. The device is the cost model's for its own arch, and the
  // built-in spec of another --arch target's (an A100's 108 SMs for sm_80 beside an sm_90 spec).
  auto device_of = [&](const std::string& arch) {
    if (arch == fo.device.arch) return fo.device;
    auto builtin = fusion::device_spec(arch);
    return builtin.is_ok() ? *builtin : fo.device;
  };
  auto limits = [](const fusion::DeviceSpec& d) {
    return codegen::SmLimits{d.regs_per_sm, d.max_threads_per_sm, d.smem_per_sm};
  };
  auto resident = [&](const codegen::Kernel& k, const codegen::KernelResources& r) {
    const fusion::DeviceSpec d = device_of(r.arch);
    return codegen::grid_resident(k, r.registers, d.sms, limits(d));
  };
  // The fused kernel of this round's schedule that ptxas reported on: none for a single node's
  // kernel, which no re-plan can split.
  auto fused_kernel = [&](const codegen::KernelResources& r) -> const codegen::Kernel* {
    auto k = std::find_if(sched->kernels.begin(), sched->kernels.end(),
                          [&](const auto& x) { return x.name == r.kernel; });
    return k == sched->kernels.end() || k->nodes.size() < 2 ? nullptr : &*k;
  };
  bool plan_again = true;
  for (int round = 0;; ++round) {
    // The last judged rewrite's plan of the graph as it stands, when there is one (the options are
    // the same until ptxas asks for a re-plan).
    if (plan_again) {
      const auto plan_start = std::chrono::steady_clock::now();
      if (round == 0 && rewrites->plan)
        plan = *rewrites->plan;
      else
        plan = fusion::make_plan(**g, fo);
      if (!plan.is_ok()) return report(plan.status());
      if (round == 0) computed_while_planning = Tensor::deferred_computed() - computed_before;
      plan->rewrite_seconds = rewrite_seconds;
      plan->plan_seconds =
          rewrite_seconds +
          std::chrono::duration<double>(std::chrono::steady_clock::now() - plan_start).count();
    }
    codegen::NodeGroups groups;
    std::vector<int> packs;
    o.group_reasons.clear();
    for (const auto& grp : plan->groups) {
      groups.push_back(grp.nodes);
      packs.push_back(grp.pack);
      o.group_reasons[grp.nodes.front()->name] = grp.reason;
    }
    o.plan_text.clear();
    for (const std::string& line : (*g)->import_log) o.plan_text += "decided at import: " + line + "\n";
    o.plan_text += rewrites->text();
    o.plan_text += fusion::explain(*plan);
    for (const std::string& r : code_replans) o.plan_text += "re-planned for code size: " + r + "\n";
    for (const std::string& r : replans) o.plan_text += "re-planned after ptxas: " + r + "\n";
    sched = codegen::build_schedule(**g, &groups, &packs, plan->gemm_folds, &room);
    if (!sched.is_ok()) return report(sched.status().with_context(a.model));
    if (code_rounds < kMaxReplans && keep_large_kernels_apart(*sched, a.max_evaluations, fo, code_replans)) {
      ++code_rounds;
      plan_again = true;
      continue;
    }
    if (!o.run_nvcc) break;
    auto build = codegen::build_kernels(**g, *sched, o, a.out);
    if (!build.is_ok()) return report(build.status());
    built = std::move(*build);
    nvcc_seconds += built->seconds;
    ++nvcc_runs;
    if (ptxas_rounds++ == kMaxReplans) break;
    const size_t before = replans.size();
    plan_again = false;
    for (const auto& r : built->resources) {
      const int spilled = r.spill_stores + r.spill_loads;
      if (spilled == 0 && r.registers <= a.max_registers) continue;
      const codegen::Kernel* k = fused_kernel(r);
      if (k == nullptr) continue;
      if (spilled == 0 && resident(*k, r)) continue;  // kept: noted after the last round
      std::set<std::string> names;
      for (const Node* n : k->nodes) names.insert(n->name);
      // Spilled below the budget: ptxas aimed at more resident blocks than the kernel fits. Room
      // for the budget first (the same kernel, declared with fewer blocks per SM); split after.
      const std::optional<int64_t> min_blocks = codegen::register_room(*k, a.max_registers);
      if (spilled > 0 && r.registers < a.max_registers && min_blocks &&
          std::find(room.kernels.begin(), room.kernels.end(), names) == room.kernels.end()) {
        room.kernels.push_back(names);
        replans.push_back(
            fmt::format("kernel {} ({} nodes) used {} registers and spilled {} bytes on {} (budget {} "
                        "registers, no spills): compiled again with room for {} registers "
                        "(__launch_bounds__({}, {}))",
                        r.kernel, names.size(), r.registers, spilled, r.arch, a.max_registers,
                        a.max_registers, k->block[0], *min_blocks));
        continue;
      }
      if (const std::optional<std::string> done = keep_kernel_apart(*k, fo)) {
        replans.push_back(
            fmt::format("kernel {} ({} nodes) used {} registers and spilled {} bytes on {} (budget {} "
                        "registers, no spills): {}",
                        r.kernel, names.size(), r.registers, spilled, r.arch, a.max_registers, *done));
        plan_again = true;
      }
    }
    if (replans.size() == before) break;
  }
  // The kernels of the artifact kept over the register budget, each with why.
  std::vector<std::string> kept;
  const std::vector<codegen::KernelResources> no_resources;
  for (const auto& r : built ? built->resources : no_resources) {
    if (r.spill_stores + r.spill_loads > 0 || r.registers <= a.max_registers) continue;
    const codegen::Kernel* k = fused_kernel(r);
    if (k == nullptr || !resident(*k, r)) continue;
    const fusion::DeviceSpec d = device_of(r.arch);
    const int64_t blocks = k->grid[0] * k->grid[1] * k->grid[2];
    kept.push_back(fmt::format(
        "kernel {} ({} nodes) uses {} registers on {} (budget {} registers) without spilling: kept, since "
        "its {} "
        "{} of {} threads are resident at once on the {} SM{} of {} at that count ({} per SM), and fewer "
        "registers would not run more of them at a time",
        r.kernel, k->nodes.size(), r.registers, r.arch, a.max_registers, blocks,
        blocks == 1 ? "block" : "blocks", k->block[0] * k->block[1] * k->block[2], d.sms,
        d.sms == 1 ? "" : "s", d.name, codegen::resident_blocks_per_sm(*k, r.registers, limits(d))));
  }
  for (const std::string& r : kept) o.plan_text += "kept after ptxas: " + r + "\n";
  // The kernels whose lanes exchange values: the plan computes those values once per element.
  for (const codegen::Kernel& k : sched->kernels)
    if (k.lane_exchanges > 0)
      o.plan_text += fmt::format(
          "lanes exchange values: kernel {} ({} nodes, from {}) reads {} values at other elements of its "
          "tiles from the lanes that computed them (warp shuffles); its code computes its nodes {} times\n",
          k.name, k.nodes.size(), k.nodes.front()->describe(), k.lane_exchanges, k.evaluations);
  Status st = codegen::write_artifact(**g, *sched, o, a.out, &summary, built ? &*built : nullptr);
  if (!st.is_ok()) return report(st);
  // The build cache kept to its size, the entries least recently added or used going first.
  uint64_t pruned = 0;
  if (!a.build_cache.empty())
    pruned =
        codegen::prune_build_cache(a.build_cache, static_cast<uint64_t>(a.build_cache_max_mb * 1024 * 1024));
  if (a.explain) fmt::print("{}", o.plan_text);
  if (!a.report_json.empty()) {
    nlohmann::json rep = nlohmann::json::parse(summary.report_json);
    auto side = [](const fusion::FusionPlan& p) {
      return nlohmann::json{{"planner", p.mode},
                            {"kernel_launches", p.cost.kernels},
                            {"library_calls", p.cost.library_calls},
                            {"launches", p.cost.launches},
                            {"estimated_bytes_moved", p.cost.bytes},
                            {"estimated_library_bytes", p.cost.library_bytes},
                            {"estimated_time_us", p.cost.time * 1e6},
                            {"groups", p.groups.size()},
                            {"packs", p.packs.size()}};
    };
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& grp : plan->groups) {
      if (grp.nodes.size() < 2) continue;
      nlohmann::json names = nlohmann::json::array();
      for (const Node* n : grp.nodes) names.push_back(n->name);
      groups.push_back({{"scheme", grp.scheme}, {"pack", grp.pack}, {"nodes", names}, {"mapping", grp.mapping},
                        {"estimated_time_us", grp.cost.time * 1e6}, {"unfused_time_us", grp.unfused.time * 1e6},
                        {"estimated_bytes", grp.cost.bytes}, {"unfused_bytes", grp.unfused.bytes}});
    }
    // The rewrites kept by their estimate: what each compared, and its lines when kept.
    auto rewrite = [](const fusion::RewriteResult& r) {
      return nlohmann::json{{"applied", !r.lines.empty()}, {"verdict", r.verdict}, {"lines", r.lines}};
    };
    rep["fusion"] = {{"device", plan->device},
                     {"ptxas_replans", replans},
                     {"ptxas_kept", kept},
                     {"nvcc_runs", nvcc_runs},
                     {"nvcc_seconds_all_runs", nvcc_seconds},
                     {"code_size_replans", code_replans},
                     {"plan_seconds", plan->plan_seconds},
                     {"rewrite_seconds", plan->rewrite_seconds},
                     {"weights_computed_while_planning", computed_while_planning},
                     {"plan_steps", plan->work},
                     {"budget_spent", plan->budget_spent},
                     {"timed_out", plan->timed_out},
                     {"chosen", side(*plan)},
                     {"none", side(none_plan)},
                     {"merged_gemms", rewrites->merges},
                     {"folded_scales", rewrites->scale_folds},
                     {"split_group_norms", rewrites->group_norms},
                     {"split_head_rows", rewrites->head_rows},
                     {"fused_groups", groups},
                     {"fine_grained_matmuls", plan->contraction_note},
                     {"tiled_gemms_not_used", plan->tiled_notes},
                     {"gemms_as_matmuls", rewrite(rewrites->gemms)},
                     {"split_to_slices", rewrite(rewrites->slices)},
                     {"relayout_copies", rewrite(rewrites->copies)},
                     {"output_copies", rewrite(rewrites->outputs)},
                     {"hoist_row_scales", rewrite(rewrites->hoists)},
                     {"hoist_layer_norms", rewrite(rewrites->norm_hoists)},
                     {"all_expert_gemms", rewrite(rewrites->experts)},
                     {"expert_sums", rewrite(rewrites->expert_sums)},
                     {"arg_reductions", rewrite(rewrites->args)},
                     {"short_reductions", rewrite(rewrites->short_sums)},
                     {"pool_taps", rewrite(rewrites->pools)},
                     {"topk_rounds", rewrite(rewrites->topks)},
                     {"short_maxima", rewrite(rewrites->short_maxima)},
                     {"shared_duplicates", rewrite(rewrites->duplicates)}};
    std::ofstream f(a.report_json);
    f << rep.dump(2) << "\n";
    if (!f) return report(Status::user(fmt::format("cannot write --report-json '{}'", a.report_json)));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& s = *sched;
  fmt::print("compiled {} -> {}\n", a.model, a.out);
  const auto gemm_kernels = std::count_if(s.kernels.begin(), s.kernels.end(), codegen::is_gemm_kernel);
  fmt::print(
      "  steps: {} kernel launches ({} memory-intensive, {} GEMMs as loops or tiles with their epilogues), "
      "{} library calls, {} copies; {} view nodes and {} nodes taken over by GEMM calls need no step\n",
      s.kernels.size(), static_cast<int64_t>(s.kernels.size()) - gemm_kernels, gemm_kernels, s.calls.size(),
      std::count_if(s.steps.begin(), s.steps.end(),
                    [](const codegen::Step& x) { return x.kind == codegen::Step::kCopy; }),
      s.views, s.folded);
  fmt::print("  memory: arena {} for {} intermediate buffers (sum {}, live peak {}, {} in place); weights {}\n",
             human_bytes(s.plan.arena_bytes), s.requests.size(), human_bytes(s.plan.total_bytes),
             human_bytes(s.plan.peak_live_bytes), s.plan.in_place, human_bytes(s.weights_bytes));
  if (o.run_nvcc) {
    int max_regs = 0, spills = 0;
    for (const auto& r : summary.resources) {
      max_regs = std::max(max_regs, r.registers);
      spills += r.spill_stores + r.spill_loads;
    }
    fmt::print("  nvcc ({}): {:.1f} s{}{}, {} kernel binaries, at most {} registers, {} bytes spilled\n",
               fmt::join(o.archs, ","), summary.nvcc_seconds,
               summary.nvcc_from_cache ? " (from the build cache)" : "",
               nvcc_runs > 1 ? fmt::format(" ({} runs, {:.1f} s in all)", nvcc_runs, nvcc_seconds) : "",
               summary.resources.size(), max_regs, spills);
  } else {
    fmt::print("  nvcc: skipped (--no-nvcc); the artifact has sources only and cannot run on --backend cuda\n");
  }
  for (const std::string& r : code_replans) fmt::print("  re-planned for code size: {}\n", r);
  for (const std::string& r : replans) fmt::print("  re-planned after ptxas: {}\n", r);
  for (const std::string& r : kept) fmt::print("  kept after ptxas: {}\n", r);
  if (o.build_emu)
    fmt::print("  emulation library: {:.1f} s{}\n", summary.emu_seconds,
               summary.emu_from_cache           ? " (from the build cache)"
               : summary.emu_precompiled_header ? ""
                                                : " (without the precompiled emulation header)");
  if (pruned > 0)
    fmt::print("  build cache: {} of older entries removed to keep it within --build-cache-max-size {} MB\n",
               human_bytes(static_cast<int64_t>(pruned)), a.build_cache_max_mb);
  fmt::print("  total {:.1f} s\n", secs);
  return 0;
}


int run_calibrate(const CalibrateArgs& a) {
  std::ifstream f(a.measurements);
  if (!f) return report(Status::user(fmt::format("{}: cannot read the measurements file", a.measurements)));
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("arch") || !j["arch"].is_string() || !j.contains("measurements") ||
      !j["measurements"].is_array())
    return report(Status::user(fmt::format(
        "{}: expected {{\"arch\": \"sm_90\", \"measurements\": [{{\"bytes\": B, \"launches\": L, \"seconds\": T}}, ...]}}",
        a.measurements)));
  auto base = fusion::device_spec(j["arch"].get<std::string>());
  if (!base.is_ok()) return report(base.status());
  std::vector<fusion::Measurement> ms;
  for (const auto& m : j["measurements"]) {
    if (!m.is_object() || !m.contains("bytes") || !m.contains("seconds") || !m["bytes"].is_number() ||
        !m["seconds"].is_number() || (m.contains("launches") && !m["launches"].is_number_integer()))
      return report(Status::user(fmt::format(
          "{}: measurement {} needs numeric \"bytes\" and \"seconds\" (and an integer \"launches\" if given)",
          a.measurements, ms.size())));
    ms.push_back({m["bytes"].get<int64_t>(), m.value("launches", 1), m["seconds"].get<double>()});
  }
  auto spec = fusion::calibrate(*base, ms);
  if (!spec.is_ok()) return report(spec.status().with_context(a.measurements));
  // Optional: tiled GEMM kernels' times, for tiled_gemm_eff (fitted after launch and bw_eff).
  std::vector<fusion::TiledMeasurement> tiled;
  if (j.contains("tiled_gemms")) {
    if (!j["tiled_gemms"].is_array())
      return report(Status::user(fmt::format("{}: \"tiled_gemms\" must be an array", a.measurements)));
    for (const auto& m : j["tiled_gemms"]) {
      if (!m.is_object() || !m.contains("flops") || !m.contains("bytes") || !m.contains("seconds") ||
          !m["flops"].is_number() || !m["bytes"].is_number() || !m["seconds"].is_number())
        return report(Status::user(
            fmt::format("{}: tiled GEMM measurement {} needs numeric \"flops\", \"bytes\" and \"seconds\"",
                        a.measurements, tiled.size())));
      tiled.push_back({m["flops"].get<double>(), m["bytes"].get<int64_t>(), m["seconds"].get<double>()});
    }
    spec = fusion::calibrate_tiled(*spec, tiled);
    if (!spec.is_ok()) return report(spec.status().with_context(a.measurements));
  }
  std::ofstream out(a.out);
  out << fusion::device_spec_json(*spec);
  if (!out) return report(Status::user(fmt::format("cannot write '{}'", a.out)));
  fmt::print("calibrated {}: launch {:.2f} us, bandwidth efficiency {:.3f} of {:.0f} GB/s{} -> {}\n",
             spec->arch, spec->launch * 1e6, spec->bw_eff, spec->dram_bw / 1e9,
             tiled.empty() ? "" : fmt::format(", tiled GEMM efficiency {:.3f}", spec->tiled_gemm_eff), a.out);
  return 0;
}

}  // namespace stitch::cli
