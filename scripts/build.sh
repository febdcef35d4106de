#!/usr/bin/env bash
# Configures and builds stitch into build/ (2 parallel jobs: CI machines have 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTITCH_WERROR=ON >/dev/null
cmake --build build -j2
