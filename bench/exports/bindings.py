#!/usr/bin/env python3
# Shape bindings of one data set of an export (bench/exports/export.py): "--shape NAME=DxD" for
# each input (its input_K.pb: a TensorProto's dims, field 1, and name, field 8), read without
# the onnx package; with --label, the dims of its attention_mask (else of its first input) as BxS:
# batch x sequence, or batch x (past + 1) for a decoding step.
#   bench/exports/bindings.py DATA_SET_DIR [--label]
import glob, os, sys
def parse(path):
    b = open(path, "rb").read()
    i, dims, name = 0, [], ""
    def varint():
        nonlocal i
        v = s = 0
        while True:
            c = b[i]; i += 1; v |= (c & 0x7F) << s; s += 7
            if c < 0x80: return v
    while i < len(b):
        key = varint(); field, wire = key >> 3, key & 7
        if wire == 0:
            v = varint()
            if field == 1: dims.append(v)
        elif wire == 2:
            n = varint(); end = i + n
            if field == 1:
                while i < end: dims.append(varint())
            elif field == 8: name = b[i:end].decode()
            i = end
        elif wire == 1: i += 8
        elif wire == 5: i += 4
        else: break
    return name, dims
files = sorted(glob.glob(os.path.join(sys.argv[1], "input_*.pb")), key=lambda f: int(f.split("_")[-1][:-3]))
ins = [parse(f) for f in files]
if len(sys.argv) > 2:
    label = dict(ins).get("attention_mask", ins[0][1])
    print("x".join(map(str, label)))
else:
    print(" ".join(f"--shape {n}={'x'.join(map(str, d)) or 'scalar'}" for n, d in ins if n))
