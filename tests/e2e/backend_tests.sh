#!/usr/bin/env bash
# End-to-end tests of the back end: every shipped model compiled (nvcc for sm_90 included) and
# run on the emu backend against its PyTorch outputs; generated kernels through the emulation
# layer's feature check; the example program; every bad artifact or runtime input getting a
# clear error, exit 2, and no partial output.
#   tests/e2e/backend_tests.sh STITCHC FEATURE_CHECK EXAMPLE REPO_ROOT C_API_TEST
set -u
STITCHC=$1
FEATURE_CHECK=$2
EXAMPLE=$3
ROOT=$4
C_API_TEST=$5
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

# --- every shipped model: compile (nvcc sm_90 + emulation library), run on emu, match PyTorch ---
# shellcheck source=tests/e2e/genai_shapes.sh
source "$(dirname "$0")/genai_shapes.sh"
shapes_for() {
  case $1 in
    cnn_small | cnn_small_qdq | cnn_small_qop | seg_small | unet_small) echo "--shape batch=2" ;;
    llama_tiny_dec) echo "--shape batch=2 --shape past=16" ;;
    qwen3_tiny_genai) genai_shapes 2 32 0 ;;
    gptoss_tiny_genai) gptoss_shapes 2 32 0 ;;
    *) echo "--shape batch=2 --shape sequence=16" ;;
  esac
}
for m in "$ROOT"/models/*/; do
  name=$(basename "$m")
  [ -f "$m/model.onnx" ] || continue
  # shellcheck disable=SC2046
  expect "compile $name (nvcc sm_90)" 0 "nvcc \(sm_90\): .* kernel binaries" -- \
    "$STITCHC" compile "$m/model.onnx" -o "$TMP/$name" $(shapes_for "$name") --arch sm_90 --report-json "$TMP/$name.json"
  expect "run $name --backend emu --expect" 0 "all [0-9]+ output\(s\) match" -- \
    "$STITCHC" run "$TMP/$name" --backend emu --inputs "$m/test_data_set_0" --expect "$m/test_data_set_0"
  expect "generated kernels of $name use only emulated CUDA features" 0 "" -- \
    "$FEATURE_CHECK" --list "$ROOT/runtime/emu/SUPPORTED.md" \
    --header "stitch/emu/emu.h=$ROOT/runtime/emu/include/stitch/emu/emu.h" \
    --header "cooperative_groups.h=$ROOT/runtime/emu/include/cooperative_groups.h" \
    --header "stitch/device/compat.cuh=$ROOT/runtime/device/include/stitch/device/compat.cuh" \
    --header "stitch/device/stitch_device.cuh=$ROOT/runtime/device/include/stitch/device/stitch_device.cuh" \
    "$TMP/$name"/kernels/k*.cu
  check "report of $name counts launches and the arena" grep -q '"kernel_launches"' "$TMP/$name.json"
  # The judged rewrites' new weights are computed when written, not by the trials planning judges.
  check "planning $name computed no weight" grep -q '"weights_computed_while_planning": 0' "$TMP/$name.json"
done
# nvcc runs beside the artifact while ptxas's report may still re-plan; its scratch directories go.
check "no nvcc scratch directory is left beside the artifacts" bash -c "! compgen -G '$TMP/*.nvcc-*' >/dev/null"
# A kernel given room for the budget keeps its plan and its name, now with launch bounds (the
# shipped models whose kernels spill at first: bert_tiny_qdq, cnn_small_qdq, deepseek_v3_tiny and
# glm4_moe_tiny on this nvcc).
room_kept() {
  python3 -c 'import json, re, sys
d, r = sys.argv[1], json.load(open(sys.argv[1] + ".json"))
rooms = [re.match(r"kernel (\S+) .*compiled again with room for \d+ registers \(__launch_bounds__\((\d+), (\d+)\)\)", l)
         for l in r["fusion"]["ptxas_replans"]]
rooms = [m for m in rooms if m]
for m in rooms:
    src = open(f"{d}/kernels/{m.group(1)}.cu").read()
    if f"__launch_bounds__({m.group(2)}, {m.group(3)}) {m.group(1)}(" not in src:
        sys.exit(f"{m.group(1)}: no launch bounds")
if rooms: print(f"{len(rooms)} kernel(s) given room", file=sys.stderr)
sys.exit(0 if rooms or sys.argv[2] == "any" else 1)' "$@"
}
check "bert_tiny_qdq: the kernel that spilled is compiled again with room, under its name" room_kept "$TMP/bert_tiny_qdq" one
for m in "$ROOT"/models/*/; do
  [ -f "$m/model.onnx" ] || continue
  check "$(basename "$m"): every kernel given room has its launch bounds" room_kept "$TMP/$(basename "$m")" any
done
# The per-layer target as a plan test: at most 3 memory-intensive kernels per transformer layer (2
# layers each, plus the embedding's or the final norm, and bert_tiny's pooler Tanh after its GEMM
# call); GEMMs as loops or tiles are not counted.
for name in bert_tiny gpt2_tiny gpt2_tiny_f16 llama_tiny llama_tiny_bf16 llama_tiny_dec qwen3_tiny_genai mixtral_tiny \
  qwen2_moe_tiny glm4_moe_tiny; do
  extra=1
  # qwen3_tiny_genai: the embedding's kernel (with the mask's lengths) and the final norm's;
  # glm4_moe_tiny: the embedding's kernel and the final norm's (after its MoE layer's 3)
  [ "$name" = bert_tiny ] || [ "$name" = qwen3_tiny_genai ] || [ "$name" = glm4_moe_tiny ] && extra=2
  check "$name: at most 3 memory-intensive kernels per layer, each kernel of one kind" python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
kinds = [k['kind'] for k in r['kernels']]
mi = kinds.count('memory-intensive')
print(f'{mi} memory-intensive kernels, {kinds.count(\"gemm\")} GEMMs', file=sys.stderr)
sys.exit(0 if mi == r['memory_intensive_kernels'] and mi + kinds.count('gemm') == r['kernel_launches'] and mi <= 3 * 2 + int(sys.argv[2]) else 1)" "$TMP/$name.json" "$extra"
done
# onnxruntime-genai's Qwen3: its Q/K norms over [B, S*H, D] run over [B, S, H, D], so that the
# second layer's Q and K kernels compute the input norm's statistics themselves; without that
# rewrite those statistics are a kernel more. And its decoding step, on emu against PyTorch.
Q3="$ROOT/models/qwen3_tiny_genai"
# shellcheck disable=SC2046
"$STITCHC" compile "$Q3/model.onnx" -o "$TMP/q3_nosplit" $(genai_shapes 2 32 0) --no-split-head-rows --no-nvcc \
  --report-json "$TMP/q3_nosplit.json" >/dev/null
check "qwen3_tiny_genai: --no-split-head-rows leaves one kernel more (the second layer's input norm)" python3 -c "
import json, sys
a, b = (json.load(open(f))['memory_intensive_kernels'] for f in sys.argv[1:3])
print(a, b, file=sys.stderr)
sys.exit(0 if b == a + 1 else 1)" "$TMP/qwen3_tiny_genai.json" "$TMP/q3_nosplit.json"
check "qwen3_tiny_genai: the plan names the rows split" grep -q "q_norm/Reshape_1' (Reshape): rows 2x128x16 as 2x32x4x16" \
  "$TMP/qwen3_tiny_genai/plan.txt"
