#!/usr/bin/env bash
# The whole test suite on a fresh machine: install dependencies, build, run
# every test (unit tests, ONNX node tests, CLI end-to-end tests, the emulation
# layer's kernels and their nvcc build), then the emulation layer's tests under
# AddressSanitizer and UndefinedBehaviorSanitizer. CI runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j2
scripts/test-sanitizers.sh
