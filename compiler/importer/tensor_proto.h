// TensorProto <-> Tensor (internal to the importer: exposes ONNX types).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "ir/tensor.h"
#include "support/status.h"

namespace stitch {

// `base_dir` resolves external data; `what` names the tensor in messages
// ("initializer 'w'", "file input_0.pb").
StatusOr<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir,
                                   const std::string& what);
onnx::TensorProto tensor_to_proto(const Tensor& t, const std::string& name);

}  // namespace stitch
