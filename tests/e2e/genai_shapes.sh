# Shape bindings of the shipped onnxruntime-genai models, whose files name their dims per input
# (sourced by tests/e2e/backend_tests.sh and bench/gpu/prepare.sh):
#   genai_shapes BATCH NEW PAST [ROWS]   qwen3_tiny_genai: NEW tokens after PAST cached, in a
#                                        cache buffer of ROWS rows (default PAST)
#   gptoss_shapes BATCH NEW PAST [ROWS]  gptoss_tiny_genai: the same, its first layer's cache a
#                                        window-sized buffer of 8 rows whatever the step
genai_shapes() {
  local s="--shape input_ids=$1x$2 --shape attention_mask=$1x$(($2 + $3))" i rows=${4:-$3}
  for i in 0 1; do
    s="$s --shape past_key_values.$i.key=$1x2x${rows}x16 --shape past_key_values.$i.value=$1x2x${rows}x16"
  done
  echo "$s"
}
gptoss_shapes() {
  local s="--shape input_ids=$1x$2 --shape attention_mask=$1x$(($2 + $3))" rows=${4:-$3}
  s="$s --shape past_key_values.0.key=$1x2x8x16 --shape past_key_values.0.value=$1x2x8x16"
  echo "$s --shape past_key_values.1.key=$1x2x${rows}x16 --shape past_key_values.1.value=$1x2x${rows}x16"
}
