#!/usr/bin/env bash
# Faults on one host (shared-memory windows), each rank a process of its own
# started by tests/mp/local_ranks.sh. See tests/mp/faults_mp.cc for the modes. Passes when every
# survivor returns an error within COLLIE_TIMEOUT (+5 s) and destroys promptly (in mode shrink: then goes on
# without the victim on a shrunk communicator),
# no process is left behind, and no Collie shm segment outlives the job.
# $1 = faults_mp, $2 = mode, $3 = ranks, $4 = victim rank.
set -euo pipefail
prog=$1 mode=$2 np=$3 victim=$4
source "$(dirname "$0")/local_ranks.sh" "$np"
out=$ranks_out
shmList() { ls /dev/shm 2>/dev/null | grep '^collie-' | sort || true; }
shmBefore=$(shmList)
export COLLIE_TIMEOUT=${COLLIE_TIMEOUT:-4} COLLIE_INIT_TIMEOUT=${COLLIE_INIT_TIMEOUT:-6}
start() { start_rank "$1" "$prog" "$mode" "$victim"; }
start_time=$SECONDS
if [ "$mode" = init ]; then
  # Rank 0 serves the rendezvous. Kill it once rank 1 is waiting on it, then start the rest.
  start 0
  start 1
  sleep 1
  kill -9 "${pids[0]}"
  echo "killed rank 0, the rendezvous root, during init"
  for ((r = 2; r < np; ++r)); do start "$r"; done
  survivors=$(seq 1 $((np - 1)))
else
  for ((r = 0; r < np; ++r)); do start "$r"; done
  survivors=$(seq 0 $((np - 1)) | grep -vx "$victim")
fi
fail=0
for r in $survivors; do
  rc=0
  wait "${pids[$r]}" || rc=$?
  sed "s/^/[$r] /" "$out/$r"
  if [ "$rc" != 0 ]; then
    echo "FAIL: rank $r exited with $rc"
    fail=1
  fi
done
if [ "$mode" != init ]; then
  rc=0
  wait "${pids[$victim]}" || rc=$?
  sed "s/^/[$victim, the victim] /" "$out/$victim"
  echo "the victim exited with $rc"
fi
echo "all ranks done within $((SECONDS - start_time)) s (COLLIE_TIMEOUT $COLLIE_TIMEOUT s, COLLIE_INIT_TIMEOUT $COLLIE_INIT_TIMEOUT s)"
if [ "$mode" = never ] && ! grep -q "waiting on rank $victim" "$out"/*; then
  echo "FAIL: no survivor's hang report names rank $victim, the one that never called"
  fail=1
fi
for p in "${pids[@]}"; do
  if kill -0 "$p" 2>/dev/null; then
    echo "FAIL: process $p is still running"
    fail=1
  fi
done
# A segment other tests create lives a few milliseconds; one still there 2 s later that was not before is ours.
leaked=$(comm -13 <(echo "$shmBefore") <(shmList))
if [ -n "$leaked" ]; then
  sleep 2
  leaked=$(comm -12 <(echo "$leaked") <(comm -13 <(echo "$shmBefore") <(shmList)))
fi
if [ -n "$leaked" ]; then
  echo "FAIL: shm segments left in /dev/shm: $leaked"
  fail=1
fi
[ "$fail" = 0 ] && echo "PASS"
exit "$fail"
