#!/usr/bin/env bash
# GPU call 2: the quantized models with a DequantizeLinear -> QuantizeLinear pair of one scale
# skipped (stitchc 1badd1a, .gpu/bin/stitchc_new) against call 1's stitchc (de5b062,
# .gpu/bin/stitchc) at the kit's shapes: each checked on cuda at its data set, then timed with
# `stitchc bench --against`, new against old and old against new (the order of the two in one
# process alternated), and new against --fusion none. bert_tiny (float; no quantization, the same
# plan from both) timed twice more: call 1's median was 10% above the run of 2026-11-27 at the
# same plan and kernel times.
# Carried: .gpu/bin/stitchc, .gpu/bin/stitchc_new, .gpu/lib, .gpu/commit, .gpu/commit_new.
R=${OUT:-/tmp/callr2}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
OLD=$B/bin/stitchc
NEW=$B/bin/stitchc_new
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BACKEND=${BACKEND:-cuda}
ITERS=${ITERS:-200}
flags="--arch sm_90 --no-emu"
[ "${NO_NVCC:-0}" = 1 ] && flags="--arch sm_90 --no-nvcc"
W=${W:-/tmp/cr2}
rm -rf "$W" && mkdir -p "$W/out"
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
echo "old stitchc $(cat "$B/commit"), new $(cat "$B/commit_new")"
# The kit's shapes: batch 2 x sequence 16 to check, 128 x 64 to time (the CNN: batch 256); DRY=1: a
# dry run on emu, timed at the small shapes.
shapes() {  # MODEL check|time
  local b=2 s=16
  if [ "$2" = time ] && [ -z "${DRY:-}" ]; then
    b=128 s=64
    [ "${1#cnn_}" != "$1" ] && b=256
  fi
  if [ "${1#cnn_}" != "$1" ]; then echo "--shape batch=$b"; else echo "--shape batch=$b --shape sequence=$s"; fi
}
# shellcheck disable=SC2046,SC2086
for m in bert_tiny_qdq cnn_small_qdq bert_tiny; do
  "$NEW" compile "models/$m/model.onnx" -o "$W/$m.check" $(shapes $m check) $flags >"$W/out/compile_$m.check.log" 2>&1 &
  "$NEW" compile "models/$m/model.onnx" -o "$W/$m.new" $(shapes $m time) $flags >"$W/out/compile_$m.new.log" 2>&1 &
  "$OLD" compile "models/$m/model.onnx" -o "$W/$m.old" $(shapes $m time) $flags >"$W/out/compile_$m.old.log" 2>&1 &
  "$NEW" compile "models/$m/model.onnx" -o "$W/$m.none" $(shapes $m time) $flags --fusion none >"$W/out/compile_$m.none.log" 2>&1 &
done
wait
at "compiled: $(find "$W" -mindepth 1 -maxdepth 1 -type d -name '*.*' | wc -l) artifacts"
for m in bert_tiny_qdq cnn_small_qdq bert_tiny; do
  echo "check $m (new): $("$NEW" run "$W/$m.check" --backend "$BACKEND" --inputs "models/$m/test_data_set_0" \
    --expect "models/$m/test_data_set_0" 2>&1 | tail -1)"
  cp "$W/$m.new/plan.txt" "$W/out/plan_$m.new.txt"
  cp "$W/$m.old/plan.txt" "$W/out/plan_$m.old.txt"
  for pair in new:old old:new new:none; do
    a=${pair%%:*} b=${pair#*:}
    "$NEW" bench "$W/$m.$a" --backend "$BACKEND" --iters "$ITERS" --warmup 20 --against "$W/$m.$b" \
      --json "$W/out/bench_${m}_${a}_vs_$b.json" >"$W/out/bench_${m}_${a}_vs_$b.txt" 2>&1
    echo "$m $a vs $b: $(sed -n 3p "$W/out/bench_${m}_${a}_vs_$b.txt" | cut -d: -f2-) | $(grep '^against' "$W/out/bench_${m}_${a}_vs_$b.txt")"
  done
done
at "end"
tar czf "$R/out.tgz" -C "$W" out
