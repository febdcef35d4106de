#!/usr/bin/env bash
# The whole test suite on a fresh machine: install dependencies, build, run
# every test (unit tests, ONNX node tests, CLI end-to-end tests). CI runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j2
