#!/usr/bin/env bash
# Compiles CUDA sources for sm_90 with nvcc exactly as a GPU build would, warnings as errors,
# and prints ptxas's register, spill and shared-memory report per kernel.
# Usage: nvcc_check.sh NVCC INCLUDE_DIR FILE.cu...    Exit 77 (skipped) when nvcc is missing.
set -uo pipefail
nvcc=$1 include=$2
shift 2
if ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "skipped: nvcc not found at '$nvcc'"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
for src in "$@"; do
  name=$(basename "$src" .cu)
  if ! log=$("$nvcc" -arch=sm_90 -cubin -Xptxas -v -Werror all-warnings -I "$include" -o "$out/$name.cubin" "$src" 2>&1); then
    echo "FAILED: nvcc $src"
    echo "$log"
    status=1
    continue
  fi
  echo "ok: $src"
  echo "$log" | sed -n "s/^ptxas info *: *Compiling entry function '\([^']*\)'.*/  \1/p; s/^ptxas info *: *\(Used .*\)/    \1/p; s/^ *\([0-9]* bytes stack frame.*\)/    \1/p" |
    { command -v c++filt >/dev/null && c++filt || cat; }
done
exit $status
