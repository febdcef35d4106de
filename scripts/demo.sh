#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, then inspect a
# shipped transformer and run every shipped model on the reference backend
# against the outputs PyTorch computed for it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
stitchc=build/cli/stitchc
echo
echo "== stitchc inspect models/bert_tiny/model.onnx --shape batch=2 --shape sequence=16"
$stitchc inspect models/bert_tiny/model.onnx --shape batch=2 --shape sequence=16
for m in models/*/; do
  echo
  echo "== stitchc run ${m}model.onnx --backend reference --inputs ${m}test_data_set_0 --expect ${m}test_data_set_0"
  $stitchc run "${m}model.onnx" --backend reference --inputs "${m}test_data_set_0" --expect "${m}test_data_set_0"
done
