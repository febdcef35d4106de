#!/usr/bin/env python3
"""onnxruntime's outputs for one data set of an export, written as a data set of their own (the
same input_K.pb files, output_K.pb from onnxruntime), so that `stitchc run --expect` can compare
against a second oracle where it disagrees with PyTorch's outputs: if stitch matches onnxruntime
and both differ from PyTorch, the ONNX file itself computes something else than the PyTorch model
(an exporter's translation), not stitch. Needs onnx and onnxruntime (pip). Tooling only.

    ort_outputs.py MODEL.onnx DATA_SET_DIR OUT_DIR"""
import glob
import os
import shutil
import sys

import onnx
import onnxruntime as ort
from onnx import numpy_helper


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    model, data, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feed = {}
    for k, path in enumerate(sorted(glob.glob(os.path.join(data, "input_*.pb")),
                                    key=lambda p: int(p.rsplit("_", 1)[1][:-3]))):
        t = onnx.TensorProto()
        t.ParseFromString(open(path, "rb").read())
        feed[t.name or names[k]] = numpy_helper.to_array(t)
        shutil.copy(path, out)
    for k, (o, v) in enumerate(zip(sess.get_outputs(), sess.run(None, feed))):
        with open(os.path.join(out, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, o.name).SerializeToString())


if __name__ == "__main__":
    main()
