#!/usr/bin/env bash
# End-to-end tests of the stitchc command line: the shipped models against
# their PyTorch outputs, and every bad input getting a clear error and exit 2.
#   tests/e2e/cli_tests.sh STITCHC REPO_ROOT
set -u
STITCHC=$1
ROOT=$2
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

# --- the shipped models match PyTorch's outputs ---------------------------------
for m in "$ROOT"/models/*/; do
  name=$(basename "$m")
  [ -f "$m/model.onnx" ] || continue
  expect "run $name --expect" 0 "all [0-9]+ output\(s\) match" -- \
    "$STITCHC" run "$m/model.onnx" --inputs "$m/test_data_set_0" --expect "$m/test_data_set_0"
done
# Half-precision outputs are compared within their type's model tolerance (support/tolerances.h)
# unless --rtol/--atol say otherwise: the bfloat16 LLaMA is 0.03 from PyTorch, outside float32's.
H=$ROOT/models/llama_tiny_bf16
expect "bf16 outputs get the bfloat16 model tolerance" 0 "tolerance: rtol 0.04 atol 0.04" -- \
  "$STITCHC" run "$H/model.onnx" --inputs "$H/test_data_set_0" --expect "$H/test_data_set_0"
expect "--rtol/--atol override a half type's default" 1 "MISMATCH: [0-9]+ element\(s\) out of tolerance" -- \
  "$STITCHC" run "$H/model.onnx" --inputs "$H/test_data_set_0" --expect "$H/test_data_set_0" --rtol 1e-3 --atol 1e-4
M=$ROOT/models/bert_tiny
D=$M/test_data_set_0

# --- inspect ------------------------------------------------------------------------
expect "inspect without bindings notes dynamic dims" 0 "bind them with --shape" -- "$STITCHC" inspect "$M/model.onnx"
expect "inspect with symbol bindings folds" 0 "after folding" -- "$STITCHC" inspect "$M/model.onnx" --shape batch=2 --shape sequence=8
expect "inspect with input bindings" 0 "bound to i64\[1x5\]" -- \
  "$STITCHC" inspect "$M/model.onnx" --shape input_ids=1x5 --shape attention_mask=1x5
expect "inspect plans the unfused arena" 0 "memory, unfused schedule: arena .* for 76 intermediate buffers" -- \
  "$STITCHC" inspect "$M/model.onnx" --shape batch=2 --shape sequence=8
expect "inspect --json" 0 '"nodes_folded"' -- "$STITCHC" inspect "$M/model.onnx" --shape batch=1 --shape sequence=4 --json
expect "inspect --dump-dir" 0 "" -- "$STITCHC" inspect "$M/model.onnx" --shape batch=1 --shape sequence=4 --dump-dir "$TMP/dump"
# One file per pass after the import, numbered in order, dead-code elimination last (however many
# passes the pipeline has).
dumps=$(ls "$TMP/dump" 2>/dev/null | wc -l)
if [ -f "$TMP/dump/00_import.txt" ] && [ -f "$TMP/dump/$(printf '%02d' $((dumps - 1)))_eliminate_dead_code.txt" ]; then
  echo "ok   dump-dir holds one IR file per pass"; pass=$((pass + 1))
else
  echo "FAIL dump-dir files missing: $(ls "$TMP/dump" 2>&1)"; fail=$((fail + 1))
fi
expect "ops lists the table" 0 "LayerNormalization +17-" -- "$STITCHC" ops

# --- run: save outputs and compare against them --------------------------------------
expect "run --save-outputs" 0 "saved 2 output" -- "$STITCHC" run "$M/model.onnx" --inputs "$D" --save-outputs "$TMP/out"
expect "saved outputs match themselves exactly" 0 "all 2 output" -- \
  "$STITCHC" run "$M/model.onnx" --inputs "$D" --expect "$TMP/out" --rtol 0 --atol 0
expect "a wrong expectation exits 1" 1 "MISMATCH: [0-9]+ element" -- \
  "$STITCHC" run "$ROOT/models/gpt2_tiny/model.onnx" --inputs "$ROOT/models/gpt2_tiny/test_data_set_0" \
  --expect "$ROOT/models/llama_tiny/test_data_set_0"
mkdir -p "$TMP/perturbed" && cp "$ROOT/models/cnn_small/test_data_set_0/input_0.pb" "$TMP/perturbed/"
cp "$ROOT/models/llama_tiny/test_data_set_0/output_0.pb" "$TMP/perturbed/output_0.pb"
expect "outputs of another model's shape are a mismatch" 1 "MISMATCH: shape" -- \
  "$STITCHC" run "$ROOT/models/cnn_small/model.onnx" --inputs "$TMP/perturbed" --expect "$TMP/perturbed"

# --- bad input: exit 2 with a message naming the culprit -----------------------------
expect "missing model file" 2 "nope.onnx: no such file" -- "$STITCHC" inspect "$TMP/nope.onnx"
printf 'not a model' >"$TMP/text.onnx"
expect "not an ONNX file" 2 "text.onnx: not (a valid )?(an )?ONNX" -- "$STITCHC" inspect "$TMP/text.onnx"
head -c 5000 "$M/model.onnx" >"$TMP/cut.onnx"
expect "truncated model" 2 "cut.onnx" -- "$STITCHC" inspect "$TMP/cut.onnx"
expect "unknown --shape name" 2 "no input or symbolic dimension has that name" -- \
  "$STITCHC" inspect "$M/model.onnx" --shape batch=1 --shape sequence=4 --shape nosuch=3
expect "malformed --shape" 2 "is not a dimension" -- "$STITCHC" inspect "$M/model.onnx" --shape batch=two
# A Resize whose scales are a graph input: stitch needs them at compile time.
RZ=/usr/share/libonnx-testdata/data/node/test_resize_upsample_scales_linear
expect "Resize scales known only at run time" 2 \
  "node 'Resize_0' \(Resize\): its scales \(input 2 'scales'\) is computed at run time.*graph input.*initializer" -- \
  "$STITCHC" compile "$RZ/model.onnx" -o "$TMP/rz" --no-nvcc
# An If on a graph input (ONNX's test_if; Optimum's merged decoders choose their first step or a
# step with a KV cache by one on use_cache_branch): one branch per artifact, fixed with
# --constant-input; data that still holds the input is checked against the fixed value.
IF=/usr/share/libonnx-testdata/data/node/test_if
expect "an If on a graph input names --constant-input" 2 \
  "If x1 \(e.g. 'If_0'\): its condition is the graph input 'cond': compile the branch you need with --constant-input cond=1" -- \
  "$STITCHC" compile "$IF/model.onnx" -o "$TMP/if" --no-nvcc
expect "the reference runs the branch --constant-input takes" 0 "all 1 output\(s\) match" -- \
  "$STITCHC" run "$IF/model.onnx" --constant-input cond=1 --inputs "$IF/test_data_set_0" --expect "$IF/test_data_set_0"
expect "data holding another value of a fixed input" 2 "input 'cond' holds another value than --constant-input fixes \(cond=0\)" -- \
  "$STITCHC" run "$IF/model.onnx" --constant-input cond=0 --inputs "$IF/test_data_set_0"
expect "compile the then branch, the decision in the plan" 0 \
  "decided at import: If 'If_0': its condition 'cond' is true at compile time, so its then_branch \(1 node\(s\)\) is inlined" -- \
  "$STITCHC" compile "$IF/model.onnx" --constant-input cond=true -o "$TMP/if" --no-nvcc --explain-fusion
expect "inspect shows the fixed input" 0 "cond +fixed by --constant-input: bool scalar" -- \
  "$STITCHC" inspect "$IF/model.onnx" --constant-input cond=0
expect "the artifact checks the fixed input and runs" 0 "all 1 output\(s\) match" -- \
  "$STITCHC" run "$TMP/if" --backend emu --inputs "$IF/test_data_set_0" --expect "$IF/test_data_set_0"
mkdir -p "$TMP/if_false" && printf '\x10\x09\x42\x04cond\x4a\x01\x00' >"$TMP/if_false/input_0.pb"  # cond = false
expect "a session refuses another value of a fixed input" 2 "input 'cond' was fixed to another value \(bool scalar\)" -- \
  "$STITCHC" run "$TMP/if" --backend emu --inputs "$TMP/if_false"
expect "--constant-input naming no input" 2 "no graph input named 'nosuch' \(its inputs: 'cond'\)" -- \
  "$STITCHC" compile "$IF/model.onnx" --constant-input nosuch=1 -o "$TMP/if2" --no-nvcc
expect "--constant-input of the wrong type" 2 "'maybe' is not a bool" -- \
  "$STITCHC" compile "$IF/model.onnx" --constant-input cond=maybe -o "$TMP/if2" --no-nvcc
# A NonZero of run-time data has a data-dependent length (Longformer's global tokens); one of
# values built from shapes folds (TorchScript's repeat_interleave; tests/unit/test_passes.cc).
NZ=/usr/share/libonnx-testdata/data/node/test_nonzero_example
expect "a NonZero of run-time data" 2 \
  "node 'NonZero_0' \(NonZero\): its output's length is the number of nonzero values of input 'condition', which is computed at run time" -- \
  "$STITCHC" compile "$NZ/model.onnx" -o "$TMP/nz" --no-nvcc
# Malformed nodes (tests/e2e/make_bad_models.py): checked against the ONNX schema of the model's
# opset, or by the op's shape rule, never read with defaults.
B=$ROOT/tests/e2e/bad_models
expect "an attribute of the wrong kind" 2 \
  "node 'sm' \(Softmax\): attribute 'axis' is a float, but Softmax \(version 13, in effect at opset 17\) takes an int" -- \
  "$STITCHC" compile "$B/softmax_float_axis.onnx" -o "$TMP/bad1" --no-nvcc
expect "an attribute the op does not have" 2 "node 'sm' \(Softmax\): 'axes' is not an attribute of Softmax.*which takes axis" -- \
  "$STITCHC" compile "$B/softmax_axes.onnx" -o "$TMP/bad2" --no-nvcc
expect "a negative pooling window" 2 "node 'pool' \(MaxPool\): the kernel's extent on spatial axis 0 is -3" -- \
  "$STITCHC" compile "$B/maxpool_negative_kernel.onnx" -o "$TMP/bad3" --no-nvcc
expect "a pooling window whose dilation would wrap its extent" 2 \
  "node 'pool' \(MaxPool\): the window \(3 with dilation 9223372036854775807\) or the padding \(0 and 0\) on spatial axis 1 is out of range: check the exporter.s kernel_shape, dilations and pads" -- \
  "$STITCHC" compile "$B/maxpool_huge_dilation.onnx" -o "$TMP/bad3b" --no-nvcc
expect "a constant ScatterND index out of range" 2 \
  "node 'put' \(ScatterND\): index 4 \(element 1 of its indices\) is out of range for axis 0 of size 4.*check the exporter's indices" -- \
  "$STITCHC" compile "$B/scatter_nd_index_out_of_range.onnx" -o "$TMP/bad4" --no-nvcc
expect "a constant ScatterElements index out of range" 2 \
  "node 'put' \(ScatterElements\): index -4 \(element 1 of its indices\) is out of range for axis 1 of size 3" -- \
  "$STITCHC" compile "$B/scatter_elements_index_out_of_range.onnx" -o "$TMP/bad5" --no-nvcc
expect "a recurrence too long to write out" 2 \
  "node 'lstm' \(LSTM\): stitch writes a recurrence out step by step.*at most 512 steps" -- \
  "$STITCHC" compile "$B/lstm_too_long.onnx" -o "$TMP/bad6" --no-nvcc
expect "a recurrence's activation with a parameter" 2 "node 'lstm' \(LSTM\): activation_alpha is not supported" -- \
  "$STITCHC" compile "$B/lstm_activation_alpha.onnx" -o "$TMP/bad7" --no-nvcc
expect "recurrence weights that are not its gates" 2 "node 'gru' \(GRU\): its weights W are 1x10x2, not 3 gates of hidden_size 4" -- \
  "$STITCHC" compile "$B/gru_weights_not_gates.onnx" -o "$TMP/bad8" --no-nvcc
expect "a scale that is not the quantization axis's" 2 \
  "node 'dq' \(DequantizeLinear\): the scale's shape 5 against x's shape 2x3x4 \(axis 1\): a scale is one value, a vector" -- \
  "$STITCHC" compile "$B/dequantize_scale_not_axis.onnx" -o "$TMP/bad9" --no-nvcc
expect "a zero point of another type than x" 2 "node 'dq' \(DequantizeLinear\): its zero point is i8 but x is u8" -- \
  "$STITCHC" compile "$B/dequantize_zero_point_type.onnx" -o "$TMP/bad10" --no-nvcc
expect "a blocked scale of the wrong block count" 2 \
  "node 'q' \(QuantizeLinear\): the scale's shape 2x2 against x's shape 2x5 \(axis 1, block_size 2\)" -- \
  "$STITCHC" compile "$B/quantize_blocked_scale.onnx" -o "$TMP/bad11" --no-nvcc
expect "an 8-bit float input" 2 "input 'f8' has element type FLOAT8E4M3FN, which stitch does not support" -- \
  "$STITCHC" compile "$B/dequantize_float8.onnx" -o "$TMP/bad12" --no-nvcc
expect "a GridSample mode it does not have" 2 \
  "node 'sample' \(GridSample\): mode 'area' is not nearest, linear \(bilinear\) or cubic \(bicubic\)" -- \
  "$STITCHC" compile "$B/gridsample_mode_area.onnx" -o "$TMP/bad13" --no-nvcc
expect "loss weights that are not one per class" 2 \
  "node 'loss' \(SoftmaxCrossEntropyLoss\): its weights have shape 4; they are one per class, \[6\]" -- \
  "$STITCHC" compile "$B/sce_weights_not_classes.onnx" -o "$TMP/bad14" --no-nvcc
expect "an LRN window of no channels" 2 "node 'lrn' \(LRN\): size must be positive, got 0" -- \
  "$STITCHC" compile "$B/lrn_size_zero.onnx" -o "$TMP/bad15" --no-nvcc
expect "an op newer than the model's opset" 2 "node 'pick' \(Where\): Where was added to ONNX at opset 9, and the model declares opset 8" -- \
  "$STITCHC" compile "$B/where_at_opset8.onnx" -o "$TMP/bad16" --no-nvcc
expect "a BatchNormalization of opset 6 in training mode" 2 "node 'bn' \(BatchNormalization\) \(opset 6\): is_test=0 asks for training mode" -- \
  "$STITCHC" compile "$B/bn_training_opset6.onnx" -o "$TMP/bad17" --no-nvcc
expect "an STFT window shorter than its frames" 2 "node 'stft' \(STFT\): its window has 8 values, but frame_length is 16" -- \
  "$STITCHC" compile "$B/stft_window_length.onnx" -o "$TMP/bad18" --no-nvcc
expect "a ReverseSequence with too few lengths" 2 "node 'rev' \(ReverseSequence\): sequence_lens has shape 3; it holds one length per batch entry" -- \
  "$STITCHC" compile "$B/reverse_sequence_lens.onnx" -o "$TMP/bad19" --no-nvcc
expect "a MatMulInteger zero point with a value too many" 2 "node 'mm' \(MatMulInteger\): a_zero_point has shape 5; it must be one value, or one per row of the product \(4 values\)" -- \
  "$STITCHC" compile "$B/matmulinteger_zero_point_rows.onnx" -o "$TMP/bad20" --no-nvcc
expect "a QLinearConv bias short of a channel" 2 "node 'qconv' \(QLinearConv\): B has shape 3; it must be one value, or one per output channel \(4 values\)" -- \
  "$STITCHC" compile "$B/qlinearconv_bias_channels.onnx" -o "$TMP/bad21" --no-nvcc
expect "an opset-1 Cast naming no type" 2 "node 'cast' \(Cast\) \(opset 1\): 'to' names 'FLOAT128', not a type of TensorProto" -- \
  "$STITCHC" compile "$B/cast_opset1_type_name.onnx" -o "$TMP/bad22" --no-nvcc
expect "a Compress condition longer than its axis" 2 "node 'compress' \(Compress\): its condition has 4 values, more than the 3 slices along its axis it selects from" -- \
  "$STITCHC" compile "$B/compress_condition_long.onnx" -o "$TMP/bad23" --no-nvcc
expect "onnxruntime's Attention with a 4-D mask" 2 "node 'attention' \(com.microsoft::Attention\): its key mask 'm' is 4-D; stitch reads the 1-D \(end positions\), 2-D and 3-D forms" -- \
  "$STITCHC" compile "$B/attention_contrib_mask_4d.onnx" -o "$TMP/bad24" --no-nvcc
expect "onnxruntime's Attention with a rotary embedding inside" 2 "node 'attention' \(com.microsoft::Attention\): do_rotary=1 \(a rotary embedding inside\) is not read" -- \
  "$STITCHC" compile "$B/attention_contrib_rotary.onnx" -o "$TMP/bad25" --no-nvcc
expect "onnxruntime's MultiHeadAttention with unidirectional=1" 2 "node 'mha' \(com.microsoft::MultiHeadAttention\): unidirectional=1 is not read" -- \
  "$STITCHC" compile "$B/mha_contrib_unidirectional.onnx" -o "$TMP/bad26" --no-nvcc
expect "onnxruntime's GroupQueryAttention with 3 head sinks for 2 heads" 2 "node 'gqa' \(Attention\): the head sinks \(input 7; GroupQueryAttention's head_sink\) must be Q's type, one per query head: \[2\], got f32 of shape 3" -- \
  "$STITCHC" compile "$B/gqa_contrib_head_sink.onnx" -o "$TMP/bad27" --no-nvcc
expect "a GroupQueryAttention whose total length is an input's value" 2 "node 'gqa/present_key_zeros' \(Expand\): its target shape .* follows the values of input 'total'" -- \
  "$STITCHC" compile "$B/gqa_contrib_total_input.onnx" -o "$TMP/bad28" --no-nvcc
expect "a GroupQueryAttention window-sized cache without a window" 2 "node 'gqa' \(com.microsoft::GroupQueryAttention\): sliding_window_cache=1 needs local_window_size positive and a past buffer" -- \
  "$STITCHC" compile "$B/gqa_contrib_window_cache_no_window.onnx" -o "$TMP/bad29" --no-nvcc
expect "onnxruntime's MoE with the sparse mixer routing" 2 "node 'moe' \(com.microsoft::MoE\): use_sparse_mixer=1 \(Phi-3.5-MoE's routing\) is not read" -- \
  "$STITCHC" compile "$B/moe_contrib_sparse_mixer.onnx" -o "$TMP/bad29b" --no-nvcc
expect "onnxruntime's CausalConvWithState whose weight is an input" 2 "node 'conv' \(com.microsoft::CausalConvWithState\): its weight 'w' must be an initializer" -- \
  "$STITCHC" compile "$B/causal_conv_contrib_weight_input.onnx" -o "$TMP/bad29c" --no-nvcc
check "no directory left after a malformed node" test ! -e "$TMP/bad1"
check "no directory left after a scatter out of range" test ! -e "$TMP/bad4"
# A decoding step's mask is [batch, past + 1] (torch.export writes the length as an expression):
# binding past binds it, and data that contradict it name both inputs.
DEC=$ROOT/models/llama_tiny_dec
expect "an expression dim binds through its symbol" 0 "attention_mask +i64\[batch,past \+ 1\] +bound to i64\[2x17\]" -- \
  "$STITCHC" inspect "$DEC/model.onnx" --shape batch=2 --shape past=16
expect "an unbound expression dim asks for its symbol" 2 "dynamic dimensions 'past \+ 1'.*--shape past=N" -- \
  "$STITCHC" inspect "$DEC/model.onnx" --shape batch=2
mkdir -p "$TMP/dec_bad" && cp "$DEC"/test_data_set_0/*.pb "$TMP/dec_bad/" &&
  cp "$M/test_data_set_0/input_1.pb" "$TMP/dec_bad/input_1.pb"  # bert_tiny's 2x16 mask: one short
expect "data that contradict an expression dim" 2 "input 'attention_mask' is bound to 2x16, but its dim 1 is 'past \+ 1', which is 17 with past=16 \(by input 'past_key_0'" -- \
  "$STITCHC" run "$DEC/model.onnx" --inputs "$TMP/dec_bad"
expect "two bindings of one symbol that disagree" 2 "symbolic dimension 'batch' is 3 by --shape batch=3 but 2 by input 'past_key_0'" -- \
  "$STITCHC" inspect "$DEC/model.onnx" --shape past_key_0=2x2x16x16 --shape batch=3
expect "partial binding names what is left" 2 "input 'input_ids' has dynamic dimensions 'sequence'" -- \
  "$STITCHC" inspect "$M/model.onnx" --shape batch=2
expect "inputs directory missing" 2 "is not a directory" -- "$STITCHC" run "$M/model.onnx" --inputs "$TMP/none"
mkdir -p "$TMP/oneinput" && cp "$D/input_0.pb" "$TMP/oneinput/"
expect "too few input files" 2 "holds 1 input file\(s\) but the model has 2" -- \
  "$STITCHC" run "$M/model.onnx" --inputs "$TMP/oneinput"
mkdir -p "$TMP/twice" && cp "$D/input_0.pb" "$TMP/twice/input_0.pb" && cp "$D/input_0.pb" "$TMP/twice/input_1.pb"
expect "two input files naming one input" 2 "input_0.pb and input_1.pb both name input 'input_ids'; give each input one file" -- \
  "$STITCHC" run "$M/model.onnx" --inputs "$TMP/twice"
mkdir -p "$TMP/badtype" && cp "$ROOT/models/cnn_small/test_data_set_0/input_0.pb" "$TMP/badtype/input_0.pb" && cp "$D/input_1.pb" "$TMP/badtype/input_1.pb"
expect "input of the wrong dtype" 2 "input 'input_ids' must be i64, got f32" -- \
  "$STITCHC" run "$M/model.onnx" --inputs "$TMP/badtype"
printf 'junk' >"$TMP/oneinput/input_1.pb"
expect "corrupt tensor file" 2 "input_1.pb" -- "$STITCHC" run "$M/model.onnx" --inputs "$TMP/oneinput"
expect "a compiled backend on a model file" 2 "backend 'cuda' runs a compiled artifact: stitchc compile" -- \
  "$STITCHC" run "$M/model.onnx" --inputs "$D" --backend cuda
# A model converted to float16 inside, its inputs and outputs float32 (tests/e2e/make_f16_inside.py),
# against its float32 source's outputs: compared within float16's tolerance, which the default says;
# float32's would fail it.
F16=$ROOT/tests/e2e/f16_inside
expect "float32 outputs of a float16 model: float16's tolerance (reference)" 0 \
  "tolerance: rtol 0.01 atol 0.01 \(f32 outputs of a model that computes in f16\)" -- \
  "$STITCHC" run "$F16/model.onnx" --inputs "$F16/test_data_set_0" --expect "$F16/test_data_set_0"
"$STITCHC" compile "$F16/model.onnx" -o "$TMP/f16_inside" --no-nvcc >/dev/null
expect "float32 outputs of a float16 model: float16's tolerance (emu)" 0 \
  "tolerance: rtol 0.01 atol 0.01 \(f32 outputs of a model that computes in f16\)" -- \
  "$STITCHC" run "$TMP/f16_inside" --backend emu --inputs "$F16/test_data_set_0" --expect "$F16/test_data_set_0"
expect "the same outputs within float32's tolerance do not match" 1 "MISMATCH" -- \
  "$STITCHC" run "$TMP/f16_inside" --backend emu --inputs "$F16/test_data_set_0" --expect "$F16/test_data_set_0" \
  --rtol 1e-3 --atol 1e-4
expect "unknown subcommand" 2 "" -- "$STITCHC" frobnicate
expect "no arguments" 2 "" -- "$STITCHC"

echo "e2e: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
