#!/usr/bin/env python3
"""Writes the malformed models tests/e2e/cli_tests.sh feeds to stitchc, each a few hundred bytes:

    python3 tests/e2e/make_bad_models.py tests/e2e/bad_models    # with onnx 1.23.2

Each is refused with exit code 2 and a message naming its node; none is a valid ONNX model
(onnx.checker.check_model refuses the first two as well; the scatters' indices point outside
their data; the recurrences are valid ONNX that stitch cannot run, or weights of the wrong size; the
quantizations have scales or zero points that do not fit x, or an element type stitch lacks; the
GridSample names a mode it does not have; the loss has weights that are not one per class; the LRN's window is empty; the MaxPool's dilation would wrap its window's extent; the integer GEMMs have a zero point or bias
that does not fit their rows or channels; the opset-1 Cast names no type; the Compress's
condition is longer than its axis).
"""
import os
import sys

import onnx
from onnx import TensorProto, helper


def model(name, node, inputs, opset=17, initializers=()):
    graph = helper.make_graph([node], name, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=list(initializers))
    imports = [helper.make_opsetid("", opset)]
    if node.domain:
        imports.append(helper.make_opsetid(node.domain, 1))
    m = helper.make_model(graph, opset_imports=imports)
    m.ir_version = 8
    return m


def zeros(name, *shape):
    n = 1
    for d in shape:
        n *= d
    return helper.make_tensor(name, TensorProto.FLOAT, list(shape), [0.0] * n)


