#!/usr/bin/env bash
# GPU call 2, after call 1 found cuDNN's backward-data convolution slower than the zero-inserting
# Conv on 7 of 10 cases (up to 17x at f16 in 3-D): the sub-pixel form (one forward convolution of
# the output phases, then an interleaving kernel), now the default, timed against both.
#   1. node tests on cuda: call 1's, and the ConvTranspose ones again with their weights frozen
#      (then they take the sub-pixel form);
#   2. bench/gpu/make_convt.py's cases compiled three ways (--conv-transpose subpixel, call,
#      zeros), each checked on cuda against PyTorch's outputs; subpixel timed against the others.
# Carried: .gpu/bin/stitchc, .gpu/lib, .gpu/commit, .gpu/nodes/NAME.
R=${OUT:-/tmp/callc}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
ROOT=$PWD
B=$ROOT/.gpu
S=$B/bin/stitchc
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export BACKEND=${BACKEND:-cuda}
ITERS=${ITERS:-100}
flags="--arch sm_90 --no-emu"
[ "${NO_NVCC:-0}" = 1 ] && flags="--arch sm_90 --no-nvcc"
W=${W:-/tmp/cw}
mkdir -p $W/out
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "stitchc built from $(cat "$B/commit")"

# 1. Node tests on cuda.
ls $B/nodes | xargs -P 14 -I{} sh -c "'$S' compile '$B/nodes/{}/model.onnx' -o '$W/n_{}' $flags > '$W/out/node_{}.log' 2>&1 || echo 'compile {} failed'"
pass=0; fail=0
for t in $(ls $B/nodes); do
  if "$S" run "$W/n_$t" --backend "$BACKEND" --inputs "$B/nodes/$t/test_data_set_0" --expect "$B/nodes/$t/test_data_set_0" \
      >"$W/out/run_$t.txt" 2>&1; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "node test $t: $(tail -2 "$W/out/run_$t.txt" | tr '\n' ' ')"; fi
done
at "1. node tests on $BACKEND: $pass passed, $fail failed"
tar czf "$R/nodes.tgz" -C $W out

# 2. ConvTranspose: the sub-pixel form against the call and the zeros form.
python3 bench/gpu/make_convt.py $W/convt ${CONVT_SMALL:+--small} >$W/out/make_convt.log 2>&1 || echo "make_convt failed"
for d in $W/convt/*/; do
  n=$(basename "$d")
  for f in subpixel call zeros; do echo "$d/model.onnx $W/c_$n.$f --conv-transpose $f"; done
done >$W/convt_compiles
# shellcheck disable=SC2016
xargs -P 14 -L 1 sh -c 's=$0 m=$1 o=$2; shift 2; "$s" compile "$m" -o "$o" '"$flags"' "$@" >"$o.log" 2>&1 || echo "compile $o failed"' \
  "$S" <$W/convt_compiles
echo "| case | subpixel: max_abs result | call | zeros | subpixel us | call us | zeros us |"
echo "|---|---|---|---|---|---|---|"
for d in $W/convt/*/; do
  n=$(basename "$d")
  row="| $n"
  for f in subpixel call zeros; do
    c=$("$S" run $W/c_$n.$f --backend "$BACKEND" --inputs "$d/test_data_set_0" --expect "$d/test_data_set_0" 2>&1 | tee $W/out/check_$n.$f.txt | grep -E "^y " | awk '{print $4, $6}')
    row="$row | $c"
    cp $W/c_$n.$f/plan.txt $W/out/plan_$n.$f.txt 2>/dev/null
  done
  for f in call zeros; do
    "$S" bench $W/c_$n.subpixel --backend "$BACKEND" --iters "$ITERS" --warmup 20 --against $W/c_$n.$f --json $W/out/bench_$n.$f.json >$W/out/bench_$n.$f.txt 2>&1
  done
  t=$(python3 -c "
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print(f\"{a['run_ms_median']*1e3:.1f} | {a['against']['run_ms_median']*1e3:.1f} | {b['against']['run_ms_median']*1e3:.1f}\")" $W/out/bench_$n.call.json $W/out/bench_$n.zeros.json 2>/dev/null || echo "failed | |")
  echo "$row | $t |"
done | tee $W/out/convt_table.md
at "2. ConvTranspose cases done"
tar czf "$R/convt.tgz" -C $W out
