#!/usr/bin/env bash
# Prepares, on a build machine, everything bench/gpu/run.sh needs on a GPU machine that has the
# CUDA toolkit and driver but none of the Debian libraries stitchc links:
#   BUNDLE/bin/stitchc and BUNDLE/lib (its shared libraries other than the C/C++ runtime and CUDA's)
#   BUNDLE/check/NAME    artifacts at small shapes with their expected outputs (correctness on the GPU)
#   BUNDLE/time/NAME     and BUNDLE/time/NAME.none: the same models at timing shapes, fused and
#                        --fusion none (the baseline every step is set beside)
#   BUNDLE/fault/NAME    inputs a run must refuse, with the artifact and error in fault/NAME.args
# Models: every shipped one (checked at each data set's shapes; timed at batch 128 x sequence 64,
# the longest their position tables allow), the three target subgraphs at BERT-base sizes, BERT-base's
# FFN1 + bias + erf GELU as a call and a GELU kernel and as one tiled GEMM kernel, its first layer
# norm + FFN1 + GELU with the norm moved past the GEMM and kept in front of it, and
# LLaMA's RMSNorm + SiLU gate at 64 rows of LLaMA-7B (bench/gpu/make_subgraphs.py). Kernels are
# compiled for ARCH (default sm_90) by nvcc here.
#   bench/gpu/prepare.sh [BUNDLE]      (default build/gpu_bundle; needs build/cli/stitchc, python3 + onnx)
# BASE=STITCHC2: also time/NAME.base, each shipped model (those named in BASE_MODELS, default all)
# compiled by STITCHC2, an earlier build, at NAME's timing shapes; run.sh times NAME against it in
# rounds that alternate the order (a change's effect on a whole model, on the same GPU in one run).
# DRY_RUN=1: small shapes everywhere and the emulation libraries built, so that
# `BACKEND=emu bench/gpu/run.sh` exercises the whole path on a machine without a GPU (with
# NO_NVCC=1 as well: no kernel binaries, quicker).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUNDLE=${1:-$ROOT/build/gpu_bundle}
STITCHC=${STITCHC:-$ROOT/build/cli/stitchc}
ARCH=${ARCH:-sm_90}
DRY_RUN=${DRY_RUN:-0}
emu_flag=--no-emu
[ "$DRY_RUN" = 1 ] && emu_flag=
[ "${NO_NVCC:-0}" = 1 ] && emu_flag="$emu_flag --no-nvcc"
[ -x "$STITCHC" ] || { echo "prepare: $STITCHC not built; run scripts/build.sh first" >&2; exit 2; }
python3 -c "import onnx, numpy" 2>/dev/null || python3 -m pip install --quiet onnx numpy
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/check" "$BUNDLE/time" "$BUNDLE/models"
cp "$STITCHC" "$BUNDLE/bin/"
strip --strip-debug "$BUNDLE/bin/stitchc"
if [ -n "${BASE:-}" ]; then
  [ -x "$BASE" ] || { echo "prepare: BASE=$BASE is not an executable stitchc" >&2; exit 2; }
  cp "$BASE" "$BUNDLE/bin/stitchc_base"
  strip --strip-debug "$BUNDLE/bin/stitchc_base"
fi
ldd "$STITCHC" | awk '/=> \//{print $3}' |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so|/cuda' |
  while read -r lib; do cp -L "$lib" "$BUNDLE/lib/" && strip --strip-debug "$BUNDLE/lib/$(basename "$lib")"; done
python3 "$ROOT/bench/gpu/make_subgraphs.py" "$BUNDLE/models/small" --rows 64 --batch 2 --seq 16 \
  --llama 256,688 --ffn 256,320,1024 >/dev/null
if [ "$DRY_RUN" = 1 ]; then
  python3 "$ROOT/bench/gpu/make_subgraphs.py" "$BUNDLE/models/large" --rows 64 --batch 2 --seq 16 \
    --llama 256,688 --ffn 256,320,1024 --no-data >/dev/null
else
  python3 "$ROOT/bench/gpu/make_subgraphs.py" "$BUNDLE/models/large" --no-data >/dev/null
fi

