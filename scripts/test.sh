#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs ctest.
# Extra arguments go to ctest (e.g. -L unit, -R allreduce).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${COLLIE_BUILD_DIR:-build}
start=$(date +%s)
ctest --test-dir "$build" --output-on-failure -j 2 --timeout 600 "$@"
# ctest does not show the output of skipped tests: print why each one skipped.
grep -h -A1 ": Skipped$" "$build/Testing/Temporary/LastTest.log" | grep -v -e "^--$" | sed 's/^/skipped: /' || true
echo "test suite: passed in $(( $(date +%s) - start )) s"
