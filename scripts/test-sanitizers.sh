#!/usr/bin/env bash
# The emulation layer's tests again, built with AddressSanitizer and UndefinedBehaviorSanitizer
# (fibers annotated for ASan), into build-asan/. Only the emulator's targets are built.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTITCH_WERROR=ON -DSTITCH_SANITIZE=ON >/dev/null
cmake --build build-asan -j2 --target stitch_emu_tests stitch_emu_oob stitch_emu_feature_check
ctest --test-dir build-asan -R '^emu' --output-on-failure -j2
