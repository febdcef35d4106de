#!/usr/bin/env bash
# GPU call: what has not run on a GPU before (QDQ models, GridSample, the loss ops, LRN), in one
# command; each stage's output packed under $OUT as soon as it ends.
#   1. ONNX's node tests of QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, GridSample,
#      NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss and LRN (frozen by bench/gpu/freeze_nodes.py),
#      compiled there with nvcc and run on cuda against their expected outputs;
#   2. the bench kit (bench/gpu/prepare.sh, now with unet_small and the two QDQ models) checked on
#      cuda and timed fused against --fusion none;
#   3. Deformable DETR, RT-DETR (data set 0: PyTorch's outputs, 1: onnxruntime's on the same input)
#      and the BERT token classifier with its loss, exported on the development machine, checked
#      on cuda and timed fused against --fusion none.
# Carried: .gpu/bin/stitchc, .gpu/lib, .gpu/commit, .gpu/nodes/NAME, .gpu/ex/NAME.
R=${OUT:-/tmp/callq}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
S=$B/bin/stitchc
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export BACKEND=${BACKEND:-cuda}
ITERS=${ITERS:-200}
flags="--arch sm_90 --no-emu"
[ "${NO_NVCC:-0}" = 1 ] && flags="--arch sm_90 --no-nvcc"
W=${W:-/tmp/cq}
rm -rf $W && mkdir -p $W/out
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1
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

# 2. The kit.
COMMIT=$(cat "$B/commit") STITCHC=$S JOBS=14 DRY_RUN=${DRY_RUN:-0} bash bench/gpu/prepare.sh $W/kit >$W/prepare.log 2>&1
at "2. kit prepared, rc $?: $(tail -1 $W/prepare.log)"
OUT=$W/kitout ITERS=$ITERS bash bench/gpu/run.sh $W/kit >$W/kit_summary.txt 2>&1
at "2. kit run rc $?"
grep -E "^check" $W/kit_summary.txt
grep -E "^(\||device|failures)" $W/kit_summary.txt
for d in $W/kit/time/*/; do cp "$d/plan.txt" "$W/kitout/plan_$(basename "$d").txt"; done
cp $W/kit_summary.txt $W/prepare.log $W/kitout/
tar czf "$R/kit.tgz" -C $W kitout

# 3. The exports.
mkdir -p $W/exo
OUT=$W/exo SETS="0 1 2" TIME=1 JOBS=14 ITERS=$ITERS timeout 240 bash bench/gpu/run_exports.sh "$B" "$B/ex" \
  deformable_detr rt_detr bert_token_loss >$W/exo/summary.txt 2>&1
at "3. exports done, rc $?"
grep -E "^(\||exports|compiles)" $W/exo/summary.txt
tar czf "$R/exports.tgz" -C $W exo
at "end"
