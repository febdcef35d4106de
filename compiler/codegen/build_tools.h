// What the artifact writer and the emulation build share: running the toolchain (nvcc, the host
// compiler) and writing files and the headers stitchc carries.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/status.h"

namespace stitch::codegen {

// Runs argv (through /bin/sh with quoted words), capturing stdout and stderr together into
// `output`; the exit status, or -1 when it could not run or did not exit.
int run_command(const std::vector<std::string>& argv, std::string* output);

// Whether `p` is a regular file this process may execute.
bool executable(const std::filesystem::path& p);

// `name` in the first directory of $PATH that has it as an executable file; "" when none does.
std::string on_path(const std::string& name);

// What identifies a tool for a build cache's key: its path and the resolved file's path, size and
// time, so that an upgrade that keeps the path builds anew.
std::string tool_identity(const std::string& tool);

// A build cache (EmuBuildOptions::cache_dir, CompileOptions::nvcc_cache_dir): files named by a
// checksum of everything their build read. take_from_cache copies `dir`/`key``suffix` to each
// destination and says whether all were there; put_in_cache copies the files in, each under a name
// of its own first and then renamed, so that processes sharing the directory see it whole or not
// at all. A cache that cannot be written is skipped.
bool take_from_cache(const std::filesystem::path& dir, const std::string& key,
                     const std::vector<std::pair<std::string, std::filesystem::path>>& files);
void put_in_cache(const std::filesystem::path& dir, const std::string& key,
                  const std::vector<std::pair<std::string, std::filesystem::path>>& files);

// Keeps the build cache under `root` (its nvcc/ and emu/ directories) at most `max_bytes`: the
// entries least recently added or taken (take_from_cache marks an entry it copies) go first, an
// entry's files (a fatbin and its log) together. Returns the bytes removed.
uint64_t prune_build_cache(const std::filesystem::path& root, uint64_t max_bytes);

// Runs nvcc (`argv`, without its output and input) on `sources`/`unity` into `fatbin`, from a copy
// of `sources` (its files, not its subdirectories) in a temporary directory named by `key`, a
// checksum of everything the build reads. nvcc's output depends on the source file's absolute
// directory (4 bytes of a fatbin built in another directory differ, nvcc 13.0), so builds of the same
// sources from the same key give the same bytes wherever the artifact goes. Where that directory
// is in use by another build, or cannot be made, nvcc runs on `sources` in place. The log names
// the files as they are in `sources`. Returns nvcc's exit status as run_command does.
int run_nvcc_by_content(std::vector<std::string> argv, const std::filesystem::path& sources,
                        const std::string& unity, const std::filesystem::path& fatbin, const std::string& key,
                        std::string* log);

// Writes `text` into `p`; a user error naming the file when it cannot.
Status write_file(const std::filesystem::path& p, const std::string& text);

// The embedded headers (codegen/embedded_headers.h) whose paths start with `prefix`, written under
// `dir` by the rest of their paths. At least one must be.
Status write_headers(const std::filesystem::path& dir, std::string_view prefix);

}  // namespace stitch::codegen