# Its other data sets: a decoding step, a chunk of 5 after 7 cached, and the step with past and
# present in one 64-row buffer (onnxruntime-genai's form on CUDA), whose caches the kernel computing
# K and V writes in place: 3 memory-intensive kernels a layer there too.
for c in "1 step 2 1 32" "2 chunk 1 5 7" "3 buffer 2 1 32 64"; do
  # shellcheck disable=SC2086
  set -- $c
  k=$1 what=$2
  shift 2
  # shellcheck disable=SC2046
  expect "compile qwen3_tiny_genai's data set $k ($what)" 0 "compiled" -- \
    "$STITCHC" compile "$Q3/model.onnx" -o "$TMP/q3_$what" $(genai_shapes "$@") --no-nvcc \
    --report-json "$TMP/q3_$what.json"
  expect "run qwen3_tiny_genai's data set $k ($what) on emu" 0 "all 5 output\(s\) match" -- \
    "$STITCHC" run "$TMP/q3_$what" --backend emu --inputs "$Q3/test_data_set_$k" --expect "$Q3/test_data_set_$k"
done
# A decoding step whose second batch row has an attention mask of zeros: its key count puts the
# cache write at position -1. The cache is computed (the past grown by a row), so the TensorScatter
# is a GatherElements and a Where; the check on its write index reports it after the run.
mkdir -p "$TMP/q3_badmask" && cp "$Q3"/test_data_set_1/input_*.pb "$TMP/q3_badmask/"
write_i64 "$TMP/q3_badmask/input_1.pb" attention_mask 2,33 "[1] * 33 + [0] * 33"
expect "a cache write index before the cache, in an expanded TensorScatter" 2 \
  "node '[^']*present_(key|value)' \(TensorScatter\): write index -1 of '[^']*' puts the 1 updates outside the cache's 33 positions" -- \
  "$STITCHC" run "$TMP/q3_step" --backend emu --inputs "$TMP/q3_badmask"
# The reference evaluates the layer's rotary embedding first, whose position id is -1 too.
expect "the reference refuses the same input" 2 \
  "\((TensorScatter|RotaryEmbedding)\): (write index|position id) -1 (of|is outside)" -- \
  "$STITCHC" run "$Q3/model.onnx" --inputs "$TMP/q3_badmask"
check "qwen3_tiny_genai, one 64-row buffer: the caches written in place by the kernel of K and V" \
  bash -c "grep -q \"written into 'present.1.key' in place\" '$TMP'/q3_buffer/kernels/k*.cu && \
    grep -q '\"in_place_of_input\"' '$TMP/q3_buffer/manifest.json'"
check "qwen3_tiny_genai, one 64-row buffer: at most 3 memory-intensive kernels per layer" python3 -c "
import json, sys
mi = json.load(open(sys.argv[1]))['memory_intensive_kernels']
print(mi, file=sys.stderr)
sys.exit(0 if mi <= 3 * 2 + 2 else 1)" "$TMP/q3_buffer.json"
# --- the mixture-of-experts models: their plans and other data sets ----------------------
# shellcheck source=tests/e2e/moe_plans.sh
source "$(dirname "$0")/moe_plans.sh"
# Convolution epilogues (cuDNN's fused call): cnn_small's residual block ends in one conv step
# that adds the block's input and applies ReLU; its stem's ReLU is its convolution's. A plan test:
# it fails when those kernels come back.
check "cnn_small: a residual block's Add and ReLU in its second convolution's call" python3 -c "
import json, sys
steps = json.load(open(sys.argv[1]))['steps']
epi = [s['params']['epilogue'] for s in steps if s['op'] == 'conv']
print(epi, file=sys.stderr)
sys.exit(0 if epi.count('residual_relu') >= 1 and epi.count('relu') >= 2 else 1)" "$TMP/cnn_small/schedule.json"
check "cnn_small: at most 7 generated kernels" python3 -c "
import json, sys
sys.exit(0 if json.load(open(sys.argv[1]))['fusion']['chosen']['kernel_launches'] <= 7 else 1)" "$TMP/cnn_small.json"
# Pools as taps (fusion/pool_taps.h): cnn_small_qdq's stem MaxPool (3 x 3, stride 2, padded by 1)
# reads a quantize-dequantize pair after the stem's convolution; as 9 strided Slices of a Pad
# combined by Max it shares that pair's kernel. --no-pool-taps leaves it a kernel of its own.
check "cnn_small_qdq: its MaxPool as taps in the kernel of the pair before it" python3 -c "
import json, re, sys
r = json.load(open(sys.argv[1]))
assert r['fusion']['pool_taps']['applied'], r['fusion']['pool_taps']
text = open(sys.argv[2]).read()
assert '(MaxPool)' not in text.split('fusion plan')[1]
both = [g for g in re.split(r'\n  group ', text) if '(Max)' in g and '(Round)' in g]
print(len(both), r['fusion']['chosen']['kernel_launches'], file=sys.stderr)
sys.exit(0 if len(both) == 1 and r['fusion']['chosen']['kernel_launches'] <= 11 else 1)" \
  "$TMP/cnn_small_qdq.json" "$TMP/cnn_small_qdq/plan.txt"
expect "compile cnn_small_qdq --no-pool-taps" 0 "compiled" -- \
  "$STITCHC" compile "$ROOT/models/cnn_small_qdq/model.onnx" -o "$TMP/cnn_qdq_pools" --shape batch=2 \
  --no-nvcc --no-pool-taps --report-json "$TMP/cnn_qdq_pools.json"
check "--no-pool-taps keeps cnn_small_qdq's MaxPool a kernel of its own" python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert not r['fusion']['pool_taps']['applied']
assert \"(MaxPool)\" in open(sys.argv[2]).read().split('fusion plan')[1]
sys.exit(0 if r['fusion']['chosen']['kernel_launches'] >= 12 else 1)" "$TMP/cnn_qdq_pools.json" "$TMP/cnn_qdq_pools/plan.txt"
# float32 convolutions and GEMMs compute in float32 unless compiled with --tf32: the schedule says
# which, the plan says so, and the emu backend rounds a --tf32 artifact's operands to TF32, so that
# stitchc run --expect checks it at kModelTf32's tolerance.
check "cnn_small: float32 library calls by default" grep -q '"tf32": false' "$TMP/cnn_small/schedule.json"
expect "compile cnn_small --tf32" 0 "" -- \
  "$STITCHC" compile "$ROOT/models/cnn_small/model.onnx" -o "$TMP/cnn_small_tf32" --shape batch=2 --tf32 --no-nvcc
check "cnn_small --tf32: TF32 library calls in the schedule" grep -q '"tf32": true' "$TMP/cnn_small_tf32/schedule.json"
check "cnn_small --tf32: the plan names TF32" grep -q "float32 GEMMs and convolutions on TF32 tensor cores" \
  "$TMP/cnn_small_tf32/plan.txt"
expect "run cnn_small --tf32 on emu at the TF32 tolerance" 0 "tolerance: rtol 0.01 atol 0.005" -- \
  "$STITCHC" run "$TMP/cnn_small_tf32" --backend emu --inputs "$ROOT/models/cnn_small/test_data_set_0" \
  --expect "$ROOT/models/cnn_small/test_data_set_0"
