#!/usr/bin/env python3
"""Inputs a run must refuse, for bench/gpu/prepare.sh's fault checks: copies the data set SRC
(ONNX test-data layout: input_0.pb, ...) to DST with input_INDEX.pb's values replaced by VALUES,
a Python list expression of that input's element count (its name, shape and type kept).
    bad_input.py SRC DST INDEX VALUES
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper

if len(sys.argv) != 5:
    sys.exit(__doc__)
src, dst, index, values = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
os.makedirs(dst, exist_ok=True)
for f in os.listdir(src):
    if f.startswith("input_") and f.endswith(".pb"):
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))
path = os.path.join(dst, f"input_{index}.pb")
old = onnx.load_tensor(path)
was = numpy_helper.to_array(old)
new = np.array(eval(values), dtype=was.dtype)  # a literal list written in prepare.sh
if new.size != was.size:
    sys.exit(f"bad_input.py: {path} holds {was.size} values, VALUES gives {new.size}")
onnx.save_tensor(numpy_helper.from_array(new.reshape(was.shape), old.name), path)
