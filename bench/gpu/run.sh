#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with the bundle bench/gpu/prepare.sh made:
#   1. every check artifact on --backend cuda against its expected outputs (PyTorch's or
#      onnxruntime's for the shipped models, numpy float64 for the subgraphs);
#   2. every input a run must refuse (BUNDLE/fault) on --backend cuda: exit 2 and the error that
#      names the node and index, read from the device's fault word after the run;
#   3. every time artifact with `stitchc bench --steps --against NAME.none`: the whole schedule
#      (CUDA Graph replay, CUDA events, median of ITERS after warm-up, seeded random inputs) and
#      each step alone beside the unfused steps of the same nodes, per kind (norm, softmax, GELU),
#      with achieved bandwidth against a measured device-to-device copy;
#   4. where the bundle has time/NAME.base (prepare.sh's BASE: an earlier stitchc), NAME against it
#      in ROUNDS rounds (default 6) that alternate which goes first, since medians drift by a few
#      percent over a run: each round's ratio, and their least, median and greatest.
# Writes DEVICE.txt, every log and JSON under $OUT (default /tmp/gpu_bench) and prints a table last.
#   bench/gpu/run.sh [BUNDLE]     (default build/gpu_bundle)
set -uo pipefail
BUNDLE=${1:-build/gpu_bundle}
OUT=${OUT:-/tmp/gpu_bench}
ITERS=${ITERS:-200}
ROUNDS=${ROUNDS:-6}
BACKEND=${BACKEND:-cuda}  # emu: a dry run of this script on a machine without a GPU
mkdir -p "$OUT"
cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(os.path.dirname(nvidia.cudnn.__file__), 'lib'))" 2>/dev/null || true)
cublas=$(python3 -c "import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), 'lib'))" 2>/dev/null || true)
export LD_LIBRARY_PATH="$BUNDLE/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${cudnn}:${cublas}:${LD_LIBRARY_PATH:-}"
STITCHC=$BUNDLE/bin/stitchc
{
  date -u +"%Y-%m-%d %H:%M UTC"
  echo "bundle commit $(cat "$BUNDLE/commit" 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv 2>&1
} >"$OUT/DEVICE.txt"
fails=0
shopt -s nullglob  # a bundle with no check (or time) artifacts runs the other half alone
for d in "$BUNDLE"/check/*/; do
  name=$(basename "$d")
  case $name in *.data) continue ;; esac
  if "$STITCHC" run "$d" --backend "$BACKEND" --inputs "$BUNDLE/check/$name.data" \
    --expect "$BUNDLE/check/$name.data" >"$OUT/check_$name.txt" 2>&1; then
    echo "check $name: $(tail -1 "$OUT/check_$name.txt")"
  else
    echo "check $name: FAILED"; tail -5 "$OUT/check_$name.txt"; fails=$((fails + 1))
  fi
done
for f in "$BUNDLE"/fault/*/; do
  name=$(basename "$f")
  { read -r artifact; read -r pattern; } <"$BUNDLE/fault/$name.args"
  "$STITCHC" run "$BUNDLE/check/$artifact" --backend "$BACKEND" --inputs "$f" >"$OUT/fault_$name.txt" 2>&1
  rc=$?
  if [ "$rc" = 2 ] && grep -qE "$pattern" "$OUT/fault_$name.txt"; then
    echo "fault $name: refused, exit 2: $(grep -oE "$pattern" "$OUT/fault_$name.txt" | head -1)"
  else
    echo "fault $name: FAILED (exit $rc, not the expected error)"; tail -5 "$OUT/fault_$name.txt"; fails=$((fails + 1))
  fi
done
for d in "$BUNDLE"/time/*/; do
  name=$(basename "$d")
  case $name in *.none | *.base) continue ;; esac
  # ffn1_gelu.tiled and ln_ffn1_gelu.nohoist are set beside the same baselines as ffn1_gelu and
  # ln_ffn1_gelu; a genai model's decoding step (NAME.step) beside NAME.step.none
  base=${name%.tiled}
  base=${base%.nohoist}
  "$STITCHC" bench "$d" --backend "$BACKEND" --iters "$ITERS" --warmup 20 --against "$BUNDLE/time/$base.none" \
    --json "$OUT/bench_$name.json" >"$OUT/bench_$name.txt" 2>&1 ||
    { echo "bench $name: FAILED"; tail -5 "$OUT/bench_$name.txt"; fails=$((fails + 1)); }
  [ -d "$BUNDLE/time/$name.base" ] || continue
  "$STITCHC" bench "$d" --backend "$BACKEND" --iters "$ITERS" --warmup 20 --rounds "$ROUNDS" \
    --against "$BUNDLE/time/$name.base" --json "$OUT/base_$name.json" >"$OUT/base_$name.txt" 2>&1 ||
    { echo "bench $name against $name.base: FAILED"; tail -5 "$OUT/base_$name.txt"; fails=$((fails + 1)); }
done
cat "$OUT/DEVICE.txt"
python3 - "$OUT" <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "bench_*.json"))):
    j = json.load(open(f))
    name = os.path.basename(f)[6:-5]
    k = j.get("kinds", {})
    kinds = "; ".join(f"{n} {v['us']:.1f} vs {v.get('against_us', 0):.1f} us" for n, v in k.items())
    rows.append(f"| {name} | {j['run_ms_median']*1e3:.1f} | {j['against']['run_ms_median']*1e3:.1f} | "
                f"{j['against']['run_ms_median']/j['run_ms_median']:.2f}x | {kinds} |")
copy = [json.load(open(f)).get("copy_gb_per_s") for f in glob.glob(os.path.join(sys.argv[1], "bench_*.json"))]
copy = [c for c in copy if c]
print(f"device-to-device copy: {max(copy):.0f} GB/s" if copy else "device-to-device copy: not measured")
print("| artifact | fused run us | --fusion none us | speedup | per kind: fused steps vs the same nodes unfused |")
print("|---|---|---|---|---|")
print("\n".join(rows))
base = []  # this build (NAME) against the earlier one (NAME.base), in rounds alternating the order
for f in sorted(glob.glob(os.path.join(sys.argv[1], "base_*.json"))):
    j = json.load(open(f))
    a = j["against"]
    base.append(f"| {os.path.basename(f)[5:-5]} | {j['run_ms_median']*1e3:.1f} | {a['run_ms_median']*1e3:.1f} | "
                f"{len(j['rounds'])} | {a['ratio_min']:.3f} / {a['ratio_median']:.3f} / {a['ratio_max']:.3f} |")
if base:
    print("| model | this build us | earlier build us | rounds | earlier / this per round: min / median / max |")
    print("|---|---|---|---|---|")
    print("\n".join(base))
PY
echo "failures: $fails"
[ "$fails" -eq 0 ]
