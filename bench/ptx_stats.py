#!/usr/bin/env python3
"""Static counts of an artifact's generated kernels, from nvcc's PTX and ptxas's report: PTX
instructions per kernel, how many of them are 64-bit integer arithmetic (add/sub/mul/mad/div/rem
on .s64/.u64) and 64-bit integer divisions or remainders, and registers and spills per kernel.
Counts of instructions in the text, not executed ones and not timings: a loop body counts once.

    python3 bench/ptx_stats.py ARTIFACT_DIR [--arch sm_90] [--per-kernel]

ARTIFACT_DIR is what `stitchc compile ... -o ARTIFACT_DIR` wrote (its kernels/all_kernels.cu).
Tooling only: nothing in the compiler or the runtime imports Python.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

INT64_ARITH = re.compile(r"^\s*(add|sub|mul|mad|div|rem)(\.[a-z0-9]+)*\.[su]64\b")
INT64_DIV = re.compile(r"^\s*(div|rem)(\.[a-z0-9]+)*\.[su]64\b")


def ptx_counts(ptx):
    """{kernel: (instructions, int64 arithmetic, int64 div/rem)} over the .entry bodies."""
    out, name, depth = {}, None, 0
    for line in ptx.splitlines():
        m = re.match(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([^\s(]+)", line)
        if m:
            name = m.group(1)
            out[name] = [0, 0, 0]
            continue
        if name is None:
            continue
        s = line.strip()
        depth += s.count("{") - s.count("}")
        if depth == 0 and s == "}":
            name = None
            continue
        if not s or s.startswith(("//", ".", "$", "{", "}")) or s.endswith(":"):
            continue
        if not s.endswith(";"):
            continue
        body = re.sub(r"^@!?%p\d+\s+", "", s)
        out[name][0] += 1
        if INT64_ARITH.match(body):
            out[name][1] += 1
        if INT64_DIV.match(body):
            out[name][2] += 1
    return out


def ptxas_counts(text):
    """{kernel: (registers, spill stores + loads)} from ptxas -v."""
    out, name = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name:
            out.setdefault(name, [0, 0])[1] = int(m.group(1)) + int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            out.setdefault(name, [0, 0])[0] = int(m.group(1))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("artifact")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--per-kernel", action="store_true")
    a = ap.parse_args()
    src = os.path.join(a.artifact, "kernels", "all_kernels.cu")
    if not os.path.exists(src):
        sys.exit(f"{src}: not found; give the directory `stitchc compile -o` wrote")
    with tempfile.TemporaryDirectory() as tmp:
        ptx = os.path.join(tmp, "k.ptx")
        base = ["nvcc", "-std=c++17", "-O3", f"-arch={a.arch}", "-I", os.path.dirname(src)]
        subprocess.run(base + ["-ptx", src, "-o", ptx], check=True)
        counts = ptx_counts(open(ptx).read())
        r = subprocess.run(base + ["-cubin", "-Xptxas", "-v", src, "-o", os.path.join(tmp, "k.cubin")],
                           check=True, capture_output=True, text=True)
        regs = ptxas_counts(r.stdout + r.stderr)
    tot = [0, 0, 0]
    if a.per_kernel:
        print("kernel | PTX instructions | int64 arithmetic | int64 div/rem | registers | spill bytes")
    for k in sorted(counts):
        c = counts[k]
        rg = regs.get(k, [0, 0])
        for i in range(3):
            tot[i] += c[i]
        if a.per_kernel:
            print(f"{k} | {c[0]} | {c[1]} | {c[2]} | {rg[0]} | {rg[1]}")
    spills = sum(v[1] for v in regs.values())
    print(f"{os.path.basename(os.path.normpath(a.artifact))}: {len(counts)} kernels, {tot[0]} PTX instructions, "
          f"{tot[1]} int64 arithmetic, {tot[2]} int64 div/rem, max {max((v[0] for v in regs.values()), default=0)} "
          f"registers, {spills} spill bytes")


if __name__ == "__main__":
    main()
