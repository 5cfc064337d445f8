#!/usr/bin/env bash
# The main job: installs dependencies, builds, then runs an allreduce benchmark across 4 local ranks (checked: see
# #wrong) with OpenMPI's MPI_Allreduce and the memory-copy limit measured in the same run, and times communicator
# creation for 8 local ranks. The table is nccl-tests' shape; a short summary per size range follows it, and the
# plot and the full figures go to files under the build tree. Extra arguments go to the allreduce benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${COLLIE_BUILD_DIR:-build}
bench=$build/bench/collie-bench
"$bench" allreduce -np 4 -b 8 -e 64M -f 4 --vs mpi --limit --summary \
  --plot "$build/bench-allreduce.svg" --json "$build/bench-allreduce.json" "$@"
"$bench" init -np 8 -n 10 -w 2
echo "bench: busbw against size plotted in $build/bench-allreduce.svg; every figure in $build/bench-allreduce.json"
