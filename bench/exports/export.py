#!/usr/bin/env python3
"""Exports transformer and CNN models that are not in models/ to ONNX, each with test data sets of
PyTorch's outputs, to try stitchc as a new user would (docs/fusion-results.md, "Transformer and
CNN exports not in the repo"). Weights are seeded random (no download); transformers at batch 2,
sequence 32 with the axes named batch and sequence (and two more data sets at batch 1, sequence 7
and batch 3, sequence 45), CNNs at 1x3x224x224.

    python3 -m venv venv && venv/bin/pip install torch transformers torchvision onnx onnxscript
    venv/bin/pip install diffusers    # only for the unet2d entries
    venv/bin/pip install timm         # only for the timm_ entries (timm_models.py)
    venv/bin/python bench/exports/export.py OUT [NAME ...]   # bert_base_12l(_f16) only when named
    bash bench/exports/check.sh OUT [NAME ...]     # compile, run on emu against PyTorch
    PYTHON=venv/bin/python bash bench/exports/check.sh OUT ...  # + onnxruntime (pip) where PyTorch differs
    venv/bin/python bench/exports/bisect_export.py NAME   # where an export departs from PyTorch

The table of models is in text_models.py, more_models.py and timm_models.py, the helpers that export them in
exporters.py. Tooling only: nothing in the compiler or the runtime imports Python.
"""
import os
import sys

from exporters import NAMED_ONLY
from more_models import more_models
from text_models import text_models
from timm_models import timm_models


def models():
    """Name -> a function that exports that model into a directory."""
    return timm_models(more_models(text_models()))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    table = models()
    names = sys.argv[2:] or [n for n in table if n not in NAMED_ONLY]
    for n in names:
        if n not in table:
            sys.exit(f"unknown model '{n}'; known: {', '.join(table)}")
        d = os.path.join(out, n)
        os.makedirs(d, exist_ok=True)
        print(f"exporting {n} -> {d}", flush=True)
        table[n](d)


if __name__ == "__main__":
    main()