# --- greedy local stitching: fewer launches, same outputs, kernels through nvcc ------------
for m in "$ROOT"/models/*/; do
  name=$(basename "$m")
  [ -f "$m/model.onnx" ] || continue
  # shellcheck disable=SC2046
  expect "compile $name --fusion greedy (nvcc sm_90)" 0 "nvcc \(sm_90\)" -- \
    "$STITCHC" compile "$m/model.onnx" -o "$TMP/fused_$name" $(shapes_for "$name") --fusion greedy
  expect "run fused $name --backend emu --expect" 0 "all [0-9]+ output\(s\) match" -- \
    "$STITCHC" run "$TMP/fused_$name" --backend emu --inputs "$m/test_data_set_0" --expect "$m/test_data_set_0"
done
expect "--explain-fusion names groups and rejected merges" 0 "group [0-9]+ \[regional\]: .* row \(regional\) kernel" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/explained" --shape batch=1 --shape sequence=4 \
  --fusion greedy --explain-fusion --no-nvcc --no-emu
check "the plan is kept in the artifact" grep -q "kernel boundaries (rejected merges):" "$TMP/explained/plan.txt"
check "the plan lists independent packs" grep -q "pack 0: groups" "$TMP/explained/plan.txt"
"$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/nopack" --shape batch=1 --shape sequence=4 \
  --no-pack --no-nvcc --no-emu >/dev/null
check "--no-pack leaves every group in its own launch" bash -c "! grep -q 'independent packs' '$TMP/nopack/plan.txt'"
# ptxas feedback: with a register budget below what the fused kernels need, they are planned
# again split (every fused kernel of bert_tiny uses more than 24 registers on sm_90), unless the
# device holds all their blocks at once at the registers they use. On a part with one SM, the
# kernels of 16 blocks of 256 threads are not (8 such blocks fit at 32 registers).
# Every round's nvcc run is counted in the summary; the artifact is written once, from the last.
echo '{"arch": "sm_90", "name": "a part with one SM", "sms": 1}' >"$TMP/one_sm.json"
expect "ptxas over --max-registers: re-planned" 0 "re-planned after ptxas: kernel .*\(budget 24 registers" -- \
  bash -c 'set -o pipefail; "$0" compile "$1" -o "$2" --shape batch=2 --shape sequence=16 --max-registers 24 \
  --device-spec "$3" --report-json "$2.json" | tee "$2.out"' "$STITCHC" "$ROOT/models/bert_tiny/model.onnx" \
  "$TMP/regs" "$TMP/one_sm.json"
check "the re-planned groups are in the plan" grep -q "re-planned after ptxas" "$TMP/regs/plan.txt"
check "the re-planned compile counts its nvcc runs" grep -qE "nvcc \(sm_90\): .* \([2-4] runs, .* s in all\)" \
  "$TMP/regs.out"
check "report.json counts the same nvcc runs, their seconds above the last run's" python3 -c '
import json, re, sys
r = json.load(open(sys.argv[1]))
f = r["fusion"]
runs = int(re.search(r"\((\d) runs, ", open(sys.argv[2]).read()).group(1))
sys.exit(0 if f["nvcc_runs"] == runs and f["nvcc_seconds_all_runs"] > r["nvcc_seconds"] > 0 else 1)' \
  "$TMP/regs.json" "$TMP/regs.out"
# bert_tiny compiled into $2 runs on emu and matches PyTorch's outputs.
bert_tiny_matches() {
  expect "$1" 0 "all [0-9]+ output\(s\) match" -- "$STITCHC" run "$2" --backend emu \
    --inputs "$ROOT/models/bert_tiny/test_data_set_0" --expect "$ROOT/models/bert_tiny/test_data_set_0"
}
bert_tiny_matches "re-planned artifact runs on emu and matches" "$TMP/regs"
# On an H100's 132 SMs every block of those kernels is resident at once at 32 registers: fewer
# would run no more of them at a time, so they are kept as planned, each with a line that says
# why, and nvcc runs once.
expect "ptxas over --max-registers with every block resident: kept" 0 \
  "kept after ptxas: kernel .* uses [0-9]+ registers on sm_90 \(budget 24 registers\) without spilling: kept, since its [0-9]+ blocks? of 256 threads are resident at once on the 132 SMs of H100" -- \
  bash -c 'set -o pipefail; "$0" compile "$1" -o "$2" --shape batch=2 --shape sequence=16 --max-registers 24 \
  --report-json "$2.json" | tee "$2.out"' "$STITCHC" "$ROOT/models/bert_tiny/model.onnx" "$TMP/regs_kept"
check "kernels kept over the budget are not re-planned, and nvcc runs once" bash -c \
  '! grep -q "re-planned after ptxas" "$0/plan.txt" && grep -qE "nvcc \(sm_90\): [0-9.]+ s, " "$0.out"' \
  "$TMP/regs_kept"
check "plan.txt and report.json name the same kept kernels" python3 -c '
import json, sys
kept = json.load(open(sys.argv[1]))["fusion"]["ptxas_kept"]
lines = [l[len("kept after ptxas: "):] for l in open(sys.argv[2]).read().splitlines() if l.startswith("kept after ptxas: ")]
sys.exit(0 if kept and kept == lines else 1)' "$TMP/regs_kept.json" "$TMP/regs_kept/plan.txt"
bert_tiny_matches "the artifact with kernels kept over the budget runs on emu and matches" "$TMP/regs_kept"
# Each target's resources are judged on its own device: sm_80's on an A100's 108 SMs beside the
# sm_90 spec the cost model plans with.
expect "ptxas residency for a second --arch target on its own device" 0 \
  "kept after ptxas: kernel .* on sm_80 \(budget 24 registers\) .* on the 108 SMs of A100" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/regs_two" --shape batch=2 --shape sequence=16 \
  --max-registers 24 --arch sm_80,sm_90 --no-emu
expect "--max-registers out of range" 2 "--max-registers 8: give a per-thread budget from 16 to 255" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/regs8" --shape batch=2 --shape sequence=16 \
  --max-registers 8
# Code size: a kernel whose code computes its nodes more than --max-evaluations times is planned
# again before nvcc. seg_small's four resamplings in one kernel computed the first one's values 192
# times each (2809 evaluations, 370 KB of source, 18 s of nvcc); compiled above, it was re-planned.
check "seg_small was re-planned for code size" \
  grep -q "re-planned for code size: kernel .* over --max-evaluations 1024: .* is computed 192 times" \
  "$TMP/seg_small/plan.txt"
evaluations_within() {
  python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
most = max(k["evaluations"] for k in r["kernels"])
sys.exit(0 if (most <= int(sys.argv[2])) == (sys.argv[3] == "within") else 1)' "$@"
}
check "every kernel of seg_small is within --max-evaluations" evaluations_within "$TMP/seg_small.json" 1024 within
"$STITCHC" compile "$ROOT/models/seg_small/model.onnx" -o "$TMP/seg_large" --shape batch=2 --max-evaluations 100000 \
  --no-nvcc --no-emu --report-json "$TMP/seg_large.json" >/dev/null
check "with --max-evaluations 100000 seg_small keeps its large kernel" \
  evaluations_within "$TMP/seg_large.json" 1024 over
expect "a budget below every fused kernel re-plans bert_tiny" 0 "its nodes are kept apart" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/evals20" --shape batch=2 --shape sequence=16 \
  --max-evaluations 20 --no-nvcc
bert_tiny_matches "bert_tiny re-planned for code size matches on emu" "$TMP/evals20"
expect "--max-evaluations below 1" 2 "--max-evaluations 0: give a count of at least 1" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/evals0" --shape batch=2 --shape sequence=16 \
  --max-evaluations 0
# The kernel file holding node $2 also holds node $3 and says $4.
same_kernel() {
  local f
  f=$(grep -l "node '$2'" "$1"/k*.cu) && grep -q "node '$3'" $f && grep -q "$4" $f
}
# In plan $1, the folded group whose reason says $2 holds node $3.
folded_group() {
  grep -A1 -F "$2" "$1" | grep -q -F "node '$3'"
}
expect "--no-stitch-matmul keeps every MatMul a library call" 0 "compiled" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/libmm" --shape batch=2 --shape sequence=16 \
  --no-stitch-matmul --no-nvcc
# What fine-grained GEMM loops make possible, planned as the cost model did before their steps were
# priced (loop_step, measured on an H100 on 2026-11-25, where these plans of the tiny models ran
# slower than library calls): a spec with free loop steps, the default planner (beam) and greedy.
# Both run on emu against PyTorch.
echo '{"arch": "sm_90", "loop_step": 1e-15}' >"$TMP/free_loops.json"
for m in bert_tiny:beam llama_tiny:beam gpt2_tiny:beam bert_tiny:greedy; do
  name=${m%%:*} mode=${m#*:}
  expect "$name with free loop steps (--fusion $mode) matches PyTorch on emu" 0 "all [0-9]+ output\(s\) match" -- \
    bash -c '"$0" compile "$1" -o "$2" --shape batch=2 --shape sequence=16 --no-nvcc --fusion "$3" \
      --device-spec "$4" >/dev/null && "$0" run "$2" --backend emu --inputs "$5" --expect "$5"' \
    "$STITCHC" "$ROOT/models/$name/model.onnx" "$TMP/loops_${name}_$mode" "$mode" "$TMP/free_loops.json" \
    "$ROOT/models/$name/test_data_set_0"
done
check "by default bert_tiny's projections are calls and Q.K^T stays in the softmax kernel" \
  same_kernel "$TMP/bert_tiny/kernels" /model/encoder/layer.0/attention/self/MatMul \
  /model/encoder/layer.0/attention/self/Softmax "regional stitching"
# With free loop steps bert_tiny's MatMuls all run as loops in kernels; with them library calls,
# the calls take over their neighbours' work.
check "the residual is added by the dense layer's GEMM (its C), layer norm reads the sum" \
  folded_group "$TMP/libmm/plan.txt" \
  "added by node '/model/encoder/layer.0/attention/output/dense/MatMul' (MatMul) as its C (a residual" \
  /model/encoder/layer.0/attention/output/Add
# Moving the second RMSNorm's row scale past the gate/up GEMM and keeping it in place (the SiLU
# gate in the down projection's kernel, computed once per row into shared memory) are within
# 0.02 us of each other in llama_tiny's estimate: the plan gives both figures either way, for the
# products only kernels read and for those attention's GEMMs read (the first norm's).
check "llama_tiny: the row-scale move is weighed by the estimate, and the plan says with what" \
  grep -Eq "row scales moved past GEMMs \(read by kernels: (not applied: )?estimated [0-9.]+ us against [0-9.]+ us without.*; read by attention: " \
  "$TMP/llama_tiny/plan.txt"
# Layer 0's gate is computed in its norm's kernel next to the gate/up loop, layer 1's in front of
# the down projection's loop (the estimate has both layouts equal).
check "llama_tiny: a down projection's kernel computes the SiLU gate once per row into shared memory" \
  grep -Eq "MatMul 'node_linear_(6|13)': A's row, once per row" "$TMP/loops_llama_tiny_beam"/kernels/k0*.cu
expect "--no-hoist-row-scales: the second norm and the SiLU gate stay apart (4 kernels per layer)" 0 \
  "9 kernels \+ 10 library calls" -- \
  "$STITCHC" compile "$ROOT/models/llama_tiny/model.onnx" -o "$TMP/llama_nohoist" --shape batch=2 \
  --shape sequence=16 --no-nvcc --no-hoist-row-scales --explain-fusion
check "gpt2_tiny: its Q/K/V Splits became Slices, by the estimate" \
  grep -q "Splits and constant Gathers as Slices (estimated .* us against .* us without" "$TMP/gpt2_tiny/plan.txt"
check "--report-json says which rewrites were applied (gpt2_tiny: Splits as Slices, no row scale moved)" \
  python3 -c "import json, sys; f = json.load(open(sys.argv[1]))['fusion']; \
assert f['split_to_slices']['applied'] and len(f['split_to_slices']['lines']) == 2, f['split_to_slices']; \
assert not f['hoist_row_scales']['applied'], f['hoist_row_scales']" "$TMP/gpt2_tiny.json"
check "gpt2_tiny: its Gemms became MatMuls, by the estimate" \
  grep -q "Gemms as MatMuls (estimated .* us against .* us without" "$TMP/gpt2_tiny/plan.txt"
check "--report-json records the Gemms as MatMuls (gpt2_tiny: 8, four per layer)" \
  python3 -c "import json, sys; f = json.load(open(sys.argv[1]))['fusion']['gemms_as_matmuls']; \
assert f['applied'] and len(f['lines']) == 8, f" "$TMP/gpt2_tiny.json"
check "GPT-2's attention output projection (a Gemm) runs inside the second layer norm's kernel (free loops)" \
  same_kernel "$TMP/loops_gpt2_tiny_beam/kernels" /model/h.0/attn/c_proj/Gemm /model/h.0/ln_2/ReduceMean_1 \
  "regional stitching"
expect "--no-gemms-as-matmuls keeps GPT-2's Gemms (5 calls per layer)" 0 "7 kernels \+ 10 library calls" -- \
  "$STITCHC" compile "$ROOT/models/gpt2_tiny/model.onnx" -o "$TMP/gpt2_gemms" --shape batch=2 \
  --shape sequence=16 --no-nvcc --no-emu --no-gemms-as-matmuls --explain-fusion
expect "--no-fuse on a Gemm: it stays a Gemm, a call of its own" 0 \
  "    node '/model/h.0/attn/c_proj/Gemm' \(Gemm\) -> f32\[32x64\]" -- \
  "$STITCHC" compile "$ROOT/models/gpt2_tiny/model.onnx" -o "$TMP/gpt2_keep_gemm" --shape batch=2 \
  --shape sequence=16 --no-nvcc --no-emu --no-fuse /model/h.0/attn/c_proj/Gemm --explain-fusion
# Its Splits kept, the first norm moves past the QKV GEMM into the Split's kernel and Q.K^T is a
# loop in the softmax's kernel: a kernel more than with the Slices, 77.5 against 73.9 us.
expect "--no-split-slices keeps GPT-2's Splits (a kernel more than with the Slices)" 0 \
  "8 kernels \+ 10 library calls, estimated 77.5 us" -- \
  "$STITCHC" compile "$ROOT/models/gpt2_tiny/model.onnx" -o "$TMP/gpt2_nosplit" --shape batch=2 \
  --shape sequence=16 --no-nvcc --no-emu --no-split-slices --explain-fusion
# (Its GEMMs left between their views: unflattened, no Reshape is shared.)
expect "GPT-2's shared Reshapes copied per reader gain nothing: the copies are not kept" 0 \
  "shared relayouts copied per reader \(not applied: estimated 73\.9 us against 73\.9 us without" -- \
  "$STITCHC" compile "$ROOT/models/gpt2_tiny/model.onnx" -o "$TMP/gpt2_copies" --shape batch=2 \
  --shape sequence=16 --no-nvcc --no-emu --no-unflatten-gemms --explain-fusion
check "--no-relayout-copies skips the comparison" \
  bash -c 'out=$("$0" compile "$1" -o "$2" --shape batch=2 --shape sequence=16 --no-nvcc --no-emu \
    --no-unflatten-gemms --no-relayout-copies --explain-fusion) && grep -q "^fusion plan" <<<"$out" && ! grep -q "relayouts copied" <<<"$out"' \
  "$STITCHC" "$ROOT/models/gpt2_tiny/model.onnx" "$TMP/gpt2_nocopies"
expect "--no-fuse on a Split a rewrite would replace: the Split stays, kept apart" 0 \
  "node '/model/h.0/attn/Split' \(Split\) is in --no-fuse" -- \
  "$STITCHC" compile "$ROOT/models/gpt2_tiny/model.onnx" -o "$TMP/gpt2_keep" --shape batch=2 \
  --shape sequence=16 --no-nvcc --no-emu --no-fuse /model/h.0/attn/Split --explain-fusion
expect "--no-fuse on a MatMul a sibling merge would replace: it stays a GEMM of its own" 0 \
  "node 'node_linear_4' \(MatMul\) -> " -- \
  "$STITCHC" compile "$ROOT/models/llama_tiny/model.onnx" -o "$TMP/llama_keep" --shape batch=2 \
  --shape sequence=16 --no-nvcc --no-emu --no-fuse node_linear_4 --explain-fusion
check "the dense layer's bias is added in its GEMM's epilogue" \
  grep -q "'/model/encoder/layer.0/attention/output/dense/MatMul' (MatMul) in its epilogue (bias)" \
  "$TMP/libmm/plan.txt"
check "BERT's Q.K^T runs inside its softmax kernel (a fine-grained GEMM, stitched)" \
  same_kernel "$TMP/loops_bert_tiny_greedy/kernels" /model/encoder/layer.0/attention/self/MatMul \
  /model/encoder/layer.0/attention/self/Softmax "regional stitching"
check "the plan names the stitched Q.K^T and its estimate against the library call" \
  grep -q -E "fine-grained MatMuls stitched into kernels \([0-9]+ of them, as loops over the contraction axis\): estimated .* us against .* us with library calls: (node '[^']*' \(MatMul\), )*node '/model/encoder/layer.0/attention/self/MatMul' \(MatMul\)" \
  "$TMP/loops_bert_tiny_greedy/plan.txt"
check "the Q head transpose is read through the scores GEMM's operand strides" \
  grep -q "read by node '/model/encoder/layer.0/attention/self/MatMul' (MatMul) through its operand A's strides" \
  "$TMP/libmm/plan.txt"
check "--no-stitch-matmul: no kernel holds a MatMul" bash -c "! grep -q ' (MatMul)$' '$TMP'/libmm/kernels/k*.cu"
# The default (beam) plan of bert_tiny; greedy's moves the embedding norm past the Q/K/V GEMM (below).
check "the embedding layer norm and the mask kernel share one launch (independent packing)" \
  same_kernel "$TMP/bert_tiny/kernels" /model/embeddings/LayerNorm/LayerNormalization /model/And_1 \
  "scheme: independent"
check "greedy moves the embedding norm past the Q/K/V GEMM (its estimate is lower, free loops)" \
  grep -q "node '/model/encoder/layer.0/attention/self/query/MatMul/merged' (MatMul): LayerNormalization '/model/embeddings/LayerNorm/LayerNormalization' decomposed" \
  "$TMP/loops_bert_tiny_greedy/plan.txt"
check "BERT's Q, K and V projections are one GEMM" \
  grep -q "node '/model/encoder/layer.0/attention/self/value/MatMul' (MatMul) -> node '/model/encoder/layer.0/attention/self/query/MatMul/merged' (MatMul, n = 64+64+64)" \
  "$TMP/fused_bert_tiny/plan.txt"
check "GPT-2's tanh-form GELU runs in its GEMM's epilogue" \
  grep -q "computed by node '/model/h.0/mlp/c_fc/Gemm' (MatMul) in its epilogue (GELU, tanh form)" \
  "$TMP/fused_gpt2_tiny/plan.txt"
check "BERT's erf-form GELU runs in FFN2's row kernel, in front of FFN2's loop (free loops)" \
  same_kernel "$TMP/loops_bert_tiny_beam/kernels" /model/encoder/layer.0/intermediate/intermediate_act_fn/Erf \
  /model/encoder/layer.0/output/dense/MatMul "regional stitching"
# With every MatMul a call, the first layer norm moves past FFN1 (it stays for FFN2's residual):
# FFN1 reads the norm's input, and its mean and scale are applied to the product in the norm's
# own kernel, in front of the erf GELU.
check "with FFN1 a library call, its layer norm moves past it (hoist in the plan)" \
  grep -q "node '/model/encoder/layer.0/intermediate/dense/MatMul' (MatMul): LayerNormalization '/model/encoder/layer.0/attention/output/LayerNorm/LayerNormalization' decomposed, row mean" \
  "$TMP/libmm/plan.txt"
check "with the norm moved past FFN1, the norm and the erf GELU are one kernel" \
  same_kernel "$TMP/libmm/kernels" /model/encoder/layer.0/intermediate/intermediate_act_fn/Erf \
  /model/encoder/layer.0/attention/output/LayerNorm/LayerNormalization/decomposed_std "regional stitching"
"$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/libmm_nohoist" --shape batch=2 \
  --shape sequence=16 --no-stitch-matmul --no-hoist-layer-norms --no-nvcc --no-emu >/dev/null
check "with FFN1 a library call reading the norm, BERT's erf-form GELU stays a kernel, and the plan says why" \
  grep -q "GELU (erf form) of node '/model/encoder/layer.0/intermediate/dense/MatMul' (MatMul) stays a kernel" \
  "$TMP/libmm_nohoist/plan.txt"
check "--no-hoist-layer-norms keeps every norm in front of its GEMM" \
  bash -c "! grep -q 'LayerNorms moved past GEMMs' '$TMP/libmm_nohoist/plan.txt'"
expect "the artifact with the norms moved matches PyTorch" 0 "all 2 output\(s\) match" -- \
  "$STITCHC" run "$TMP/libmm" --backend emu --inputs "$ROOT/models/bert_tiny/test_data_set_0" \
  --expect "$ROOT/models/bert_tiny/test_data_set_0"
# GroupNorm (unet_small): each of its 7 norms with its weight, bias and SiLU (and a block's residual
# Add) in one kernel once the groups' channels are an axis; without the rewrite the weight, bias and
# SiLU after each norm are a kernel of their own. The default compile is the loop over models above.
U=$ROOT/models/unet_small
check "unet_small: every GroupNorm's channels as an axis (the rewrite in the plan)" \
  bash -c "[ \"\$(grep -c \"^  node '.*' (InstanceNormalization): groups .* as 2x4x\" '$TMP/unet_small/plan.txt')\" = 7 ]"
check "unet_small: a GroupNorm, its weight and bias and the SiLU after it are one kernel" \
  same_kernel "$TMP/unet_small/kernels" node_InstanceNormalization_12 node_silu "row kernel"
"$STITCHC" compile "$U/model.onnx" -o "$TMP/unet_nosplit" --shape batch=2 --no-split-group-norms --no-nvcc \
  --report-json "$TMP/unet_nosplit.json" >/dev/null
check "--no-split-group-norms keeps the Reshape back after each norm, and more kernels" python3 -c "
import json, sys
a, b = (json.load(open(f))['memory_intensive_kernels'] for f in sys.argv[1:3])
sys.exit(0 if b > a and 'GroupNorms' not in open(sys.argv[3]).read() else 1)" "$TMP/unet_small.json" \
  "$TMP/unet_nosplit.json" "$TMP/unet_nosplit/plan.txt"
expect "unet_small without the GroupNorm rewrite matches PyTorch" 0 "all 1 output\(s\) match" -- \
  "$STITCHC" run "$TMP/unet_nosplit" --backend emu --inputs "$U/test_data_set_0" --expect "$U/test_data_set_0"
# With FFN1 a call, the erf form runs in front of FFN2's loop (above) or in a kernel of its own;
# --approximate-gelu lets the call's epilogue compute GELU.
expect "--approximate-gelu: BERT's GELU in the GEMM epilogue" 0 "compiled" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/approx" --shape batch=2 --shape sequence=16 \
  --approximate-gelu --no-stitch-matmul --no-nvcc
check "--approximate-gelu is in the plan" grep -q "GELU, erf form run as the tanh form (--approximate-gelu)" \
  "$TMP/approx/plan.txt"
expect "--approximate-gelu artifact matches PyTorch within the model tolerance" 0 "all 2 output\(s\) match" -- \
  "$STITCHC" run "$TMP/approx" --backend emu --inputs "$ROOT/models/bert_tiny/test_data_set_0" \
  --expect "$ROOT/models/bert_tiny/test_data_set_0"
"$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/nomerge" --shape batch=1 --shape sequence=4 \
  --no-merge-gemms --no-nvcc --no-emu >/dev/null
check "--no-merge-gemms keeps sibling GEMMs apart" bash -c "! grep -q 'sibling GEMMs merged' '$TMP/nomerge/plan.txt'"
check "gpt2_tiny: its Conv1D GEMMs between views read their activations unflattened" \
  grep -q "GEMMs of flattened activations read them unflattened" "$TMP/gpt2_tiny/plan.txt"
"$STITCHC" compile "$ROOT/models/gpt2_tiny/model.onnx" -o "$TMP/noflat" --shape input_ids=2x16 \
  --shape attention_mask=2x16 --no-unflatten-gemms --no-nvcc --no-emu >/dev/null
check "--no-unflatten-gemms leaves them between their views" \
  bash -c "! grep -q 'GEMMs of flattened activations' '$TMP/noflat/plan.txt'"
B=$TMP/bert_tiny
D=$ROOT/models/bert_tiny/test_data_set_0
check "artifact holds manifest, schedule, weights, sources, fatbin, emu library, report" \
  test -f "$B/manifest.json" -a -f "$B/schedule.json" -a -f "$B/weights.bin" -a -f "$B/kernels/all_kernels.cu" \
  -a -f "$B/kernels/kernels.fatbin" -a -f "$B/emu/kernels_emu.so" -a -f "$B/report.json"
K0=$(basename "$(ls "$B"/kernels/k000_*.cu)")
check "kernel files open with a header naming their nodes" grep -q "node '.*' (Gather)" "$B/kernels/$K0"
expect "stitchc MODEL -o DIR is compile" 0 "compiled" -- \
  "$STITCHC" "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/short" --shape batch=1 --shape sequence=4 --no-nvcc
expect "recompiling over an artifact replaces it" 0 "compiled" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/short" --shape batch=1 --shape sequence=4 --no-nvcc
expect "--save-outputs from the emu backend" 0 "saved 2 output" -- \
  "$STITCHC" run "$B" --backend emu --inputs "$D" --save-outputs "$TMP/emu_out"
expect "emu outputs agree with the reference interpreter" 0 "all 2 output" -- \
  "$STITCHC" run "$ROOT/models/bert_tiny/model.onnx" --inputs "$D" --expect "$TMP/emu_out"
expect "the C ABI from C" 0 "c-api: all checks passed" -- "$C_API_TEST" "$B"
expect "example program runs the artifact" 0 "last_hidden_state f32 \[2x16x64\] sum .* finite" -- "$EXAMPLE" "$B" emu
# Several runs on one session, as a service answers requests: a token id past the vocabulary is
# refused (exit 2 at the end), and the runs after it give what a session that never saw it gives.
mkdir -p "$TMP/ex_bad" "$TMP/ex_good"
python3 -c "import struct, sys; open(sys.argv[1], 'wb').write(struct.pack('<32q', *([1] * 5 + [1000000] + [1] * 26)))" \
  "$TMP/ex_bad/input_ids.bin"
"$EXAMPLE" "$B" emu "$TMP/ex_good" >"$TMP/ex_alone.txt" 2>&1
expect "example: a refused run and the session goes on" 2 \
  "index 1000000 of 'input_ids'.*is outside" -- "$EXAMPLE" "$B" emu "$TMP/ex_bad" "$TMP/ex_good" "$TMP/ex_bad" "$TMP/ex_good"
expect "example: an input directory that does not exist" 2 "input directory '.*/ex_none' does not exist" -- \
  "$EXAMPLE" "$B" emu "$TMP/ex_none"
