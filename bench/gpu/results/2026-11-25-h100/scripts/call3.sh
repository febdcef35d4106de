#!/usr/bin/env bash
# GPU call 3: call 2 again with the loop_step cost model; plus checks of the new plans on cuda.
# short batches): each model compiled with the default plan, with --no-stitch-matmul and with
# --fusion none, timed; ncu on the decoding step's slow kernels.
R=$OUT
cd "$(dirname "$0")/.."
B=$PWD/.gpu; S=$B/bin/stitchc
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
W=/tmp/c2; mkdir -p $W/out
t0=$SECONDS
{
for b in 1 4 8 32; do echo "$B/ex/llama_dec/model.onnx llama_dec_b$b --shape batch=$b --shape past=127"; done
echo "$B/ex/mistral_dec/model.onnx mistral_dec_b8 --shape batch=8 --shape past=127"
for bs in 1x16 2x16 8x16 32x16; do echo "models/llama_tiny/model.onnx llama_tiny_$bs --shape batch=${bs%x*} --shape sequence=${bs#*x}"; done
for bs in 2x16 8x16; do echo "models/bert_tiny/model.onnx bert_tiny_$bs --shape batch=${bs%x*} --shape sequence=${bs#*x}"; done
} > $W/list
while read -r m n rest; do
  echo "$m $W/$n $rest"; echo "$m $W/$n.nostitch $rest --no-stitch-matmul"; echo "$m $W/$n.none $rest --fusion none"
done < $W/list > $W/compiles
xargs -P 14 -L 1 sh -c 's=$0 m=$1 o=$2; shift 2; "$s" compile "$m" -o "$o" --arch sm_90 --no-emu "$@" >"$o.log" 2>&1 || echo "compile $o failed"' $S < $W/compiles
echo "compiles $((SECONDS - t0)) s"
while read -r m n rest; do
  $S bench $W/$n --iters 300 --warmup 30 --against $W/$n.nostitch --json $W/out/$n.json > $W/out/$n.txt 2>&1 || echo "bench $n failed"
  $S bench $W/$n.nostitch --iters 300 --warmup 30 --against $W/$n.none --json $W/out/$n.nostitch.json > $W/out/$n.nostitch.txt 2>&1 || echo "bench $n.nostitch failed"
  python3 - $W/out/$n.json $W/out/$n.nostitch.json $n <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print(f"{sys.argv[3]:16s} default {a['run_ms_median']*1e3:7.1f}  no-stitch-matmul {a['against']['run_ms_median']*1e3:7.1f}  none {b['against']['run_ms_median']*1e3:7.1f} us")
PY
done < $W/list
echo "benches $((SECONDS - t0)) s"
for c in "$B/ex/llama_dec llama_dec" "$B/ex/mistral_dec mistral_dec" "models/llama_tiny llama_tiny" "models/bert_tiny bert_tiny" "models/llama_tiny_dec llama_tiny_dec"; do
  set -- $c; d=$1/test_data_set_0
  $S compile $1/model.onnx -o $W/chk_$2 --arch sm_90 --no-emu $(python3 bench/exports/bindings.py $d) > $W/out/chk_$2.log 2>&1 && \
    echo "check $2: $($S run $W/chk_$2 --backend cuda --inputs $d --expect $d 2>&1 | tail -1)"
done
: ncu --clock-control none -k regex:'k00[12]_' -c 2 --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats \
  $S bench $W/llama_dec_b8 --no-cuda-graph --iters 1 --warmup 1 > $W/out/ncu_llama_dec_b8.txt 2>&1
echo "ncu rc $? at $((SECONDS - t0)) s"
for n in $(cut -d' ' -f2 $W/list); do cp $W/$n/plan.txt $W/out/plan_$n.txt; done
tar czf $R/c2.tgz -C $W out
