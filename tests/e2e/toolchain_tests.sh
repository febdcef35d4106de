#!/usr/bin/env bash
# End-to-end tests of the toolchain stitchc runs for a compile: the emulation library's host
# compiler and CUDA headers, found where stitchc runs (a choice of the user's that does not work is
# refused with exit 2, naming it, and leaves no output), and the build cache (`--build-cache`)
# that lets a second compile of the same kernels copy nvcc's fatbin and the emulation library, and
# the same fatbin from nvcc whatever the artifact's directory.
# (nvcc itself missing: backend_tests.sh; an installed stitchc moved elsewhere: install_tests.sh.)
#   tests/e2e/toolchain_tests.sh STITCHC REPO_ROOT
set -u
STITCHC=$1
ROOT=$2
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

# The emulation library's build finds its host compiler and the CUDA headers where it runs
# (codegen/emu_build.h): a choice the user made that does not work is refused, naming it.
expect "CUDA headers missing for the emulation build" 2 \
  "cuda_fp16.h and cuda_bf16.h, which are not in /nonexistent/include \(from CUDA_HOME\)" -- \
  env CUDA_HOME=/nonexistent "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/nocudainc" \
  --shape batch=1 --shape sequence=4 --no-nvcc
check "no directory left when the CUDA headers are missing" test ! -e "$TMP/nocudainc"
expect "a host compiler that is not there" 2 "STITCH_HOST_CXX is '/nonexistent/g\+\+', which is not an executable file" -- \
  env STITCH_HOST_CXX=/nonexistent/g++ "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/nocxx" \
  --shape batch=1 --shape sequence=4 --no-nvcc
expect "a host compiler that fails" 2 "building the emulation library with /bin/false \(from STITCH_HOST_CXX\) failed" -- \
  env STITCH_HOST_CXX=/bin/false "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/badcxx" \
  --shape batch=1 --shape sequence=4 --no-nvcc
check "no directory left when the host compiler fails" test ! -e "$TMP/badcxx"
# A build cache: the second compile of the same model copies nvcc's fatbin and the emulation
# library instead of building them, and its artifact is the first's.
expect "a compile that fills the build cache" 0 "" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/cache1" --shape batch=2 --shape sequence=16 \
  --build-cache "$TMP/build_cache"
expect "the same compile again takes both builds from it" 0 \
  "nvcc \(sm_90\): [0-9.]+ s \(from the build cache\).*emulation library: [0-9.]+ s \(from the build cache\)" -- \
  bash -c "'$STITCHC' compile '$ROOT/models/bert_tiny/model.onnx' -o '$TMP/cache2' --shape batch=2 \
    --shape sequence=16 --build-cache '$TMP/build_cache' | tr '\n' ' '"
check "the cached build's fatbin is the first build's" cmp "$TMP/cache1/kernels/kernels.fatbin" \
  "$TMP/cache2/kernels/kernels.fatbin"
check "and the report says where it came from" grep -q '"nvcc_from_cache": true' "$TMP/cache2/report.json"
expect "the cached build runs on emu against PyTorch's outputs" 0 "" -- \
  "$STITCHC" run "$TMP/cache2" --backend emu --inputs "$ROOT/models/bert_tiny/test_data_set_0" \
  --expect "$ROOT/models/bert_tiny/test_data_set_0"
# nvcc's output depends on its source file's directory; stitchc builds in a directory named by the
# build's key, so another compile of the same kernels, into another artifact, gives the same bytes.
expect "the same compile into another directory, without the cache" 0 "" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/again/elsewhere" --shape batch=2 \
  --shape sequence=16 --no-emu
check "builds the same fatbin byte for byte" cmp "$TMP/cache1/kernels/kernels.fatbin" \
  "$TMP/again/elsewhere/kernels/kernels.fatbin"
echo not-a-directory >"$TMP/cache_file"
expect "a build cache that is a file" 2 "--build-cache '$TMP/cache_file': not a directory stitchc can write" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/cache3" --shape batch=2 --shape sequence=16 \
  --build-cache "$TMP/cache_file"
# The cache kept to --build-cache-max-size after each compile, the least recently used entries first.
expect "a compile with a tiny --build-cache-max-size prunes the cache" 0 \
  "build cache: .* removed to keep it within --build-cache-max-size 0.001 MB" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/cache4" --shape batch=2 --shape sequence=16 \
  --build-cache "$TMP/build_cache" --build-cache-max-size 0.001
check "which then holds no entry, each being larger than that" bash -c "[ -z \"\$(find '$TMP/build_cache' -type f)\" ]"
expect "a --build-cache-max-size of 0" 2 "--build-cache-max-size must be more than 0 MB" -- \
  "$STITCHC" compile "$ROOT/models/bert_tiny/model.onnx" -o "$TMP/cache5" --shape batch=2 --shape sequence=16 \
  --build-cache "$TMP/build_cache" --build-cache-max-size 0

echo "toolchain e2e: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
