#!/usr/bin/env bash
# The installed tree (cmake --install): stitchc compiles a shipped model from a prefix that has been
# moved after installing, on the precompiled emulation header installed beside it and the headers
# it carries (nothing read from the source or build tree), the artifact matches PyTorch's outputs
# on emu, and a separate CMake project builds the example program against find_package(stitch)
# and runs that artifact.
#   install_tests.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
BUILD=$(cd "$1" && pwd)
ROOT=$(cd "$2" && pwd)
# shellcheck source=tests/e2e/lib.sh
source "$ROOT/tests/e2e/lib.sh"

expect "cmake --install into a prefix" 0 "" -- cmake --install "$BUILD" --prefix "$TMP/installed" --strip
mv "$TMP/installed" "$TMP/moved"
P=$TMP/moved
for f in bin/stitchc lib/libstitch_runtime.so include/stitch/runtime.hpp include/stitch/runtime.h \
  lib/cmake/stitch/stitchConfig.cmake lib/stitch/emu_pch/stitch/emu/emu.h.gch \
  lib/stitch/emu_pch/stitch/emu/emu.h.gch.digest; do
  check "installed: $f" test -f "$P/$f"
done
# stitchc carries the headers its kernels and their emulation library include: no path to them
# remains in it.
check "the installed stitchc names neither header directory of the source tree" bash -c \
  "! grep -aqF -e '$ROOT/runtime/emu/include' -e '$ROOT/runtime/device/include' '$P/bin/stitchc'"
check "the installed stitchc finds the runtime library beside it" bash -c \
  "ldd '$P/bin/stitchc' | grep -qF 'libstitch_runtime.so => $P/bin/../lib/libstitch_runtime.so'"

M=$ROOT/models/bert_tiny
expect "the moved stitchc compiles bert_tiny" 0 "" -- \
  "$P/bin/stitchc" compile "$M/model.onnx" -o "$TMP/bert" --shape batch=2 --shape sequence=16 --no-nvcc
check "it built the emulation library on the precompiled header installed beside it" \
  grep -q '"emu_precompiled_header": true' "$TMP/bert/report.json"
check "the artifact's device headers are the source tree's" \
  cmp "$TMP/bert/kernels/stitch_device.cuh" "$ROOT/runtime/device/include/stitch/device/stitch_device.cuh"
check "the emulation build left no headers in the artifact" test ! -e "$TMP/bert/emu/include"
expect "the moved stitchc runs it on emu against PyTorch's outputs" 0 "" -- \
  "$P/bin/stitchc" run "$TMP/bert" --backend emu --inputs "$M/test_data_set_0" --expect "$M/test_data_set_0"
# The host compiler is found where it runs: named by STITCH_HOST_CXX and looked up on PATH (the
# build's own compiler may be elsewhere on the machine the prefix moved to).
cxx_dir=$(dirname "$(command -v g++)")
expect "the moved stitchc builds with STITCH_HOST_CXX=g++ from PATH" 0 "" -- \
  env STITCH_HOST_CXX=g++ PATH="$cxx_dir:/usr/bin:/bin" "$P/bin/stitchc" compile "$M/model.onnx" -o "$TMP/bert_cxx" \
  --shape batch=2 --shape sequence=16 --no-nvcc
expect "and that artifact runs on emu against PyTorch's outputs" 0 "" -- \
  "$P/bin/stitchc" run "$TMP/bert_cxx" --backend emu --inputs "$M/test_data_set_0" --expect "$M/test_data_set_0"
# The header beside it is the one it takes: with another digest there, it takes none.
cp "$P/lib/stitch/emu_pch/stitch/emu/emu.h.gch.digest" "$TMP/digest"
echo 0000 >"$P/lib/stitch/emu_pch/stitch/emu/emu.h.gch.digest"
expect "with the digest beside that header changed, it compiles without it" 0 \
  "without the precompiled emulation header" -- \
  "$P/bin/stitchc" compile "$M/model.onnx" -o "$TMP/bert_nopch" --shape batch=2 --shape sequence=16 --no-nvcc
check "and says so in the report" grep -q '"emu_precompiled_header": false' "$TMP/bert_nopch/report.json"
cp "$TMP/digest" "$P/lib/stitch/emu_pch/stitch/emu/emu.h.gch.digest"

# A service's own project: the example program against the installed package.
mkdir -p "$TMP/service"
cat >"$TMP/service/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.22)
project(service CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(stitch 0.1 REQUIRED CONFIG)
add_executable(infer "$ROOT/examples/infer.cc")
target_link_libraries(infer PRIVATE stitch::runtime)
EOF
expect "a service's CMake project finds the installed package" 0 "" -- \
  cmake -S "$TMP/service" -B "$TMP/service/build" -G Ninja -DCMAKE_PREFIX_PATH="$P"
expect "and builds the example program against it" 0 "" -- cmake --build "$TMP/service/build"
expect "which runs the artifact on emu" 0 "last_hidden_state f32 \[2x16x64\] sum .* finite" -- \
  "$TMP/service/build/infer" "$TMP/bert" emu

echo "install e2e: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
