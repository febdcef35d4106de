#!/usr/bin/env python3
# Shape bindings of one data set of an export (bench/exports/export.py): "--shape NAME=DxD" for
# each input (its input_K.pb: a TensorProto's dims, field 1, and name, field 8), read without
# the onnx package; with --label, the dims of its attention_mask (else of its first input) as BxS:
# batch x sequence, or batch x (past + 1) for a decoding step. An input named in the export's file
# `constant_inputs` (one name a line; Optimum's merged decoders: use_cache_branch) is given as
# "--constant-input NAME=V,..." with the data set's values (bool and integer types) instead.
#   bench/exports/bindings.py DATA_SET_DIR [--label]
import glob, os, sys
def parse(path):
    b = open(path, "rb").read()
    i, dims, name, dtype, raw = 0, [], "", 0, b""
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
            elif field == 2: dtype = v
        elif wire == 2:
            n = varint(); end = i + n
            if field == 1:
                while i < end: dims.append(varint())
            elif field == 8: name = b[i:end].decode()
            elif field == 9: raw = b[i:end]
            i = end
        elif wire == 1: i += 8
        elif wire == 5: i += 4
        else: break
    return name, dims, dtype, raw
# raw_data of the integer and bool types (TensorProto.DataType -> (bytes, signed))
INT_TYPES = {9: (1, False), 2: (1, False), 3: (1, True), 4: (2, False), 5: (2, True), 6: (4, True), 7: (8, True),
             12: (4, False), 13: (8, False)}
def values(dtype, raw):
    if dtype not in INT_TYPES or not raw:
        sys.exit("bindings.py: a constant input must be of a bool or integer type, stored as raw_data")
    n, signed = INT_TYPES[dtype]
    return [int.from_bytes(raw[k:k + n], "little", signed=signed) for k in range(0, len(raw), n)]
files = sorted(glob.glob(os.path.join(sys.argv[1], "input_*.pb")), key=lambda f: int(f.split("_")[-1][:-3]))
ins = [parse(f) for f in files]
listed = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "constant_inputs")
fixed = set(open(listed).read().split()) if os.path.exists(listed) else set()
if len(sys.argv) > 2:
    label = {n: d for n, d, _, _ in ins}.get("attention_mask", ins[0][1])
    print("x".join(map(str, label)))
else:
    print(" ".join(f"--constant-input {n}={','.join(map(str, values(t, r)))}" if n in fixed else
                   f"--shape {n}={'x'.join(map(str, d)) or 'scalar'}" for n, d, t, r in ins if n))
