#!/usr/bin/env bash
# The main job: installs dependencies, builds, then runs an allreduce benchmark
# across 4 local ranks (checked: see #wrong) and times communicator creation
# for 8 local ranks. Extra arguments go to the allreduce benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
bench=${COLLIE_BUILD_DIR:-build}/bench/collie-bench
"$bench" allreduce -np 4 -b 8 -e 64M -f 4 "$@"
"$bench" init -np 8 -n 10 -w 2
