#!/usr/bin/env bash
# GPU call 1 (one call, every stage in order of what has never run on a GPU; each stage's results
# packed under $OUT as soon as it ends, so a stage cut off by the limit loses only itself):
#   1. the bench kit compiled there (cnn_small's convolutions now end in cuDNN's fused call),
#      checked on cuda and timed fused against --fusion none;
#   2. Optimum exports carried from the development machine: checked on cuda at three data sets
#      (a merged decoder's two branches, decoders' empty past), timed at the time_shapes beside them;
#   3. torchvision CNNs exported there: checked on cuda and timed at 1x3x224x224;
#   4. the small transformer exports of earlier GPU runs, exported there, checked at two shapes.
# Carried: .gpu/bin/stitchc and .gpu/lib (bench/gpu/prepare.sh's), .gpu/commit, .gpu/opt/NAME.
# LIMIT (seconds, default 570) bounds the whole call; stage 4 gets what is left.
R=${OUT:-/tmp/call1}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
LIMIT=${LIMIT:-570}
BACKEND=${BACKEND:-cuda}
export BACKEND
OPT=${OPT:-"resnet convnext segformer swin mobilenet_v2 mobilevit levit bert wav2vec2 whisper_encoder cohere opt t5_decoder_merged"}
CNN=${CNN:-"resnet18 mobilenet_v3_small efficientnet_b0 shufflenet_v2_x0_5 convnext_tiny regnet_y_400mf mnasnet0_5 densenet121 squeezenet1_0 googlenet efficientnet_v2_s mobilenet_v2 resnext50_32x4d resnet18_gn"}
SMALL=${SMALL:-"bert_base_2l bert_dynamo gpt2_dynamo llama_2l llama_ts distilbert roberta_dynamo gpt_neox phi mistral qwen2 bloom t5_enc opt opt_ts falcon gptj albert electra deberta_v2 mpnet gemma phi3 stablelm mobilebert xlm_roberta_ts bert_f16 gpt2_f16 llama_f16 llama_bf16 bert_bf16 vit whisper_enc swin gpt2_dec llama_dec llama_dec_ts mistral_dec qwen2_dec gemma2 gpt_bigcode starcoder2 olmo cohere clip_text bart wav2vec2 segformer dinov2 qwen3 olmo2 modernbert mpt gpt_neo codegen nemotron granite xglm persimmon beit xlnet rembert roformer squeezebert"}
t0=$SECONDS
at() { echo "[$((SECONDS - t0)) s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1
python3 -c "import torch, transformers, torchvision; print('torch', torch.__version__, 'transformers', transformers.__version__, 'torchvision', torchvision.__version__)"
echo "stitchc built from $(cat "$B/commit")"

# CPU phase: the exports (8 processes, one thread each) while the kit compiles (8 at a time).
mkdir -p /tmp/ex /tmp/exo
(for n in $CNN $SMALL; do echo "$n"; done | xargs -P 8 -I{} sh -c \
  'OMP_NUM_THREADS=1 timeout 240 python3 bench/exports/export.py /tmp/ex {} > /tmp/exo/export_{}.log 2>&1') &
exporter=$!
COMMIT=$(cat "$B/commit") STITCHC=$B/bin/stitchc LD_LIBRARY_PATH=$B/lib JOBS=8 DRY_RUN=${DRY_RUN:-0} \
  bash bench/gpu/prepare.sh /tmp/kit >"$R/prepare.log" 2>&1
at "1. kit prepared, rc $?: $(tail -1 "$R/prepare.log")"
OUT=/tmp/kitout ITERS=${ITERS:-200} bash bench/gpu/run.sh /tmp/kit >/tmp/kitout_summary.txt 2>&1
at "1. kit run rc $?"
grep -E "^check" /tmp/kitout_summary.txt | grep -vc "match$" | sed 's/^/   checks not matching: /'
grep -E "^(\||device|failures)" /tmp/kitout_summary.txt
for d in /tmp/kit/time/*/; do cp "$d/plan.txt" "/tmp/kitout/plan_$(basename "$d").txt"; done
cp /tmp/kitout_summary.txt /tmp/kitout/kit_summary.txt; cp "$R/prepare.log" /tmp/kitout/
tar czf "$R/kit.tgz" -C /tmp kitout

# 2. Optimum's exports, carried.
mkdir -p /tmp/opto
OUT=/tmp/opto SETS="0 2 3" TIME=1 JOBS=12 ITERS=${ITERS:-200} timeout 200 bash bench/gpu/run_exports.sh "$B" "$B/opt" $OPT \
  >/tmp/opto/summary.txt 2>&1 || true
at "2. Optimum exports done"
grep "^| " /tmp/opto/summary.txt
tar czf "$R/optimum.tgz" -C /tmp opto

# 3. torchvision CNNs at their exported 1x3x224x224 (no axis to bind: an empty time_shapes).
timeout $((LIMIT - (SECONDS - t0) - 200 > 60 ? LIMIT - (SECONDS - t0) - 200 : 60)) \
  bash -c "while kill -0 $exporter 2>/dev/null; do sleep 2; done"
at "exports: $(ls /tmp/ex | wc -l) made"
for n in $CNN; do [ -f "/tmp/ex/$n/model.onnx" ] && : >"/tmp/ex/$n/time_shapes"; done
mkdir -p /tmp/cnno
OUT=/tmp/cnno SETS=0 TIME=1 JOBS=14 ITERS=${ITERS:-100} timeout 160 bash bench/gpu/run_exports.sh "$B" /tmp/ex $CNN \
  >/tmp/cnno/summary.txt 2>&1 || true
at "3. CNNs done"
grep "^| " /tmp/cnno/summary.txt
tar czf "$R/cnn.tgz" -C /tmp cnno

# 4. The small transformer exports, checked at two shapes with what time is left.
left=$((LIMIT - (SECONDS - t0) - 15))
mkdir -p /tmp/exo
[ "$left" -gt 30 ] && OUT=/tmp/exo SETS="0 2" JOBS=14 timeout "$left" bash bench/gpu/run_exports.sh "$B" /tmp/ex $SMALL \
  >/tmp/exo/summary.txt 2>&1
at "4. small exports done (rc $?, $left s given)"
echo "   rows matching at every data set: $(grep -c "^| .* | .*match.* |" /tmp/exo/summary.txt)"
grep "^| " /tmp/exo/summary.txt | grep -v "^| export" | grep -v "^|---" | grep -vE "\| ([0-9x]+: all [0-9]+ output\(s\) match(; )?)+ \|" | head -20
tar czf "$R/exports.tgz" -C /tmp exo
at "end"
