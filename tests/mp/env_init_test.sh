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

# Two ranks started with different settings that must match: init refuses them on both, each naming the
# setting. (Ranks on different backends need a GPU for one of them: scripts/fake_gpu.sh tries that.)
source "$(dirname "$0")/refused_at_init.sh"
# Different algorithms for one collective: the ranks would run programs that do not match.
refused_at_init "different COLLIE_ALGO" "was started with a different COLLIE_ALGO than rank [01]" \
  COLLIE_ALGO=allreduce:ring COLLIE_ALGO=allreduce:rd
# COLLIE_CHECK set on one rank only: the checking rank would wait for a comparison its peer never sends.
refused_at_init "COLLIE_CHECK on one rank only" "COLLIE_CHECK=.*set it alike on all ranks" COLLIE_CHECK=0 COLLIE_CHECK=1
# COLLIE_DIRECT_TUNE or COLLIE_DIRECT_STAGING unlike: on a GPU the ranks would choose different algorithms, or
# refuse different direct calls. Checked on every backend, so here too.
refused_at_init "COLLIE_DIRECT_TUNE on one rank only" "COLLIE_DIRECT_TUNE=.*set them alike on all ranks" \
  COLLIE_DIRECT_TUNE=0 COLLIE_DIRECT_TUNE=1
refused_at_init "different COLLIE_DIRECT_STAGING" "COLLIE_DIRECT_STAGING=[0-9]*, rank [01] with .*set them alike" \
  COLLIE_DIRECT_STAGING=1048576 COLLIE_DIRECT_STAGING=2097152
# COLLIE_DIRECT_ONE_LAUNCH on one rank only: on a GPU that rank would wait on the host for peers that launch alone.
refused_at_init "COLLIE_DIRECT_ONE_LAUNCH on one rank only" "COLLIE_DIRECT_ONE_LAUNCH=.*set it alike on all ranks" \
  COLLIE_DIRECT_ONE_LAUNCH=0 COLLIE_DIRECT_ONE_LAUNCH=1
# LL flags repeating at different periods (COLLIE_TEST_LL_FLAG_PERIOD, here on the emulated kernels): each rank would
# take the other's lines for stale or new at the wrong time. The window headers differ.
refused_at_init "different COLLIE_TEST_LL_FLAG_PERIOD" "flag period \(256\|512\).*COLLIE_TEST_LL_FLAG_PERIOD" \
  "COLLIE_TEST_EMULATE_KERNELS=2 COLLIE_TEST_LL_FLAG_PERIOD=256" "COLLIE_TEST_EMULATE_KERNELS=2 COLLIE_TEST_LL_FLAG_PERIOD=512"
# Windows of different sizes (4 and 8 slots of 64 KiB): a rank would map too little of its peer's, or address
# slots that are not there.
refused_at_init "windows of different sizes" "uses a [0-9]*-byte window, rank [01] a [0-9]*-byte one" \
  "COLLIE_SLOTS=4 COLLIE_SLOT_BYTES=65536" "COLLIE_SLOTS=8 COLLIE_SLOT_BYTES=65536"
# Windows of one size cut differently (4 slots of 8 KiB against 8 of 4 KiB): the sizes agree, the slots do not.
refused_at_init "windows of one size cut into different slots" \
  "window has [48] slots of [0-9]* bytes.*all ranks must use the same" \
  "COLLIE_SLOTS=4 COLLIE_SLOT_BYTES=8192" "COLLIE_SLOTS=8 COLLIE_SLOT_BYTES=4096"
