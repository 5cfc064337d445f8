#!/usr/bin/env bash
# Installs the build in $1 into a scratch prefix, builds tests/consumer ($2)
# against it with cmake ($3), and runs both consumers.
set -euo pipefail
build=$1 src=$2 cmake=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmake" --install "$build" --prefix "$tmp/prefix" >/dev/null
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" "$cmake" -S "$src" -B "$tmp/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
"$cmake" --build "$tmp/build" >/dev/null
cuda_lib=$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/../lib64
export LD_LIBRARY_PATH="$tmp/prefix/lib:$cuda_lib:${LD_LIBRARY_PATH:-}"
"$tmp/build/consumer_cmake"
"$tmp/build/consumer_pkgconfig"
echo "PASS: find_package(Collie) and pkg-config consumers"
