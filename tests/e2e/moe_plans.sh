#!/usr/bin/env bash
# The mixture-of-experts models' plan tests and their other data sets, sourced by backend_tests.sh
# after every shipped model was compiled into $TMP/NAME (with $TMP/NAME.json, its report): what
# the MoE rewrites must keep together (the router, its top k, the experts' activations) and what
# each --no-... flag leaves apart. Each fails when those kernels come apart or the count grows.
# shellcheck disable=SC2154  # STITCHC, ROOT, TMP and the shape helpers are backend_tests.sh's

# onnxruntime-genai's gpt-oss: onnxruntime's MoE over all 4 experts (the top 2 picked in the
# routing's row kernel, no TopK), head sinks, a window-sized cache; its other data sets on emu
# against onnxruntime, and the prompt's plan: at most 3 memory-intensive kernels a layer (the
# attention; the routing with the activation weighted by it, the experts' activations an axis of
# their own beside the routing's rows; the residual and next norm).
G="$ROOT/models/gptoss_tiny_genai"
for c in "1 step 2 1 32" "2 chunk 1 5 7" "3 buffer 2 1 32 64"; do
  # shellcheck disable=SC2086
  set -- $c
  k=$1 what=$2
  shift 2
  # shellcheck disable=SC2046
  expect "compile gptoss_tiny_genai's data set $k ($what)" 0 "compiled" -- \
    "$STITCHC" compile "$G/model.onnx" -o "$TMP/go_$what" $(gptoss_shapes "$@") --no-nvcc
  expect "run gptoss_tiny_genai's data set $k ($what) on emu" 0 "all 5 output\(s\) match" -- \
    "$STITCHC" run "$TMP/go_$what" --backend emu --inputs "$G/test_data_set_$k" --expect "$G/test_data_set_$k"
