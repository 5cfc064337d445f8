#!/usr/bin/env bash
# Environment init paths other than collie-run's defaults: COLLIE_ROOT given by
# name ("localhost"), no COLLIE_SECRET (derived), and a single rank with no
# launcher at all. $1 = collie-run, $2 = collectives_mp.
set -euo pipefail
source "$(dirname "$0")/free_port.sh"
run=$1 prog=$2
err=$(mktemp)
port=$(free_port)
env -u COLLIE_SECRET "$run" -np 3 -x COLLIE_ROOT=localhost:$port -- env -u COLLIE_SECRET "$prog" --quick
echo "PASS: COLLIE_ROOT by host name, derived secret"
env -u COLLIE_RANK -u COLLIE_WORLD_SIZE -u COLLIE_ROOT COLLIE_RANK=0 COLLIE_WORLD_SIZE=1 "$prog" --quick
echo "PASS: single rank without COLLIE_ROOT"
if env -u COLLIE_RANK COLLIE_WORLD_SIZE=2 COLLIE_RANK=1 "$prog" --quick 2>"$err"; then
  echo "FAIL: 2 ranks without COLLIE_ROOT should not start"; exit 1
fi
grep -q "needs COLLIE_ROOT" "$err" || { echo "FAIL: no COLLIE_ROOT message"; cat "$err"; exit 1; }
echo "PASS: missing COLLIE_ROOT is explained"
# 2^32 + 2 would pass as 2 ranks if it were narrowed to int before its range check.
if env -u COLLIE_RANK -u COLLIE_ROOT COLLIE_WORLD_SIZE=4294967298 COLLIE_RANK=1 "$prog" --quick 2>"$err"; then
  echo "FAIL: COLLIE_WORLD_SIZE=4294967298 should not start"; exit 1
fi
grep -q "COLLIE_WORLD_SIZE must be a positive integer" "$err" || { echo "FAIL: no range message"; cat "$err"; exit 1; }
rm -f "$err"
echo "PASS: an out-of-range COLLIE_WORLD_SIZE is refused"

# COLLIE_DEBUG=INFO with COLLIE_DEBUG_FILE: one log per process (%p), carrying the
# footprint line, and an unknown COLLIE_ variable reported.
logdir=$(mktemp -d)
"$run" -np 2 -x COLLIE_DEBUG=INFO -x "COLLIE_DEBUG_FILE=$logdir/log.%h.%p" -x COLLIE_NO_SUCH_VAR=1 "$prog" --quick >/dev/null
nlogs=$(find "$logdir" -name 'log.*' | wc -l)
[ "$nlogs" = 2 ] || { echo "FAIL: expected 2 log files, found $nlogs"; exit 1; }
grep -q "COLLIE INFO comm rank 0/2 ready" "$logdir"/log.* || { echo "FAIL: no INFO init line"; cat "$logdir"/log.*; exit 1; }
grep -q "unknown environment variable COLLIE_NO_SUCH_VAR" "$logdir"/log.* || { echo "FAIL: unknown variable not reported"; exit 1; }
rm -rf "$logdir"
echo "PASS: COLLIE_DEBUG_FILE per process with INFO lines"

# Slurm's and OpenMPI's variables, set by hand as srun / mpirun would: two
# processes started in the background, rank and size from SLURM_PROCID/NTASKS.
port=$(free_port)
for r in 0 1; do
  env -u COLLIE_RANK -u COLLIE_WORLD_SIZE SLURM_PROCID=$r SLURM_NTASKS=2 COLLIE_ROOT=127.0.0.1:$port \
    "$prog" --quick >/dev/null &
done
wait -n && wait -n || { echo "FAIL: Slurm environment init"; exit 1; }
echo "PASS: Slurm environment init"
port=$(free_port)
for r in 0 1 2; do
  env -u COLLIE_RANK -u COLLIE_WORLD_SIZE OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=3 \
    COLLIE_ROOT=127.0.0.1:$port "$prog" --quick >/dev/null &
done
wait -n && wait -n && wait -n || { echo "FAIL: OpenMPI environment init"; exit 1; }
echo "PASS: OpenMPI environment init"

# COLLIE_CHECK set on one rank only: the checking rank would wait for a comparison its peer never
# sends, so init refuses it on both ranks, naming the setting.
port=$(free_port)
logs=$(mktemp -d)
for r in 0 1; do
  env -u COLLIE_RANK -u COLLIE_WORLD_SIZE COLLIE_RANK=$r COLLIE_WORLD_SIZE=2 COLLIE_ROOT=127.0.0.1:$port \
    COLLIE_CHECK=$r "$prog" --quick >"$logs/$r" 2>&1 &
done
if wait -n || wait -n; then echo "FAIL: ranks with different COLLIE_CHECK started"; cat "$logs"/*; exit 1; fi
for r in 0 1; do
  grep -q "COLLIE_CHECK=.*set it alike on all ranks" "$logs/$r" || { echo "FAIL: rank $r: no COLLIE_CHECK message"; cat "$logs/$r"; exit 1; }
done
rm -rf "$logs"
echo "PASS: COLLIE_CHECK on one rank only is refused at init"

# Ranks whose LL flags would repeat at different periods (COLLIE_LL_FLAG_PERIOD, here on the emulated kernels):
# each would take the other's lines for stale or new at the wrong time, so the window headers refuse it at init.
port=$(free_port)
logs=$(mktemp -d)
for r in 0 1; do
  env -u COLLIE_RANK -u COLLIE_WORLD_SIZE COLLIE_RANK=$r COLLIE_WORLD_SIZE=2 COLLIE_ROOT=127.0.0.1:$port \
    COLLIE_EMULATE_KERNELS=2 COLLIE_LL_FLAG_PERIOD=$((256 << r)) "$prog" --quick >"$logs/$r" 2>&1 &
done
if wait -n || wait -n; then echo "FAIL: ranks with different COLLIE_LL_FLAG_PERIOD started"; cat "$logs"/*; exit 1; fi
grep -q "flag period 512.*COLLIE_LL_FLAG_PERIOD\|flag period 256.*COLLIE_LL_FLAG_PERIOD" "$logs"/* ||
  { echo "FAIL: no COLLIE_LL_FLAG_PERIOD message"; cat "$logs"/*; exit 1; }
rm -rf "$logs"
echo "PASS: different COLLIE_LL_FLAG_PERIOD on two ranks is refused at init"
