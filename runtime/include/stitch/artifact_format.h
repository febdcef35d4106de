// The artifact directory format, shared by the compiler (writer) and the runtime (reader).
// docs/artifact-format.md describes every file and field; bump kArtifactVersion on any change
// a reader of the previous version would misread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stitch::artifact {

inline constexpr const char* kFormatName = "stitch-artifact";
inline constexpr int kArtifactVersion = 11;  // 2: gemm steps carry an epilogue (bias); 3: gelu, bias_gelu;
                                             // 4: kernels say whether they launch cooperatively;
                                             // 5: residual, bias_residual; 6: relu, bias_relu;
                                             // 7: outputs written in place of an input;
                                             // 8: conv steps carry an epilogue (residual, relu);
                                             // 9: the manifest's fixed_inputs; FNV-1a's own
                                             //    offset basis
                                             // 10: schedule.json's tf32 (float32 library calls
                                             //    compute in float32 unless it is true)
                                             // 11: conv_transpose steps

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kScheduleFile = "schedule.json";
inline constexpr const char* kWeightsFile = "weights.bin";
inline constexpr const char* kReportFile = "report.json";
inline constexpr const char* kKernelsDir = "kernels";
inline constexpr const char* kUnityFile = "kernels/all_kernels.cu";
inline constexpr const char* kFatbinFile = "kernels/kernels.fatbin";
inline constexpr const char* kEmuLibrary = "emu/kernels_emu.so";

// Buffers in the arena and the weights blob start at multiples of this (cudaMalloc's alignment).
inline constexpr std::int64_t kAlignment = 256;

// FNV-1a, 64 bits: detects truncated or edited files (not a defence against a deliberate
// forgery, which needs a signature the deployment adds around the directory).
// The offset basis is FNV's 0xcbf29ce484222325 (versions before 9 used a basis one digit short,
// 1469598103934665603: still a hash, but not FNV-1a's).
inline std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 0xcbf29ce484222325ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace stitch::artifact