"$EXAMPLE" "$B" emu "$TMP/ex_bad" "$TMP/ex_good" "$TMP/ex_bad" "$TMP/ex_good" >"$TMP/ex_four.txt" 2>/dev/null
# shellcheck disable=SC2016
check "example: the runs after a refused one give the outputs of a fresh session" bash -c \
  '[ "$(grep -c "^refused (exit 2)" "$1")" = 2 ] && [ "$(grep -c sum "$1")" = 4 ] &&
   [ "$(grep sum "$1" | sort -u)" = "$(grep sum "$2" | sort)" ]' _ "$TMP/ex_four.txt" "$TMP/ex_alone.txt"

# --- bad input: exit 2, clear message, no partial output ----------------------------------
expect "dynamic input left unbound" 2 "input 'input_ids' has dynamic dimensions .* bind them with --shape" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/unbound"
check "no directory left after a failed compile" test ! -e "$TMP/unbound"
expect "bad --arch" 2 "--arch 'ampere' is not of the form sm_XY" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/badarch" --shape batch=1 --shape sequence=4 --arch ampere
check "no directory left after a bad --arch" test ! -e "$TMP/badarch"
expect "nvcc missing" 2 "nvcc not found at /nonexistent/bin/nvcc" -- \
  env CUDA_HOME=/nonexistent "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/nonvcc" \
  --shape batch=1 --shape sequence=4
