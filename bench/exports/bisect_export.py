#!/usr/bin/env python3
"""Where an export departs from PyTorch: for one model of export.py's table, the first values of
its ONNX file that differ from the PyTorch program they were translated from. Used when
check.sh says "the export differs from PyTorch" (stitch matches onnxruntime on the same file, and
both differ from PyTorch's outputs), to find the node to report to the exporter.

The model is built and its first data set's inputs made as export.py does, then exported with
torch.export and translated to ONNX with torch.onnx. The exported program runs under torch.fx's
interpreter, which keeps every node's value, and onnxruntime runs the ONNX file with every value
made an output and its graph optimizations off. The translation names its values after the
program's nodes, so the two are matched by name. Values are walked in the program's order; a value
"departs" when it differs beyond the tolerance while every value it is computed from agreed (or
was not compared), so the first departure is the translation's fault and later ones follow from
it. Each line names the program node, its ATen op, the ONNX node that produced the value, the
largest difference and the model source line the program node came from.

    venv/bin/python bench/exports/bisect_export.py NAME [--atol A] [--rtol R] [--show K]

Needs torch, transformers, onnx, onnxscript and onnxruntime (pip). Tooling only: nothing in the
compiler or the runtime imports Python.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import torch

import exporters
import text_models
from export import models


def capture(name):
    """The (make_model, keys, vocab) of a text export in the table, without exporting it."""
    got = {}

    def grab(_name, make_model, keys, vocab, *_rest):
        got.update(make_model=make_model, keys=list(keys), vocab=vocab)

    # text_models' text() looks export_text up when an entry runs; more_models' entries use text()
    saved = exporters.export_text, text_models.export_text
    exporters.export_text = text_models.export_text = grab
    try:
        table = models()
        if name not in table:
            sys.exit(f"unknown model '{name}'; known: {', '.join(table)}")
        table[name]("")
    finally:
        exporters.export_text, text_models.export_text = saved
    if not got:
        sys.exit(f"'{name}' is not a text export (input_ids, attention_mask): only those are bisected")
    return got


class Recorder(torch.fx.Interpreter):
    """Runs a program and keeps each node's tensor value by node name."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        v = super().run_node(n)
        if isinstance(v, torch.Tensor):
            self.values[n.name] = v.detach()
        return v


def onnx_values(path, feed):
    """Every value of the ONNX file at `path` by name, from onnxruntime with optimizations off."""
    m = onnx.load(path)
    known = {o.name for o in m.graph.output}
    typed = {vi.name: vi for vi in m.graph.value_info}
    for node in m.graph.node:
        for o in node.output:
            if o and o not in known and o in typed:
                m.graph.output.append(typed[o])
                known.add(o)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feed))), m


def source_line(node):
    """The last frame of a program node's stack trace: the model code it came from."""
    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File "):
            loc = lines[i].split(",")
            where = os.path.basename(loc[0].split('"')[1]) + ":" + loc[1].split()[-1]
            code = lines[i + 1] if i + 1 < len(lines) else ""
            return f"{where}: {code}"
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--show", type=int, default=5, help="departures to list (default 5)")
    ap.add_argument("--print", nargs="*", default=[], metavar="VALUE",
                    help="print these values' first elements, the program's and onnxruntime's")
    a = ap.parse_args()

    spec = capture(a.name)
    torch.manual_seed(0)  # as export_text: the weights are the seed's
    model = spec["make_model"]().eval()
    w = exporters.Wrap(model, spec["keys"]).eval()
    ids, mask = exporters.text_inputs(spec["vocab"])
    with torch.no_grad():
        eager = w(ids, mask)
        ep = torch.export.export(w, (ids, mask))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx_program = torch.onnx.export(ep, (ids, mask), dynamo=True, opset_version=18,
                                         input_names=["input_ids", "attention_mask"], output_names=spec["keys"])
        onnx_program.save(path, external_data=False)
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
        ov, m = onnx_values(path, feed)
    # The program as decomposed for the translation: its node names are the ONNX values' names.
    translated = onnx_program.exported_program
    with torch.no_grad():
        rec = Recorder(translated.module())
        prog = rec.run(ids, mask)
    for k, (x, y) in enumerate(zip(eager, prog)):
        d = float((x.double() - y.double()).abs().max())
        print(f"output {spec['keys'][k]}: the decomposed program against eager PyTorch: max |diff| {d:.3g}")
    producer = {o: nd for nd in m.graph.node for o in nd.output}
    for k, key in enumerate(spec["keys"]):
        d = float(np.abs(ov[key].astype(np.float64) - prog[k].double().numpy()).max())
        print(f"output {key}: onnxruntime on the export against the program: max |diff| {d:.3g}")

    graph = translated.module().graph
    status = {}  # node name -> "same", "differs" or "unseen"
    compared, departures = 0, []
    for n in graph.nodes:
        ins = [i.name for i in n.all_input_nodes]
        if n.name not in rec.values or n.name not in ov:
            status[n.name] = "unseen"
            continue
        want, got = rec.values[n.name], ov[n.name]
        if tuple(want.shape) != tuple(got.shape):
            status[n.name] = "unseen"
            continue
        compared += 1
        if want.dtype == torch.bool or not (want.is_floating_point() or want.is_complex()):
            bad = int((want.numpy() != got).sum())
            diff = f"{bad} of {want.numel()} elements differ"
        else:
            w64, g64 = want.double().numpy(), got.astype(np.float64)
            err = np.abs(w64 - g64)
            bad = int((~(err <= a.atol + a.rtol * np.abs(w64)) & ~(np.isnan(w64) & np.isnan(g64))).sum())
            diff = f"max |diff| {float(np.nanmax(err)) if err.size else 0:.3g} ({bad} of {want.numel()} elements)"
        if not bad:
            status[n.name] = "same"
            continue
        status[n.name] = "differs"
        if all(status.get(i) != "differs" for i in ins):
            p = producer.get(n.name)
            departures.append(f"{n.name} = {n.target}({', '.join(ins)}): {diff}; ONNX node "
                              f"'{p.name if p else '?'}' ({p.op_type if p else '?'}); {source_line(n)}")
    print(f"{compared} values compared by name")
    np.set_printoptions(precision=5, threshold=16, edgeitems=4)
    for name in a.print:
        if name not in rec.values or name not in ov:
            print(f"{name}: {'not a program value' if name not in rec.values else 'not an ONNX value'}")
            continue
        p = producer.get(name)
        print(f"{name} (ONNX node '{p.name if p else '?'}'):\n  program:     {rec.values[name].numpy().reshape(-1)[:8]}"
              f"\n  onnxruntime: {ov[name].reshape(-1)[:8]}")
    if not departures:
        print("no value departs from the program within the tolerance")
    for line in departures[:a.show]:
        print("departs:", line)
    if len(departures) > a.show:
        print(f"... and {len(departures) - a.show} more departures")


if __name__ == "__main__":
    main()
