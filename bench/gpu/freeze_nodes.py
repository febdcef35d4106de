#!/usr/bin/env python3
"""Copies ONNX node tests for a GPU run through `stitchc compile` and `stitchc run --expect`, which
take a model as a user has it: where stitchc needs an input at compile time (DFT's length, a
ConvTranspose's weights in the form only the Conv rewrite takes), that input becomes an
initializer, as the node-test runner does (tests/onnx_node/node_tests.cc): integer inputs first,
then every input but the first.
    freeze_nodes.py STITCHC OUT_DIR [--level N --suffix S] TEST_DIR...
--level 2 --suffix _frozen: every input but the first frozen, the copy named NAME_frozen (a
ConvTranspose's weights then constants, so it takes the sub-pixel form).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import onnx
from onnx import numpy_helper


def as_declared(t, vi):
    """ONNX 1.12's test data stores bfloat16 tensors as UINT16 (the same bits): retagged as the
    model declares them, as the node-test runner reads them."""
    if t.data_type == onnx.TensorProto.UINT16 and vi.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
        t.data_type = onnx.TensorProto.BFLOAT16
    t.name = vi.name
    return t


def frozen_copy(src, dst, level):
    model = onnx.load(os.path.join(src, "model.onnx"))
    data = os.path.join(src, "test_data_set_0")
    inputs = sorted(f for f in os.listdir(data) if f.startswith("input_"))
    tensors = [onnx.load_tensor(os.path.join(data, f)) for f in inputs]
    real = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    keep = []
    for i, (vi, t) in enumerate(zip(real, tensors)):
        t = as_declared(t, vi)
        kind = numpy_helper.to_array(t).dtype.kind if t.data_type != onnx.TensorProto.BFLOAT16 else "f"
        freeze = (level == 1 and kind in "iub") or (level == 2 and i > 0)
        if freeze:
            model.graph.initializer.append(t)
            model.graph.input.remove(vi)
        else:
            keep.append(t)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(os.path.join(dst, "test_data_set_0"))
    onnx.save(model, os.path.join(dst, "model.onnx"))
    for i, t in enumerate(keep):
        onnx.save_tensor(t, os.path.join(dst, "test_data_set_0", f"input_{i}.pb"))
    outputs = {o.name: o for o in model.graph.output}
    for f in sorted(os.listdir(data)):
        if f.startswith("output_"):
            t = onnx.load_tensor(os.path.join(data, f))
            if t.name in outputs:
                t = as_declared(t, outputs[t.name])
            onnx.save_tensor(t, os.path.join(dst, "test_data_set_0", f))


def main():
    stitchc, out, tests = sys.argv[1], sys.argv[2], sys.argv[3:]
    levels, suffix = (0, 1, 2), ""
    if tests[:1] == ["--level"]:
        levels, suffix, tests = (int(tests[1]),), tests[3], tests[4:]
    os.makedirs(out, exist_ok=True)
    for t in tests:
        name = os.path.basename(t.rstrip("/")) + suffix
        for level in levels:
            frozen_copy(t, os.path.join(out, name), level)
            with tempfile.TemporaryDirectory() as tmp:
                r = subprocess.run([stitchc, "compile", os.path.join(out, name, "model.onnx"), "-o", tmp,
                                    "--no-nvcc", "--no-emu"], capture_output=True, text=True)
            if r.returncode == 0:
                print(f"{name}: level {level}")
                break
        else:
            shutil.rmtree(os.path.join(out, name))
            print(f"{name}: not compiled: {r.stderr.strip().splitlines()[-1][:200]}")


if __name__ == "__main__":
    main()
