// The artifact directory format, shared by the compiler (writer) and the runtime (reader).
// docs/artifact-format.md describes every file and field; bump kArtifactVersion on any change
// a reader of the previous version would misread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stitch::artifact {

inline constexpr const char* kFormatName = "stitch-artifact";
inline constexpr int kArtifactVersion = 13;  // 2: gemm steps carry an epilogue (bias); 3: gelu, bias_gelu;
                                             // 4: kernels say whether they launch cooperatively;
                                             // 5: residual, bias_residual; 6: relu, bias_relu;
                                             // 7: outputs written in place of an input;
                                             // 8: conv steps carry an epilogue (residual, relu);
                                             // 9: the manifest's fixed_inputs; FNV-1a's own
                                             //    offset basis
                                             // 10: schedule.json's tf32 (float32 library calls
                                             //    compute in float32 unless it is true)
                                             // 11: conv_transpose steps
                                             // 12: files checked with XXH3-64 (`xxh3`), not
                                             //    FNV-1a
                                             // 13: run-time checks: kernels' `faults`, and
                                             //    the session's fault word (storage "fault")

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

// The session's fault word (the one buffer of storage "fault"): two uint64, the code of the first
// run-time check that failed in a run (0: none) and the value it found.
inline constexpr std::int64_t kFaultWordBytes = 16;

// The manifest's checksum of a file: XXH3, 64 bits, seed 0 (xxHash 0.8, from Debian's
// libxxhash-dev). It detects truncated or edited files, not a deliberate forgery, which needs a
// signature the deployment adds around the directory. Versions 9 to 11 used FNV-1a, a byte at a
// time: 0.54 s per 440 MB (BERT-base's weights) on one core of the development machine, twice at
// a compile (the model and the weights) and again at every load; XXH3 takes 0.03 s there.
class Checksum {
 public:
  Checksum();
  ~Checksum();
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;

  void update(const void* data, std::size_t n);
  // Of everything given so far; update may go on after it.
  std::uint64_t digest() const;

 private:
  void* state_;  // xxHash's XXH3_state_t, which its header alone defines
};

std::uint64_t checksum(const void* data, std::size_t n);

}  // namespace stitch::artifact
