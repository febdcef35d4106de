#!/usr/bin/env python3
"""Writes the three subgraphs the fusion targets name, at BERT-base sizes, as ONNX models with
seeded random test data (outputs from numpy in float64, rounded to float32), for bench/gpu:

  layernorm   bias + residual + layer norm, the decomposed 9-op chain as exporters write it
              ([rows, 768]: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add)
  softmax     scale + additive mask + softmax over attention scores ([batch, 12, seq, seq])
  bias_gelu   bias + GELU in its erf form ([rows, 3072])
  ffn1_gelu   FFN1 with its bias and erf-form GELU: [ffn rows, 768] x [768, 3072] (the weight an
              input, so artifacts stay small), BERT-base's at batch 8 x sequence 128 by default;
              a library call and a GELU kernel, or one tiled GEMM kernel with the GELU in its
              epilogue (what `tiled_gemm_eff` in a --device-spec file decides; bench/gpu/prepare.sh
              compiles both)
  ln_ffn1_gelu  a layer norm in front of FFN1 + bias + erf GELU, the weight a constant ([ffn rows,
              768], BERT's first norm and FFN1; the norm an output too, as BERT's residual):
              stitchc moves the norm past the GEMM, or with --no-hoist-layer-norms keeps it
              (bench/gpu/prepare.sh compiles both)
  rms_gate    RMSNorm's reduction and row scale on a merged gate/up product, then the SiLU gate
              (LLaMA's MLP input once stitchc moves the row scale past the GEMM: [gate rows, H]
              and [gate rows, 2 I] in, [gate rows, I] out; LLaMA-7B's H 4096, I 11008 by
              default): a row kernel with wide values, its rows' blocks replicated

Needs (tooling only): pip install onnx numpy
Run: python3 bench/gpu/make_subgraphs.py OUT_DIR [--rows N] [--batch B] [--seq S]
       [--gate-rows R] [--llama H,I] [--ffn R,H,F] [--no-data]
"""
import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


WITH_DATA = True


