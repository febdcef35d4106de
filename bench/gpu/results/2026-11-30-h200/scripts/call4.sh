#!/usr/bin/env bash
# GPU call 4: one session on cuda answering several runs, a refused one among them. The C++
# example (stitch_example, which now takes several input directories, each a run of the same
# session) runs bert_tiny at 2 x 16 with inputs [bad, good, bad, good], where bad has a token id
# past the vocabulary: each bad run must be refused with the Gather named (the fault word, copied
# back after the run, in CUDA Graph replay after the first), and each good run must give the
# outputs of a fresh session with only the good inputs (on the development machine's emu backend
# the same artifact gives pooler_output sum -1.42233, last_hidden_state sum 2.22883e-06).
# Carried: .gpu/bin/stitchc_new, .gpu/bin/stitch_example_new, .gpu/lib.
R=${OUT:-/tmp/callr4}
mkdir -p "$R"
cd "$(dirname "$0")/../../../../.." || exit 1
B=$PWD/.gpu
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BACKEND=${BACKEND:-cuda}
flags="--arch sm_90 --no-emu"
[ "${NO_NVCC:-0}" = 1 ] && flags="--arch sm_90 --no-nvcc"
W=${W:-/tmp/cr4}
rm -rf "$W" && mkdir -p "$W/bad" "$W/good"
date -u
# shellcheck disable=SC2086
"$B/bin/stitchc_new" compile models/bert_tiny/model.onnx -o "$W/bert" --shape batch=2 --shape sequence=16 $flags | tail -1
python3 -c "import struct, sys; open(sys.argv[1], 'wb').write(struct.pack('<32q', *([1] * 5 + [1000000] + [1] * 26)))" \
  "$W/bad/input_ids.bin"
E=$B/bin/stitch_example_new
"$E" "$W/bert" "$BACKEND" "$W/good" >"$R/alone.txt" 2>&1
echo "alone, rc $?"
"$E" "$W/bert" "$BACKEND" "$W/bad" "$W/good" "$W/bad" "$W/good" >"$R/four.txt" 2>"$R/four_err.txt"
echo "bad, good, bad, good: rc $?"
cat "$R/four.txt" "$R/four_err.txt"
refused=$(grep -c '^refused (exit 2)' "$R/four.txt")
sums=$(grep -c sum "$R/four.txt")
same=no
[ "$(grep sum "$R/four.txt" | sort -u)" = "$(grep sum "$R/alone.txt" | sort)" ] && same=yes
cat "$R/alone.txt"
echo "refused $refused of 4, $sums output lines, good runs as a fresh session: $same"