def main(out):
    os.makedirs(out, exist_ok=True)
    x = lambda *shape: helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    q8 = lambda *shape: helper.make_tensor_value_info("q", TensorProto.UINT8, list(shape))
    cases = {
        # Softmax's axis written as a float: read as absent it would be the default axis.
        "softmax_float_axis": model("softmax_float_axis", helper.make_node("Softmax", ["x"], ["y"], "sm", axis=0.0),
                                    [x(2, 3)]),
        # A misspelt attribute: "axes" for Softmax.
        "softmax_axes": model("softmax_axes", helper.make_node("Softmax", ["x"], ["y"], "sm", axes=[0]), [x(2, 3)]),
        # A negative pooling window.
        "maxpool_negative_kernel": model(
            "maxpool_negative_kernel", helper.make_node("MaxPool", ["x"], ["y"], "pool", kernel_shape=[-3, 2]),
            [x(1, 1, 5, 5)]),
        # A pooling window whose dilation is 2^63 - 1: its extent would wrap a 64-bit integer.
        "maxpool_huge_dilation": model(
            "maxpool_huge_dilation",
            helper.make_node("MaxPool", ["x"], ["y"], "pool", kernel_shape=[3, 3], dilations=[1, 2**63 - 1]),
            [x(1, 1, 5, 5)]),
        # Scatters whose constant indices point outside the data (the front end maps constant
        # indices at compile time, so it refuses them there).
        "scatter_nd_index_out_of_range": model(
            "scatter_nd_index_out_of_range", helper.make_node("ScatterND", ["x", "idx", "u"], ["y"], "put"),
            [x(4, 3), helper.make_tensor_value_info("u", TensorProto.FLOAT, [2, 3])], opset=18,
            initializers=[helper.make_tensor("idx", TensorProto.INT64, [2, 1], [1, 4])]),
        "scatter_elements_index_out_of_range": model(
            "scatter_elements_index_out_of_range",
            helper.make_node("ScatterElements", ["x", "idx", "u"], ["y"], "put", axis=1),
            [x(4, 3), helper.make_tensor_value_info("u", TensorProto.FLOAT, [1, 2])], opset=18,
            initializers=[helper.make_tensor("idx", TensorProto.INT64, [1, 2], [0, -4])]),
        # Recurrences: one too long to write out step by step, an activation with a parameter, and
        # weights that are not the op's gates times hidden_size.
        "lstm_too_long": model(
            "lstm_too_long", helper.make_node("LSTM", ["x", "w", "r"], ["y"], "lstm", hidden_size=2), [x(600, 1, 2)],
            initializers=[zeros("w", 1, 8, 2), zeros("r", 1, 8, 2)]),
        "lstm_activation_alpha": model(
            "lstm_activation_alpha",
            helper.make_node("LSTM", ["x", "w", "r"], ["y"], "lstm", hidden_size=2,
                             activations=["HardSigmoid", "Tanh", "Tanh"], activation_alpha=[0.3]),
            [x(3, 1, 2)], initializers=[zeros("w", 1, 8, 2), zeros("r", 1, 8, 2)]),
        "gru_weights_not_gates": model(
            "gru_weights_not_gates", helper.make_node("GRU", ["x", "w", "r"], ["y"], "gru", hidden_size=4),
            [x(3, 1, 2)], initializers=[zeros("w", 1, 10, 2), zeros("r", 1, 12, 4)]),
        # Quantization: a scale neither one value nor the axis's length, a zero point of another type
        # than x, a blocked scale of the wrong block count, and an 8-bit float, which the IR lacks.
        "dequantize_scale_not_axis": model(
            "dequantize_scale_not_axis", helper.make_node("DequantizeLinear", ["q", "s"], ["y"], "dq", axis=1),
            [q8(2, 3, 4)], opset=21, initializers=[helper.make_tensor("s", TensorProto.FLOAT, [5], [0.5] * 5)]),
        "dequantize_zero_point_type": model(
            "dequantize_zero_point_type", helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], "dq"),
            [q8(2, 3)], opset=13,
            initializers=[helper.make_tensor("s", TensorProto.FLOAT, [], [0.5]),
                          helper.make_tensor("z", TensorProto.INT8, [], [1])]),
        "quantize_blocked_scale": model(
            "quantize_blocked_scale",
            helper.make_node("QuantizeLinear", ["x", "s"], ["y"], "q", axis=1, block_size=2, output_dtype=3),
            [x(2, 5)], opset=21, initializers=[zeros("s", 2, 2)]),
        "dequantize_float8": model(
            "dequantize_float8", helper.make_node("DequantizeLinear", ["f8", "s"], ["y"], "dq"),
            [helper.make_tensor_value_info("f8", TensorProto.FLOAT8E4M3FN, [4])], opset=21,
            initializers=[helper.make_tensor("s", TensorProto.FLOAT, [], [0.5])]),
        # A GridSample mode the op does not have.
        "gridsample_mode_area": model(
            "gridsample_mode_area", helper.make_node("GridSample", ["x", "grid"], ["y"], "sample", mode="area"),
            [x(1, 2, 4, 4), helper.make_tensor_value_info("grid", TensorProto.FLOAT, [1, 3, 3, 2])], opset=20),
        # A loss whose weights are not one per class.
        "sce_weights_not_classes": model(
            "sce_weights_not_classes", helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["y"], "loss"),
            [x(4, 6), helper.make_tensor_value_info("t", TensorProto.INT64, [4])], opset=13,
            initializers=[zeros("w", 4)]),
        # An LRN whose window spans no channel.
        "lrn_size_zero": model("lrn_size_zero", helper.make_node("LRN", ["x"], ["y"], "lrn", size=0), [x(1, 4, 3, 3)],
                               opset=13),
        # A model of opset 8 using Where, which ONNX added at opset 9.
        "where_at_opset8": model(
            "where_at_opset8", helper.make_node("Where", ["c", "x", "x"], ["y"], "pick"),
            [helper.make_tensor_value_info("c", TensorProto.BOOL, [2, 3]), x(2, 3)], opset=8),
        # BatchNormalization of opset 6 without is_test: training mode, by the spec's default.
        "bn_training_opset6": model(
            "bn_training_opset6", helper.make_node("BatchNormalization", ["x", "s", "s", "s", "s"], ["y"], "bn"),
            [x(2, 3, 4)], opset=6, initializers=[zeros("s", 3)]),
        # An STFT whose window is shorter than its frame_length.
        "stft_window_length": model(
            "stft_window_length", helper.make_node("STFT", ["x", "step", "w", "len"], ["y"], "stft"),
            [x(1, 64, 1)], opset=17,
            initializers=[helper.make_tensor("step", TensorProto.INT64, [], [8]), zeros("w", 8),
                          helper.make_tensor("len", TensorProto.INT64, [], [16])]),
        # A ReverseSequence with one length too few for its batch.
        "reverse_sequence_lens": model(
            "reverse_sequence_lens", helper.make_node("ReverseSequence", ["x", "lens"], ["y"], "rev"), [x(5, 4)],
            opset=13, initializers=[helper.make_tensor("lens", TensorProto.INT64, [3], [1, 2, 3])]),
        # A MatMulInteger whose per-row zero point has one value too many for A's 4 rows.
        "matmulinteger_zero_point_rows": model(
            "matmulinteger_zero_point_rows", helper.make_node("MatMulInteger", ["q", "b", "zp"], ["y"], "mm"),
            [q8(4, 8)], opset=10,
            initializers=[helper.make_tensor("b", TensorProto.INT8, [8, 3], [1] * 24),
                          helper.make_tensor("zp", TensorProto.UINT8, [5], [0] * 5)]),
        # A QLinearConv whose int32 bias has 3 values for 4 output channels.
        "qlinearconv_bias_channels": model(
            "qlinearconv_bias_channels",
            helper.make_node("QLinearConv", ["q", "s", "z", "w", "s", "wz", "s", "z", "bias"], ["y"], "qconv"),
            [q8(1, 2, 5, 5)], opset=10,
            initializers=[helper.make_tensor("s", TensorProto.FLOAT, [], [0.5]),
                          helper.make_tensor("z", TensorProto.UINT8, [], [0]),
                          helper.make_tensor("w", TensorProto.INT8, [4, 2, 3, 3], [1] * 72),
                          helper.make_tensor("wz", TensorProto.INT8, [], [0]),
                          helper.make_tensor("bias", TensorProto.INT32, [3], [1, 2, 3])]),
        # A Cast of opset 1 whose type name is not one of TensorProto's.
        "cast_opset1_type_name": model(
            "cast_opset1_type_name", helper.make_node("Cast", ["x"], ["y"], "cast", to="FLOAT128"), [x(2, 3)],
            opset=1),
        # A Compress whose condition is longer than the axis it selects along.
        "compress_condition_long": model(
            "compress_condition_long", helper.make_node("Compress", ["x", "c"], ["y"], "compress", axis=0), [x(3, 5)],
            opset=11, initializers=[helper.make_tensor("c", TensorProto.BOOL, [4], [1, 0, 1, 1])]),
        # onnxruntime's Attention with Megatron's 4-D mask, which stitch does not read.
        "attention_contrib_mask_4d": model(
            "attention_contrib_mask_4d",
            helper.make_node("Attention", ["x", "w", "b", "m"], ["y"], "attention", domain="com.microsoft",
                             num_heads=2),
            [x(2, 4, 8), helper.make_tensor_value_info("m", TensorProto.INT32, [2, 1, 4, 4])],
            initializers=[zeros("w", 8, 24), zeros("b", 24)]),
        # onnxruntime's Attention with the rotary embedding inside (its GPU kernels' form).
        "attention_contrib_rotary": model(
            "attention_contrib_rotary",
            helper.make_node("Attention", ["x", "w", "b"], ["y"], "attention", domain="com.microsoft",
                             num_heads=2, do_rotary=1),
            [x(2, 4, 8)], initializers=[zeros("w", 8, 24), zeros("b", 24)]),
        # onnxruntime's MultiHeadAttention with unidirectional=1, whose masking stitch does not read.
        "mha_contrib_unidirectional": model(
            "mha_contrib_unidirectional",
            helper.make_node("MultiHeadAttention", ["x", "x", "x"], ["y"], "mha", domain="com.microsoft",
                             num_heads=2, unidirectional=1),
            [x(2, 4, 8)]),
        # onnxruntime's GroupQueryAttention with 3 head sinks for 2 heads; and one whose
        # total_sequence_length is a graph input, not read from the attention mask's shape: the
        # present cache's length would follow a value.
        "gqa_contrib_head_sink": model(
            "gqa_contrib_head_sink",
            helper.make_node("GroupQueryAttention", ["x", "x", "x", "", "", "lens", "total", "", "", "", "", "sink"],
                             ["y"], "gqa", domain="com.microsoft", num_heads=2, kv_num_heads=2),
            [x(2, 4, 8), helper.make_tensor_value_info("lens", TensorProto.INT32, [2]),
             helper.make_tensor_value_info("sink", TensorProto.FLOAT, [3])],
            initializers=[helper.make_tensor("total", TensorProto.INT32, [], [4])]),
        "gqa_contrib_total_input": model(
            "gqa_contrib_total_input",
            helper.make_node("GroupQueryAttention", ["x", "x", "x", "", "", "lens", "total"], ["y"], "gqa",
                             domain="com.microsoft", num_heads=2, kv_num_heads=2),
            [x(2, 4, 8), helper.make_tensor_value_info("lens", TensorProto.INT32, [2]),
             helper.make_tensor_value_info("total", TensorProto.INT32, [])]),
        # A window-sized cache (sliding_window_cache=1) without a window or a past buffer:
        # onnxruntime refuses it too (the buffer must hold the window).
        "gqa_contrib_window_cache_no_window": model(
            "gqa_contrib_window_cache_no_window",
            helper.make_node("GroupQueryAttention", ["x", "x", "x", "", "", "lens", "total"], ["y"], "gqa",
                             domain="com.microsoft", num_heads=2, kv_num_heads=2, sliding_window_cache=1),
            [x(2, 4, 8), helper.make_tensor_value_info("lens", TensorProto.INT32, [2])],
            initializers=[helper.make_tensor("total", TensorProto.INT32, [], [4])]),
        # onnxruntime's MoE with Phi-3.5-MoE's sparse mixer routing, which stitch does not read; and
        # CausalConvWithState whose weight is a graph input (its kernel size not known).
        "moe_contrib_sparse_mixer": model(
            "moe_contrib_sparse_mixer",
            helper.make_node("MoE", ["x", "r", "w1", "", "w2"], ["y"], "moe", domain="com.microsoft", k=2,
                             use_sparse_mixer=1),
            [x(2, 4, 8), helper.make_tensor_value_info("r", TensorProto.FLOAT, [8, 4])],
            initializers=[zeros("w1", 4, 6, 8), zeros("w2", 4, 8, 6)]),
        "causal_conv_contrib_weight_input": model(
            "causal_conv_contrib_weight_input",
            helper.make_node("CausalConvWithState", ["x", "w"], ["y"], "conv", domain="com.microsoft"),
            [x(2, 4, 8), helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 1, 3])]),
    }
    for name, m in cases.items():
        onnx.save(m, os.path.join(out, name + ".onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
