#include "codegen/emu_build.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "codegen/build_tools.h"
#include "codegen/embedded_headers.h"
#include "stitch/artifact_format.h"

namespace stitch::codegen {
namespace fs = std::filesystem;

namespace {

// The emulation header, as the host compiler finds it on the include path.
constexpr const char* kEmuHeader = "stitch/emu/emu.h";

// `wrapper` (a header -include takes, its .gch beside it) when that .gch was made from the headers
// this stitchc carries: the digest the build wrote beside it is theirs. Otherwise none, and the
// emulation header is read itself.
std::optional<std::string> usable_precompiled_header(const std::string& wrapper) {
  if (wrapper.empty()) return std::nullopt;
  std::ifstream f(wrapper + ".gch.digest");
  std::string digest;
  std::error_code ec;
  if (!(f >> digest) || digest != embedded_headers_digest() || !fs::is_regular_file(wrapper + ".gch", ec))
    return std::nullopt;
  return wrapper;
}

bool has_cuda_headers(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "cuda_fp16.h", ec) && fs::is_regular_file(dir / "cuda_bf16.h", ec);
}

// The cache's name for a build of `unit` defining `kernels` by the host compiler `cxx`: see
// EmuBuildOptions::cache_dir.
std::string cache_key(const std::string& unit, const std::vector<const Kernel*>& kernels,
                      const std::string& cxx) {
  artifact::Checksum key;
  auto add = [&](std::string_view s) { key.update(s.data(), s.size() + 1); };  // with a separator
  add(unit);
  for (const Kernel* k : kernels) {
    add(k->name);
    add(k->source);
  }
  add(embedded_headers_digest());
  const std::string compiler = fmt::format("{} {}", tool_identity(cxx), STITCH_EMU_CXX_FLAGS);
  add(compiler);
  return fmt::format("{:016x}.so", key.digest());  // the entry's whole name
}

}  // namespace

StatusOr<std::string> find_host_cxx(const std::string& built_in) {
  if (const char* env = std::getenv("STITCH_HOST_CXX"); env && *env) {
    const std::string want = env;
    const std::string found = want.find('/') == std::string::npos ? on_path(want)
                              : executable(want)                  ? want
                                                                  : "";
    if (!found.empty()) return found;
    return Status::user(fmt::format(
        "STITCH_HOST_CXX is '{}', which is not {}: point it at a C++20 compiler (g++), or unset it to use {}",
        want, want.find('/') == std::string::npos ? "an executable on PATH" : "an executable file",
        built_in));
  }
  if (executable(built_in)) return built_in;
  for (const char* name : {"c++", "g++"})
    if (std::string found = on_path(name); !found.empty()) return found;
  return Status::user(
      fmt::format("the emu backend builds the kernels with a host C++ compiler, and there is none: {} (the "
                  "one stitchc was "
                  "built with) is gone and neither c++ nor g++ is on PATH; install g++, or set "
                  "STITCH_HOST_CXX to a C++20 "
                  "compiler",
                  built_in));
}

StatusOr<std::string> find_host_cxx() { return find_host_cxx(STITCH_HOST_CXX); }

StatusOr<std::string> find_cuda_include(const std::string& built_in) {
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) {
    const fs::path dir = fs::path(home) / "include";
    if (has_cuda_headers(dir)) return dir.string();
    return Status::user(fmt::format(
        "the emu backend includes the CUDA toolkit's cuda_fp16.h and cuda_bf16.h, which are not in {} (from "
        "CUDA_HOME): point CUDA_HOME at a CUDA toolkit",
        dir.string()));
  }
  for (const fs::path& dir : {fs::path(built_in), fs::path("/usr/local/cuda/include")})
    if (has_cuda_headers(dir)) return dir.string();
  return Status::user(fmt::format(
      "the emu backend includes the CUDA toolkit's cuda_fp16.h and cuda_bf16.h, and neither {} (the toolkit "
      "stitchc was built with) nor /usr/local/cuda/include has them: install the CUDA toolkit, or set "
      "CUDA_HOME",
      built_in));
}

StatusOr<std::string> find_cuda_include() { return find_cuda_include(STITCH_CUDA_INCLUDE_DIR); }