check "no directory left when nvcc is missing" test -z "$(ls "$TMP" | grep nonvcc)"
mkdir -p "$TMP/notart" && echo hi >"$TMP/notart/keep.txt"
expect "refuses to overwrite a non-artifact directory" 2 "exists and is not a stitch artifact" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/notart" --shape batch=1 --shape sequence=4 --no-nvcc
check "the non-artifact directory is untouched" test -f "$TMP/notart/keep.txt"
expect "unknown --fusion planner" 2 "available planners are none, greedy, beam and ilp" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/fz" --shape batch=1 --shape sequence=4 --fusion bogus
expect "unknown --conv-transpose form" 2 "conv-transpose: bogus not in \{subpixel,call,zeros\}" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/fz" --shape batch=1 --shape sequence=4 \
  --conv-transpose bogus
X=$ROOT/tests/onnx_node/extra/test_convtranspose_stitch_pads_past_window
expect "a ConvTranspose of run-time weights that only the Conv form takes" 2 \
  "on spatial axis 0 its pads \(3 before, 2 after\).*its weights \(input 1 'x1'\) are computed at run time" -- \
  "$STITCHC" compile "$X/model.onnx" -o "$TMP/fz" --no-nvcc
expect "cost model for an unknown device" 2 "no device spec for 'sm_70'" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/fz" --shape batch=1 --shape sequence=4 --device-spec sm_70
echo '{' >"$TMP/bad_spec.json"
expect "a device spec that is not JSON" 2 "not a device spec" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/fz" --shape batch=1 --shape sequence=4 \
  --device-spec "$TMP/bad_spec.json"
