#!/usr/bin/env bash
# GPU call 5 of 2026-12-04: plain 16-bit conversions in kernels whose outputs only arithmetic
# computes (codegen/nan_bits.h), stitchc5 (the working tree after 368661d).
#   1. gpt2_tiny_f16 and llama_tiny_bf16 at 128 x 64: stitchc5 against stitchc_tree (every kernel
#      keeping NaN bits) and against stitchc_plaincvt (no kernel keeping them), 8 rounds each;
#   2. every shipped model at each of its data sets compiled by stitchc5 and checked on cuda;
#   3. the node tests of call 1 (BitCast and Cast among them) compiled by stitchc5, run on cuda.
R=${OUT:-/tmp/callr}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
S=$B/bin/stitchc5
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
ROUNDS=${ROUNDS:-8}
W=${W:-/tmp/cr5}
rm -rf "$W" && mkdir -p "$W/c5" "$W/out"
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
big="--shape batch=128 --shape sequence=64 --arch sm_90 --no-emu"
c() { "$B/bin/$1" compile "models/$2/model.onnx" -o "$W/$3" $4 >"$W/c5/compile_$3.log" 2>&1 || echo "compile $3 failed"; }
for m in gpt2_tiny_f16 llama_tiny_bf16; do
  c stitchc5 $m $m.N "$big" &
  c stitchc_tree $m $m.T "$big" &
  c stitchc_plaincvt $m $m.P "$big" &
done
# every shipped model's data sets (check/NAME.K)
for dir in models/*/; do
  m=$(basename "$dir")
  for data in "$dir"test_data_set_*; do
    k=${data##*_}
    while [ "$(jobs -rp | wc -l)" -ge 14 ]; do wait -n; done
    c stitchc5 "$m" "check_$m.$k" "$(python3 bench/exports/bindings.py "$data") --arch sm_90 --no-emu" &
  done
done
wait
at "1-2. compiled"
for m in gpt2_tiny_f16 llama_tiny_bf16; do
  grep -c "cvt_plain<" "$W/$m.N"/kernels/k*.cu | awk -F: -v m=$m '$2 > 0 {p++} $2 == 0 {e++} END {print m ": " p + 0 " kernels with plain conversions, " e + 0 " keeping NaN bits"}'
  for v in T P; do
    "$S" bench "$W/$m.N" --backend cuda --iters 200 --warmup 20 --rounds "$ROUNDS" --against "$W/$m.$v" \
      --json "$W/c5/$m.N_vs_$v.json" >"$W/c5/$m.N_vs_$v.txt" 2>&1 || { echo "$m N vs $v FAILED"; tail -3 "$W/c5/$m.N_vs_$v.txt"; }
  done
done
at "1. rounds done"
python3 - "$W/c5" <<'PY'
import glob, json, os, sys
print("| artifact | us | against | other us | rounds | other / this per round: min / median / max |")
print("|---|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*_vs_*.json"))):
    j = json.load(open(f)); a = j["against"]
    x, y = os.path.basename(f)[:-5].split("_vs_")
    print(f"| {x} | {j['run_ms_median']*1e3:.1f} | {y} | {a['run_ms_median']*1e3:.1f} | {len(j['rounds'])} | "
          f"{a['ratio_min']:.3f} / {a['ratio_median']:.3f} / {a['ratio_max']:.3f} |")
PY
pass=0 fail=0
for d in "$W"/check_*/; do
  n=$(basename "$d"); n=${n#check_}; m=${n%.*}; k=${n##*.}
  if "$S" run "$d" --backend cuda --inputs "models/$m/test_data_set_$k" --expect "models/$m/test_data_set_$k" >"$W/c5/check_$n.txt" 2>&1; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "check $n: FAILED: $(tail -2 "$W/c5/check_$n.txt" | tr '\n' ' ')"
  fi
done
at "2. shipped models on cuda: $pass passed, $fail failed"
find "$B/nodes" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort >"$W/nodes"
timeout 150 xargs -P 14 -I{} sh -c "'$S' compile '$B/nodes/{}/model.onnx' -o '$W/n_{}' --arch sm_90 --no-emu > '$W/out/node_{}.log' 2>&1 || echo 'compile {} failed'" <"$W/nodes"
timeout 100 xargs -P 8 -I{} sh -c "'$S' run '$W/n_{}' --backend cuda --inputs '$B/nodes/{}/test_data_set_0' --expect '$B/nodes/{}/test_data_set_0' > '$W/out/run_{}.txt' 2>&1 && echo pass > '$W/out/ok_{}' || echo 'node test {}: '\$(tail -2 '$W/out/run_{}.txt' | tr '\n' ' ')" <"$W/nodes"
at "3. node tests on cuda: $(ls "$W"/out/ok_* 2>/dev/null | wc -l) of $(wc -l <"$W/nodes") passed; $(grep -l 'cvt_plain<' "$W"/n_*/kernels/k*.cu 2>/dev/null | wc -l) of $(ls "$W"/n_*/kernels/k*.cu | wc -l) kernels with plain conversions"
(cd "$W/out" && for f in run_*.txt; do n=${f#run_}; echo "${n%.txt}: $(tail -1 "$f")"; done) >"$W/c5/nodes_on_cuda.txt"
tar czf "$R/c5.tgz" -C "$W" c5
at "end"
