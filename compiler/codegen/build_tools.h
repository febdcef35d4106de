// What the artifact writer and the emulation build share: running the toolchain (nvcc, the host
// compiler) and writing files and the headers stitchc carries.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace stitch::codegen {

// Runs argv (through /bin/sh with quoted words), capturing stdout and stderr together into
// `output`; the exit status, or -1 when it could not run or did not exit.
int run_command(const std::vector<std::string>& argv, std::string* output);

// Writes `text` into `p`; a user error naming the file when it cannot.
Status write_file(const std::filesystem::path& p, const std::string& text);

// The embedded headers (codegen/embedded_headers.h) whose paths start with `prefix`, written under
// `dir` by the rest of their paths. At least one must be.
Status write_headers(const std::filesystem::path& dir, std::string_view prefix);

}  // namespace stitch::codegen
