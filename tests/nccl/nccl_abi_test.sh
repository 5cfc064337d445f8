#!/usr/bin/env bash
# Existing binaries. First, ours exports every function NVIDIA's libnccl.so.2
# does. Then our nccl.h programs, compiled against NVIDIA's own nccl.h and
# linked with NVIDIA's libnccl.so.2 (the CUDA toolkit ships both), run on
# Collie's libnccl.so.2 without being rebuilt, as a user swaps the library:
#  1. LD_LIBRARY_PATH naming a folder that holds only ours (a binary without RPATH):
#     the C clique program (3 ranks), the C++ threads program (every symbol bound
#     at load), and the C program across 3 processes under collie-run;
#  2. a binary whose RPATH names NVIDIA's folder: LD_LIBRARY_PATH does not redirect it
#     (checked with ldd), LD_PRELOAD of ours does, and the program passes.
# It proves the header's values and struct layouts (ncclConfig_t of a newer
# header, ncclUniqueId) match NVIDIA's where a binary depends on them.
# Usage: nccl_abi_test.sh nvidia-include-dir nvidia-lib-dir our-libnccl.so.2 cc c++ collie-run tests/nccl
# Exits 77 (skipped), saying why, when NVIDIA's header or library is not there.
set -euo pipefail
inc=$1 libdir=$2 ours=$3 cc=$4 cxx=$5 run=$6 src=$7
if [ ! -f "$inc/nccl.h" ] || [ ! -e "$libdir/libnccl.so" ]; then
  echo "SKIP: NVIDIA's nccl.h or libnccl.so not found (looked in '$inc' and '$libdir'; the CUDA toolkit ships them)"
  exit 77
fi
if grep -q NCCL_COLLIE "$inc/nccl.h"; then
  echo "FAIL: $inc/nccl.h is Collie's header, not NVIDIA's"
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/lib"
cp "$ours" "$tmp/lib/libnccl.so.2"
version=$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{printf "%s%s", sep, $3; sep="."}' "$inc/nccl.h")
echo "NVIDIA's nccl.h: $version"
export COLLIE_DEVICE=host

# A binary built against a later NCCL may name any function it exports, and a program that resolves every symbol
# at load (LD_BIND_NOW, or Python loading an extension such as PyTorch's) fails on the first one missing: ours must
# export them all.
theirs=$(nm -D --defined-only "$libdir/libnccl.so" | awk '$2 ~ /^[TtWi]$/ && $3 ~ /^p?nccl/ {print $3}' | sort -u)
mine=$(nm -D --defined-only "$ours" | awk '$2 ~ /^[TtWi]$/ {print $3}' | sort -u)
[ "$(echo "$theirs" | wc -l)" -ge 70 ] || { echo "FAIL: read only a few functions from NVIDIA's library"; exit 1; }
missing=$(comm -23 <(echo "$theirs") <(echo "$mine"))
[ -z "$missing" ] || { echo "FAIL: NVIDIA's libnccl.so $version exports functions ours does not:"; echo "$missing"; exit 1; }
echo "PASS: every one of the $(echo "$theirs" | wc -l) functions NVIDIA's libnccl.so $version exports is exported by ours"

# No -I of Collie's: nccl.h (and the cuda_*.h it includes) come from NVIDIA's folder.
"$cc" -std=c99 -O1 -I"$inc" "$src/nccl_clique_test.c" -L"$libdir" -lnccl -lm -o "$tmp/clique"
"$cc" -std=c99 -O1 -I"$inc" "$src/nccl_mp.c" -L"$libdir" -lnccl -o "$tmp/mp"
"$cxx" -std=c++17 -O1 -I"$inc" "$src/nccl_threads_test.cc" -L"$libdir" -lnccl -pthread -o "$tmp/threads"
"$cc" -std=c99 -O1 -I"$inc" "$src/nccl_clique_test.c" -L"$libdir" -Wl,--disable-new-dtags,-rpath,"$libdir" -lnccl \
  -lm -o "$tmp/clique_rpath"

needs_ours() {  # the libnccl.so.2 that $1 loads under the given environment is the copy in $tmp/lib
  local got
  got=$(env "${@:2}" ldd "$1" | awk '{ if ($1 == "libnccl.so.2") print $3; else if ($1 ~ /\/libnccl\.so\.2$/) print $1 }')
  [ "$got" = "$tmp/lib/libnccl.so.2" ] || { echo "FAIL: $1 loads '$got', not Collie's copy"; exit 1; }
}

needs_ours "$tmp/clique" LD_LIBRARY_PATH="$tmp/lib"
LD_LIBRARY_PATH="$tmp/lib" "$tmp/clique" 3
LD_LIBRARY_PATH="$tmp/lib" LD_BIND_NOW=1 COLLIE_TIMEOUT=2 "$tmp/threads"
LD_LIBRARY_PATH="$tmp/lib" "$run" -np 3 "$tmp/mp" --id-file "$tmp/id"
echo "PASS: binaries built against NVIDIA's nccl.h $version run on Collie's libnccl.so.2 through LD_LIBRARY_PATH"

got=$(LD_LIBRARY_PATH="$tmp/lib" ldd "$tmp/clique_rpath" | awk '$1 == "libnccl.so.2" {print $3}')
[ "$got" = "$libdir/libnccl.so.2" ] || { echo "FAIL: with an RPATH, LD_LIBRARY_PATH gave '$got'"; exit 1; }
needs_ours "$tmp/clique_rpath" LD_PRELOAD="$tmp/lib/libnccl.so.2"
LD_PRELOAD="$tmp/lib/libnccl.so.2" "$tmp/clique_rpath" 3
echo "PASS: a binary whose RPATH names NVIDIA's library runs on Collie's through LD_PRELOAD"
