#!/usr/bin/env bash
# The main job: installs dependencies, builds, then runs an allreduce benchmark
# across 4 local ranks (checked: see #wrong) with OpenMPI's MPI_Allreduce and
# the memory-copy limit measured in the same run, and times communicator
# creation for 8 local ranks. Extra arguments go to the allreduce benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
bench=${COLLIE_BUILD_DIR:-build}/bench/collie-bench
"$bench" allreduce -np 4 -b 8 -e 64M -f 4 --vs mpi --limit "$@"
"$bench" init -np 8 -n 10 -w 2
