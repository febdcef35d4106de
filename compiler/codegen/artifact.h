// The artifact writer: schedule + kernels -> the artifact directory of DESIGN.md
// (docs/artifact-format.md). Writes into a temporary sibling directory and renames it into
// place at the end, so a failed compile leaves no partial output.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/emu_build.h"
#include "codegen/schedule.h"

namespace stitch::codegen {

struct CompileOptions {
  std::vector<std::string> archs{"sm_90"};  // sm_XY for each target
  bool run_nvcc = true;                      // false: emit sources only (--no-nvcc)
  bool build_emu = true;                     // build the emulation library for --backend emu
  std::string fusion = "none";
  std::string model_path;                    // for the manifest
  std::vector<std::string> shape_bindings;   // as given on the command line
  std::string plan_text;                     // the fusion plan explained (written as plan.txt)
  std::map<std::string, std::string> group_reasons;  // first node of a group -> why it is so
  // The emulation library's build (codegen/emu_build.h): its precompiled header
  // (EmuBuildOptions::pch) and a cache of libraries built before (EmuBuildOptions::cache_dir).
  std::optional<std::string> emu_pch;
  std::string emu_cache_dir;
  // A cache of nvcc's builds (`stitchc compile --build-cache DIR`, DIR/nvcc): the fatbin and log of
  // the same kernel sources built before by the same nvcc with the same arguments, copied in place
  // of a run; a new build is added (codegen/build_tools.h, put_in_cache).
  std::string nvcc_cache_dir;
  // An emulation library built before (build_emu_library) that defines every kernel of the
  // schedule under its name, and perhaps other artifacts' kernels: copied into the artifact in
  // place of a build.
  std::string emu_library;
  // float32 GEMM and convolution calls on TF32 tensor cores (--tf32), written into schedule.json;
  // by default they compute in float32.
  bool tf32 = false;
};

// ptxas's resource use of one kernel for one arch.
struct KernelResources {
  std::string kernel, arch;
  int registers = 0, spill_stores = 0, spill_loads = 0, smem_bytes = 0, stack_bytes = 0;
};

struct ArtifactSummary {
  std::vector<KernelResources> resources;
  double nvcc_seconds = 0, emu_seconds = 0;
  bool emu_precompiled_header = false;  // the emulation library built on the precompiled header
  bool emu_from_cache = false;          // the emulation library copied from CompileOptions::emu_cache_dir
  bool nvcc_from_cache = false;         // the fatbin copied from CompileOptions::nvcc_cache_dir
  std::string report_json;  // report.json's text
};

// Finds nvcc: $CUDA_HOME/bin/nvcc when CUDA_HOME is set (and nowhere else), else PATH, then
// /usr/local/cuda/bin/nvcc.
StatusOr<std::string> find_nvcc();

// Parses `nvcc -Xptxas -v` output into per-kernel resources.
std::vector<KernelResources> parse_ptxas(const std::string& log);

// A schedule's kernels through nvcc ahead of the artifact (`stitchc compile` reads ptxas's report to
// decide whether the plan stands, and builds the artifact once, from the round that stands). The
// fatbin and nvcc's log sit in a scratch directory beside the artifact's, removed with this object.
struct KernelBuild {
  KernelBuild() = default;
  KernelBuild(KernelBuild&& o) noexcept { *this = std::move(o); }
  KernelBuild& operator=(KernelBuild&& o) noexcept;
  KernelBuild(const KernelBuild&) = delete;
  KernelBuild& operator=(const KernelBuild&) = delete;
  ~KernelBuild();

  std::vector<KernelResources> resources;
  double seconds = 0;       // nvcc's run
  bool from_cache = false;  // copied from CompileOptions::nvcc_cache_dir instead
  std::string log;          // nvcc's output with -Xptxas -v
  std::string dir;     // the scratch directory: kernels/ with the sources, and the fatbin
  // Each kernel source's checksum, by its path in the artifact: write_artifact refuses a build of
  // other sources than the schedule it writes.
  std::map<std::string, uint64_t> sources;
};

// Runs nvcc on the kernels of `s` for o.archs, in a scratch directory beside `dir` (the artifact's,
// which must be free for one as write_artifact requires). nvcc's errors as write_artifact gives them.
StatusOr<KernelBuild> build_kernels(const Graph& g, const Schedule& s, const CompileOptions& o,
                                    const std::string& dir);

// Writes the artifact of `s` into `dir`. With o.run_nvcc, its fatbin is `built`'s when given (a
// build of the same kernel sources, else an internal error), or nvcc's run now.
Status write_artifact(const Graph& g, const Schedule& s, const CompileOptions& o, const std::string& dir,
                      ArtifactSummary* summary, const KernelBuild* built = nullptr);

}  // namespace stitch::codegen
