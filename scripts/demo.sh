#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, then compile every shipped model
# ahead of time (generated CUDA kernels through nvcc for sm_90, static schedule, weights) and run
# each artifact on the CPU emulation backend against the outputs PyTorch computed for it. On a
# machine with a GPU, add `--backend cuda` runs of the same artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
stitchc=build/cli/stitchc
out=build/demo
mkdir -p "$out"
for m in models/*/; do
  name=$(basename "$m")
  [ -f "${m}model.onnx" ] || continue  # models/__pycache__ after running make_models.py
  shapes=(--shape batch=2)
  case $name in
    cnn_small | cnn_small_qdq | cnn_small_qop | seg_small | unet_small) ;;
    llama_tiny_dec) shapes+=(--shape past=16) ;;
    qwen3_tiny_genai) # onnxruntime-genai's dims are named per input: a prompt of 32, an empty cache
      shapes=(--shape input_ids=2x32 --shape attention_mask=2x32)
      for i in 0 1; do shapes+=(--shape "past_key_values.$i.key=2x2x0x16" --shape "past_key_values.$i.value=2x2x0x16"); done ;;
    gptoss_tiny_genai) # the same, its first layer's cache a window-sized buffer of 8 rows
      shapes=(--shape input_ids=2x32 --shape attention_mask=2x32)
      shapes+=(--shape past_key_values.0.key=2x2x8x16 --shape past_key_values.0.value=2x2x8x16)
      shapes+=(--shape past_key_values.1.key=2x2x0x16 --shape past_key_values.1.value=2x2x0x16) ;;
    *) shapes+=(--shape sequence=16) ;;
  esac
  echo
  echo "== stitchc compile ${m}model.onnx -o $out/$name ${shapes[*]}"
  $stitchc compile "${m}model.onnx" -o "$out/$name" "${shapes[@]}"
  echo "== stitchc run $out/$name --backend emu --inputs ${m}test_data_set_0 --expect ${m}test_data_set_0"
  $stitchc run "$out/$name" --backend emu --inputs "${m}test_data_set_0" --expect "${m}test_data_set_0"
done
echo
echo "== build/examples/stitch_example $out/bert_tiny emu   (the C++ example linking the runtime)"
build/examples/stitch_example "$out/bert_tiny" emu
