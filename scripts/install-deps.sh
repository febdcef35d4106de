#!/usr/bin/env bash
# Installs the Debian packages stitch needs to build and test. Idempotent and
# non-interactive; run as root (or with sudo available) on a fresh machine.
set -euo pipefail

packages=(
  build-essential cmake ninja-build
  libonnx-dev libprotobuf-dev protobuf-compiler   # ONNX protobuf classes and CMake targets
  libcli11-dev libfmt-dev nlohmann-json3-dev      # command line, formatting, JSON
  catch2                                          # unit tests
  libonnx-testdata                                # ONNX's own backend node tests (oracle)
  libglpk-dev                                     # exact ILP fusion planner (GLPK)
  libxxhash-dev                                   # the artifact's file checksums (XXH3)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
