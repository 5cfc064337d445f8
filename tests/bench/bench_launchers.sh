#!/usr/bin/env bash
# collie-bench joins a job started by others: collie-run, Slurm's variables
# (set by hand as srun would, with COLLIE_ROOT), and plain mpirun (no
# COLLIE_ROOT: the unique ids then travel over MPI). $1 = collie-bench,
# $2 = collie-run, $3 = mpirun or "" when built without MPI.
set -uo pipefail
bench=$1 run=$2 mpirun=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../mp/free_port.sh"
out=$(mktemp)
trap 'rm -f "$out"*' EXIT
args=(-b 8 -e 64K -f 32 -n 2 -w 1)
check() {  # check NAME: the table in $out is complete, checked and has the expected rank count
  grep -q "# Out of bounds values : 0 OK" "$out" && grep -q "allreduce: $2 ranks" "$out" ||
    { echo "FAIL: $1"; cat "$out"*; exit 1; }
  echo "PASS: $1"
}
"$run" -np 3 "$bench" allreduce "${args[@]}" >"$out" 2>&1
check "under collie-run -np 3" 3
port=$(free_port)
for r in 0 1; do
  env -u COLLIE_RANK -u COLLIE_WORLD_SIZE SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r \
    COLLIE_ROOT=127.0.0.1:$port "$bench" allreduce "${args[@]}" >"$out.$r" 2>&1 &
done
wait -n && wait -n || { echo "FAIL: Slurm environment"; cat "$out".*; exit 1; }
cp "$out.0" "$out"
check "under Slurm's variables (2 processes, COLLIE_ROOT)" 2
if [ -n "$mpirun" ]; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$mpirun" --oversubscribe -np 3 \
    "$bench" allreduce "${args[@]}" >"$out" 2>&1
  check "under plain mpirun -np 3 (ids over MPI, no COLLIE_ROOT)" 3
fi
