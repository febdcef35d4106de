#!/usr/bin/env bash
# The whole test suite on a fresh machine: install dependencies, build, run
# every test (unit tests, ONNX node tests, CLI end-to-end tests, the emulation
# layer's kernels and their nvcc build), then the emulation layer's tests under
# AddressSanitizer and UndefinedBehaviorSanitizer. CI runs this. Each stage's
# time is printed as it ends, so a slower run shows where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
stage() {
  local start=$SECONDS
  "$@"
  echo "test.sh: '$*' took $((SECONDS - start)) s"
}
stage scripts/install-deps.sh
stage scripts/build.sh
stage ctest --test-dir build --output-on-failure -j2
stage scripts/test-sanitizers.sh
echo "test.sh: all stages passed in $SECONDS s"
