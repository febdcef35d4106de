# More exports made on this machine (bench/exports/export.py), compiled with the bundled stitchc
# and this machine's nvcc, checked on cuda against PyTorch at the export's shapes, timed at 8 x 128.
B=build/gpu_bundle
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
MODELS="bert_base_12l_f16 llama_2l gpt2_dynamo"
python3 bench/exports/export.py /tmp/ex $MODELS > $OUT/export2.log 2>&1 || { tail -20 $OUT/export2.log; }
for m in $MODELS; do
  M=/tmp/ex/$m/model.onnx; [ -f $M ] || { echo "$m: no export"; continue; }
  $B/bin/stitchc compile $M -o /tmp/$m.check --arch sm_90 --no-emu --shape batch=2 --shape sequence=32 > $OUT/$m.check.log 2>&1 &
  $B/bin/stitchc compile $M -o /tmp/$m.fused --arch sm_90 --no-emu --shape batch=8 --shape sequence=128 > $OUT/$m.fused.log 2>&1 &
  $B/bin/stitchc compile $M -o /tmp/$m.none --arch sm_90 --no-emu --shape batch=8 --shape sequence=128 --fusion none > $OUT/$m.none.log 2>&1 &
done
wait
for m in $MODELS; do
  echo "== $m"; grep -h "steps:" $OUT/$m.fused.log $OUT/$m.none.log; grep -h "error" $OUT/$m.*.log | head -3
  echo "check: $($B/bin/stitchc run /tmp/$m.check --backend cuda --inputs /tmp/ex/$m/test_data_set_0 --expect /tmp/ex/$m/test_data_set_0 2>&1 | tail -1)"
  $B/bin/stitchc bench /tmp/$m.fused --iters 200 --warmup 20 --against /tmp/$m.none --json $OUT/bench_$m.json > $OUT/bench_$m.txt 2>&1
  grep -E "^run\(\)|^against|^norm|^softmax|^gelu" $OUT/bench_$m.txt
done
cd $OUT && tar czf exports2.tgz *.log bench_*.txt bench_*.json && rm -f *.log bench_*
