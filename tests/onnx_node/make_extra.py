#!/usr/bin/env python3
"""Writes node tests in ONNX's own layout (model.onnx, test_data_set_0/) for behaviour that the
Debian libonnx-testdata (ONNX 1.12, opsets up to 17) does not cover: Resize's attributes of
opsets 18 and 19 (axes, keep_aspect_ratio_policy, antialias, half_pixel_symmetric) and its
float16 and integer inputs; Einsum's ellipses, broadcasting, implicit outputs, three operands
and the equations transformers use; EyeLike at a supported opset (ONNX's are at opset 9);
GroupNormalization at opsets 18 and 21 (ONNX 1.12 predates it). Expected outputs come from ONNX's reference implementation
(onnx.reference.ReferenceEvaluator), never from stitch. Tooling only; the files are committed.

    python3 -m venv venv && venv/bin/pip install onnx numpy
    venv/bin/python tests/onnx_node/make_extra.py tests/onnx_node/extra
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

ELEM = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16, np.int64: TensorProto.INT64}


def resize_case(out, name, x, opset, attrs, roi=None, scales=None, sizes=None):
    """One Resize of graph input x; roi, scales and sizes as initializers (known at compile time)."""
    inits, names = [], []
    for key, val, dt in (("roi", roi, np.float32), ("scales", scales, np.float32), ("sizes", sizes, np.int64)):
        if val is None:
            names.append("")
        else:
            inits.append(numpy_helper.from_array(np.array(val, dtype=dt), key))
            names.append(key)
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node("Resize", ["x"] + names, ["y"], name="resize", **attrs)
    elem = ELEM[x.dtype.type]
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", elem, list(x.shape))],
                              [helper.make_tensor_value_info("y", elem, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # readable by the libonnx the project builds with
    (y,) = ReferenceEvaluator(model).run(None, {"x": x})
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    onnx.save_tensor(numpy_helper.from_array(x, "x"), os.path.join(d, "test_data_set_0", "input_0.pb"))
    onnx.save_tensor(numpy_helper.from_array(y, "y"), os.path.join(d, "test_data_set_0", "output_0.pb"))
    print(f"{name}: {list(x.shape)} -> {list(y.shape)}")


def node_case(out, name, op, inputs, opset, attrs):
    """One `op` node of graph inputs x0, x1, ... (their data in test_data_set_0)."""
    names = [f"x{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], name=op.lower(), **attrs)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info(n, ELEM[x.dtype.type], list(x.shape))
                                             for n, x in zip(names, inputs)],
                              [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    (y,) = ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))
    d = os.path.join(out, name, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(out, name, "model.onnx"))
    for i, (n, x) in enumerate(zip(names, inputs)):
        onnx.save_tensor(numpy_helper.from_array(x, n), os.path.join(d, f"input_{i}.pb"))
    onnx.save_tensor(numpy_helper.from_array(y, "y"), os.path.join(d, "output_0.pb"))
    print(f"{name}: {[list(x.shape) for x in inputs]} -> {list(y.shape)}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    resize_case(out, "test_resize_stitch_axes_half_pixel_symmetric", x, 19,
                dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric", axes=[2, 3]),
                scales=[1.7, 0.6])
    resize_case(out, "test_resize_stitch_not_larger_nearest", x, 18,
                dict(mode="nearest", nearest_mode="round_prefer_ceil", keep_aspect_ratio_policy="not_larger",
                     axes=[3, 2]), sizes=[12, 9])
    resize_case(out, "test_resize_stitch_not_smaller_cubic", x, 18,
                dict(mode="cubic", keep_aspect_ratio_policy="not_smaller", axes=[2, 3]), sizes=[3, 3])
    resize_case(out, "test_resize_stitch_antialias_linear", x, 18,
                dict(mode="linear", antialias=1), scales=[1, 1, 0.4, 0.3])
    resize_case(out, "test_resize_stitch_antialias_cubic_exclude_outside", x, 18,
                dict(mode="cubic", antialias=1, exclude_outside=1, cubic_coeff_a=-0.5), sizes=[2, 3, 3, 2])
    resize_case(out, "test_resize_stitch_crop_extrapolate_axes", x, 18,
                dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", axes=[1, 3],
                     extrapolation_value=10.0), roi=[-0.2, -0.25, 1.3, 1.1], sizes=[4, 6])
    resize_case(out, "test_resize_stitch_batch_and_width", x, 18,
                dict(mode="linear", coordinate_transformation_mode="align_corners"), scales=[2, 1, 1, 1.5])
    resize_case(out, "test_resize_stitch_float16_bilinear", x.astype(np.float16), 18,
                dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"), scales=[1, 1, 2, 2])
    resize_case(out, "test_resize_stitch_int64_nearest", rng.integers(-1000, 1000, (1, 2, 3, 4)).astype(np.int64),
                13, dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
                roi=[], scales=[1, 1, 2.5, 0.5])

    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    einsums = {
        "xlnet_scores": ("ibnd,jbnd->bnij", [f(5, 2, 3, 4), f(6, 2, 3, 4)]),
        "funnel_scores": ("bind,bjnd->bnij", [f(2, 5, 3, 4), f(2, 6, 3, 4)]),
        "ellipsis_broadcast": ("...ij,...jk->...ik", [f(2, 1, 3, 4), f(5, 4, 2)]),
        "implicit_output": ("ij,jk", [f(3, 4), f(4, 5)]),
        "three_operands": ("ij,jk,kl->il", [f(2, 3), f(3, 4), f(4, 5)]),
        "summed_alone": ("ijk,jl->li", [f(2, 3, 4), f(3, 5)]),
        "outer_product": ("i,j->ij", [f(3), f(4)]),
        "diagonal_of_three": ("iii->i", [f(3, 3, 3)]),
        "trace_times_vector": ("ii,j->j", [f(4, 4), f(3)]),
        "to_scalar": ("ij,ij->", [f(3, 4), f(3, 4)]),
    }
    for name, (eq, xs) in einsums.items():
        node_case(out, f"test_einsum_stitch_{name}", "Einsum", xs, 12, dict(equation=eq))
    x = rng.standard_normal((3, 5)).astype(np.float32)
    node_case(out, "test_eyelike_stitch_above_diagonal", "EyeLike", [x], 13, dict(k=2))
    node_case(out, "test_eyelike_stitch_int64_below", "EyeLike", [x], 13, dict(k=-1, dtype=TensorProto.INT64))
    # GroupNormalization: scale and bias per group at opset 18, per channel at 21 (what PyTorch's
    # exporter writes for nn.GroupNorm at opset 21); feature maps and a sequence. (Float16 is a unit
    # test: a fused kernel rounds to half once, these tests' tolerance expects the per-op rounding.)
    x = rng.standard_normal((2, 6, 5, 7)).astype(np.float32)
    node_case(out, "test_group_normalization_stitch_per_group_18", "GroupNormalization",
              [x, f(3) + 1, f(3)], 18, dict(num_groups=3))
    node_case(out, "test_group_normalization_stitch_per_channel_21", "GroupNormalization",
              [x, f(6) + 1, f(6)], 21, dict(num_groups=2, epsilon=1e-3))
    node_case(out, "test_group_normalization_stitch_sequence_21", "GroupNormalization",
              [f(3, 8, 9), f(8) + 1, f(8)], 21, dict(num_groups=4))


if __name__ == "__main__":
    main()
