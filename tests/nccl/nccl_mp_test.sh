#!/usr/bin/env bash
# The nccl.h program nccl_mp across processes started by collie-run, with the
# unique id passed through a file, and with NCCL_COMM_ID (the address
# collie-run picked for COLLIE_ROOT, which nothing else uses here), with and
# without COLLIE_SECRET. Usage: nccl_mp_test.sh collie-run nccl_mp
# shellcheck disable=SC2016  # the rank command is single-quoted on purpose: it expands in the ranks
set -euo pipefail
run=$1 prog=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export COLLIE_DEVICE=host

"$run" -np 4 "$prog" --id-file "$tmp/id4"
echo "PASS: 4 processes, unique id through a file"
"$run" -np 3 sh -c 'NCCL_COMM_ID=$COLLIE_ROOT exec "$0"' "$prog"
echo "PASS: 3 processes, NCCL_COMM_ID with collie-run's secret"
"$run" -np 5 sh -c 'NCCL_COMM_ID=$COLLIE_ROOT exec env -u COLLIE_SECRET "$0"' "$prog"
echo "PASS: 5 processes, NCCL_COMM_ID with the secret derived from the address"
