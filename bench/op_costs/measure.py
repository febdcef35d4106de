#!/usr/bin/env python3
"""Counts the SASS instructions nvcc emits for each CUDA math function and operator that the
generated kernels use (compiler/codegen/scalar_ops.cc), for the cost model's per-op weights
(codegen::op_instructions in compiler/codegen/op_cost.cc).

Each probe is a one-line kernel y[i] = f(x[i]) (or f(x[i], z[i])); its count is the number of
instructions up to the kernel's first EXIT (the fast path with its inline branches; a slow path
that nvcc moved into a subroutine after EXIT is left out, one it kept inline, such as sinf's
reduction of large arguments, is counted), minus the same count of the kernel that only copies its
operand (unary) or adds its two operands (binary, plus one for that add). Needs nvcc (the CUDA toolkit) and nvdisasm (Debian's CUDA toolkit has
none: `pip install nvidia-cuda-nvdisasm` in a virtual environment, then pass --nvdisasm PATH).

    python3 bench/op_costs/measure.py --nvdisasm PATH [--arch sm_90]
"""
import argparse
import os
import re
import subprocess
import tempfile

UNARY = ["expf(a)", "logf(a)", "log1pf(a)", "erff(a)", "tanhf(a)", "sqrtf(a)", "1.0f / a", "sinf(a)", "cosf(a)",
         "tanf(a)", "asinf(a)", "acosf(a)", "atanf(a)", "sinhf(a)", "coshf(a)", "asinhf(a)", "acoshf(a)",
         "atanhf(a)", "floorf(a)", "rintf(a)", "fabsf(a)"]
BINARY = ["a + b", "a * b", "a / b", "powf(a, b)", "fmodf(a, b)", "fmaxf(a, b)"]


def kernels():
    src = ['#define U(n, e) extern "C" __global__ void n(const float* __restrict__ x, float* __restrict__ y) '
           '{ int i = blockIdx.x * blockDim.x + threadIdx.x; float a = x[i]; y[i] = (e); }',
           '#define B(n, e) extern "C" __global__ void n(const float* __restrict__ x, const float* __restrict__ z, '
           'float* __restrict__ y) { int i = blockIdx.x * blockDim.x + threadIdx.x; float a = x[i]; float b = z[i]; '
           'y[i] = (e); }',
           "U(u_base, a)", "B(b_base, a + b)"]
    names = {}
    for i, e in enumerate(UNARY):
        names[f"u{i}"] = ("u_base", e)
        src.append(f"U(u{i}, {e})")
    for i, e in enumerate(BINARY):
        names[f"b{i}"] = ("b_base", e)
        src.append(f"B(b{i}, {e})")
    return "\n".join(src) + "\n", names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvdisasm", required=True)
    ap.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    src, names = kernels()
    with tempfile.TemporaryDirectory() as d:
        cu, cubin = os.path.join(d, "probe.cu"), os.path.join(d, "probe.cubin")
        open(cu, "w").write(src)
        subprocess.run([args.nvcc, f"-arch={args.arch}", "-cubin", "-O3", "-o", cubin, cu], check=True)
        sass = subprocess.run([args.nvdisasm, "-c", cubin], check=True, capture_output=True, text=True).stdout
    parts = re.split(r"\n\s*\.text\.(\w+):", sass)
    count = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        n = 0
        for line in body.split("\n"):
            if not re.search(r"/\*[0-9a-f]{4}\*/", line) or "NOP" in line:
                continue
            n += 1
            if "EXIT" in line:
                break
        count[name] = n
    print(f"# nvcc {args.arch}: instructions to the first EXIT, minus the base kernel's")
    for k, (base, e) in names.items():
        print(f"{e:16s} {count[k] - count[base] + (1 if base == 'b_base' else 0)}")


if __name__ == "__main__":
    main()
