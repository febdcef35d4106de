#!/usr/bin/env python3
"""Writes transposed convolutions at the sizes of real decoders and vocoders as ONNX models (the
weights and bias constants, then the activation their model puts after them) with seeded random
test data whose expected outputs come from PyTorch (conv_transpose in float64, rounded to the
model's type), for timing stitchc's two forms of ConvTranspose on a GPU: cuDNN's backward-data
convolution (the default) and the forward convolution over the input with zeros between its
values (--conv-transpose-as-conv).

  hifigan_up1   HiFi-GAN V1's first upsampling: 512 -> 256 channels, kernel 16, stride 8, pad 4,
                over 256 mel frames (1-D), then LeakyReLU 0.1
  hifigan_up4   its last: 64 -> 32 channels, kernel 4, stride 2, pad 1, over 16384 samples
  dcgan_2d      a 2-D decoder block: 256 -> 128 channels, kernel 4, stride 2, pad 1, 32 x 32 ->
                64 x 64, batch 8, then ReLU
  unet_2d       a U-Net's up path: 256 -> 128 channels, kernel 2, stride 2, 64 x 64 -> 128 x 128,
                batch 8, then ReLU
  unet_3d       a 3-D U-Net's: 64 -> 32 channels, kernel 2, stride 2, 16 x 32 x 32 -> 32 x 64 x 64,
                batch 2, then ReLU

Each as NAME_f32 and NAME_f16. Needs (tooling only): pip install onnx numpy torch
Run: python3 bench/gpu/make_convt.py OUT_DIR [--small]   (--small: a quarter of each extent)
"""
import argparse
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

CASES = {
    # name: (x shape, w shape, strides, pads (begin = end), activation)
    "hifigan_up1": ((1, 512, 256), (512, 256, 16), [8], [4], "leaky"),
    "hifigan_up4": ((1, 64, 16384), (64, 32, 4), [2], [1], "leaky"),
    "dcgan_2d": ((8, 256, 32, 32), (256, 128, 4, 4), [2, 2], [1, 1], "relu"),
    "unet_2d": ((8, 256, 64, 64), (256, 128, 2, 2), [2, 2], [0, 0], "relu"),
    "unet_3d": ((2, 64, 16, 32, 32), (64, 32, 2, 2, 2), [2, 2, 2], [0, 0, 0], "relu"),
}


def write(out, name, x, w, b, strides, pads, act, np_type, onnx_type):
    conv = {1: torch.nn.functional.conv_transpose1d, 2: torch.nn.functional.conv_transpose2d,
            3: torch.nn.functional.conv_transpose3d}[len(strides)]
    xt, wt, bt = (torch.from_numpy(a.astype(np_type).astype(np.float64)) for a in (x, w, b))
    y = conv(xt, wt, bt, stride=strides, padding=pads)
    y = torch.nn.functional.leaky_relu(y, 0.1) if act == "leaky" else torch.relu(y)
    y = y.numpy().astype(np_type)
    inits = [numpy_helper.from_array(w.astype(np_type), "w"), numpy_helper.from_array(b.astype(np_type), "b")]
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["t"], name="up", strides=strides,
                              pads=pads + pads, kernel_shape=list(w.shape[2:]))]
    nodes.append(helper.make_node("LeakyRelu", ["t"], ["y"], name="act", alpha=0.1) if act == "leaky"
                 else helper.make_node("Relu", ["t"], ["y"], name="act"))
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", onnx_type, list(x.shape))],
                              [helper.make_tensor_value_info("y", onnx_type, list(y.shape))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="stitch-bench")
    onnx.checker.check_model(model)
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    onnx.save_tensor(numpy_helper.from_array(x.astype(np_type), "x"), os.path.join(d, "test_data_set_0", "input_0.pb"))
    onnx.save_tensor(numpy_helper.from_array(y, "y"), os.path.join(d, "test_data_set_0", "output_0.pb"))
    print(f"{name}: {list(x.shape)} -> {list(y.shape)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(23)
    for name, (xs, ws, strides, pads, act) in CASES.items():
        if a.small:
            xs = xs[:2] + tuple(max(2, e // 4) for e in xs[2:])
        fan = ws[0] * int(np.prod(ws[2:])) // int(np.prod(strides))
        x = rng.standard_normal(xs).astype(np.float32)
        w = (rng.standard_normal(ws) / np.sqrt(fan)).astype(np.float32)
        b = rng.standard_normal(ws[1]).astype(np.float32) * 0.1
        write(a.out, f"{name}_f32", x, w, b, strides, pads, act, np.float32, TensorProto.FLOAT)
        write(a.out, f"{name}_f16", x, w, b, strides, pads, act, np.float16, TensorProto.FLOAT16)


if __name__ == "__main__":
    main()
