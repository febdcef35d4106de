#!/usr/bin/env python3
"""Where a quantized model's outputs part from onnxruntime's: the first quantized activation that differs.

A quantized model amplifies float differences of an ulp: a value that sits on a rounding boundary in
onnxruntime may land a step away in stitch (or in onnxruntime's own optimized session), and the step
spreads through the layers after it. This script makes every quantized activation (the outputs of
QuantizeLinear, DynamicQuantizeLinear, QLinearMatMul and QLinearConv) and the float value each
quantization reads a graph output too, runs the model with onnxruntime (graph optimizations off)
and with stitchc on emu, and prints them in the graph's order with their differences: a fusion bug
shows as a float value far from onnxruntime's, a boundary case as float values within an ulp and a
quantized one a step away.

    python3 bench/exports/quantized_diff.py STITCHC MODEL_DIR [--data test_data_set_0] [stitchc compile options]

Tooling only (needs onnx and onnxruntime); writes under a temporary directory.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

QUANTIZING = {"QuantizeLinear", "DynamicQuantizeLinear", "QLinearMatMul", "QLinearConv"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stitchc")
    ap.add_argument("model_dir")
    ap.add_argument("--data", default="test_data_set_0")
    args, compile_options = ap.parse_known_args()
    model = onnx.load(os.path.join(args.model_dir, "model.onnx"))
    declared = {o.name for o in model.graph.output}
    watched = []
    for n in model.graph.node:
        if n.domain not in ("", "ai.onnx") or n.op_type not in QUANTIZING:
            continue
        names = [n.output[0]] + ([n.input[0]] if n.op_type in ("QuantizeLinear", "DynamicQuantizeLinear") else [])
        for name in names:
            if name not in declared and name not in watched:
                watched.append(name)
    if not watched:
        sys.exit("the model quantizes nothing (no QuantizeLinear, DynamicQuantizeLinear, QLinearMatMul or QLinearConv)")
    for name in watched:
        model.graph.output.append(helper.make_empty_tensor_value_info(name))

    work = tempfile.mkdtemp(prefix="quantized_diff_")
    path = os.path.join(work, "model.onnx")
    onnx.save(model, path)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    files = sorted(glob.glob(os.path.join(args.model_dir, args.data, "input_*.pb")))
    feed = {n: numpy_helper.to_array(onnx.load_tensor(f)) for n, f in zip(names, files)}
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))

    data = os.path.join(work, "data")
    os.makedirs(data)
    for i, n in enumerate(names):
        onnx.save_tensor(numpy_helper.from_array(feed[n], n), os.path.join(data, f"input_{i}.pb"))
    artifact, got_dir = os.path.join(work, "artifact"), os.path.join(work, "got")
    shapes = []
    for n in names:
        shapes += ["--shape", f"{n}={'x'.join(str(d) for d in feed[n].shape) or 'scalar'}"]
    subprocess.run([args.stitchc, "compile", path, "-o", artifact, "--no-nvcc", *shapes, *compile_options],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([args.stitchc, "run", artifact, "--backend", "emu", "--inputs", data, "--save-outputs", got_dir],
                   check=True, stdout=subprocess.DEVNULL)
    outputs = [o.name for o in sess.get_outputs()]
    got = {n: numpy_helper.to_array(onnx.load_tensor(os.path.join(got_dir, f"output_{i}.pb")))
           for i, n in enumerate(outputs)}

    print(f"{'value':48} {'type':7} {'max abs diff':>13} {'differ':>9}")
    first = None
    for name in watched + [o for o in outputs if o in declared]:
        a, b = got[name], want[name]
        quantized = a.dtype in (np.int8, np.uint8)
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        differ = int((diff > 0).sum()) if quantized else int((diff > 1e-4 + 1e-3 * np.abs(b)).sum())
        if quantized and differ and first is None:
            first = name
        print(f"{name[:48]:48} {str(a.dtype):7} {diff.max() if diff.size else 0.0:13.3g} {differ:9}")
    print(f"first quantized value that differs: {first or 'none'} (artifacts in {work})")


if __name__ == "__main__":
    main()
