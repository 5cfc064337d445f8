#!/usr/bin/env bash
# --vs mpi: collie-bench starts itself under mpirun (-np 3) and runs OpenMPI's
# collectives on the same cases, every collective, checked; the table has an
# mpi column group and the ratio columns. $1 = collie-bench, $2 = the test dir.
set -uo pipefail
bench=$1 here=$2
export OMPI_MCA_rmaps_base_oversubscribe=1
for c in allreduce allgather reducescatter broadcast reduce alltoall alltoallv gather scatter sendrecv; do
  extra=()
  [ "$c" = alltoallv ] && extra=(--traffic random)
  [ "$c" = broadcast ] || [ "$c" = reduce ] || [ "$c" = gather ] || [ "$c" = scatter ] && extra=(-r 2)
  EXPECT_GROUPS=mpi bash "$here/bench_table.sh" "$bench" "$c" -np 3 -b 8 -e 64K -f 32 -n 2 -w 1 --vs mpi "${extra[@]}" \
    >"${TMPDIR:-/tmp}/bench_mpi_$$.log" 2>&1 || { cat "${TMPDIR:-/tmp}/bench_mpi_$$.log"; rm -f "${TMPDIR:-/tmp}/bench_mpi_$$.log"; exit 1; }
  grep -q "mpi/collie time" "${TMPDIR:-/tmp}/bench_mpi_$$.log" || { echo "FAIL: $c has no ratio columns"; exit 1; }
  echo "PASS: $c --vs mpi"
done
rm -f "${TMPDIR:-/tmp}/bench_mpi_$$.log"
