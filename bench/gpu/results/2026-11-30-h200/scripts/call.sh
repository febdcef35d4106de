#!/usr/bin/env bash
# GPU call: what has not run on a GPU since the runs of 2026-11-27, in one command; each stage's
# output packed under $OUT as soon as it ends.
#   1. the bench kit (bench/gpu/prepare.sh, now every shipped model at each of its data sets, the
#      mixture-of-experts and onnxruntime-genai models among them, and inputs that a run must
#      refuse) checked on cuda and timed fused against --fusion none; the C++ example on cuda;
#   2. the node tests added since: onnxruntime's contrib ops (GroupQueryAttention,
#      MultiHeadAttention, MatMulNBits, MoE, ...; expected outputs onnxruntime's), the project's
#      extra cases (numpy's) and ONNX's BitCast and QLinearMatMul (frozen by
#      bench/gpu/freeze_nodes.py), compiled there with nvcc and run on cuda;
#   3. six transformer exports made on the development machine (post-norm and mixture-of-experts
#      models), checked on cuda against PyTorch and timed fused against --fusion none.
# Carried: .gpu/bin/stitchc, .gpu/bin/stitch_example, .gpu/lib, .gpu/commit, .gpu/nodes/NAME,
# .gpu/ex/NAME.
R=${OUT:-/tmp/callr}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
S=$B/bin/stitchc
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export BACKEND=${BACKEND:-cuda}
ITERS=${ITERS:-200}
flags="--arch sm_90 --no-emu"
[ "${NO_NVCC:-0}" = 1 ] && flags="--arch sm_90 --no-nvcc"
W=${W:-/tmp/cr}
rm -rf "$W" && mkdir -p "$W/out"
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1
echo "stitchc built from $(cat "$B/commit")"

# 1. The kit.
COMMIT=$(cat "$B/commit") STITCHC=$S JOBS=${JOBS:-14} DRY_RUN=${DRY_RUN:-0} bash bench/gpu/prepare.sh "$W/kit" >"$W/prepare.log" 2>&1
at "1. kit prepared, rc $?: $(tail -1 "$W/prepare.log")"
OUT=$W/kitout ITERS=$ITERS bash bench/gpu/run.sh "$W/kit" >"$W/kit_summary.txt" 2>&1
at "1. kit run rc $?"
grep -E "^(check|fault)" "$W/kit_summary.txt"
grep -E "^(\||device|failures)" "$W/kit_summary.txt"
"$B/bin/stitch_example" "$W/kit/check/bert_tiny" "$BACKEND" >"$W/kitout/example.txt" 2>&1
at "1. stitch_example on $BACKEND, rc $?: $(tail -1 "$W/kitout/example.txt")"
for d in "$W"/kit/time/*/; do cp "$d/plan.txt" "$W/kitout/plan_$(basename "$d").txt"; done
cp "$W/kit_summary.txt" "$W/prepare.log" "$W/kitout/"
tar czf "$R/kit.tgz" -C "$W" kitout

# 2. Node tests on cuda.
find "$B/nodes" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort >"$W/nodes"
xargs -P 14 -I{} sh -c "'$S' compile '$B/nodes/{}/model.onnx' -o '$W/n_{}' $flags > '$W/out/node_{}.log' 2>&1 || echo 'compile {} failed'" <"$W/nodes"
pass=0 fail=0
while read -r t; do
  if "$S" run "$W/n_$t" --backend "$BACKEND" --inputs "$B/nodes/$t/test_data_set_0" --expect "$B/nodes/$t/test_data_set_0" \
    >"$W/out/run_$t.txt" 2>&1; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "node test $t: $(tail -2 "$W/out/run_$t.txt" | tr '\n' ' ')"
  fi
done <"$W/nodes"
at "2. node tests on $BACKEND: $pass passed, $fail failed"
tar czf "$R/nodes.tgz" -C "$W" out

# 3. The exports.
mkdir -p "$W/exo"
OUT=$W/exo SETS="0 1 2" TIME=1 JOBS=14 ITERS=$ITERS timeout 200 bash bench/gpu/run_exports.sh "$B" "$B/ex" \
  gemma2 olmo2 qwen3_moe deepseek_v3 dots1 glm4_moe >"$W/exo/summary.txt" 2>&1
at "3. exports done, rc $?"
grep -E "^(\||exports|compiles)" "$W/exo/summary.txt"
tar czf "$R/exports.tgz" -C "$W" exo
at "end"
