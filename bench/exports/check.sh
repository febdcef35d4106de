#!/usr/bin/env bash
# Compiles each export in DIR (bench/exports/export.py) with stitchc and runs it on the emu backend
# against PyTorch's outputs; prints one line per model: kernels + library calls chosen and unfused,
# estimated bytes of generated kernels and of all traffic (library calls too), estimated time,
# planning time and the comparison. Usage: bench/exports/check.sh DIR [NAME ...]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STITCHC=${STITCHC:-$ROOT/build/cli/stitchc}
DIR=$1
shift
names=("$@")
[ ${#names[@]} -eq 0 ] && names=($(cd "$DIR" && ls -d */ | tr -d /))
echo "| export | kernels + library calls, none | chosen (beam) | est. kernel bytes, none / chosen | with library calls | est. us, none / chosen | planning s | emu vs PyTorch |"
echo "|---|---|---|---|---|---|---|---|"
for n in "${names[@]}"; do
  m=$DIR/$n
  shapes=()
  grep -q "input_ids" <(python3 -c "print(open('$m/model.onnx','rb').read(4000))" 2>/dev/null) &&
    shapes=(--shape batch=2 --shape sequence=32)
  out=$(mktemp -d)
  # nvcc for sm_90 (its ptxas feedback may re-plan a kernel); NO_NVCC=1 skips it.
  nvcc=()
  [ "${NO_NVCC:-0}" = 1 ] && nvcc=(--no-nvcc)
  if ! "$STITCHC" compile "$m/model.onnx" -o "$out/a" "${shapes[@]}" "${nvcc[@]}" --report-json "$out/r.json" \
      >"$out/log" 2>&1; then
    echo "| $n | compile failed: $(tail -1 "$out/log") |"
    continue
  fi
  res=$("$STITCHC" run "$out/a" --backend emu --inputs "$m/test_data_set_0" --expect "$m/test_data_set_0" 2>&1 | tail -1)
  python3 - "$out/r.json" "$n" "$res" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["fusion"]
c, u = f["chosen"], f["none"]
def total(p):  # generated kernels and library calls together
    return p["estimated_bytes_moved"] + p["estimated_library_bytes"]
print(f"| {sys.argv[2]} | {u['kernel_launches']} + {u['library_calls']} | {c['kernel_launches']} + {c['library_calls']} | "
      f"{u['estimated_bytes_moved']} / {c['estimated_bytes_moved']} "
      f"({u['estimated_bytes_moved'] / max(c['estimated_bytes_moved'], 1):.1f}x) | "
      f"{total(u) / max(total(c), 1):.1f}x | "
      f"{u['estimated_time_us']:.1f} / {c['estimated_time_us']:.1f} | {f['plan_seconds']:.3f} | {sys.argv[3]} |")
PY
  rm -rf "$out"
done
