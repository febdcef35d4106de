#!/usr/bin/env bash
# GPU call: models of opsets 6 to 10 and the audio front end's ops, which had not run on a GPU.
#   1. ONNX's node tests of opsets 6 to 10 and those of STFT, the window functions, MVN and Shrink
#      (frozen by bench/gpu/freeze_nodes.py), compiled there with nvcc and
#      run on cuda against their expected outputs;
#   2. PyTorch exports made there (bench/exports/export.py): whisper_logmel (torch.stft at opset 17),
#      resnet18_opset9, mobilenet_v2_opset10, bert_opset10; checked on cuda against PyTorch and
#      timed fused against --fusion none.
# Carried: .gpu/bin/stitchc, .gpu/lib, .gpu/commit, .gpu/nodes/NAME.
R=${OUT:-/tmp/calll}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
S=$B/bin/stitchc
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export BACKEND=${BACKEND:-cuda}
ITERS=${ITERS:-200}
flags="--arch sm_90 --no-emu"
[ "${NO_NVCC:-0}" = 1 ] && flags="--arch sm_90 --no-nvcc"
W=${W:-/tmp/cl}
rm -rf $W && mkdir -p $W/out $W/ex $W/exo
EXPORTS=${EXPORTS:-"whisper_logmel resnet18_opset9 mobilenet_v2_opset10 bert_opset10"}
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1
python3 -c "import torch, transformers, torchvision; print('torch', torch.__version__, 'transformers', transformers.__version__, 'torchvision', torchvision.__version__)"
echo "stitchc built from $(cat "$B/commit")"

# The exports, 4 processes, while the node tests compile.
(for n in $EXPORTS; do echo "$n"; done | xargs -P 4 -I{} sh -c \
  "OMP_NUM_THREADS=2 timeout 200 python3 bench/exports/export.py $W/ex {} > $W/exo/export_{}.log 2>&1") &
exporter=$!

# 1. Node tests on cuda.
ls $B/nodes | xargs -P 12 -I{} sh -c "'$S' compile '$B/nodes/{}/model.onnx' -o '$W/n_{}' $flags > '$W/out/node_{}.log' 2>&1 || echo 'compile {} failed'"
pass=0; fail=0
for t in $(ls $B/nodes); do
  if "$S" run "$W/n_$t" --backend "$BACKEND" --inputs "$B/nodes/$t/test_data_set_0" --expect "$B/nodes/$t/test_data_set_0" \
      >"$W/out/run_$t.txt" 2>&1; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "node test $t: $(tail -2 "$W/out/run_$t.txt" | tr '\n' ' ')"; fi
done
at "1. node tests on $BACKEND: $pass passed, $fail failed"
tar czf "$R/nodes.tgz" -C $W out

# 2. The exports: the CNNs and the spectrogram at their exported shapes, BERT at 8 x 128.
wait $exporter
at "exports: $(ls $W/ex | wc -l) made"
for n in whisper_logmel resnet18_opset9 mobilenet_v2_opset10; do [ -f "$W/ex/$n/model.onnx" ] && : >"$W/ex/$n/time_shapes"; done
OUT=$W/exo SETS="0 1 2" TIME=1 JOBS=12 ITERS=$ITERS timeout 200 bash bench/gpu/run_exports.sh "$B" "$W/ex" $EXPORTS \
  >$W/exo/summary.txt 2>&1
at "2. exports done, rc $?"
grep -E "^(\||exports|compiles)" $W/exo/summary.txt
tar czf "$R/exports.tgz" -C $W exo
at "end"
