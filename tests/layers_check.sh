#!/usr/bin/env bash
# Fails when a layer includes a header of a layer above it. The layers, lowest first:
#   base/                 status, log, env, hash, CUDA checks, device memory: uses no other layer
#   algorithms/           Programs, verifier, simulator, tuner: base only
#   transport/            bootstrap, shm, cuda_ipc, ucx: base only (knows nothing of collectives)
#   executor/ kernels/    run a rank's Program; one layer, since the step runner and the device primitives
#                         are shared source: base, algorithms, transport
#   core/                 communicators, enqueue, groups: everything below
#   compat/nccl/          collie.h and core/embedding.h (the one declared embedding header), base, transport's
#                         bootstrap for the unique id
# bench/, tools/ and tests/ sit on top and may include anything. tests/fake_cuda/ stands in for libcudart in
# fake-CUDA builds, so any layer may include its header. $1 = source root.
set -euo pipefail
cd "$1"

allowed() {  # the folders a file under $1 may include from
  case $1 in
    base/*) echo "base" ;;
    algorithms/*) echo "base algorithms" ;;
    transport/*) echo "base transport" ;;
    executor/* | kernels/*) echo "base algorithms transport executor kernels" ;;
    core/*) echo "base algorithms transport executor kernels core" ;;
    compat/*) echo "base compat core/embedding.h transport/bootstrap" ;;
    *) echo "*" ;;
  esac
}

bad=0
checked=0
while IFS= read -r file; do
  ok=$(allowed "$file")
  [ "$ok" = "*" ] && continue
  checked=$((checked + 1))
  while IFS= read -r inc; do
    case $inc in
      tests/fake_cuda/*) continue ;;
    esac
    hit=0
    for prefix in $ok; do
      case $inc in
        "$prefix" | "$prefix"/*) hit=1 ;;
      esac
    done
    if [ $hit = 0 ]; then
      echo "FAIL: $file includes \"$inc\", above its layer (allowed: $ok)"
      bad=1
    fi
  done < <(sed -n 's/^#include "\([a-z_]*\/[^"]*\)".*/\1/p' "$file")
done < <(find base algorithms transport executor kernels core compat \
  -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' | sort)
[ $bad = 0 ] || exit 1
echo "PASS: $checked files include only their own layer and those below"
