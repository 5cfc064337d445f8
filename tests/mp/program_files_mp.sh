#!/usr/bin/env bash
# Program files across processes (COLLIE_ALGO=COLLECTIVE:file:PATH): collie-sim exports built-in algorithms on 3
# ranks (allreduce rd and reducescatter ring, one chunk each; allgather bruck, whose ranges cross rank blocks and
# so run in one round), and collectives_mp --quick runs every collective with them, checked against its
# references, on one host and, when this build has UCX, across 2 fake nodes. A file for 4 ranks is refused at
# init.
# Usage: program_files_mp.sh collie-sim collie-run collectives_mp [ucx]
set -euo pipefail
sim=$1 run=$2 mp=$3 ucx=${4:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$sim" export allreduce rd -n 3 >"$dir/ar.json"
"$sim" export reducescatter ring -n 3 >"$dir/rs.json"
"$sim" export allgather bruck -n 3 >"$dir/ag.json"
export COLLIE_ALGO="allreduce:file:$dir/ar.json;reducescatter:file:$dir/rs.json;allgather:file:$dir/ag.json"
"$run" -np 3 "$mp" --quick
echo "PASS: program files across 3 processes"
if [ "$ucx" = ucx ]; then
  UCX_TLS=sm,self COLLIE_TIMEOUT=60 "$run" --nodes 2 -np 3 "$mp" --quick
  echo "PASS: program files across 2 fake nodes over UCX"
fi
"$sim" export allreduce rd -n 4 >"$dir/ar4.json"
export COLLIE_ALGO="allreduce:file:$dir/ar4.json"
set +e
"$run" -np 3 "$mp" --quick >"$dir/out" 2>&1
rc=$?
set -e
refused=$(grep -c "is for 4 ranks; this communicator has 3" "$dir/out" || true)
# collie-run stops the other ranks once one fails, so only the first refusal is sure to be printed.
if [ "$rc" = 0 ] || [ "$refused" -lt 1 ]; then
  echo "FAIL: a 4-rank file on 3 processes: exit $rc, $refused ranks said why"
  cat "$dir/out"
  exit 1
fi
echo "PASS: a file for 4 ranks is refused at init"
