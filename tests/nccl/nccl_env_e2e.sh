#!/usr/bin/env bash
# NCCL's environment variables reaching Collie through libnccl.so.2, end to end:
#  - NCCL_DEBUG=INFO + NCCL_DEBUG_FILE give one log per process with the version
#    line, Collie's INFO lines, each mapping, and the ignored NCCL_* variables;
#  - NCCL_ALGO becomes COLLIE_ALGO: ranks that disagree on it are refused at init,
#    as Collie refuses ranks with different COLLIE_ALGO; a COLLIE_ALGO set too wins.
# Usage: nccl_env_e2e.sh collie-run nccl_mp nccl_clique_test
# shellcheck disable=SC2016  # rank commands are single-quoted on purpose: they expand in the ranks
set -euo pipefail
run=$1 mp=$2 clique=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export COLLIE_DEVICE=host

NCCL_DEBUG=INFO NCCL_DEBUG_FILE="$tmp/log.%h.%p" NCCL_ALGO=Tree NCCL_IB_HCA=mlx5_0 \
  TORCH_NCCL_ASYNC_ERROR_HANDLING=1 "$clique" 2 >/dev/null
logs=$(find "$tmp" -name 'log.*')
[ "$(echo "$logs" | wc -l)" = 1 ] || { echo "FAIL: expected one log file, got: $logs"; exit 1; }
for want in "NCCL version 2.19.3" "NCCL_ALGO=Tree -> COLLIE_ALGO=allreduce:tree" \
  "NCCL_IB_HCA=mlx5_0 is accepted and ignored" "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 is accepted and ignored" \
  "COLLIE INFO comm rank 0/2 ready"; do
  grep -qF "$want" "$logs" || { echo "FAIL: no '$want' in the log:"; cat "$logs"; exit 1; }
done
echo "PASS: NCCL_DEBUG=INFO and NCCL_DEBUG_FILE: version, mappings, ignored variables, Collie's INFO lines"

NCCL_DEBUG=WARN NCCL_DEBUG_FILE="$tmp/warn.%p" NCCL_ALGO=Tree "$clique" 1 >/dev/null
if grep -q "COLLIE INFO" "$tmp"/warn.*; then echo "FAIL: INFO lines at NCCL_DEBUG=WARN"; exit 1; fi
echo "PASS: NCCL_DEBUG=WARN keeps INFO quiet"

# Rank 0 alone sees NCCL_ALGO=Tree: init must fail naming COLLIE_ALGO.
if "$run" -np 2 sh -c '[ "$COLLIE_RANK" = 0 ] && export NCCL_ALGO=Tree; NCCL_COMM_ID=$COLLIE_ROOT exec "$0"' \
  "$mp" >"$tmp/out" 2>&1; then
  echo "FAIL: ranks with different NCCL_ALGO were accepted"; exit 1
fi
grep -q "different COLLIE_ALGO" "$tmp/out" || { echo "FAIL: no COLLIE_ALGO sentence:"; cat "$tmp/out"; exit 1; }
echo "PASS: NCCL_ALGO reaches init (ranks that differ are refused)"
"$run" -np 2 sh -c 'export NCCL_ALGO=Ring; NCCL_COMM_ID=$COLLIE_ROOT exec "$0"' "$mp" >/dev/null
echo "PASS: the same NCCL_ALGO on every rank"
# COLLIE_ALGO set on every rank wins over a rank's own NCCL_ALGO, so they agree again.
"$run" -np 2 -x COLLIE_ALGO=allreduce:ring \
  sh -c '[ "$COLLIE_RANK" = 0 ] && export NCCL_ALGO=Tree; NCCL_COMM_ID=$COLLIE_ROOT exec "$0"' "$mp" >/dev/null
echo "PASS: COLLIE_ALGO wins over NCCL_ALGO"
