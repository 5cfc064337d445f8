#!/usr/bin/env bash
# Installs what Collie needs from Debian's packages (only what is missing, so a
# second run does nothing) and configures + builds it in ./build.
# Used by scripts/bench.sh and scripts/test.sh; safe to run on its own.
set -euo pipefail
cd "$(dirname "$0")/.."

# clang and libclang-rt-14-dev (libFuzzer and the sanitizer runtimes) build the fuzz targets: scripts/fuzz.sh.
# nlohmann-json3-dev reads program files (algorithms/program_file.h), libpugixml-dev MSCCL's XML
# (algorithms/msccl_xml.h). ccache lets CI's fake-CUDA build reuse the main build's objects (.ci/run).
packages=(cmake ninja-build g++ pkg-config clang-format googletest libgtest-dev libopenmpi-dev openmpi-bin libucx-dev ucx-utils iproute2
  clang libclang-rt-14-dev nlohmann-json3-dev libpugixml-dev ccache)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine may have no package lists yet: update once and retry.
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    { $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; }
fi

# The CUDA toolkit is expected at the usual place when nvcc is not on PATH.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

build=${COLLIE_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${COLLIE_BUILD_TYPE:-RelWithDebInfo}" ${COLLIE_CMAKE_ARGS:-}
fi
cmake --build "$build"
