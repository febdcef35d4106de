// The headers generated kernels and their emulation library include (runtime/device/include and
// runtime/emu/include), carried inside stitchc by the build (cmake/embed_headers.cmake), so that a
// stitchc installed or copied elsewhere does not read the source tree it was built from.
#pragma once

#include <string_view>
#include <vector>

namespace stitch::codegen {

struct EmbeddedFile {
  std::string_view path;  // under an include directory: "stitch/device/stitch_device.cuh"
  std::string_view text;
};

// Every embedded header, sorted by path within each include directory.
const std::vector<EmbeddedFile>& embedded_headers();

// The SHA-256 of the headers' paths and contents, in hex: the build writes the same digest beside
// the precompiled emulation header it makes from them (emu.h.gch.digest).
std::string_view embedded_headers_digest();

}  // namespace stitch::codegen
