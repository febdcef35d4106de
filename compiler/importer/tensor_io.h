// Reading and writing single tensors as ONNX TensorProto files (.pb), the
// layout of ONNX's backend test data (input_0.pb, output_0.pb, ...).
#pragma once

#include <string>

#include "ir/tensor.h"
#include "support/status.h"

namespace stitch {

struct NamedTensor {
  std::string name;  // may be empty: test data often leaves it unset
  Tensor tensor;
};

StatusOr<NamedTensor> read_tensor_file(const std::string& path);
Status write_tensor_file(const std::string& path, const Tensor& t, const std::string& name);

}  // namespace stitch
