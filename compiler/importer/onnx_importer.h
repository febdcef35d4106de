// The ONNX importer: model.onnx -> Graph.
//
// Reads initializers (inline or external data), Constant nodes (turned into
// constants), attributes, and graph inputs with symbolic dimensions. Every
// problem is a user error naming the file, node or input at fault: missing
// or non-ONNX file, unsupported opset, unsupported ops (all listed at once,
// with counts and example nodes), dangling inputs, cycles.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace stitch {

struct ImportOptions {
  // "NAME=V[,V...]": graph inputs fixed to a value, so that an If they decide keeps only the
  // branch it takes (importer/inline_if.h); recorded in Graph::fixed_inputs.
  std::vector<std::string> constant_inputs;
};

StatusOr<std::unique_ptr<Graph>> import_onnx_file(const std::string& path, const ImportOptions& options = {});
// `base_dir` resolves external data; `display` names the model in messages.
StatusOr<std::unique_ptr<Graph>> import_onnx_bytes(const std::string& bytes, const std::string& base_dir,
                                                   const std::string& display,
                                                   const ImportOptions& options = {});

}  // namespace stitch
