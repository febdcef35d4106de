// onnxruntime's contrib ops, as its transformer optimizer writes them (optimum-cli export onnx
// --optimize, onnxruntime.transformers.optimizer.optimize_model). The importer reads each as the
// default-domain ops it is defined by, before shape inference, so that the planner fuses them as it
// fuses an unoptimized export:
//
//   com.microsoft::SkipLayerNormalization      Add(s) + LayerNormalization
//   com.microsoft::SkipSimplifiedLayerNormalization   Add(s) + RMSNormalization
//   com.microsoft::BiasGelu, Gelu, FastGelu    (Add +) Gelu (FastGelu its tanh form)
//   com.microsoft::QuickGelu                   x * Sigmoid(alpha * x)
//   com.microsoft::EmbedLayerNormalization     Gathers of the embeddings + LayerNormalization;
//                                              mask_index the ReduceSum of the mask
//   com.microsoft::Attention                   the packed QKV MatMul, a Split and Attention
//                                              (opset 23) over an additive mask built as
//                                              onnxruntime builds it (mask_filter_value where the
//                                              mask is 0, the future excluded when unidirectional),
//                                              the past and present as stacked K and V
//   com.microsoft::MultiHeadAttention          Attention (opset 23) of the projected Q, K and V
//                                              (their packed bias added; packed forms split;
//                                              K and V heads first with Q put heads first too),
//                                              the same key masks, the past and present as K
//                                              and V apart (contrib_attention.cc)
//   com.microsoft::GroupQueryAttention         TensorScatter (opset 24) of the new K and V into
//                                              the cache at each batch's past length, then
//                                              Attention (opset 23) under a mask of the keys
//                                              each query sees (the batch's count, causal, a
//                                              local window); Q and K rotated first when
//                                              do_rotary (contrib_attention.cc)
//   com.microsoft::RotaryEmbedding             RotaryEmbedding (opset 23): its inputs reordered,
//                                              an offset position made each batch's positions
//   com.microsoft::MatMulNBits                 MatMul (+ Add of its bias) of the weight
//                                              dequantized at compile time into A's type
//                                              (contrib_matmul_nbits.cc)
//   LayerNormalization below opset 17, SimplifiedLayerNormalization (onnxruntime registers both
//   in the default domain)                     LayerNormalization, RMSNormalization
//
// Every node written is of opset 23 (RMSNormalization's and Attention's first) or, where a
// later input or attribute is used, the opset that defines it, whatever the model's: each node
// carries its own opset, and the passes that expand these nodes write theirs at it
// (passes/graph_builder.h). Forms with no such definition (rotary attention, a shared past
// buffer, Megatron's 4-D mask, MultiHeadAttention's unidirectional flag and beam-search cache,
// GroupQueryAttention's quantized or window-sized cache and softmax sinks, outputs onnxruntime
// leaves undefined) are refused naming the node. Semantics are onnxruntime's CPU kernels', which
// the node tests (tests/onnx_node/contrib) take their expected outputs from.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace stitch {

// Whether a node with no op-table row (domain, op type and opset read) is one the importer writes
// as default-domain ops (above).
bool is_contrib_op(const Node& n);
// The com.microsoft ops read, "A, B and C", for messages.
std::string contrib_op_list();

// Writes every node of `g` that is_contrib_op as the ops it is defined by, in topological order
// (the graph's nodes sorted, inputs and outputs resolved). The nodes it adds are appended; the
// caller sorts again.
Status expand_contrib_ops(Graph& g);

}  // namespace stitch
