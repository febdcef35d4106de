// What a Session needs from a backend: input upload, one run of the schedule, output download.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model.h"

namespace stitch::rt {

class BackendImpl {
 public:
  virtual ~BackendImpl() = default;
  virtual void upload(int input, const void* data, size_t bytes) = 0;
  virtual void run() = 0;
  virtual void download(int output, void* data, size_t bytes) = 0;
  // Makes input `input` hold what output `output` holds (nothing to do when it is that output's
  // buffer already: written in place).
  virtual void carry(int output, int input, size_t bytes) = 0;
  virtual std::string describe() const = 0;
  // For Session::profile: one run, timed whole or step by step (milliseconds), on `clock()`.
  virtual std::string clock() const = 0;
  virtual double timed_run() = 0;
  virtual std::vector<double> timed_steps() = 0;
  // Bytes read + written per second by a large device-to-device copy; 0 where there is no device.
  virtual double copy_bytes_per_s() { return 0; }
};

// The address of every schedule buffer, from the bases of its storage (arena, weights, the
// session's input and output buffers, its fault word). Computed once per session: buffers never
// move.
std::vector<void*> buffer_addresses(const ModelData& m, void* arena, void* weights,
                                    const std::vector<uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                                    void* fault_word);

// After a run, the host's copy of the session's fault word (artifact::kFaultWordBytes): when a
// kernel recorded a fault, clears the copy and fails with code 2, naming the step, the node and
// the check with the value it found. The backend clears its device word before calling this.
void check_faults(const ModelData& m, uint64_t* word);

// Per kernel step, its argument values and the void** array that launch APIs take (pointing into
// `values`). Built once; `pointers` stays valid because `values` is never resized afterwards.
struct LaunchArgs {
  std::vector<void*> values, pointers;
};
std::vector<LaunchArgs> kernel_launch_args(const ModelData& m, const std::vector<void*>& addresses);

std::unique_ptr<BackendImpl> make_emu_backend(const ModelData& m);
std::unique_ptr<BackendImpl> make_cuda_backend(const ModelData& m, bool use_graph);

}  // namespace stitch::rt
