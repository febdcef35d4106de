#!/usr/bin/env bash
# GPU call 3: where bert_tiny_qdq's quantize kernels spend their time, by variants of them timed
# against stitchc 1badd1a's (A) at 128 x 64 with `stitchc bench --against`: B, each division by a
# scale a product with its reciprocal (not exact: a stitchc built with the Stitcher's rounds_ off,
# .gpu/bin/stitchc_recip); C, stitch_dev::float_to_int a plain conversion (no NaN or range
# handling: not exact either); D, float_to_int converting through 32 bits where both bounds fit
# (the same integers); BD, B and D together. stitchc copies runtime/device/include's headers into
# each artifact, so C and D are that header swapped in this copy of the tree while compiling
# (.gpu/hdr), and put back after. D is also checked on cuda against the data set at 2 x 16.
# Carried: .gpu/bin/stitchc_new, .gpu/bin/stitchc_recip, .gpu/lib, .gpu/hdr.
R=${OUT:-/tmp/callr3}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
NEW=$B/bin/stitchc_new
RECIP=$B/bin/stitchc_recip
H=runtime/device/include/stitch/device/stitch_device.cuh
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BACKEND=${BACKEND:-cuda}
ITERS=${ITERS:-200}
flags="--arch sm_90 --no-emu"
[ "${NO_NVCC:-0}" = 1 ] && flags="--arch sm_90 --no-nvcc"
SHAPES=${SHAPES:---shape batch=128 --shape sequence=64}
W=${W:-/tmp/cr3}
rm -rf "$W" && mkdir -p "$W/out"
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
echo "tree at $PWD"
M=models/bert_tiny_qdq/model.onnx
# shellcheck disable=SC2086
{
  "$NEW" compile $M -o "$W/A" $SHAPES $flags >"$W/out/A.log" 2>&1 &
  "$RECIP" compile $M -o "$W/B" $SHAPES $flags >"$W/out/B.log" 2>&1 &
  wait
  cp "$B/hdr/plain.cuh" $H
  "$NEW" compile $M -o "$W/C" $SHAPES $flags >"$W/out/C.log" 2>&1
  cp "$B/hdr/int32.cuh" $H
  "$NEW" compile $M -o "$W/D" $SHAPES $flags >"$W/out/D.log" 2>&1 &
  "$RECIP" compile $M -o "$W/BD" $SHAPES $flags >"$W/out/BD.log" 2>&1 &
  "$NEW" compile $M -o "$W/Dcheck" --shape batch=2 --shape sequence=16 $flags >"$W/out/Dcheck.log" 2>&1 &
  wait
  cp "$B/hdr/orig.cuh" $H
}
at "compiled; float_to_int in each: A $(grep -c 'static_cast<int>(x)' "$W/A/kernels/stitch_device.cuh") D $(grep -c 'static_cast<int>(x)' "$W/D/kernels/stitch_device.cuh")"
echo "D checked: $("$NEW" run "$W/Dcheck" --backend "$BACKEND" --inputs models/bert_tiny_qdq/test_data_set_0 \
  --expect models/bert_tiny_qdq/test_data_set_0 2>&1 | tail -1)"
for v in B C D BD A; do
  "$NEW" bench "$W/$v" --backend "$BACKEND" --iters "$ITERS" --warmup 20 --against "$W/A" \
    --json "$W/out/bench_$v.json" >"$W/out/bench_$v.txt" 2>&1
  echo "$v vs A: $(sed -n 3p "$W/out/bench_$v.txt" | cut -d: -f2-) | $(grep '^against' "$W/out/bench_$v.txt")"
done
at "end"
tar czf "$R/out.tgz" -C "$W" out
