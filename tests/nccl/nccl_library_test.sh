#!/usr/bin/env bash
# libnccl.so.2 as a file users drop in:
#  1. it exports every function nccl.h declares (prototypes parsed from the
#     header), each nccl* with its pnccl* twin, and nothing else;
#  2. its SONAME is libnccl.so.2 and it needs no CUDA, NCCL or Collie library (cudart is inside);
#  3. a C program compiled against nccl.h and linked with plain -lnccl (no rpath)
#     runs with LD_LIBRARY_PATH naming a folder that holds only libnccl.so.2.
# Usage: nccl_library_test.sh nccl.h libnccl.so.2 C-compiler cuda-include-dir program.c
set -euo pipefail
header=$1 lib=$2 cc=$3 cudainc=$4 src=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prototypes: comments removed, declarations joined, "ncclResult_t name(" or "const char* name(".
declared=$(sed -e 's://.*$::' "$header" | tr '\n' ' ' | perl -pe 's:/\*.*?\*/::g' |
  grep -oE '(ncclResult_t|const char ?\*) +p?nccl[A-Za-z0-9_]+ *\(' | sed -E 's/^.* (p?nccl[A-Za-z0-9_]+) *\($/\1/' |
  sort -u)
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWi]$/ {print $3}' | sort -u)
ndecl=$(echo "$declared" | wc -l)
[ "$ndecl" -ge 70 ] || { echo "FAIL: parsed only $ndecl prototypes from $header"; exit 1; }
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
[ -z "$missing" ] || { echo "FAIL: declared in nccl.h but not exported:"; echo "$missing"; exit 1; }
for f in $(echo "$declared" | grep '^nccl'); do
  grep -qx "p$f" <<<"$declared" || { echo "FAIL: nccl.h declares $f without p$f"; exit 1; }
done
extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -vE '^p?nccl' || true)
[ -z "$extra" ] || { echo "FAIL: exported beyond nccl*/pnccl*:"; echo "$extra" | head; exit 1; }
echo "PASS: $ndecl functions declared in nccl.h, all exported, nothing else"

soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libnccl.so.2 ] || { echo "FAIL: SONAME is '$soname'"; exit 1; }
needed=$(objdump -p "$lib" | awk '$1 == "NEEDED" {print $2}')
if grep -qiE 'cuda|nccl|collie' <<<"$needed"; then
  echo "FAIL: libnccl.so.2 needs another CUDA, NCCL or Collie library:"; objdump -p "$lib" | grep NEEDED; exit 1
fi
echo "PASS: SONAME libnccl.so.2, needs no CUDA, NCCL or Collie library"

mkdir "$tmp/lib" "$tmp/link"
cp "$lib" "$tmp/lib/libnccl.so.2"
ln -s "$tmp/lib/libnccl.so.2" "$tmp/link/libnccl.so"
"$cc" -std=c99 -O1 -I"$(dirname "$header")" -isystem "$cudainc" "$src" -L"$tmp/link" -lnccl -lm -o "$tmp/prog"
if grep -qE 'RPATH|RUNPATH' <<<"$(readelf -d "$tmp/prog")"; then echo "FAIL: the program has an rpath"; exit 1; fi
COLLIE_DEVICE=host LD_LIBRARY_PATH="$tmp/lib" "$tmp/prog" 3
echo "PASS: a program built with -lnccl runs with LD_LIBRARY_PATH holding only libnccl.so.2"
