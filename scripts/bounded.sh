# Sourced by the CI stages that run test binaries themselves rather than through ctest (whose --timeout bounds
# each test): `bounded CMD...` runs CMD under a wall-clock limit, COLLIE_STEP_TIMEOUT seconds (default 900).
# A hang then fails its stage naming the command, instead of stalling CI until the whole run is killed
# without a word. timeout signals the command's whole process group, so collie-run's ranks go too.
# Each step's time is printed after it, so that a CI log shows where the stage's minutes went.
bounded() {
  local limit=${COLLIE_STEP_TIMEOUT:-900} rc=0 t0=$SECONDS
  timeout -k 10 "$limit" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "TIMED OUT after $limit s: $*" >&2; fi
  echo "step: $((SECONDS - t0)) s, exit $rc: ${*:1:4}"
  return "$rc"
}

# CI samples the sweeps it repeats under the sanitizers and on the fake GPU: each run takes one of SWEEP_PARTS
# (default 2) parts of each sampled sweep (gtest's own sharding), the part given by SWEEP_PART or else drawn and
# printed, so that a run's choice can be replayed and successive runs cover every case. The plain suite
# (scripts/test.sh) runs every case every time. SWEEP_PARTS=1 runs them all here too.
sweep_parts=${SWEEP_PARTS:-2}
if [ -z "${sweep_part:-}" ]; then
  sweep_part=${SWEEP_PART:-$((RANDOM % sweep_parts))}
  echo "sampled sweeps: part $sweep_part of 0..$((sweep_parts - 1)) (SWEEP_PART=$sweep_part replays it)"
fi
# `sampled CMD...`: `bounded CMD...` over this run's part of the tests the gtest binary CMD selects.
sampled() {
  GTEST_TOTAL_SHARDS=$sweep_parts GTEST_SHARD_INDEX=$sweep_part bounded "$@"
}

# ---- the fake-GPU runs (scripts/fake_gpu.sh, and under ThreadSanitizer scripts/sanitize.sh)
# A gtest binary under `bounded` (with --gtest_brief=1), failing if a test it selected skipped. A skip passes
# in gtest; here (no usable GPU, one GPU where a test needs two, a build without UCX) it would have shown
# nothing, and the rows of docs/RELIABILITY.md that name the test would rest on nothing. So each filter leaves
# out the tests that cannot run in its setting, and runs them where they can.
every_test() {
  local log rc=0
  log=$(mktemp)
  bounded "$@" --gtest_brief=1 2>&1 | tee "$log" || rc=$?
  if [ "$rc" = 0 ] && grep -q '^\[  SKIPPED \]' "$log"; then
    echo "a selected test skipped, where every one must run: ${*:1:3}" >&2
    grep -A1 ': Skipped$' "$log" >&2 || true
    rc=1
  fi
  rm -f "$log"
  return "$rc"
}
# Left out of the one-GPU runs (every_test): the tests that need two GPUs, run with two fake ones in fake_gpu.sh, and
# without UCX the destroy of a communicator whose peers on another host go through the proxy.
two_gpus='CudaBackend.AStreamOfAnotherGpuIsAnError:CudaBackend.RanksOnTwoGpus*'
# Whether the build tree $1 has UCX (the proxy's transport, and the fake nodes').
has_ucx() { grep -q 'COLLIE_WITH_UCX:BOOL=ON' "$1/CMakeCache.txt"; }
no_ucx() { has_ucx "$1" || echo ':CudaBackend.DestroyOfAProxied*'; }
