#!/usr/bin/env python3
"""A BERT-base-sized encoder as an ONNX file of seeded random weights, for timing stitchc's
compile (import, the rewrites before planning, planning, writing the weights) on the real weight
sizes without PyTorch. Its outputs mean nothing; it has no test data.

L layers of hidden 768, 12 heads, FFN 3072, opset 18, inputs x [batch, sequence, 768] and an
additive mask [batch, 1, 1, sequence]; each layer's Q, K, V, output and FFN projections are
MatMuls of their own constant weights with a bias Add, its GELU is erf's, and its two LayerNorms
are the decomposed 9-op chain of a TorchScript export or, with --layer-norm-op, LayerNormalization
ops as torch.export writes them. 12 layers are a 340 MB file.

  python3 bench/exports/random_bert.py OUT.onnx [--layers L] [--layer-norm-op]
  stitchc compile OUT.onnx -o DIR --shape batch=8 --shape sequence=128 --no-nvcc --no-emu

Needs onnx and numpy (pip), like the other tools here.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN, FFN, HEADS = 768, 3072, 12


def build(layers, layer_norm_op):
    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def weight(name, shape, scale=0.02):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, out, **attrs):
        nodes.append(helper.make_node(op, inputs, [out], name="n_" + out, **attrs))
        return out

    d = HIDDEN // HEADS
    const("axes_last", np.array([-1], np.int64))
    for name, v in [("two", 2.0), ("eps", 1e-12), ("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5),
                    ("scale", 1 / np.sqrt(d))]:
        const(name, np.array(v, np.float32))
    const("heads_shape", np.array([0, 0, HEADS, d], np.int64))
    const("hidden_shape", np.array([0, 0, HIDDEN], np.int64))

    def layer_norm(p, x):
        gamma, beta = weight(p + "_gamma", [HIDDEN], 1.0), weight(p + "_beta", [HIDDEN])
        if layer_norm_op:
            return node("LayerNormalization", [x, gamma, beta], p, axis=-1, epsilon=1e-12)
        mu = node("ReduceMean", [x, "axes_last"], p + "_mean", keepdims=1)
        centered = node("Sub", [x, mu], p + "_centered")
        sq = node("Pow", [centered, "two"], p + "_squared")
        var = node("ReduceMean", [sq, "axes_last"], p + "_variance", keepdims=1)
        sd = node("Sqrt", [node("Add", [var, "eps"], p + "_with_eps")], p + "_std")
        normed = node("Div", [centered, sd], p + "_normed")
        return node("Add", [node("Mul", [normed, gamma], p + "_scaled"), beta], p)

    x = "x"
    for layer in range(layers):
        p = f"l{layer}_"

        def linear(name, inp, k, n):
            mm = node("MatMul", [inp, weight(p + name + "_w", [k, n])], p + name + "_product")
            return node("Add", [mm, weight(p + name + "_b", [n])], p + name)

        def heads(v, perm):
            return node("Transpose", [node("Reshape", [v, "heads_shape"], v + "_split")], v + "_heads", perm=perm)

        q = heads(linear("q", x, HIDDEN, HIDDEN), [0, 2, 1, 3])
        k = heads(linear("k", x, HIDDEN, HIDDEN), [0, 2, 3, 1])
        v = heads(linear("v", x, HIDDEN, HIDDEN), [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], p + "qk"), "scale"], p + "scores")
        probs = node("Softmax", [node("Add", [scores, "mask"], p + "masked")], p + "probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], p + "context")], p + "context_t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "hidden_shape"], p + "context_rows")
        x1 = layer_norm(p + "ln1", node("Add", [linear("o", ctx, HIDDEN, HIDDEN), x], p + "residual1"))
        f1 = linear("ffn1", x1, HIDDEN, FFN)
        erf = node("Erf", [node("Div", [f1, "sqrt2"], p + "gelu_div")], p + "gelu_erf")
        gelu = node("Mul", [node("Mul", [f1, node("Add", [erf, "one"], p + "gelu_add")], p + "gelu_mul"), "half"],
                    p + "gelu")
        x = layer_norm(p + "ln2", node("Add", [linear("ffn2", gelu, FFN, HIDDEN), x1], p + "residual2"))
    node("Identity", [x], "y")
    graph = helper.make_graph(
        nodes, "random_bert",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", HIDDEN]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", 1, 1, "sequence"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", HIDDEN])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--layer-norm-op", action="store_true")
    a = ap.parse_args()
    model = build(a.layers, a.layer_norm_op)
    onnx.checker.check_model(model)
    onnx.save(model, a.out)


if __name__ == "__main__":
    main()