def save(out, name, graph, feeds, outputs):  # outputs: computed only when test data is written
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="stitch-bench")
    onnx.checker.check_model(model)
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    if not WITH_DATA:
        return
    for i, (n, v) in enumerate(feeds.items()):
        onnx.save_tensor(numpy_helper.from_array(v, n), os.path.join(d, "test_data_set_0", f"input_{i}.pb"))
    for i, (n, v) in enumerate(outputs().items()):
        onnx.save_tensor(numpy_helper.from_array(v.astype(np.float32), n),
                         os.path.join(d, "test_data_set_0", f"output_{i}.pb"))
    print(f"{name}: {', '.join(f'{n} {list(v.shape)}' for n, v in feeds.items())}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--gate-rows", type=int, default=64)
    ap.add_argument("--llama", default="4096,11008", help="hidden and intermediate size of rms_gate")
    ap.add_argument("--ffn", default="1024,768,3072", help="rows, hidden and intermediate size of ffn1_gelu")
    ap.add_argument("--no-data", action="store_true", help="models only (timing needs no test data)")
    a = ap.parse_args()
    global WITH_DATA
    WITH_DATA = not a.no_data
    rng = np.random.default_rng(7)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    c = lambda n, v: numpy_helper.from_array(np.asarray(v, dtype=np.float32), n)

    # bias + residual + layer norm, decomposed
    h = 768
    x, res, bias, gamma, beta = f32(a.rows, h), f32(a.rows, h), f32(h), f32(h), f32(h)
    nodes = [helper.make_node("Add", ["x", "bias"], ["xb"]), helper.make_node("Add", ["xb", "res"], ["s"]),
             helper.make_node("ReduceMean", ["s"], ["mu"], axes=[-1]), helper.make_node("Sub", ["s", "mu"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["d2"]), helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["n"]), helper.make_node("Mul", ["n", "gamma"], ["g"]),
             helper.make_node("Add", ["g", "beta"], ["y"])]
    g = helper.make_graph(nodes, "layernorm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [a.rows, h]),
                           helper.make_tensor_value_info("res", TensorProto.FLOAT, [a.rows, h])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [a.rows, h])],
                          [c("bias", bias), c("gamma", gamma), c("beta", beta), c("two", 2.0), c("eps", 1e-12)])
    def layernorm():
        s = x.astype(np.float64) + bias + res
        mu = s.mean(-1, keepdims=True)
        return {"y": (s - mu) / np.sqrt(((s - mu) ** 2).mean(-1, keepdims=True) + 1e-12) * gamma + beta}
    save(a.out, "layernorm", g, {"x": x, "res": res}, layernorm)

    # scale + additive mask + softmax
    heads = 12
    scores = f32(a.batch, heads, a.seq, a.seq)
    mask = np.where(rng.random((a.batch, 1, 1, a.seq)) < 0.1, -10000.0, 0.0).astype(np.float32)
    nodes = [helper.make_node("Mul", ["scores", "scale"], ["sc"]), helper.make_node("Add", ["sc", "mask"], ["m"]),
             helper.make_node("Softmax", ["m"], ["p"], axis=-1)]
    g = helper.make_graph(nodes, "softmax",
                          [helper.make_tensor_value_info("scores", TensorProto.FLOAT, list(scores.shape)),
                           helper.make_tensor_value_info("mask", TensorProto.FLOAT, list(mask.shape))],
                          [helper.make_tensor_value_info("p", TensorProto.FLOAT, list(scores.shape))],
                          [c("scale", 0.125)])
    def softmax():
        z = scores.astype(np.float64) * 0.125 + mask
        z = np.exp(z - z.max(-1, keepdims=True))
        return {"p": z / z.sum(-1, keepdims=True)}
    save(a.out, "softmax", g, {"scores": scores, "mask": mask}, softmax)

    # bias + GELU, erf form
    f = 3072
    x, bias = f32(a.rows, f), f32(f)
    nodes = [helper.make_node("Add", ["x", "bias"], ["xb"]), helper.make_node("Div", ["xb", "sqrt2"], ["q"]),
             helper.make_node("Erf", ["q"], ["e"]), helper.make_node("Add", ["e", "one"], ["e1"]),
             helper.make_node("Mul", ["xb", "e1"], ["t"]), helper.make_node("Mul", ["t", "half"], ["y"])]
    g = helper.make_graph(nodes, "bias_gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [a.rows, f])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [a.rows, f])],
                          [c("bias", bias), c("sqrt2", math.sqrt(2.0)), c("one", 1.0), c("half", 0.5)])
    def bias_gelu():
        xb = x.astype(np.float64) + bias
        erf = np.vectorize(math.erf)
        return {"y": 0.5 * xb * (1 + erf(xb / math.sqrt(2.0)))}
    save(a.out, "bias_gelu", g, {"x": x}, bias_gelu)

    # FFN1 + bias + GELU, erf form
    rows, hid, f = (int(v) for v in a.ffn.split(","))
    x, w, bias = f32(rows, hid), (f32(hid, f) / math.sqrt(hid)).astype(np.float32), f32(f)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "bias"], ["xb"]),
             helper.make_node("Div", ["xb", "sqrt2"], ["q"]), helper.make_node("Erf", ["q"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["xb", "e1"], ["t"]),
             helper.make_node("Mul", ["t", "half"], ["y"])]
    g = helper.make_graph(nodes, "ffn1_gelu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, hid]),
                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [hid, f])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, f])],
                          [c("bias", bias), c("sqrt2", math.sqrt(2.0)), c("one", 1.0), c("half", 0.5)])
    def ffn1_gelu():
        xb = x.astype(np.float64) @ w.astype(np.float64) + bias
        erf = np.vectorize(math.erf)
        return {"y": 0.5 * xb * (1 + erf(xb / math.sqrt(2.0)))}
    save(a.out, "ffn1_gelu", g, {"x": x, "w": w}, ffn1_gelu)

    # Layer norm + FFN1 + bias + GELU, erf form, the weight a constant (stitchc moves the norm past
    # the GEMM only when it can fold the norm's weight into the GEMM's); the norm is an output too,
    # as BERT's post-norm residual for FFN2
    x = (f32(rows, hid) + 0.5).astype(np.float32)
    gamma, beta = (1 + 0.1 * f32(hid)).astype(np.float32), (0.1 * f32(hid)).astype(np.float32)
    nodes = [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["n"], axis=-1, epsilon=1e-12),
             helper.make_node("MatMul", ["n", "w"], ["h"]), helper.make_node("Add", ["h", "bias"], ["xb"]),
             helper.make_node("Div", ["xb", "sqrt2"], ["q"]), helper.make_node("Erf", ["q"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["xb", "e1"], ["t"]),
             helper.make_node("Mul", ["t", "half"], ["y"])]
    g = helper.make_graph(nodes, "ln_ffn1_gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, hid])],
                          [helper.make_tensor_value_info("n", TensorProto.FLOAT, [rows, hid]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, f])],
                          [c("gamma", gamma), c("beta", beta), c("w", w), c("bias", bias), c("sqrt2", math.sqrt(2.0)),
                           c("one", 1.0), c("half", 0.5)])
    def ln_ffn1_gelu():
        s = x.astype(np.float64)
        mu = s.mean(-1, keepdims=True)
        n = (s - mu) / np.sqrt(((s - mu) ** 2).mean(-1, keepdims=True) + 1e-12) * gamma + beta
        xb = n @ w.astype(np.float64) + bias
        erf = np.vectorize(math.erf)
        return {"n": n, "y": 0.5 * xb * (1 + erf(xb / math.sqrt(2.0)))}
    save(a.out, "ln_ffn1_gelu", g, {"x": x}, ln_ffn1_gelu)

    # RMSNorm's row scale on the gate/up product, SiLU gate
    h, inter = (int(v) for v in a.llama.split(","))
    x, p = f32(a.gate_rows, h), f32(a.gate_rows, 2 * inter)
    nodes = [helper.make_node("Pow", ["x", "two"], ["x2"]),
             helper.make_node("ReduceMean", ["x2"], ["ms"], axes=[-1]),
             helper.make_node("Add", ["ms", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Reciprocal", ["sd"], ["r"]), helper.make_node("Mul", ["p", "r"], ["ps"]),
             helper.make_node("Slice", ["ps", "zero", "mid", "last"], ["gate"]),
             helper.make_node("Slice", ["ps", "mid", "end", "last"], ["up"]),
             helper.make_node("Sigmoid", ["gate"], ["sg"]), helper.make_node("Mul", ["gate", "sg"], ["silu"]),
             helper.make_node("Mul", ["silu", "up"], ["y"])]
    i64 = lambda n, v: numpy_helper.from_array(np.asarray([v], dtype=np.int64), n)
    g = helper.make_graph(nodes, "rms_gate",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [a.gate_rows, h]),
                           helper.make_tensor_value_info("p", TensorProto.FLOAT, [a.gate_rows, 2 * inter])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [a.gate_rows, inter])],
                          [c("two", 2.0), c("eps", 1e-6), i64("zero", 0), i64("mid", inter),
                           i64("end", 2 * inter), i64("last", -1)])
    def rms_gate():
        r = 1 / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6)
        ps = p.astype(np.float64) * r
        gate, up = ps[:, :inter], ps[:, inter:]
        return {"y": gate / (1 + np.exp(-gate)) * up}
    save(a.out, "rms_gate", g, {"x": x, "p": p}, rms_gate)


if __name__ == "__main__":
    main()
