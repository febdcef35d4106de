#!/usr/bin/env python3
"""Exports transformer and CNN models that are not in models/ to ONNX, each with one test data set
of PyTorch's outputs, to try stitchc as a new user would (docs/fusion-results.md, "Transformer and
CNN exports not in the repo"). Weights are seeded random (no download); transformers at batch 2,
sequence 32 with the axes named batch and sequence, CNNs at 1x3x224x224.

    python3 -m venv venv && venv/bin/pip install torch transformers torchvision onnx onnxscript
    venv/bin/python bench/exports/export.py OUT [NAME ...]
    bash bench/exports/check.sh OUT [NAME ...]     # compile, run on emu against PyTorch

Tooling only: nothing in the compiler or the runtime imports Python.
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

BATCH, SEQ = 2, 32


def save_case(out, names_in, inputs, names_out, outputs):
    d = os.path.join(out, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    for i, (n, t) in enumerate(zip(names_in, inputs)):
        onnx.save_tensor(numpy_helper.from_array(t.numpy(), n), os.path.join(d, f"input_{i}.pb"))
    for i, (n, t) in enumerate(zip(names_out, outputs)):
        onnx.save_tensor(numpy_helper.from_array(t.detach().numpy(), n), os.path.join(d, f"output_{i}.pb"))


def text_inputs(vocab):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[1, SEQ - 5:] = 0  # the second sequence is padded
    return ids, mask


class Wrap(torch.nn.Module):
    """Positional (input_ids, attention_mask) -> the model's tensors, in a fixed order."""

    def __init__(self, m, keys):
        super().__init__()
        self.m, self.keys = m, keys

    def forward(self, input_ids, attention_mask):
        r = self.m(input_ids=input_ids, attention_mask=attention_mask)
        return tuple(r[k] for k in self.keys)


def export_text(name, model, keys, vocab, dynamo, opset, out):
    torch.manual_seed(0)
    model.eval()
    w = Wrap(model, keys).eval()
    ids, mask = text_inputs(vocab)
    with torch.no_grad():
        ref = w(ids, mask)
    path = os.path.join(out, "model.onnx")
    if dynamo:
        b, s = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("sequence", min=2, max=1024)
        torch.onnx.export(w, (ids, mask), path, dynamo=True, opset_version=opset,
                          input_names=["input_ids", "attention_mask"], output_names=list(keys),
                          dynamic_shapes={"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}},
                          external_data=False)
    else:
        axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
        torch.onnx.export(w, (ids, mask), path, dynamo=False, opset_version=opset,
                          input_names=["input_ids", "attention_mask"], output_names=list(keys),
                          dynamic_axes=axes)
    save_case(out, ["input_ids", "attention_mask"], [ids, mask], list(keys), ref)


def export_cnn(name, ctor, out):
    torch.manual_seed(0)
    model = ctor(weights=None).eval()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, (x,), os.path.join(out, "model.onnx"), dynamo=False, opset_version=17,
                      input_names=["input"], output_names=["output"])
    save_case(out, ["input"], [x], ["output"], [y])


def models():
    import transformers as tf
    import torchvision.models as tv
    bert_base = dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072)
    bert_small = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512)
    gpt2 = dict(n_embd=128, n_layer=2, n_head=4)
    llama = dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                 intermediate_size=688, vocab_size=1000)
    t = {
        "bert_base_2l": lambda o: export_text("bert_base_2l", tf.BertModel(tf.BertConfig(**bert_base)),
                                              ["last_hidden_state", "pooler_output"], 30522, False, 16, o),
        "bert_dynamo": lambda o: export_text("bert_dynamo", tf.BertModel(tf.BertConfig(**bert_small)),
                                             ["last_hidden_state"], 30522, True, 18, o),
        "gpt2_dynamo": lambda o: export_text("gpt2_dynamo", tf.GPT2Model(tf.GPT2Config(**gpt2)),
                                             ["last_hidden_state"], 50257, True, 18, o),
        "llama_2l": lambda o: export_text("llama_2l", tf.LlamaModel(tf.LlamaConfig(**llama)),
                                          ["last_hidden_state"], 1000, True, 18, o),
        "llama_ts": lambda o: export_text("llama_ts", tf.LlamaModel(tf.LlamaConfig(**llama)),
                                          ["last_hidden_state"], 1000, False, 17, o),
    }
    for n in ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x0_5", "convnext_tiny"]:
        t[n] = (lambda ctor: lambda o: export_cnn(None, ctor, o))(getattr(tv, n))
    return t


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    table = models()
    names = sys.argv[2:] or list(table)
    for n in names:
        if n not in table:
            sys.exit(f"unknown model '{n}'; known: {', '.join(table)}")
        d = os.path.join(out, n)
        os.makedirs(d, exist_ok=True)
        print(f"exporting {n} -> {d}", flush=True)
        table[n](d)


if __name__ == "__main__":
    main()
