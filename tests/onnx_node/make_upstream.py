#!/usr/bin/env python3
"""Writes ONNX's own node tests for ops newer than Debian's test data into tests/onnx_node/upstream.

Debian's libonnx-testdata is ONNX 1.12's (opsets up to 17). The onnx Python package carries the
definitions of every node test (onnx.backend.test.case.node): the model, its inputs and the
outputs of ONNX's reference implementation. This script writes the cases of the ops below in the
layout of the Debian data (model.onnx, test_data_set_N/input_K.pb and output_K.pb), so
stitch_node_tests runs them as it runs the rest.

Attention's "_expanded" variants (the op's function body) are left out: each is the same case as
the op's own test, in a model ten times its size. So are the quantization cases of element types the
IR does not carry (UNCARRIED_TYPES).

    python3 tests/onnx_node/make_upstream.py tests/onnx_node/upstream   # with onnx 1.23.2
"""
import os
import shutil
import sys
import warnings

import onnx
from onnx import TensorProto, numpy_helper
from onnx.backend.test.case import node

# Test-name prefixes: the opset-23 transformer ops, then the ops and op versions of opsets 24 to 28
# that the op table claims (BitCast: opset 26), then Col2Im (opset 18), TopK's newer cases (ties, integer types) and
# QuantizeLinear and DequantizeLinear's newest versions (int16, blocked scales, output_dtype) and
# GridSample's (opset 22: N-D, the modes linear and cubic), and QLinearMatMul's (opset 21: int8
# operands, float16 scales).
PREFIXES = [
    "test_attention",
    "test_rms_normalization",
    "test_rotary_embedding",
    "test_swish",
    "test_tensorscatter",
    "test_cumprod",
    "test_range",
    "test_mod",
    "test_swiglu",
    "test_bitcast",
    "test_col2im",
    "test_top_k",
    "test_quantizelinear",
    "test_dequantizelinear",
    "test_gridsample",
    "test_qlinearmatmul",
]

# Element types the IR does not carry (8-bit floats, 4-bit and 2-bit integers, 4-bit floats): the
# cases quantizing to them or from them are left out, as stitch refuses such a model when reading it.
UNCARRIED_TYPES = {
    TensorProto.FLOAT8E4M3FN,
    TensorProto.FLOAT8E4M3FNUZ,
    TensorProto.FLOAT8E5M2,
    TensorProto.FLOAT8E5M2FNUZ,
    TensorProto.UINT4,
    TensorProto.INT4,
    TensorProto.FLOAT4E2M1,
    TensorProto.UINT2,
    TensorProto.INT2,
}


def carried(model):
    g = model.graph
    types = [v.type.tensor_type.elem_type for v in list(g.input) + list(g.output)]
    types += [t.data_type for t in g.initializer]
    return not any(t in UNCARRIED_TYPES for t in types)


def wanted(name):
    if not any(name.startswith(p) for p in PREFIXES):
        return False
    return not (name.startswith("test_attention") and name.endswith("_expanded"))


def write_tensor(path, x, name):
    proto = x if isinstance(x, TensorProto) else numpy_helper.from_array(x, name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_upstream.py OUT_DIR")
    out = sys.argv[1]
    warnings.filterwarnings("ignore")  # the case definitions divide by zero on purpose
    cases = [c for c in node.collect_testcases(None) if wanted(c.name) and carried(c.model)]
    shutil.rmtree(out, ignore_errors=True)
    for c in cases:
        d = os.path.join(out, c.name)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(c.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(c.data_sets):
            sd = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(sd)
            for j, x in enumerate(inputs):
                write_tensor(os.path.join(sd, f"input_{j}.pb"), x, c.model.graph.input[j].name)
            for j, x in enumerate(outputs):
                write_tensor(os.path.join(sd, f"output_{j}.pb"), x, c.model.graph.output[j].name)
    print(f"{len(cases)} node tests of onnx {onnx.__version__} written to {out}")


if __name__ == "__main__":
    main()
