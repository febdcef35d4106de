# BERT-base, 12 layers (bench/exports/export.py, seeded random weights), exported here, compiled
# here with the bundled stitchc and this machine's nvcc, checked against PyTorch on cuda, timed.
B=build/gpu_bundle
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
date -u +%H:%M:%S
python3 bench/exports/export.py /tmp/ex bert_base_12l > $OUT/export.log 2>&1 || { tail -20 $OUT/export.log; exit 1; }
date -u +%H:%M:%S
M=/tmp/ex/bert_base_12l/model.onnx
ls -la $M
( time $B/bin/stitchc compile $M -o /tmp/c_check --arch sm_90 --no-emu --shape batch=2 --shape sequence=32 ) > $OUT/c_check.log 2>&1 &
( time $B/bin/stitchc compile $M -o /tmp/c_fused --arch sm_90 --no-emu --shape batch=8 --shape sequence=128 --report-json $OUT/report_fused.json ) > $OUT/c_fused.log 2>&1 &
( time $B/bin/stitchc compile $M -o /tmp/c_none --arch sm_90 --no-emu --shape batch=8 --shape sequence=128 --fusion none ) > $OUT/c_none.log 2>&1 &
wait
date -u +%H:%M:%S
for f in check fused none; do echo "== $f"; grep -E "steps:|error|real" $OUT/c_$f.log; done
$B/bin/stitchc run /tmp/c_check --backend cuda --inputs /tmp/ex/bert_base_12l/test_data_set_0 --expect /tmp/ex/bert_base_12l/test_data_set_0 2>&1 | tail -2
$B/bin/stitchc bench /tmp/c_fused --iters 200 --warmup 20 --against /tmp/c_none --json $OUT/bench_bert_base_12l.json > $OUT/bench_bert_base_12l.txt 2>&1; tail -12 $OUT/bench_bert_base_12l.txt
cp /tmp/c_fused/plan.txt $OUT/plan_fused.txt