done
check "gptoss_tiny_genai: no TopK, at most 3 memory-intensive kernels per layer" python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
mi = r['memory_intensive_kernels']
print(mi, file=sys.stderr)
sys.exit(0 if mi <= 3 * 2 + 1 else 1)" "$TMP/gptoss_tiny_genai.json"
check "gptoss_tiny_genai: the routing's rounds and the weighted activation in the softmax's kernel" python3 -c "
import re, sys
text = open(sys.argv[1]).read()
assert '(TopK)' not in text
groups = re.split(r'\n  group ', text)
both = [g for g in groups if \"routing_round1_first' (ReduceMin)\" in g and \"weighted_activation' (Mul)\" in g]
print(len(both), file=sys.stderr)
sys.exit(0 if len(both) == 2 else 1)" "$TMP/gptoss_tiny_genai/plan.txt"
# transformers' Mixtral in its batched_mm form gathers each routed token's expert weights
# (GatherND) for a batched MatMul; each such GEMM becomes one GEMM of every expert's weights, read
# once, with the token's expert's part picked from the product. --no-all-expert-gemms keeps the
# gathers (the plan then has no such section).
check "mixtral_tiny: its 4 expert GEMMs read every expert's weights once" bash -c \
  "[ \$(grep -c \"copying an expert's weights for each of 64 slots\" '$TMP/mixtral_tiny/plan.txt') = 4 ] && \
    grep -q \"as GEMMs of every expert's weights (estimated\" '$TMP/mixtral_tiny/plan.txt'"
check "--no-all-expert-gemms keeps mixtral_tiny's per-token weight gathers" \
  bash -c 'out=$("$0" compile "$1" -o "$2" --shape batch=2 --shape sequence=16 --no-nvcc --no-emu \
    --no-all-expert-gemms --explain-fusion) && grep -q "^fusion plan" <<<"$out" && ! grep -q "every expert" <<<"$out" && \
    grep -q "(GatherND) -> f32\[64x128x64\]" <<<"$out"' \
  "$STITCHC" "$ROOT/models/mixtral_tiny/model.onnx" "$TMP/mixtral_gathered"
# Its routers' TopKs are judged as rounds of row reductions in the softmax's kernel (kept: one
# ReduceMax of keys a round); --no-topk-rounds skips the comparison.
check "mixtral_tiny: its TopKs judged as rounds, --no-topk-rounds skips that" \
  bash -c 'grep -q "^TopKs as rounds of row reductions (" "$2/mixtral_tiny/plan.txt" && out=$("$0" compile "$1" -o "$2/mixtral_rounds" \
    --shape batch=2 --shape sequence=16 --no-nvcc --no-emu --no-topk-rounds --explain-fusion) && \
    grep -q "^fusion plan" <<<"$out" && ! grep -q "TopKs as rounds" <<<"$out"' \
  "$STITCHC" "$ROOT/models/mixtral_tiny/model.onnx" "$TMP"
# A token's weighted sum over its slots becomes one GEMM over every expert (onnxruntime's MoE op's
# form): the activation runs on every expert's part of the first projection, times the token's
# routing weight for each expert, 0 where not chosen, and the second projection of every expert,
# weighted and summed, is one GEMM with the residual as its C. The router's GEMM and the first
# projection are then siblings of one input, whose norm's row scale moves past both; the router's
# softmax (over 4 experts: element-wise ops), its top 2 (rounds of keys), the routing weights and
# the activation are one kernel,
# which computes the norm's statistics itself. A plan test: it fails when those come apart or the
# count grows (3 a layer, in backend_tests.sh).
check "mixtral_tiny: the router, its top 2 and every expert's weighted activation in one kernel, 7 kernels" env PYTHONPATH="$ROOT/tests/e2e" python3 -c "
import sys
from plan_groups import holding, memory_intensive, plan
text, groups = plan(sys.argv[1])
assert \"MoE tokens' sums over their slots as one GEMM over every expert (estimated\" in text
one = holding(groups, \"node_softmax/short_exp' (Exp)\", \"node_topk__1/round1_best' (ReduceMax)\",
              \"node_sum_2/every_expert/weighted' (Mul)\", \"node_Sigmoid_203/per_expert' (Sigmoid)\")
mi = memory_intensive(sys.argv[2])
print(len(one), mi, file=sys.stderr)
sys.exit(0 if len(one) == 1 and \"picked' (GatherND) ->\" not in text and '(TopK) ->' not in text and mi <= 7 else 1)" "$TMP/mixtral_tiny/plan.txt" "$TMP/mixtral_tiny.json"
# The row scale moved past the router's GEMM reads a copy of the norm's statistic chain, made so
# that a kernel could compute it itself; the plan puts the copy's reader in the kernel that
# computes the original chain too, so the copy is dropped and each statistic computed once. A plan
# test: it fails when a copy's ReduceMean is left.
check "mixtral_tiny: each norm's statistic computed once in the router's kernel" python3 -c "
import sys
text = open(sys.argv[1]).read()
assert 'duplicates sharing a kernel read as their originals (estimated' in text
means = [l for l in text.split('\n') if '(ReduceMean) ->' in l]
print(len(means), file=sys.stderr)
sys.exit(0 if means and not any('/for_' in l for l in means) else 1)" "$TMP/mixtral_tiny/plan.txt"
# Qwen2-MoE's shared expert, gated per token by its own sigmoid, is two more experts' rows of that
# GEMM (its width twice an expert's), its second projection more rows of the GEMM's weights: its
# activation and gate join the router's kernel, and its own GEMM and the Add go. Its norm's row
# scale, not moved by itself, is judged again after the router's softmax and top k became row ops
# of the router's rows, and moves then. A plan test: it fails when those come apart or the count
# grows (3 a layer, in backend_tests.sh).
check "qwen2_moe_tiny: the shared expert in the GEMM over every expert, its activation in the router's kernel, 7 kernels" env PYTHONPATH="$ROOT/tests/e2e" python3 -c "
import sys
from plan_groups import holding, memory_intensive, plan
text, groups = plan(sys.argv[1])
assert \"[64, 64] times 'sigmoid', node 'node_add_10' (Add) gone\" in text
assert 'judged again after the short reductions and TopKs below: read by kernels: estimated' in text
one = holding(groups, \"node_Softmax_205/short_exp' (Exp)\", \"node_topk__1/round1_best' (ReduceMax)\",
              \"node_sigmoid' (Sigmoid)\", \"node_sum_1/every_expert/with_shared' (Concat)\", \"node_mean_1' (ReduceMean)\")
mi = memory_intensive(sys.argv[2])
print(len(one), mi, file=sys.stderr)
sys.exit(0 if len(one) == 1 and \"node 'node_linear_6' (MatMul)\" not in text and mi <= 7 else 1)" "$TMP/qwen2_moe_tiny/plan.txt" "$TMP/qwen2_moe_tiny.json"
# GLM-4-MoE's router (DeepSeek-V3's, one group of experts): the top 2 of sigmoid scores plus a
# correction bias, over the scores flattened to [tokens, experts], the chosen scores gathered. The
# top 2's rounds over 4 experts are element-wise (Max of Slices), so the scores, the flattened view,
# the picks, the gather and every expert's activation are one element kernel. A plan test: it fails
# when the scores and the picks come apart again or the count grows.
check "glm4_moe_tiny: the router's scores, their flattened view, its top 2 and the gather in one kernel, 8 kernels" env PYTHONPATH="$ROOT/tests/e2e" python3 -c "
import sys
from plan_groups import holding, memory_intensive, plan
text, groups = plan(sys.argv[1])
assert 'maxima and minima over a few elements as element-wise ops, judged per row length (over 4: estimated' in text
one = holding(groups, \"node_sigmoid' (Sigmoid)\", \"sigmoid/flattened' (Reshape)\",
              \"node_topk_2__1/round1_index'\", \"node_gather' (GatherElements)\")
mi = memory_intensive(sys.argv[2])
print(len(one), mi, file=sys.stderr)
sys.exit(0 if len(one) == 1 and '(TopK) ->' not in text and '(ReduceMax) ->' not in text and mi <= 8 else 1)" "$TMP/glm4_moe_tiny/plan.txt" "$TMP/glm4_moe_tiny.json"
# DeepSeek-V3's router with its experts in groups: the top 2 of each group (rows of 2), the best 2
# groups (rows of 4) with their mask scattered, and the top 2 of the masked scores (rows of 8). The
# rounds over rows of 2 and 4 are element-wise (Max of Slices), so the whole router is one kernel
# over its rows of every expert (7 launches in the MoE layer otherwise). That layer is 4 launches:
# the latent attention's norms (a pack), the attention, the router (packed with the norm's
# statistics) and the activations. A plan test: it fails when the router comes apart or the count
# grows.
check "deepseek_v3_tiny: the group-limited router's three top 2s in one kernel, 9 kernels" env PYTHONPATH="$ROOT/tests/e2e" python3 -c "
import json, sys
from plan_groups import holding, plan
text, groups = plan(sys.argv[1])
assert 'maxima and minima over a few elements as element-wise ops, judged per row length (over 2: estimated' in text
assert '; over 4: estimated' in text
one = holding(groups, \"node_sigmoid' (Sigmoid)\", \"node_topk__1/round1_best/shape' (Reshape)\",
              \"node_topk_1__1/round1_best/shape' (Reshape)\", \"node_scatter/select' (Where)\",
              \"node_topk_2__1/round1_best' (ReduceMax)\")
r = json.load(open(sys.argv[2]))
f, mi = r['fusion'], r['memory_intensive_kernels']
assert f['short_maxima']['applied'] and len(f['short_maxima']['lines']) == 4, f['short_maxima']
assert f['topk_rounds']['applied'] and f['arg_reductions']['applied'], (f['topk_rounds'], f['arg_reductions'])
print(len(one), mi, file=sys.stderr)
sys.exit(0 if len(one) == 1 and '(TopK) ->' not in text and mi <= 9 else 1)" "$TMP/deepseek_v3_tiny/plan.txt" "$TMP/deepseek_v3_tiny.json"
# DeepSeek-V4's hyper-connections: each normalizes a 4 x 4 matrix per token by 20 Sinkhorn steps,
# their row and column sums Adds of Slices. In an element kernel over the matrices each lane computes
# its own element and reads the others of its matrix from their lanes (warp shuffles), so those
# kernels compute each node about once per element, and no kernel is planned again for code size
# (computed again at each element instead, they took twice the evaluations and a second nvcc run).
# A plan test: it fails when the exchange goes or the count grows.
check "deepseek_v4_tiny: Sinkhorn steps in kernels whose lanes exchange their matrix, 16 kernels" python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
f = r['fusion']
assert f['short_reductions']['applied'], f['short_reductions']
assert not f['code_size_replans'], f['code_size_replans']
xs = [k for k in r['kernels'] if 'of each tile of 16 (axes 2 on) read from the lanes that computed them' in k['mapping']]
assert [k['name'] for k in xs] == [k['name'] for k in r['kernels'] if k['lane_exchanges'] > 0]
lines = [l for l in open(sys.argv[2]).read().splitlines() if l.startswith('lanes exchange values: kernel ')]
assert len(lines) == len(xs), lines
divs = [sum(n['op'] == 'Div' for n in k['nodes']) for k in xs]
print(len(xs), divs, [(len(k['nodes']), k['evaluations']) for k in xs], r['memory_intensive_kernels'], file=sys.stderr)
assert all(k['evaluations'] <= 1.2 * len(k['nodes']) for k in xs)
sys.exit(0 if len(xs) == 8 and sum(divs) >= 100 and r['memory_intensive_kernels'] <= 16 else 1)" \
  "$TMP/deepseek_v4_tiny.json" "$TMP/deepseek_v4_tiny/plan.txt"
# With --no-expert-sums the slot form stays: the sum of each token's expert outputs over its 2
# slots (a ReduceSum over the middle axis: a kernel of its own as a row op) is written as Adds of
# Slices, which join the residual and the next RMSNorm's kernel; the post-attention norm's row scale
# moves past the router's GEMM, whose softmax kernel then computes the statistic itself and shares
# a launch with the norm's kernel (the experts' GEMM reads the norm). The router's top 2, as rounds
# of keys, join its softmax's kernel. A plan test: it fails when those kernels come apart or the
# count grows.
"$STITCHC" compile "$ROOT/models/mixtral_tiny/model.onnx" -o "$TMP/mixtral_slots" --shape batch=2 --shape sequence=16 \
  --no-nvcc --no-emu --no-expert-sums --report-json "$TMP/mixtral_slots.json" >/dev/null
check "--no-expert-sums: mixtral_tiny's slot sum in the next norm's kernel, the router and its top 2 beside the norm, 9 kernels" env PYTHONPATH="$ROOT/tests/e2e" python3 -c "
import sys
from plan_groups import holding, memory_intensive, plan
text, groups = plan(sys.argv[1])
assert 'sums and softmaxes over a few elements as element-wise ops (estimated' in text
assert \"MoE tokens' sums\" not in text
assert \"node 'node_linear_4' (MatMul): row scale 'rsqrt_1' applied to the product\" in text
both = holding(groups, \"node_sum_2/elements_to\", \"node_mean_2' (ReduceMean)\")
router = [g.split(':')[0] for g in groups if \"node_softmax/short_exp' (Exp)\" in g or \"node_mean_1' (ReduceMean)\" in g]
picks = holding(groups, \"node_softmax/short_exp' (Exp)\", \"node_topk__1/round1_best' (ReduceMax)\")
mi = memory_intensive(sys.argv[2])
print(len(both), router, len(picks), mi, file=sys.stderr)
packed = len(router) == 2 and all('pack' in r for r in router) and router[0].split('pack')[1] == router[1].split('pack')[1]
sys.exit(0 if len(both) == 1 and packed and len(picks) == 1 and '(TopK) ->' not in text and mi <= 9 else 1)" "$TMP/mixtral_slots/plan.txt" "$TMP/mixtral_slots.json"
check "--no-short-reductions keeps mixtral_tiny's slot sums ReduceSums (with --no-expert-sums)" \
  bash -c 'out=$("$0" compile "$1" -o "$2" --shape batch=2 --shape sequence=16 --no-nvcc --no-emu \
    --no-short-reductions --no-expert-sums --explain-fusion) && grep -q "^fusion plan" <<<"$out" && ! grep -q "sums and softmaxes over a few" <<<"$out" && \
    [ $(grep -c "(ReduceSum) -> f32\[32x64\]" <<<"$out") = 2 ]' \
  "$STITCHC" "$ROOT/models/mixtral_tiny/model.onnx" "$TMP/mixtral_sums"
