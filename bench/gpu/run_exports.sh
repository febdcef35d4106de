#!/usr/bin/env bash
# On the GPU machine: transformer exports made there by bench/exports/export.py (that machine's
# PyTorch, seeded random weights), compiled by a bundle's stitchc with that machine's nvcc, run on
# --backend cuda against PyTorch's outputs, and (TIME=1) timed fused against --fusion none.
#   bench/gpu/run_exports.sh BUNDLE DIR NAME...
# BUNDLE: bench/gpu/prepare.sh's (only its bin/ and lib/ are used). DIR: where the exports go (an
# export already there is kept). Each data set named in SETS (default "0 2": the export's own
# batch 2 x sequence 32, and batch 3 x sequence 45) is compiled at its shapes and checked. With
# TIME=1 each is also compiled at batch 8 x sequence 128 (a decoding step: batch 8, past 127; or the
# --shape flags in DIR/NAME/time_shapes where that file exists) fused and --fusion none and timed
# with `stitchc bench --against` (ITERS runs, CUDA Graph replay).
# JOBS exports and compiles run at a time (default 12). Logs and JSON go to OUT; a table is
# printed last. BACKEND=emu NO_NVCC=1: a dry run of this script on a machine without a GPU.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUNDLE=$1
DIR=$2
shift 2
names=("$@")
OUT=${OUT:-/tmp/gpu_exports}
JOBS=${JOBS:-12}
SETS=${SETS:-0 2}
TIME=${TIME:-0}
ITERS=${ITERS:-200}
ARCH=${ARCH:-sm_90}
BACKEND=${BACKEND:-cuda}
flags="--arch $ARCH --no-emu"
[ "${NO_NVCC:-0}" = 1 ] && flags="--arch $ARCH --no-nvcc"
STITCHC=$BUNDLE/bin/stitchc
export LD_LIBRARY_PATH="$BUNDLE/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
mkdir -p "$OUT" "$DIR"
work=$(mktemp -d)

# 1. Exports, JOBS at a time, each process on 2 threads.
t0=$SECONDS
for n in "${names[@]}"; do
  [ -f "$DIR/$n/model.onnx" ] && continue
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  OMP_NUM_THREADS=2 python3 "$ROOT/bench/exports/export.py" "$DIR" "$n" >"$OUT/export_$n.log" 2>&1 &
done
wait
echo "exports: $((SECONDS - t0)) s"

# 2. Compiles: each checked data set at its own shapes; with TIME=1 the timing shapes fused and none.
t0=$SECONDS
{
  for n in "${names[@]}"; do
    m=$DIR/$n
    [ -f "$m/model.onnx" ] || continue
    for k in $SETS; do
      [ -d "$m/test_data_set_$k" ] || continue
      # no trailing blank where a static model has no bindings: xargs -L would join the next line
      b=$(python3 "$ROOT/bench/exports/bindings.py" "$m/test_data_set_$k")
      echo "$m/model.onnx $work/$n.$k${b:+ $b}"
    done
    if [ "$TIME" = 1 ]; then
      case $n in
        *_dec | *_dec_ts) shapes="--shape batch=8 --shape past=127" ;;
        *) shapes="--shape batch=8 --shape sequence=128" ;;
      esac
      # an export whose inputs are named otherwise (Optimum's, images) says its own in time_shapes
      [ -f "$m/time_shapes" ] && shapes=$(cat "$m/time_shapes")
      echo "$m/model.onnx $work/$n.fused${shapes:+ $shapes}"
      echo "$m/model.onnx $work/$n.none${shapes:+ $shapes} --fusion none"
    fi
  done
} >"$work/compiles"
# shellcheck disable=SC2016
xargs -P "$JOBS" -L 1 sh -c 's=$0 m=$1 o=$2; shift 2; "$s" compile "$m" -o "$o" '"$flags"' "$@" >"$o.log" 2>&1' \
  "$STITCHC" <"$work/compiles"
echo "compiles: $((SECONDS - t0)) s ($(wc -l <"$work/compiles") artifacts)"

# 3. Checks on the GPU, then timings, one at a time; a row each as it is done.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1
echo "| export | on $BACKEND against PyTorch (batch x sequence: result) | fused vs --fusion none at the timing shapes (run() median; per kind, us) |"
echo "|---|---|---|"
for n in "${names[@]}"; do
  m=$DIR/$n
  if [ ! -f "$m/model.onnx" ]; then
    echo "| $n | no export: $(grep -v Warning "$OUT/export_$n.log" | tail -1) | |"
    continue
  fi
  checks=""
  for k in $SETS; do
    [ -d "$m/test_data_set_$k" ] || continue
    label=$(python3 "$ROOT/bench/exports/bindings.py" "$m/test_data_set_$k" --label)
    cp "$work/$n.$k.log" "$OUT/compile_$n.$k.log" 2>/dev/null
    if [ -f "$work/$n.$k/schedule.json" ] || [ -f "$work/$n.$k/plan.txt" ]; then
      r=$("$STITCHC" run "$work/$n.$k" --backend "$BACKEND" --inputs "$m/test_data_set_$k" \
        --expect "$m/test_data_set_$k" 2>&1 | tee "$OUT/check_$n.$k.txt" | tail -1)
    else
      r="compile failed: $(tail -1 "$work/$n.$k.log")"
    fi
    checks="$checks${checks:+; }$label: $r"
  done
  timing="-"
  if [ "$TIME" = 1 ]; then
    cp "$work/$n.fused.log" "$OUT/compile_$n.fused.log" 2>/dev/null
    cp "$work/$n.fused/plan.txt" "$OUT/plan_$n.txt" 2>/dev/null
    if "$STITCHC" bench "$work/$n.fused" --backend "$BACKEND" --iters "$ITERS" --warmup 20 --against "$work/$n.none" \
        --json "$OUT/bench_$n.json" >"$OUT/bench_$n.txt" 2>&1; then
      timing=$(python3 - "$OUT/bench_$n.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
f, u = j["run_ms_median"] * 1e3, j["against"]["run_ms_median"] * 1e3
k = "; ".join(f"{n} {v['us']:.1f} vs {v.get('against_us', 0):.1f}" for n, v in j.get("kinds", {}).items())
print(f"{f:.1f} vs {u:.1f} us, {u / f:.2f}x; {k}")
PY
)
    else
      timing="bench failed: $(tail -1 "$OUT/bench_$n.txt")"
    fi
  fi
  echo "| $n | $checks | $timing |"
done
rm -rf "$work"
