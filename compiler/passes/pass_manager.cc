#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "ir/text.h"
#include "ir/verifier.h"
#include "passes/pass.h"

namespace stitch {

namespace {
constexpr PassInfo kFrontend[] = {
    {"bind_shapes", "binds symbolic input dimensions from --shape", bind_shapes},
    {"infer_shapes", "infers every dtype and static shape, propagating constants", infer_shapes},
    {"fold_constants", "replaces nodes whose outputs are known by constants", fold_constants},
    {"fold_row_substitutions",
     "writes a triangular solve written out row by row (the chunked gated delta rule's: each step a row's "
     "prefix plus its products with the rows above, scattered back) as one StitchRowSubstitution",
     fold_row_substitutions},
    {"fold_single_choices",
     "makes a TopK, ArgMax or ArgMin over one element its input and zeros, a Where of a constant "
     "condition of one value the input it selects, a ReduceSum, ReduceMean, ReduceMax or ReduceMin over "
     "one element that element (plus 0 for a sum or mean), a Softmax or LogSoftmax over one element x - x "
     "(plus 1)",
     fold_single_choices},
    // Once before the expansions too, so that they see through no-ops (a KV cache grown by a zero Pad
    // is the cache itself, which the TensorScatter expansion may then leave to be written in place).
    {"remove_noops", "drops Identity, eval Dropout, same-type Cast, same-shape Reshape...", remove_noops},
    {"expand_resize",
     "writes each Resize as Gathers of constant indices times constant weights, axis by axis", expand_resize},
    {"expand_grid_sample",
     "writes each GridSample as its coordinates' arithmetic and a GatherElements per tap, weighted and "
     "summed",
     expand_grid_sample},
    {"expand_einsum", "writes each Einsum as Transposes, Reshapes, ReduceSums and batched MatMuls",
     expand_einsum},
    {"expand_block_moves",
     "writes each DepthToSpace and SpaceToDepth (PixelShuffle) as the Reshape, Transpose and Reshape it is",
     expand_block_moves},
    {"expand_one_hot",
     "writes each OneHot as an Equal of its indices against the positions and a Where of its values",
     expand_one_hot},
    {"expand_trilu",
     "writes each Trilu of a static shape as a Where of a constant mask of its last two axes (at most "
     "65536 elements), x and 0",
     expand_trilu},
    {"expand_compress", "writes each Compress of a constant condition as a Gather of the positions it keeps",
     expand_compress},
    {"expand_dft",
     "writes each DFT as one MatMul by a constant matrix of its weights, with Transposes around it, and each "
     "STFT as a Gather of its frames and one MatMul by its windowed DFT weights",
     expand_dft},
    {"expand_recurrent",
     "writes each LSTM, GRU and RNN over a known sequence out step by step: one MatMul of the whole input, "
     "then each step's recurrence MatMul, gates and state update",
     expand_recurrent},
    {"expand_quantize",
     "writes each QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear as the Casts, Divs or Muls, "
     "Rounds and Clips it is defined by",
     expand_quantize},
    {"expand_integer_gemms",
     "writes each MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv as a MatMul or Conv of its "
     "operands "
     "less their zero points, exact in float32 or float64, with its requantization's element-wise work",
     expand_integer_gemms},
    {"expand_losses",
     "writes each NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as a LogSoftmax, a GatherElements of "
     "the targets' log-probabilities, their weights and the reduction",
     expand_losses},
    {"expand_lrn",
     "writes each LRN as its squares, a Pad and Slices summing the channel window, and a Pow and Div",
     expand_lrn},
    {"expand_reverse_sequence",
     "writes each ReverseSequence as a GatherElements along its time axis of an index Expanded from its time "
     "and batch axes",
     expand_reverse_sequence},
    {"expand_bool_reductions",
     "writes each ReduceMax or ReduceMin of bool as the reduction of the values cast to uint8, cast back",
     expand_bool_reductions},
    {"expand_mvn",
     "writes each MeanVarianceNormalization as its mean, centered values, variance, Sqrt and Div over its "
     "axes",
     expand_mvn},
    {"expand_group_norm",
     "writes each GroupNormalization as Reshapes around an InstanceNormalization, with its scale and bias",
     expand_group_norm},
    {"expand_rms_norm", "writes each RMSNormalization as its statistics (Pow, ReduceMean, ...) and Muls",
     expand_rms_norm},
    {"expand_rotary_embedding",
     "writes each RotaryEmbedding as Slices of each head's halves, their rotation by the caches and a Concat",
     expand_rotary_embedding},
    {"expand_attention",
     "writes each Attention as the head reshapes, scaled MatMul, masks, Softmax and MatMul it is defined by",
     expand_attention},
    {"expand_tensor_scatter",
     "writes each TensorScatter as a GatherElements of the update at each cache position and a Where",
     expand_tensor_scatter},
    {"expand_scatter_nd",
     "writes each ScatterND of constant indices as a Gather of its update rows and a Where over the data",
     expand_scatter_nd},
    {"expand_scatter_elements",
     "writes each ScatterElements of constant indices as a Gather of its updates and a Where over the data",
     expand_scatter_elements},
    {"expand_swiglu", "writes each SwiGLU as Swish of its gate times its value", expand_swiglu},
    {"expand_integer_matmuls",
     "writes each MatMul or Gemm of integers as a Mul of its operands along a new K axis and a ReduceSum "
     "over it",
     expand_integer_matmuls},
    {"expand_conv_transpose",
     "writes each ConvTranspose of constant weights as a Conv of its input with zeros between the values",
     expand_conv_transpose},
    {"split_conv_padding",
     "gives a Conv padded more on one side than the other a Pad of the difference, padding alike on both "
     "sides",
     split_conv_padding},
    {"check_divisors",
     "gives an integer Div or Mod whose divisor may be 0 a check of it, which refuses a 0 naming the node",
     check_divisors},
    {"relabel_transposes", "makes a Transpose that moves only size-1 axes a Reshape (a view)",
     relabel_transposes},
    {"remove_noops", "drops Identity, eval Dropout, same-type Cast, same-shape Reshape...", remove_noops},
    {"merge_duplicates", "drops a Reshape, Flatten, Squeeze or Unsqueeze that repeats an earlier one",
     merge_duplicates},
    {"eliminate_dead_code", "drops nodes and constants no output depends on", eliminate_dead_code},
};

Status dump(const Graph& g, const std::string& dir, int index, const std::string& name) {
  if (dir.empty()) return Status::ok();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = fmt::format("{}/{:02}_{}.txt", dir, index, name);
  std::ofstream f(path);
  if (!f) return Status::user(fmt::format("cannot write IR dump '{}'", path));
  PrintOptions opts;
  opts.max_constant_elements = 16;
  f << print_graph(g, opts);
  return Status::ok();
}
}  // namespace

std::span<const PassInfo> frontend_passes() { return kFrontend; }

Status run_frontend(Graph& g, PassContext& ctx) {
  RETURN_IF_ERROR(dump(g, ctx.dump_dir, 0, "import"));
  int index = 1;
  bool inferred = false;
  for (const PassInfo& p : kFrontend) {
    ASSIGN_OR_RETURN(bool changed, p.fn(g, ctx));
    if (changed) ctx.log.push_back(p.name);
    const bool infers = std::string(p.name) == "infer_shapes";
    inferred |= infers;
    if (ctx.verify) {
      VerifyOptions vo;
      vo.require_static_types = inferred;
      Status st = verify_graph(g, vo);
      // The types of nodes a later pass built by hand (infer_shapes has just run every rule).
      if (st.is_ok() && inferred && changed && !infers) st = verify_node_types(g);
      if (!st.is_ok()) return st.with_context(fmt::format("after pass {}", p.name));
    }
    RETURN_IF_ERROR(dump(g, ctx.dump_dir, index++, p.name));
  }
  return Status::ok();
}

Status parse_shape_binding(const std::string& arg, ShapeBindings& into) {
  auto eq = arg.rfind('=');
  if (eq == std::string::npos || eq == 0)
    return Status::user(fmt::format("--shape '{}' must look like NAME=1x128 (an input) or SYMBOL=4 (a "
                                    "symbolic dimension)", arg));
  std::string name = arg.substr(0, eq), spec = arg.substr(eq + 1);
  Dims d;
  if (spec != "scalar") {
    size_t pos = 0;
    while (true) {
      size_t x = spec.find('x', pos);
      std::string part = spec.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      char* end = nullptr;
      long long v = part.empty() ? -1 : std::strtoll(part.c_str(), &end, 10);
      if (part.empty() || *end || v < 0)
        return Status::user(fmt::format("--shape '{}': '{}' is not a dimension (use non-negative integers "
                                        "joined by 'x', e.g. 1x128)", arg, part));
      d.push_back(v);
      if (x == std::string::npos) break;
      pos = x + 1;
    }
  }
  if (into.by_input.count(name) || into.by_symbol.count(name))
    return Status::user(fmt::format("--shape binds '{}' twice", name));
  into.by_input[name] = d;  // bind_shapes decides whether NAME is an input or a symbol
  return Status::ok();
}

}  // namespace stitch
