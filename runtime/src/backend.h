// What a Session needs from a backend: input upload, one run of the schedule, output download.
#pragma once

#include <memory>
#include <string>

#include "model.h"

namespace stitch::rt {

class BackendImpl {
 public:
  virtual ~BackendImpl() = default;
  virtual void upload(int input, const void* data, size_t bytes) = 0;
  virtual void run() = 0;
  virtual void download(int output, void* data, size_t bytes) = 0;
  virtual std::string describe() const = 0;
};

std::unique_ptr<BackendImpl> make_emu_backend(const ModelData& m);
std::unique_ptr<BackendImpl> make_cuda_backend(const ModelData& m, bool use_graph);

}  // namespace stitch::rt
