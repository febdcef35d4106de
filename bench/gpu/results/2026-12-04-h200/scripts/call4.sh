#!/usr/bin/env bash
# GPU call 4 of 2026-12-04: the tree combine of split rows, and the 16-bit conversions measured
# with stitchc builds that differ in them alone (call 3's variant P was void: stitchc carries its
# device header inside it, so a header copied into the source tree there changed nothing).
#   1. bench/gpu/grid_barrier.cu, now with the tree combine (the project's grid_row_combine);
#   2. bert_tiny_dyn (8 split row kernels at 128 x 64): stitchc_tree (the tree combine) checked on
#      cuda at the data set's shapes, and timed against stitchc (6dc1ff2, the serial combine) and
#      against itself compiled twice (T vs T2: the spread of identical kernels);
#   3. gpt2_tiny_f16 and llama_tiny_bf16 at 128 x 64: stitchc_tree (NaN-keeping conversions) against
#      stitchc_plaincvt (the same with e21dd1a's plain conversions), and against itself twice.
R=${OUT:-/tmp/callr}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
ROUNDS=${ROUNDS:-8}
W=${W:-/tmp/cr4}
rm -rf "$W" && mkdir -p "$W/c4"
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
"$B/bin/grid_barrier" >"$W/c4/grid_barrier.txt" 2>&1 ||
  { nvcc -O3 -arch=sm_90 -std=c++17 -I runtime/device/include bench/gpu/grid_barrier.cu -o "$W/gb" && "$W/gb" >"$W/c4/grid_barrier.txt" 2>&1; }
at "1. grid_barrier rc $?"
grep -E "^(device|row|\| (one|split|partials|form))" "$W/c4/grid_barrier.txt"
big="--shape batch=128 --shape sequence=64 --arch sm_90 --no-emu"
c() { "$B/bin/$1" compile "models/$2/model.onnx" -o "$W/$3" $4 >"$W/c4/compile_$3.log" 2>&1 || echo "compile $3 failed"; }
c stitchc_tree bert_tiny_dyn dyn.check "$(python3 bench/exports/bindings.py models/bert_tiny_dyn/test_data_set_0) --arch sm_90 --no-emu" &
c stitchc bert_tiny_dyn dyn.S "$big" &
c stitchc_tree bert_tiny_dyn dyn.T "$big" &
c stitchc_tree bert_tiny_dyn dyn.T2 "$big" &
for m in gpt2_tiny_f16 llama_tiny_bf16; do
  c stitchc_tree $m $m.T "$big" &
  c stitchc_tree $m $m.T2 "$big" &
  c stitchc_plaincvt $m $m.P "$big" &
done
wait
at "2. compiled"
"$B/bin/stitchc" run "$W/dyn.check" --backend cuda --inputs models/bert_tiny_dyn/test_data_set_0 \
  --expect models/bert_tiny_dyn/test_data_set_0 >"$W/c4/check_dyn.txt" 2>&1
echo "check bert_tiny_dyn (tree combine) on cuda, rc $?: $(tail -1 "$W/c4/check_dyn.txt")"
grep -c "grid_row_combine(.*scratch_" "$W"/dyn.T/kernels/k*.cu | awk -F: '{s += $2} END {print "tree combines in dyn.T kernels:", s}'
bench() {  # bench A B
  "$B/bin/stitchc" bench "$W/$1" --backend cuda --iters 200 --warmup 20 --rounds "$ROUNDS" --against "$W/$2" \
    --json "$W/c4/$1_vs_$2.json" >"$W/c4/$1_vs_$2.txt" 2>&1 || { echo "$1 vs $2 FAILED"; tail -3 "$W/c4/$1_vs_$2.txt"; }
}
bench dyn.T dyn.S
bench dyn.T dyn.T2
for m in gpt2_tiny_f16 llama_tiny_bf16; do
  bench $m.T $m.P
  bench $m.T $m.T2
done
at "3. rounds done"
python3 - "$W/c4" <<'PY'
import glob, json, os, sys
print("| artifact | us | against | other us | rounds | other / this per round: min / median / max |")
print("|---|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*_vs_*.json"))):
    j = json.load(open(f)); a = j["against"]
    x, y = os.path.basename(f)[:-5].split("_vs_")
    print(f"| {x} | {j['run_ms_median']*1e3:.1f} | {y} | {a['run_ms_median']*1e3:.1f} | {len(j['rounds'])} | "
          f"{a['ratio_min']:.3f} / {a['ratio_median']:.3f} / {a['ratio_max']:.3f} |")
PY
grep -E "^ +[0-9]+ +k[0-9]+_rows_" "$W/c4/dyn.T_vs_dyn.S.txt"
tar czf "$R/c4.tgz" -C "$W" c4
at "end"