# A spec file with a field out of its range: refused with exit 2, naming the field.
bad_spec() {
  echo "$2" >"$TMP/bad_field_spec.json"
  expect "$1" 2 "$3" -- "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/fz" --shape batch=1 \
    --shape sequence=4 --device-spec "$TMP/bad_field_spec.json"
}
bad_spec "a device spec with no SMs" '{"arch":"sm_90","sms":0}' '"sms" must be a whole number from 1 to 100000'
bad_spec "a device spec with a fraction of a register" '{"arch":"sm_90","regs_per_sm":65536.5}' \
  '"regs_per_sm" must be a whole number'
bad_spec "a tiled GEMM efficiency above 1" '{"arch":"sm_90","tiled_gemm_eff":1.5}' \
  '"tiled_gemm_eff" is a fraction of the fp32 rate: at most 1'
bad_spec "a negative loop step" '{"arch":"sm_90","loop_step":-1}' '"loop_step" must be a positive number'
expect "beam width 0" 2 "--beam-width must be at least 1" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/fz" --shape batch=1 --shape sequence=4 --beam-width 0
expect "plan budget 0" 2 "--plan-budget must be at least 1 step" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/fz" --shape batch=1 --shape sequence=4 --plan-budget 0
expect "plan time limit 0" 2 "--plan-time-limit must be more than 0 seconds" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/fz" --shape batch=1 --shape sequence=4 \
  --plan-time-limit 0
