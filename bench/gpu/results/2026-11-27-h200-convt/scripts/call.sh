#!/usr/bin/env bash
# GPU call (one call; each stage packs its results under $OUT as it ends):
#   1. the node tests of what has never run on a GPU (DFT, DepthToSpace/SpaceToDepth, OneHot, Conv
#      padded more at one end, and ConvTranspose, now cuDNN's backward-data call) compiled by nvcc
#      there and checked on cuda against ONNX's expected outputs (copied by freeze_nodes.py);
#   2. bench/gpu/make_convt.py's transposed convolutions (decoder and vocoder sizes, f32 and f16),
#      each compiled as the call (default) and as a Conv (--conv-transpose-as-conv), both checked
#      on cuda against PyTorch's outputs, the call timed against the Conv form;
#   3. exports of the fourth round carried from the development machine, checked on cuda against
#      PyTorch's outputs; the transformers among them timed fused against --fusion none.
# Carried: .gpu/bin/stitchc, .gpu/lib, .gpu/commit, .gpu/nodes/NAME, .gpu/ex/NAME.
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

# 2. ConvTranspose: the call against the Conv form.
python3 bench/gpu/make_convt.py $W/convt ${CONVT_SMALL:+--small} >$W/out/make_convt.log 2>&1 || echo "make_convt failed"
for d in $W/convt/*/; do
  n=$(basename "$d")
  echo "$d/model.onnx $W/c_$n.call"
  echo "$d/model.onnx $W/c_$n.conv --conv-transpose-as-conv"
done | sed 's/ *$//' >$W/convt_compiles
# shellcheck disable=SC2016
xargs -P 14 -L 1 sh -c 's=$0 m=$1 o=$2; shift 2; "$s" compile "$m" -o "$o" '"$flags"' "$@" >"$o.log" 2>&1 || echo "compile $o failed"' \
  "$S" <$W/convt_compiles
echo "| case | call: max_abs result | conv form: max_abs result | call us | conv form us |"
echo "|---|---|---|---|---|"
for d in $W/convt/*/; do
  n=$(basename "$d")
  c1=$("$S" run $W/c_$n.call --backend "$BACKEND" --inputs "$d/test_data_set_0" --expect "$d/test_data_set_0" 2>&1 | tee $W/out/check_$n.call.txt | grep -E "^y " | awk '{print $4, $6}')
  c2=$("$S" run $W/c_$n.conv --backend "$BACKEND" --inputs "$d/test_data_set_0" --expect "$d/test_data_set_0" 2>&1 | tee $W/out/check_$n.conv.txt | grep -E "^y " | awk '{print $4, $6}')
  "$S" bench $W/c_$n.call --backend "$BACKEND" --iters "$ITERS" --warmup 20 --against $W/c_$n.conv --json $W/out/bench_$n.json >$W/out/bench_$n.txt 2>&1
  b=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(f\"{j['run_ms_median']*1e3:.1f} | {j['against']['run_ms_median']*1e3:.1f}\")" $W/out/bench_$n.json 2>/dev/null || echo "failed |")
  echo "| $n | $c1 | $c2 | $b |"
  cp $W/c_$n.call/plan.txt $W/out/plan_$n.call.txt 2>/dev/null
  cp $W/c_$n.conv/plan.txt $W/out/plan_$n.conv.txt 2>/dev/null
done | tee $W/out/convt_table.md
at "2. ConvTranspose cases done"
tar czf "$R/convt.tgz" -C $W out

# 3. Fourth-round exports carried.
mkdir -p $W/exo
OUT=$W/exo SETS="0" JOBS=14 timeout 150 bash bench/gpu/run_exports.sh "$B" "$B/ex" ${CHECK_ONLY-hifigan swin2sr mamba2} \
  >$W/exo/summary_check.txt 2>&1
grep "^| " $W/exo/summary_check.txt
OUT=$W/exo SETS="0" TIME=1 JOBS=14 ITERS=$ITERS timeout $((540 - (SECONDS - t0) > 60 ? 540 - (SECONDS - t0) : 60)) \
  bash bench/gpu/run_exports.sh "$B" "$B/ex" ${TIMED-fnet doge vaultgemma xmod} >$W/exo/summary_time.txt 2>&1
grep "^| " $W/exo/summary_time.txt
at "3. exports done"
tar czf "$R/exports.tgz" -C $W exo
