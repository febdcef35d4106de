#!/usr/bin/env bash
# GPU call of 2026-12-04: what changed since the runs of 2026-11-30 (stitchc e21dd1a), in one
# command; each stage's output packed under $OUT as soon as it ends.
#   1. bench/gpu/grid_barrier.cu: a cooperative launch and a grid-wide barrier alone, and one row's
#      sum and maximum split over blocks at several grids (carried binary, else built here);
#   2. the bench kit (bench/gpu/prepare.sh) checked on cuda and timed fused against --fusion none,
#      and every shipped model against e21dd1a's stitchc (BASE) in rounds that alternate the order;
#      the C++ example on cuda;
#   3. node tests on cuda: the project's extra cases (101, 42 of them new since 2026-11-30: integer
#      MatMul, Gemm and Einsum, the type sweep's cases) and ONNX's own tests of the ops whose kernels
#      changed since (Cast, BitCast, BitShift, MatMul, Gemm, Einsum, ReduceMax/Min, ArgMax/Min,
#      QuantizeLinear, Clip, Pow, Mod, OneHot, Pad, CumSum, Shrink, Attention), frozen by
#      bench/gpu/freeze_nodes.py, compiled here with nvcc and run on cuda.
# Carried: .gpu/bin/{stitchc,stitchc_base,stitch_example,grid_barrier}, .gpu/lib, .gpu/commit,
# .gpu/nodes/NAME.
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
rm -rf "$W" && mkdir -p "$W/out" "$W/barrier"
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1
echo "stitchc built from $(cat "$B/commit"); base $(cat "$B/base_commit")"

# 1. The grid barrier.
if [ "$BACKEND" = cuda ]; then
  gb=$B/bin/grid_barrier
  if ! timeout 120 "$gb" >"$W/barrier/grid_barrier.txt" 2>&1; then
    at "1. carried grid_barrier failed: $(tail -2 "$W/barrier/grid_barrier.txt" | tr '\n' ' '); building it here"
    nvcc -O3 -arch=sm_90 -std=c++17 bench/gpu/grid_barrier.cu -o "$W/grid_barrier" &&
      timeout 120 "$W/grid_barrier" >"$W/barrier/grid_barrier.txt" 2>&1
  fi
  at "1. grid_barrier rc $?"
  cat "$W/barrier/grid_barrier.txt"
  tar czf "$R/barrier.tgz" -C "$W" barrier
fi

# 2. The kit, with every shipped model also compiled by the base stitchc.
COMMIT=$(cat "$B/commit") STITCHC=$S BASE=$B/bin/stitchc_base JOBS=${JOBS:-14} DRY_RUN=${DRY_RUN:-0} \
  timeout 200 bash bench/gpu/prepare.sh "$W/kit" >"$W/prepare.log" 2>&1
at "2. kit prepared, rc $?: $(tail -1 "$W/prepare.log")"
OUT=$W/kitout ITERS=$ITERS ROUNDS=${ROUNDS:-5} timeout 260 bash bench/gpu/run.sh "$W/kit" >"$W/kit_summary.txt" 2>&1
at "2. kit run rc $?"
grep -E "^(check|fault)" "$W/kit_summary.txt" | grep -v ": all [0-9]* output(s) match$"
echo "checks matching: $(grep -cE '^check .*: all [0-9]+ output\(s\) match$' "$W/kit_summary.txt") of $(grep -c '^check ' "$W/kit_summary.txt")"
grep -E "^(\||device|failures)" "$W/kit_summary.txt"
"$B/bin/stitch_example" "$W/kit/check/bert_tiny" "$BACKEND" >"$W/kitout/example.txt" 2>&1
at "2. stitch_example on $BACKEND, rc $?: $(tail -1 "$W/kitout/example.txt")"
for d in "$W"/kit/time/*/; do cp "$d/plan.txt" "$W/kitout/plan_$(basename "$d").txt" 2>/dev/null; done
cp "$W/kit_summary.txt" "$W/prepare.log" "$W/kitout/"
tar czf "$R/kit.tgz" -C "$W" kitout

# 3. Node tests on cuda: compiled 14 at a time, run 8 at a time.
find "$B/nodes" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort >"$W/nodes"
timeout 150 xargs -P 14 -I{} sh -c "'$S' compile '$B/nodes/{}/model.onnx' -o '$W/n_{}' $flags > '$W/out/node_{}.log' 2>&1 || echo 'compile {} failed'" <"$W/nodes"
at "3. node tests compiled"
timeout 100 xargs -P 8 -I{} sh -c "'$S' run '$W/n_{}' --backend $BACKEND --inputs '$B/nodes/{}/test_data_set_0' --expect '$B/nodes/{}/test_data_set_0' > '$W/out/run_{}.txt' 2>&1 && echo pass > '$W/out/ok_{}' || echo 'node test {}: '\$(tail -2 '$W/out/run_{}.txt' | tr '\n' ' ')" <"$W/nodes"
at "3. node tests on $BACKEND: $(ls "$W"/out/ok_* 2>/dev/null | wc -l) of $(wc -l <"$W/nodes") passed"
tar czf "$R/nodes.tgz" -C "$W" out
at "end"