# JOBS compiles at a time (default 1): on a machine with many cores, such as the GPU machine
# itself, the whole kit compiles in a few minutes. `settle` waits for them all and fails if any did.
JOBS=${JOBS:-1}
failed=0
compile() {  # compile OUT MODEL [flags...]
  local out=$1 model=$2
  shift 2
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || failed=1; done
  # shellcheck disable=SC2086
  { "${COMPILER:-$STITCHC}" compile "$model" -o "$out" --arch "$ARCH" $emu_flag "$@" >"$out.log" 2>&1 ||
    { echo "prepare: compiling $model failed:" >&2; tail -5 "$out.log" >&2; exit 1; }; } &
}
settle() {
  while [ -n "$(jobs -rp)" ]; do wait -n || failed=1; done
  [ "$failed" = 0 ] || { echo "prepare: a compile failed (its log is beside its artifact)" >&2; exit 1; }
}
# shellcheck source=tests/e2e/genai_shapes.sh
source "$ROOT/tests/e2e/genai_shapes.sh"
# The half-precision models check cuBLASLt and the kernels in float16 and bfloat16 against PyTorch;
# the quantized ones (int8 through ONNX Runtime's quantizer: QDQ, dynamic, operator format) the
# quantize kernels and integer GEMMs against onnxruntime; the onnxruntime-optimized ones its
# contrib ops read as ONNX ops; the mixture-of-experts and onnxruntime-genai models their routing,
# expert GEMMs, caches and attention.
# Every shipped model, checked at each of its data sets' shapes (check/NAME for the first,
# check/NAME.K for data set K) and timed at batch 128 x sequence 64, the longest their position
# tables allow (a decoding step: batch 64 or 128 after 63 cached; images: batch 256).
for dir in "$ROOT"/models/*/; do
  m=$(basename "$dir")
  [ -f "$dir/model.onnx" ] || continue
  for data in "$dir"test_data_set_*; do
    k=${data##*_}
    name=$m
    [ "$k" = 0 ] || name=$m.$k
    # shellcheck disable=SC2046
    compile "$BUNDLE/check/$name" "$dir/model.onnx" $(python3 "$ROOT/bench/exports/bindings.py" "$data")
    cp -r "$data" "$BUNDLE/check/$name.data"
  done
  case $m in
    cnn_small | seg_small | unet_small | cnn_small_qdq | cnn_small_qop) large="--shape batch=256" ;;
    llama_tiny_dec) large="--shape batch=64 --shape past=63" ;;
    # a prompt of 64 (time/NAME) and a decoding step (time/NAME.step)
    qwen3_tiny_genai) large=$(genai_shapes 64 64 0) ;;
    gptoss_tiny_genai) large=$(gptoss_shapes 64 64 0) ;;
    *) large="--shape batch=128 --shape sequence=64" ;;
  esac
  [ "$DRY_RUN" = 1 ] && large=$(python3 "$ROOT/bench/exports/bindings.py" "$dir/test_data_set_0")
  # shellcheck disable=SC2086
  compile "$BUNDLE/time/$m" "$dir/model.onnx" $large
  # shellcheck disable=SC2086
  compile "$BUNDLE/time/$m.none" "$dir/model.onnx" $large --fusion none
  if [ -n "${BASE:-}" ] && [[ -z "${BASE_MODELS:-}" || " $BASE_MODELS " == *" $m "* ]]; then
    # shellcheck disable=SC2086
    COMPILER=$BUNDLE/bin/stitchc_base compile "$BUNDLE/time/$m.base" "$dir/model.onnx" $large
  fi
  if [ "${m%_genai}" != "$m" ]; then
    large=$(genai_shapes 128 1 63)
    [ "$m" = gptoss_tiny_genai ] && large=$(gptoss_shapes 128 1 63)
    [ "$DRY_RUN" = 1 ] && large=$(python3 "$ROOT/bench/exports/bindings.py" "$dir/test_data_set_1")
    # shellcheck disable=SC2086
    compile "$BUNDLE/time/$m.step" "$dir/model.onnx" $large
    # shellcheck disable=SC2086
    compile "$BUNDLE/time/$m.step.none" "$dir/model.onnx" $large --fusion none
  fi
done
# Inputs a run must refuse with exit 2, naming the node and the index (run.sh runs each on the GPU):
# fault/NAME holds the inputs, fault/NAME.args the check artifact to run them on and a pattern the
# error must match. A token id past bert_tiny's vocabulary (its embedding's Gather, in a stitched
# kernel); qwen3_tiny_genai's decoding step with a second row of zeros in its attention mask, which
# puts that row's cache write at position -1 (TensorScatter's index check).
fault() {  # fault NAME ARTIFACT DATA_SET INPUT_INDEX VALUES PATTERN
  python3 "$ROOT/bench/gpu/bad_input.py" "$3" "$BUNDLE/fault/$1" "$4" "$5"
  printf '%s\n%s\n' "$2" "$6" >"$BUNDLE/fault/$1.args"
}
mkdir -p "$BUNDLE/fault"
fault bert_tiny_token bert_tiny "$ROOT/models/bert_tiny/test_data_set_0" 0 "[1] * 5 + [1000000] + [1] * 26" \
  "node '[^']*' \(Gather\): index 1000000 of 'input_ids', along axis 0 of '[^']*', is outside"
fault qwen3_genai_mask qwen3_tiny_genai.1 "$ROOT/models/qwen3_tiny_genai/test_data_set_1" 1 "[1] * 33 + [0] * 33" \
  "node '[^']*present_(key|value)' \(TensorScatter\): write index -1 of '[^']*' puts the 1 updates outside"
for s in layernorm softmax bias_gelu ffn1_gelu ln_ffn1_gelu rms_gate; do
  compile "$BUNDLE/check/$s" "$BUNDLE/models/small/$s/model.onnx"
  cp -r "$BUNDLE/models/small/$s/test_data_set_0" "$BUNDLE/check/$s.data"
  compile "$BUNDLE/time/$s" "$BUNDLE/models/large/$s/model.onnx"
  compile "$BUNDLE/time/$s.none" "$BUNDLE/models/large/$s/model.onnx" --fusion none
done
# FFN1 + GELU once more as the tiled GEMM kernel (a device spec that rates it as fast as the
# library, so the planner takes it): time/ffn1_gelu.tiled beside time/ffn1_gelu (call + GELU
# kernel) measures tiled_gemm_eff (fusion/cost.h); check/ffn1_gelu.tiled its results on the GPU.
echo "{\"arch\": \"$ARCH\", \"tiled_gemm_eff\": 1.0}" >"$BUNDLE/models/tiled_spec.json"
for kind in check:small time:large; do
  compile "$BUNDLE/${kind%%:*}/ffn1_gelu.tiled" "$BUNDLE/models/${kind#*:}/ffn1_gelu/model.onnx" \
    --device-spec "$BUNDLE/models/tiled_spec.json"
done
cp -r "$BUNDLE/check/ffn1_gelu.data" "$BUNDLE/check/ffn1_gelu.tiled.data"
# The layer norm in front of FFN1 kept there (--no-hoist-layer-norms): time/ln_ffn1_gelu.nohoist
# beside time/ln_ffn1_gelu (the norm moved past the GEMM, its mean and scale applied with the GELU)
# measures what the rewrite's estimate claims; both set beside the same --fusion none baseline.
for kind in check:small time:large; do
  compile "$BUNDLE/${kind%%:*}/ln_ffn1_gelu.nohoist" "$BUNDLE/models/${kind#*:}/ln_ffn1_gelu/model.onnx" \
    --no-hoist-layer-norms
done
cp -r "$BUNDLE/check/ln_ffn1_gelu.data" "$BUNDLE/check/ln_ffn1_gelu.nohoist.data"
settle
for kind in check time; do
  grep -q "tiled GEMM" "$BUNDLE/$kind/ffn1_gelu.tiled/plan.txt" ||
    { echo "prepare: ffn1_gelu.tiled is not a tiled GEMM kernel" >&2; exit 1; }
  grep -q "LayerNorms moved past GEMMs (feeding other work: estimated" "$BUNDLE/$kind/ln_ffn1_gelu/plan.txt" ||
    { echo "prepare: ln_ffn1_gelu's layer norm was not moved past its GEMM" >&2; exit 1; }
done
rm -rf "$BUNDLE/models"
# COMMIT names the commit stitchc was built from where this copy of the repository is not that
# commit (a bundle prepared on the GPU machine with a stitchc carried there)
if [ -n "${COMMIT:-}" ]; then echo "$COMMIT" >"$BUNDLE/commit"; else git -C "$ROOT" rev-parse --short HEAD >"$BUNDLE/commit" 2>/dev/null || true; fi
echo "prepare: $BUNDLE ($(du -sh "$BUNDLE" | cut -f1), arch $ARCH, commit $(cat "$BUNDLE/commit" 2>/dev/null))"