expect "a small plan budget keeps the best plan so far and says so" 0 "search steps \(the search's budget ran out" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/fz" --shape batch=1 --shape sequence=4 \
  --plan-budget 300 --no-nvcc --no-emu --explain-fusion
expect "calibrate: not a measurements file" 2 "expected \{\"arch\"" -- "$STITCHC" calibrate "$TMP/bad_spec.json" -o "$TMP/spec.json"
echo '{"arch":"sm_90","measurements":[{"bytes":1000,"launches":"x","seconds":4e-6}]}' >"$TMP/m_bad.json"
expect "calibrate: a non-integer launch count" 2 "integer \"launches\"" -- "$STITCHC" calibrate "$TMP/m_bad.json" -o "$TMP/spec.json"
echo '{"arch":"sm_90","measurements":[{"bytes":1000,"seconds":4e-6}]}' >"$TMP/m_one.json"
expect "calibrate: one measurement cannot fit two constants" 2 "at least two measurements" -- \
  "$STITCHC" calibrate "$TMP/m_one.json" -o "$TMP/spec.json"
echo '{"arch":"sm_90","measurements":[{"bytes":1000,"launches":1,"seconds":4e-6},{"bytes":100000000,"launches":1,"seconds":4e-5}]}' >"$TMP/m.json"
expect "calibrate fits launch and bandwidth efficiency" 0 "calibrated sm_90: launch 4.00 us" -- \
  "$STITCHC" calibrate "$TMP/m.json" -o "$TMP/spec.json"
check "a calibrated spec keeps the tiled GEMM efficiency" grep -q '"tiled_gemm_eff": 0.7' "$TMP/spec.json"
# A tiled GEMM of BERT-base's FFN1 size (2 x 1024 x 3072 x 768 flops, its bytes) at 103.2 us: after
# the 4 us launch and 9.1 us of memory, 90.1 us for 72.1 us of math at the fp32 peak.
echo '{"arch":"sm_90","measurements":[{"bytes":1000,"launches":1,"seconds":4e-6},{"bytes":100000000,"launches":1,"seconds":4e-5}],"tiled_gemms":[{"flops":4.832e9,"bytes":25178124,"seconds":1.032e-4}]}' >"$TMP/m_tiled.json"
expect "calibrate fits the tiled GEMM efficiency" 0 "tiled GEMM efficiency 0.800" -- \
  "$STITCHC" calibrate "$TMP/m_tiled.json" -o "$TMP/spec_tiled.json"
check "the fitted tiled GEMM efficiency is in the spec" grep -q '"tiled_gemm_eff": 0.800' "$TMP/spec_tiled.json"
echo '{"arch":"sm_90","measurements":[{"bytes":1000,"launches":1,"seconds":4e-6},{"bytes":100000000,"launches":1,"seconds":4e-5}],"tiled_gemms":{"flops":1}}' >"$TMP/m_tiled_obj.json"
expect "calibrate: tiled_gemms not an array" 2 "\"tiled_gemms\" must be an array" -- \
  "$STITCHC" calibrate "$TMP/m_tiled_obj.json" -o "$TMP/spec_tiled.json"
sed 's/"seconds":1.032e-4/"seconds":"slow"/' "$TMP/m_tiled.json" >"$TMP/m_tiled_str.json"
expect "calibrate: a tiled GEMM measurement without numeric seconds" 2 "tiled GEMM measurement 0 needs numeric" -- \
  "$STITCHC" calibrate "$TMP/m_tiled_str.json" -o "$TMP/spec_tiled.json"
sed 's/1.032e-4/1e-5/' "$TMP/m_tiled.json" >"$TMP/m_tiled_fast.json"
expect "calibrate: a tiled GEMM faster than its launch and memory time" 2 "no more than its launch and memory time" -- \
  "$STITCHC" calibrate "$TMP/m_tiled_fast.json" -o "$TMP/spec_tiled.json"
expect "a calibrated spec drives the planner" 0 "compiled" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/calibrated" --shape batch=1 --shape sequence=4 \
  --device-spec "$TMP/spec.json" --no-nvcc --no-emu
expect "--no-fuse of an unknown node" 2 "--no-fuse 'nosuch': the model has no node of that name" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/fz" --shape batch=1 --shape sequence=4 \
  --fusion greedy --no-fuse nosuch
expect "--backend cuda without a GPU" 2 "needs an NVIDIA GPU .* --backend emu" -- \
  "$STITCHC" run "$B" --backend cuda --inputs "$D"
expect "cuda on an artifact compiled with --no-nvcc" 2 "compiled without the cuda backend .* --no-nvcc" -- \
  "$STITCHC" run "$TMP/short" --backend cuda --inputs "$D"
expect "input shape differs from the compiled shape" 2 "input 'input_ids' has shape 2x16, the artifact was compiled for 1x4" -- \
  "$STITCHC" run "$TMP/short" --backend emu --inputs "$D"
mkdir -p "$TMP/wrongtype" && cp "$ROOT/models/cnn_small/test_data_set_0/input_0.pb" "$TMP/wrongtype/input_0.pb" && \
  cp "$D/input_1.pb" "$TMP/wrongtype/input_1.pb"
expect "input of the wrong dtype" 2 "input 'input_ids' has dtype f32, the artifact expects i64" -- \
  "$STITCHC" run "$B" --backend emu --inputs "$TMP/wrongtype"
# A token id past the vocabulary: the embedding's Gather (in a stitched kernel) reports it after
# the run.
mkdir -p "$TMP/badtoken" && cp "$D/input_1.pb" "$TMP/badtoken/input_1.pb"
write_i64 "$TMP/badtoken/input_0.pb" input_ids 2,16 "[1] * 5 + [1000000] + [1] * 26"
expect "a token id past the vocabulary" 2 "node '[^']*' \(Gather\): index 1000000 of 'input_ids', along axis 0 of '[^']*', is outside \[-[0-9]+, [0-9]+\)" -- \
  "$STITCHC" run "$B" --backend emu --inputs "$TMP/badtoken"
expect "the reference refuses the same token id" 2 "index 1000000 is out of range" -- \
  "$STITCHC" run "$ROOT/models/bert_tiny/model.onnx" --inputs "$TMP/badtoken"
