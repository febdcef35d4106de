// The pass interface: one signature for all passes, one list of them.
//
// A pass is `StatusOr<bool> pass(Graph&, PassContext&)`; the bool says
// whether it changed the graph. The pipeline in pass_manager.cc is the one
// place that lists passes; the CLI, dumps and docs read it.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace stitch {

// --shape bindings: by input name (whole shape) or by symbolic dim name.
struct ShapeBindings {
  std::map<std::string, Dims> by_input;
  std::map<std::string, int64_t> by_symbol;
};

// Parses one --shape argument: "input_ids=1x128", "batch=2", "x=scalar".
Status parse_shape_binding(const std::string& arg, ShapeBindings& into);

struct PassContext {
  ShapeBindings bindings;
  std::string dump_dir;      // when set, the IR is written after every pass
  bool verify = true;        // run the verifier after every pass
  // The form expand_conv_transpose gives a strided ConvTranspose: "subpixel" (the default, also
  // ""), "call" or "zeros" (that file's comment), where it applies
  std::string conv_transpose_form;
  std::vector<std::string> log;  // one line per pass that changed the graph
};

using PassFn = StatusOr<bool> (*)(Graph&, PassContext&);

struct PassInfo {
  const char* name;
  const char* summary;
  PassFn fn;
};

StatusOr<bool> bind_shapes(Graph& g, PassContext& ctx);
StatusOr<bool> infer_shapes(Graph& g, PassContext& ctx);
StatusOr<bool> fold_constants(Graph& g, PassContext& ctx);
StatusOr<bool> fold_row_substitutions(Graph& g, PassContext& ctx);
StatusOr<bool> fold_single_choices(Graph& g, PassContext& ctx);
StatusOr<bool> expand_resize(Graph& g, PassContext& ctx);
StatusOr<bool> expand_einsum(Graph& g, PassContext& ctx);
StatusOr<bool> expand_mvn(Graph& g, PassContext& ctx);
StatusOr<bool> expand_bool_reductions(Graph& g, PassContext& ctx);
StatusOr<bool> expand_reverse_sequence(Graph& g, PassContext& ctx);
StatusOr<bool> expand_dft(Graph& g, PassContext& ctx);
StatusOr<bool> expand_recurrent(Graph& g, PassContext& ctx);
StatusOr<bool> expand_quantize(Graph& g, PassContext& ctx);
StatusOr<bool> expand_integer_gemms(Graph& g, PassContext& ctx);
StatusOr<bool> expand_grid_sample(Graph& g, PassContext& ctx);
StatusOr<bool> expand_losses(Graph& g, PassContext& ctx);
StatusOr<bool> expand_lrn(Graph& g, PassContext& ctx);
StatusOr<bool> expand_block_moves(Graph& g, PassContext& ctx);
StatusOr<bool> expand_one_hot(Graph& g, PassContext& ctx);
StatusOr<bool> expand_trilu(Graph& g, PassContext& ctx);
StatusOr<bool> expand_compress(Graph& g, PassContext& ctx);
StatusOr<bool> expand_group_norm(Graph& g, PassContext& ctx);
StatusOr<bool> expand_rms_norm(Graph& g, PassContext& ctx);
StatusOr<bool> expand_rotary_embedding(Graph& g, PassContext& ctx);
StatusOr<bool> expand_attention(Graph& g, PassContext& ctx);
StatusOr<bool> expand_tensor_scatter(Graph& g, PassContext& ctx);
StatusOr<bool> expand_scatter_nd(Graph& g, PassContext& ctx);
StatusOr<bool> expand_scatter_elements(Graph& g, PassContext& ctx);
StatusOr<bool> expand_swiglu(Graph& g, PassContext& ctx);
StatusOr<bool> expand_integer_matmuls(Graph& g, PassContext& ctx);
StatusOr<bool> expand_conv_transpose(Graph& g, PassContext& ctx);
StatusOr<bool> split_conv_padding(Graph& g, PassContext& ctx);
StatusOr<bool> check_divisors(Graph& g, PassContext& ctx);
StatusOr<bool> relabel_transposes(Graph& g, PassContext& ctx);
StatusOr<bool> remove_noops(Graph& g, PassContext& ctx);
StatusOr<bool> merge_duplicates(Graph& g, PassContext& ctx);
StatusOr<bool> eliminate_dead_code(Graph& g, PassContext& ctx);

// The front-end pipeline, in order.
std::span<const PassInfo> frontend_passes();
// Runs the front-end pipeline: verifies after each pass (if ctx.verify) and
// dumps the IR text into ctx.dump_dir (00_import.txt, 01_bind_shapes.txt...).
Status run_frontend(Graph& g, PassContext& ctx);

}  // namespace stitch
