#!/usr/bin/env bash
# GPU call 1: the bench kit at this commit, compiled on the GPU machine, checked and timed; then
# full-width exports and two decoding steps made there, checked and timed fused vs --fusion none.
R=$OUT
cd "$(dirname "$0")/.."
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv; nvcc --version | tail -2
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
WIDE="llama_wide qwen3_wide falcon_wide bloom_wide gemma2_wide gpt2_wide llama_dec mistral_dec"
t0=$SECONDS
(STITCHC=$PWD/.gpu/bin/stitchc LD_LIBRARY_PATH=$PWD/.gpu/lib JOBS=8 bash bench/gpu/prepare.sh /tmp/kit > $R/prepare.log 2>&1; echo "prepare rc $? at $((SECONDS - t0)) s") &
mkdir -p /tmp/ex /tmp/exo
for n in $WIDE; do OMP_NUM_THREADS=2 python3 bench/exports/export.py /tmp/ex $n > /tmp/exo/export_$n.log 2>&1 & done
wait
echo "cpu phase $((SECONDS - t0)) s"; tail -3 $R/prepare.log
OUT=/tmp/kitout ITERS=200 bash bench/gpu/run.sh /tmp/kit > $R/kit_summary.txt 2>&1
echo "kit rc $? at $((SECONDS - t0)) s"; tail -40 $R/kit_summary.txt
cp /tmp/kit/commit /tmp/kitout/ 2>/dev/null; for d in /tmp/kit/time/*/; do cp $d/plan.txt /tmp/kitout/plan_$(basename $d).txt; done
tar czf $R/kit.tgz -C /tmp kitout
OUT=/tmp/exo TIME=1 SETS=0 JOBS=12 bash bench/gpu/run_exports.sh /tmp/kit /tmp/ex $WIDE > $R/exports_summary.txt 2>&1
echo "exports rc $? at $((SECONDS - t0)) s"; tail -14 $R/exports_summary.txt
tar czf $R/exports.tgz -C /tmp exo