expect "reference backend on a directory" 2 "is an artifact directory: run it with --backend emu" -- \
  "$STITCHC" run "$B" --inputs "$D"
expect "not an artifact directory" 2 "manifest.json'; recompile" -- "$STITCHC" run "$TMP/notart" --backend emu --inputs "$D"
cp -r "$B" "$TMP/tampered" && printf 'x' >>"$TMP/tampered/weights.bin"
expect "weights with extra bytes" 2 "'weights.bin' has [0-9]+ bytes, the manifest says" -- \
  "$STITCHC" run "$TMP/tampered" --backend emu --inputs "$D"
cp -r "$B" "$TMP/edited" && sed -i '1s/$/ (edited)/' "$TMP/edited/kernels/$K0"
expect "edited kernel source" 2 "$K0' .*(checksum|bytes)" -- "$STITCHC" run "$TMP/edited" --backend emu --inputs "$D"
# One byte of the weights changed, the size kept: only the checksum can tell.
cp -r "$B" "$TMP/flipped" && byte=$(od -An -tu1 -j100 -N1 "$B/weights.bin") &&
  printf "\\$(printf %03o $(((byte + 1) % 256)))" | dd of="$TMP/flipped/weights.bin" bs=1 seek=100 conv=notrunc status=none
cmp -s "$B/weights.bin" "$TMP/flipped/weights.bin" && { echo "FAIL the flipped weights are unchanged"; fail=$((fail + 1)); }
expect "weights edited in place" 2 "'weights.bin' does not match its checksum" -- \
  "$STITCHC" run "$TMP/flipped" --backend emu --inputs "$D"
cp -r "$B" "$TMP/truncated" && head -c 100 "$B/schedule.json" >"$TMP/truncated/schedule.json"
expect "truncated schedule" 2 "schedule.json' has [0-9]+ bytes" -- "$STITCHC" run "$TMP/truncated" --backend emu --inputs "$D"
cp -r "$B" "$TMP/missing" && rm "$TMP/missing/emu/kernels_emu.so"
expect "missing file" 2 "missing file 'emu/kernels_emu.so'" -- "$STITCHC" run "$TMP/missing" --backend emu --inputs "$D"
cp -r "$B" "$TMP/version" && sed -i -E 's/"version": [0-9]+,/"version": 99,/' "$TMP/version/manifest.json"
version=$(sed -n 's/.*kArtifactVersion = \([0-9]*\);.*/\1/p' "$ROOT/runtime/include/stitch/artifact_format.h")
expect "format version mismatch" 2 "format version 99, this runtime reads version $version" -- \
  "$STITCHC" run "$TMP/version" --backend emu --inputs "$D"
cp -r "$B" "$TMP/inplace" &&
  sed -i -E 's/"name": "last_hidden_state",/"name": "last_hidden_state", "in_place_of_input": 9,/' "$TMP/inplace/manifest.json"
expect "an output said to be written in place of an input that does not exist" 2 \
  "output 'last_hidden_state' is said to be written in place of input 9, which is not an input of its type and shape" -- \
  "$STITCHC" run "$TMP/inplace" --backend emu --inputs "$D"
cp -r "$B" "$TMP/fixed" &&
  sed -i -E 's/"fixed_inputs": \[\]/"fixed_inputs": [{"name": "f", "dtype": "bool", "dims": [], "data": "zz"}]/' "$TMP/fixed/manifest.json"
expect "a fixed input whose data is not hex" 2 "fixed input 'f' has data that is not lower-case hex" -- \
  "$STITCHC" run "$TMP/fixed" --backend emu --inputs "$D"
sed -i -E 's/"data": "zz"/"data": "0101"/' "$TMP/fixed/manifest.json"
expect "a fixed input whose data does not fill its shape" 2 "fixed input 'f' holds 2 bytes, its shape needs 1" -- \
  "$STITCHC" run "$TMP/fixed" --backend emu --inputs "$D"
expect "bench on the emu backend" 0 "run\(\): 3 iterations after 1 warm-up: min .* ms, median" -- \
  "$STITCHC" bench "$B" --backend emu --iters 3 --warmup 1
expect "bench --backend cuda without a GPU" 2 "needs an NVIDIA GPU" -- "$STITCHC" bench "$B"
# Per step against the unfused artifact: each stitched kernel beside the steps that run its nodes
# there, summed per kind of subgraph (bert_tiny: 8 kernels and 11 GEMM calls; 5 layer-norm kernels,
# two of them with the erf GELU moved past FFN1 with the norm, 2 softmax; no GELU kernel of its own).
"$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/bert_none" --shape batch=2 --shape sequence=16 \
  --fusion none --no-nvcc >/dev/null 2>&1
expect "bench --steps --against the unfused artifact" 0 \
  "norm: 5 step\(s\), .* the same nodes there: " -- \
  "$STITCHC" bench "$B" --backend emu --iters 2 --warmup 0 --against "$TMP/bert_none" --json "$TMP/bench.json"
check "bench --json holds every step and the per-kind sums" python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
k = j['kinds']
assert len(j['steps']) == 19 and j['against']['run_ms_median'] > 0
assert (k['norm']['steps'], k['softmax']['steps']) == (5, 2) and 'gelu' not in k, k
assert all(s['median_us'] > 0 for s in j['steps'])" "$TMP/bench.json"
expect "bench --against a folder that is no artifact" 2 "manifest.json" -- \
  "$STITCHC" bench "$B" --backend emu --iters 1 --against "$TMP"
expect "bench --json into a missing folder" 2 "cannot write --json" -- \
  "$STITCHC" bench "$B" --backend emu --iters 1 --json "$TMP/no/such/dir/b.json"
expect "bench with zero iterations" 2 "--iters and --rounds must be at least 1" -- \
  "$STITCHC" bench "$B" --backend emu --iters 0
expect "bench with zero rounds" 2 "--iters and --rounds must be at least 1" -- \
  "$STITCHC" bench "$B" --backend emu --rounds 0
# Rounds alternate which artifact runs first; each round gives both medians and their ratio, and
# the steps alone are timed in the first.
expect "bench --rounds alone: a median per round" 0 "median per round: [0-9.]+ [0-9.]+ ms \\(spread" -- \
  "$STITCHC" bench "$B" --backend emu --iters 2 --warmup 0 --rounds 2
expect "bench --rounds 3 --against the unfused artifact" 0 \
  "ratio per round \\(against / this\\): min [0-9.]+, median [0-9.]+, max [0-9.]+" -- \
  "$STITCHC" bench "$B" --backend emu --iters 2 --warmup 0 --rounds 3 --against "$TMP/bert_none" \
  --json "$TMP/rounds.json"
check "bench --rounds --json: the order, medians and ratio of each round" python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
r, a = j['rounds'], j['against']
assert [x['first'] for x in r] == ['this', 'against', 'this'], r
for x in r:
    assert x['run_ms_median'] > 0 and abs(x['ratio'] - x['against_run_ms_median'] / x['run_ms_median']) < 1e-9, x
ratios = sorted(x['ratio'] for x in r)
assert (a['ratio_min'], a['ratio_median'], a['ratio_max']) == (ratios[0], ratios[1], ratios[2]), a
assert len(j['steps']) == 19 and all(s['median_us'] > 0 for s in j['steps'])" "$TMP/rounds.json"
expect "example: unknown backend" 2 "unknown backend 'tpu'" -- "$EXAMPLE" "$B" tpu

echo "backend e2e: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
