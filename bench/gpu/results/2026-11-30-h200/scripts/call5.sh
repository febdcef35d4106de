#!/usr/bin/env bash
# GPU call 5: bert_tiny_dyn's split-row kernels (DynamicQuantizeLinear's whole-tensor minimum and
# maximum, a row of 524288 split over 128 blocks of 128 threads), with their segment loops under
# `#pragma unroll 4` and `#pragma unroll 8` (stitchc builds of 63b351d with Stitcher::row_loop
# changed, .gpu/bin/stitchc_unrollN), against 63b351d's, at 128 x 64 with `stitchc bench --against`.
# The unrolled ones also checked on cuda at 2 x 16. Carried: .gpu/bin/stitchc_head,
# .gpu/bin/stitchc_unroll4, .gpu/bin/stitchc_unroll8, .gpu/lib.
R=${OUT:-/tmp/callr5}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BACKEND=${BACKEND:-cuda}
ITERS=${ITERS:-200}
flags="--arch sm_90 --no-emu"
[ "${NO_NVCC:-0}" = 1 ] && flags="--arch sm_90 --no-nvcc"
SHAPES=${SHAPES:---shape batch=128 --shape sequence=64}
W=${W:-/tmp/cr5}
rm -rf "$W" && mkdir -p "$W/out"
date -u
M=models/bert_tiny_dyn/model.onnx
# shellcheck disable=SC2086
for v in head unroll4 unroll8; do
  "$B/bin/stitchc_$v" compile $M -o "$W/$v" $SHAPES $flags >"$W/out/$v.log" 2>&1 &
  "$B/bin/stitchc_$v" compile $M -o "$W/$v.check" --shape batch=2 --shape sequence=16 $flags >"$W/out/$v.check.log" 2>&1 &
done
wait
for v in head unroll4 unroll8; do
  echo "check $v: $("$B/bin/stitchc_head" run "$W/$v.check" --backend "$BACKEND" --inputs models/bert_tiny_dyn/test_data_set_0 \
    --expect models/bert_tiny_dyn/test_data_set_0 2>&1 | tail -1)"
done
for v in unroll4 unroll8 head; do
  "$B/bin/stitchc_head" bench "$W/$v" --backend "$BACKEND" --iters "$ITERS" --warmup 20 --against "$W/head" \
    --json "$W/out/bench_$v.json" >"$W/out/bench_$v.txt" 2>&1
  echo "$v vs head: $(sed -n 3p "$W/out/bench_$v.txt" | cut -d: -f2-) | $(grep '^against' "$W/out/bench_$v.txt")"
  grep -E "^ +[0-9]+ +k[0-9]+_rows_reducemax" "$W/out/bench_$v.txt" | awk '{print "  " $2, $5 " us"}' | head -3
done
tar czf "$R/out.tgz" -C "$W" out
