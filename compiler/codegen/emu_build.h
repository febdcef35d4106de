// The emulation library of generated kernels: their CUDA sources compiled by the host compiler
// against the emulation headers (runtime/emu) into one shared library, in which the emu backend
// finds each kernel's entry point by the kernel's name. An artifact holds the library of its own
// kernels (emu/kernels_emu.so); one library can also hold the kernels of several artifacts whose
// kernel names differ (CompileOptions::emu_library), to pay the host compiler's fixed cost once.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "support/status.h"

namespace stitch::codegen {

struct EmuBuildOptions {
  // The precompiled emulation header, by the header -include names with its .gch beside it:
  // unset, default_emu_pch_header(); empty, none.
  std::optional<std::string> pch;
  // A directory of libraries already built, each named by a checksum of everything its build read:
  // the translation unit, the kernels' names and sources, the emulation and device headers
  // stitchc carries, and the host compiler (its path, size and time) with its flags. A build of
  // the same copies that library instead of running the host compiler, and a new build is added.
  // Processes may share one: a library enters it whole, by a rename.
  std::string cache_dir;
};

struct EmuBuild {
  double seconds = 0;
  bool precompiled_header = false;  // the host compiler took the precompiled header
  bool from_cache = false;          // copied from EmuBuildOptions::cache_dir
};

// The host C++ compiler that builds emulation libraries: $STITCH_HOST_CXX when set (a path, or a
// name looked up on PATH; the user's choice, with no fallback), else the compiler stitchc was
// built with while it is there, else c++ or g++ on PATH. A user error saying what to install or
// set when there is none. `built_in` replaces the build's compiler (for tests).
StatusOr<std::string> find_host_cxx();
StatusOr<std::string> find_host_cxx(const std::string& built_in);

// The CUDA toolkit's headers the emulation build includes (cuda_fp16.h, cuda_bf16.h):
// $CUDA_HOME/include when CUDA_HOME is set (no fallback, as for nvcc), else the build's toolkit
// while it is there, else /usr/local/cuda/include. A user error when none has them. `built_in`
// replaces the build's (for tests).
StatusOr<std::string> find_cuda_include();
StatusOr<std::string> find_cuda_include(const std::string& built_in);

// The precompiled emulation header stitchc uses unless told (the wrapper that -include takes): the
// one installed beside it (PREFIX/lib/stitch/emu_pch), else the build tree's. Either is used only
// when made from the headers this stitchc carries (codegen/embedded_headers.h).
std::string default_emu_pch_header();

// Gives every kernel of `kernels` the name `prefix` + its name, in its source too, so that kernels
// of several schedules can share one library (CompileOptions::emu_library) or one nvcc run.
void prefix_kernel_names(std::vector<Kernel>& kernels, const std::string& prefix);

// The translation unit of an emulation library: `code`, which defines `kernels` (their sources, or
// #includes of them), and an entry point for each kernel by its name.
std::string emu_translation_unit(const std::string& code, const std::vector<const Kernel*>& kernels);

// Builds `library` from the translation unit `unit` (emu_translation_unit's text), which the
// caller has written at `unit_path`. The emulation and device headers are written beside it under
// include/ for the build and removed after it; the kernels find stitch_device.cuh on that path.
// `kernels` are those the unit defines (for the cache's key). The host compiler and the CUDA
// headers are found at run time (find_host_cxx, find_cuda_include), so that an installed stitchc
// can move between machines. An internal error, with the host compiler's output, when the build
// fails; a user error when the compiler was the user's ($STITCH_HOST_CXX).
StatusOr<EmuBuild> build_emu_library(const std::filesystem::path& unit_path, const std::string& unit,
                                     const std::vector<const Kernel*>& kernels,
                                     const std::filesystem::path& library, const EmuBuildOptions& o);

}  // namespace stitch::codegen
