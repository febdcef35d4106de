// Pieces shared by the stitchc subcommands.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"

namespace stitch::cli {

// Applies --shape bindings (plus `extra` bindings, e.g. from input data) to
// an imported graph and runs the front-end passes on it in place. `path`
// names the model in messages. `conv_transpose_form`: PassContext's.
Status prepare_model(Graph& g, const std::string& path, const std::vector<std::string>& shapes,
                     const ShapeBindings& extra, const std::string& dump_dir,
                     const std::string& conv_transpose_form = "");

// Prints "error: ..." to stderr and returns the exit code for the status.
int report(const Status& st);

std::string human_bytes(int64_t bytes);

}  // namespace stitch::cli
