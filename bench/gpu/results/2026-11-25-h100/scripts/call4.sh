#!/usr/bin/env bash
# GPU call 4 (the final compiler): the kit checked and timed; the loop comparison of calls 2 and 3
# again on this card; every small export made here and checked on cuda at two shapes.
R=$OUT
cd "$(dirname "$0")/.."
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$SECONDS
SMALL="bert_base_2l bert_dynamo gpt2_dynamo llama_2l llama_ts distilbert roberta_dynamo gpt_neox phi mistral qwen2 bloom t5_enc opt opt_ts falcon gptj albert electra deberta_v2 mpnet gemma phi3 stablelm mobilebert xlm_roberta_ts bert_f16 gpt2_f16 llama_f16 llama_bf16 bert_bf16 vit whisper_enc swin gpt2_dec llama_dec llama_dec_ts mistral_dec qwen2_dec gemma2 gpt_bigcode starcoder2 olmo cohere clip_text bart wav2vec2 segformer dinov2 qwen3 olmo2 modernbert mpt gpt_neo codegen nemotron granite xglm persimmon beit xlnet funnel rembert roformer squeezebert"
mkdir -p /tmp/ex /tmp/exo
# exports on 10 processes while the kit compiles on 6
(for n in $SMALL; do echo $n; done | xargs -P 10 -I{} sh -c 'OMP_NUM_THREADS=1 python3 bench/exports/export.py /tmp/ex {} > /tmp/exo/export_{}.log 2>&1') &
STITCHC=$PWD/.gpu/bin/stitchc LD_LIBRARY_PATH=$PWD/.gpu/lib JOBS=6 bash bench/gpu/prepare.sh /tmp/kit > $R/prepare.log 2>&1; echo "prepare rc $? at $((SECONDS - t0)) s"
wait; echo "exports done at $((SECONDS - t0)) s: $(ls /tmp/ex | wc -l) of $(echo $SMALL | wc -w)"
OUT=/tmp/kitout ITERS=200 bash bench/gpu/run.sh /tmp/kit > $R/kit_summary.txt 2>&1
echo "kit rc $? at $((SECONDS - t0)) s"; grep -E "^check|failures" $R/kit_summary.txt | grep -v "match$" ; grep -c "match$" $R/kit_summary.txt
tail -22 $R/kit_summary.txt | grep "^|"
tar czf $R/kit.tgz -C /tmp kitout
bash .gpu/call2.sh > /tmp/loops.txt 2>&1; cat /tmp/loops.txt | grep -E "default|failed"; mv $R/c2.tgz $R/loops.tgz
echo "loops at $((SECONDS - t0)) s"
OUT=/tmp/exo SETS="0 2" JOBS=14 timeout 320 bash bench/gpu/run_exports.sh /tmp/kit /tmp/ex $SMALL > $R/exports_summary.txt 2>&1
echo "exports rc $? at $((SECONDS - t0)) s"; grep -c "all [0-9]* output(s) match; 3x45: all\|all [0-9]* output(s) match$" $R/exports_summary.txt; grep "^| " $R/exports_summary.txt | grep -v "match; [0-9x]*: all [0-9]* output(s) match |" | head -20
tar czf $R/exports.tgz -C /tmp exo
