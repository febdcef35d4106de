// Pieces shared by the stitchc subcommands.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"

namespace stitch::cli {

struct LoadedModel {
  std::unique_ptr<Graph> imported;  // as imported, before any pass
  std::unique_ptr<Graph> graph;     // after the front-end pipeline
};

// Imports MODEL, applies --shape bindings (plus `extra` bindings, e.g. from
// input data) and runs the front-end passes.
StatusOr<LoadedModel> load_model(const std::string& path, const std::vector<std::string>& shapes,
                                 const ShapeBindings& extra, const std::string& dump_dir);

// Prints "error: ..." to stderr and returns the exit code for the status.
int report(const Status& st);

std::string human_bytes(int64_t bytes);

}  // namespace stitch::cli
