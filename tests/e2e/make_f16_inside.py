#!/usr/bin/env python3
"""Writes tests/e2e/f16_inside: a float32 model converted to float16 inside, its inputs and outputs
kept float32 (what onnxruntime's float16 converter writes with keep_io_types), and the outputs of
the float32 model it came from, computed by numpy in float64: y = x @ W + b, then Tanh. The
float16 weights and products put the converted model's outputs up to a few float16 steps from
those, more than float32's tolerance allows and within float16's. Tooling only; the files are
committed.

    venv/bin/python tests/e2e/make_f16_inside.py tests/e2e/f16_inside
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main(out):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    w = (rng.standard_normal((64, 32)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(32) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], "to_half", to=TensorProto.FLOAT16),
        helper.make_node("MatMul", ["x16", "w16"], ["p16"], "matmul"),
        helper.make_node("Add", ["p16", "b16"], ["s16"], "bias"),
        helper.make_node("Tanh", ["s16"], ["t16"], "tanh"),
        helper.make_node("Cast", ["t16"], ["y"], "to_float", to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes, "f16_inside", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])],
        initializer=[numpy_helper.from_array(w.astype(np.float16), "w16"),
                     numpy_helper.from_array(b.astype(np.float16), "b16")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    want = np.tanh(x.astype(np.float64) @ w.astype(np.float64) + b.astype(np.float64)).astype(np.float32)
    d = os.path.join(out, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(out, "model.onnx"))
    onnx.save_tensor(numpy_helper.from_array(x, "x"), os.path.join(d, "input_0.pb"))
    onnx.save_tensor(numpy_helper.from_array(want, "y"), os.path.join(d, "output_0.pb"))
    # How far the float16 model is from float32's outputs (as float16 arithmetic would give them).
    got = np.tanh((x.astype(np.float16).astype(np.float64) @ w.astype(np.float16).astype(np.float64)
                   + b.astype(np.float16)).astype(np.float16)).astype(np.float32)
    err = np.abs(got - want)
    print(f"max abs {err.max():.2e}; outside float32's 1e-3/1e-4: {(err > 1e-4 + 1e-3 * np.abs(want)).sum()}; "
          f"outside float16's 1e-2/1e-2: {(err > 1e-2 + 1e-2 * np.abs(want)).sum()}")


if __name__ == "__main__":
    main(sys.argv[1])
