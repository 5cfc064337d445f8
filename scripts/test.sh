#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs ctest.
# Extra arguments go to ctest (e.g. -L unit, -R allreduce).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${COLLIE_BUILD_DIR:-build}
# The build's settings are not Collie's: the tests would warn that they do not know them.
unset COLLIE_BUILD_DIR COLLIE_BUILD_TYPE COLLIE_CMAKE_ARGS
start=$(date +%s)
# ctest does not show the output of skipped tests: print why each one skipped.
# One line per distinct reason, with how many tests gave it.
skipped() {
  grep -h -A1 ": Skipped$" "$build/Testing/Temporary/LastTest.log" | grep -v -e "^--$" -e ": Skipped$" | sort |
    uniq -c | sed 's/^ *\([0-9]*\) /skipped (\1 tests): /' || true
  grep -h "^skipped: " "$build/Testing/Temporary/LastTest.log" | sort | uniq -c |
    sed 's/^ *\([0-9]*\) skipped: /skipped (\1 tests): /' || true
}
if [ "${SWEEP_PARTS:-1}" = 1 ]; then
  ctest --test-dir "$build" --output-on-failure -j 2 --timeout 600 "$@"
  skipped
else
  # CI (SWEEP_PARTS=N): the reruns of the sweeps on other paths (label `rerun`: emulated kernels, reads in
  # place, the staged path, the proxy) take one of N parts of their cases, drawn and printed as in the
  # sanitizer stages (scripts/bounded.sh); every other entry runs whole.
  source scripts/bounded.sh
  ctest --test-dir "$build" --output-on-failure -j 2 --timeout 600 -LE rerun "$@"
  skipped
  GTEST_TOTAL_SHARDS=$sweep_parts GTEST_SHARD_INDEX=$sweep_part \
    ctest --test-dir "$build" --output-on-failure -j 2 --timeout 600 -L rerun "$@"
fi
echo "test suite: passed in $(( $(date +%s) - start )) s"
