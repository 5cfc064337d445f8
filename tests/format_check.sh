#!/usr/bin/env bash
# Fails when a C/C++/CUDA source of ours is not formatted per .clang-format.
# $1 = source root. Skips (exit 0, with the reason) when clang-format is missing.
set -euo pipefail
cd "$1"
if ! command -v clang-format >/dev/null; then
  echo "SKIP: clang-format is not installed"
  exit 0
fi
mapfile -t files < <(find include base core algorithms executor transport kernels bench tools tests compat \
  -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.c' | sort)
clang-format --dry-run --Werror "${files[@]}"
echo "PASS: ${#files[@]} files formatted"
