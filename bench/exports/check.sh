#!/usr/bin/env bash
# Compiles each export in DIR (bench/exports/export.py) with stitchc and runs it on the emu backend
# against PyTorch's outputs; prints one line per model: kernels + library calls chosen and unfused,
# estimated bytes of generated kernels and of all traffic (library calls too), estimated time,
# planning time and the comparison; then each further data set (test_data_set_1... at other
# bindings of batch and sequence, or of batch and past for a decoding step) compiled at its shapes
# (without nvcc) and run on emu against PyTorch.
# Where the first data set does not match, onnxruntime's outputs on the same file are compared
# too (PYTHON names an interpreter with onnx and onnxruntime; without them this is skipped).
# Usage: bench/exports/check.sh DIR [NAME ...]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STITCHC=${STITCHC:-$ROOT/build/cli/stitchc}
DIR=$1
shift
names=("$@")
[ ${#names[@]} -eq 0 ] && names=($(cd "$DIR" && ls -d */ | tr -d /))
echo "| export | kernels + library calls, none | chosen (beam) | est. kernel bytes, none / chosen | with library calls | est. us, none / chosen | planning s | emu vs PyTorch | other shapes (batch x sequence) |"
echo "|---|---|---|---|---|---|---|---|---|"
# Shape bindings of a data set: bench/exports/bindings.py.
bindings() { python3 "$ROOT/bench/exports/bindings.py" "$@"; }
for n in "${names[@]}"; do
  m=$DIR/$n
  # Every input bound from the first data set's shapes (its dynamic dims bound through them).
  shapes=($(bindings "$m/test_data_set_0"))
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
  # Not PyTorch's outputs: onnxruntime on the same file as a second oracle ($PYTHON with onnx and
  # onnxruntime; skipped without them), to tell an export that differs from PyTorch from stitch.
  if [[ $res != *" match"* ]] && "${PYTHON:-python3}" -c "import onnxruntime" 2>/dev/null; then
    if "${PYTHON:-python3}" "$ROOT/bench/exports/ort_outputs.py" "$m/model.onnx" "$m/test_data_set_0" "$out/ort" \
        >"$out/log_ort" 2>&1; then
      if "$STITCHC" run "$out/a" --backend emu --inputs "$out/ort" --expect "$out/ort" >"$out/log_ort" 2>&1; then
        res="differs from PyTorch, matches onnxruntime on the same file (the export differs from PyTorch)"
      else
        res="$res; differs from onnxruntime too"
      fi
    fi
  fi
  more=""
  for d in "$m"/test_data_set_*; do
    [ "$d" = "$m/test_data_set_0" ] && continue
    l=$(bindings "$d" --label)
    r="compile failed"
    # --no-nvcc: these check the emu results; the first compile covers nvcc and its ptxas feedback
    if "$STITCHC" compile "$m/model.onnx" -o "$out/$l" $(bindings "$d") --no-nvcc >"$out/log_$l" 2>&1; then
      r=$("$STITCHC" run "$out/$l" --backend emu --inputs "$d" --expect "$d" 2>&1 | tail -1)
    fi
    more="$more${more:+; }$l: $r"
  done
  python3 - "$out/r.json" "$n" "$res" "$more" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["fusion"]
c, u = f["chosen"], f["none"]
def total(p):  # generated kernels and library calls together
    return p["estimated_bytes_moved"] + p["estimated_library_bytes"]
print(f"| {sys.argv[2]} | {u['kernel_launches']} + {u['library_calls']} | {c['kernel_launches']} + {c['library_calls']} | "
      f"{u['estimated_bytes_moved']} / {c['estimated_bytes_moved']} "
      f"({u['estimated_bytes_moved'] / max(c['estimated_bytes_moved'], 1):.1f}x) | "
      f"{total(u) / max(total(c), 1):.1f}x | "
      f"{u['estimated_time_us']:.1f} / {c['estimated_time_us']:.1f} | {f['plan_seconds']:.3f} | {sys.argv[3]} | "
      f"{sys.argv[4] or '-'} |")
PY
  rm -rf "$out"
done