std::string default_emu_pch_header() {
  // Installed (cmake --install): PREFIX/lib/stitch/emu_pch, beside PREFIX/bin/stitchc.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed =
        exe.parent_path().parent_path() / STITCH_INSTALL_LIBDIR / "stitch" / "emu_pch" / kEmuHeader;
    if (fs::is_regular_file(installed, ec)) return installed.string();
  }
  return STITCH_EMU_PCH_HEADER;
}

void prefix_kernel_names(std::vector<Kernel>& kernels, const std::string& prefix) {
  for (Kernel& k : kernels) {
    std::string& src = k.source;
    for (size_t at = src.find(k.name); at != std::string::npos; at = src.find(k.name, at + prefix.size() + 1))
      src.insert(at, prefix);
    k.name = prefix + k.name;
  }
}

std::string emu_translation_unit(const std::string& code, const std::vector<const Kernel*>& kernels) {
  std::string src =
      "// The kernels for the CPU emulation layer: same sources, plus entry points by name.\n" + code;
  for (const Kernel* k : kernels) src += fmt::format("STITCH_EMU_EXPORT_KERNEL({});\n", k->name);
  return src;
}

StatusOr<EmuBuild> build_emu_library(const fs::path& unit_path, const std::string& unit,
                                     const std::vector<const Kernel*>& kernels, const fs::path& library,
                                     const EmuBuildOptions& o) {
  EmuBuild out;
  ASSIGN_OR_RETURN(const std::string cxx, find_host_cxx());
  ASSIGN_OR_RETURN(const std::string cuda_include, find_cuda_include());
  const char* user_cxx = std::getenv("STITCH_HOST_CXX");
  const auto t0 = std::chrono::steady_clock::now();
  auto took = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::error_code ec;
  const std::string key = o.cache_dir.empty() ? "" : cache_key(unit, kernels, cxx);
  if (!key.empty() && take_from_cache(o.cache_dir, key, {{"", library}})) {
    out.seconds = took();
    out.from_cache = true;
    return out;
  }
  // The emulation and device headers, for this build only.
  const fs::path include = unit_path.parent_path() / "include";
  RETURN_IF_ERROR(write_headers(include, ""));
  auto build = [&](const std::string& prelude, std::string* log) {
    std::vector<std::string> argv = {cxx};
    if (prelude != kEmuHeader) argv.push_back("-H");  // lists the headers: "! X.gch" when it took the .gch
    std::istringstream flags(STITCH_EMU_CXX_FLAGS);
    for (std::string f; flags >> f;) argv.push_back(f);
    argv.insert(argv.end(), {"-shared", "-w", "-include", prelude, "-I", include.string(), "-I",
                             (include / "stitch" / "device").string(), "-isystem", cuda_include, "-o",
                             library.string(), unit_path.string()});
    return run_command(argv, log);
  };
  std::string log;
  const std::optional<std::string> pch = usable_precompiled_header(o.pch.value_or(default_emu_pch_header()));
  int rc = -1;
  if (pch) {
    rc = build(*pch, &log);
    const std::string used = "! " + *pch + ".gch\n";
    out.precompiled_header =
        rc == 0 && (log.rfind(used, 0) == 0 || log.find("\n" + used) != std::string::npos);
  }
  // Without the precompiled header, or again without it when the build on it failed: a header
  // GCC cannot use is meant to be skipped, but a mismatch it does not detect can break the
  // compiler itself, and the header alone then tells a real error from that.
  if (rc != 0) {
    log.clear();
    rc = build(kEmuHeader, &log);
  }
  out.seconds = took();
  fs::remove_all(include, ec);
  if (rc != 0 && user_cxx && *user_cxx)
    return Status::user(
        fmt::format("building the emulation library with {} (from STITCH_HOST_CXX) failed (exit {}): it "
                    "needs a C++20 compiler "
                    "that takes GCC's flags ({}); unset STITCH_HOST_CXX to use {}:\n{}",
                    cxx, rc, STITCH_EMU_CXX_FLAGS, STITCH_HOST_CXX, log));
  if (rc != 0)
    return Status::internal(
        fmt::format("building the emulation library with {} failed (exit {}):\n{}", cxx, rc, log));
  if (!key.empty()) put_in_cache(o.cache_dir, key, {{"", library}});
  return out;
}

}  // namespace stitch::codegen
