#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (address + undefined behaviour sanitizers) in
# build-fuzz/ and fuzzes each for a bounded time from its corpus, tests/fuzz/corpus/<target>/.
# Fails on any crash, failed check, leak, sanitizer report or timeout, and says where the input that
# caused it was written. New inputs go to a scratch folder, never into the repository, unless --merge
# is given: then those that reach new code are merged into the corpus (minimised) for committing.
#
#   scripts/fuzz.sh [--merge] [TARGET...]    (default: all targets)
#   COLLIE_FUZZ_SECONDS=N   seconds per target (default 20)
#   COLLIE_FUZZ_CXX=...     the clang++ to build with (default clang++)
# Needs clang and libFuzzer (Debian: clang, libclang-rt-14-dev; scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
seconds=${COLLIE_FUZZ_SECONDS:-20}
all=(bootstrap_wire algo_overrides topology traffic user_text program_file msccl_xml)
merge=0
targets=()
for arg in "$@"; do
  case "$arg" in
    --merge) merge=1 ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *)
      if [[ " ${all[*]} " != *" $arg "* ]]; then echo "fuzz: unknown target '$arg' (${all[*]})" >&2; exit 2; fi
      targets+=("$arg") ;;
  esac
done
((${#targets[@]})) || targets=("${all[@]}")

cxx=${COLLIE_FUZZ_CXX:-clang++}
command -v "$cxx" >/dev/null || { echo "fuzz: $cxx not found; run scripts/setup.sh (clang, libclang-rt-14-dev)" >&2; exit 1; }
build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
fi
cmake --build "$build"
built=$(date +%s)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/collie-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"
# fuzz_one TARGET: fuzzes one target, printing its outcome; a failure leaves $scratch/TARGET.failed.
fuzz_one() {
  local t=$1 corpus=tests/fuzz/corpus/$1 artifacts=$build/artifacts/$1 log=$build/logs/$1.log rc=0 execs crash
  mkdir -p "$scratch/$t" "$artifacts" "$(dirname "$log")"
  # libFuzzer writes new inputs into the first folder only: the scratch one. The corpus is read-only input.
  # -timeout: one input may take at most 10 s (a hang is a bug too); -rss_limit_mb bounds memory.
  "$build/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$scratch/$t" "$corpus" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" != 0 ]; then
    touch "$scratch/$t.failed"
    echo "fuzz: $t FAILED (exit $rc); the end of its log ($log):"
    tail -n 40 "$log"
    crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    if [ -n "$crash" ]; then
      echo "fuzz: the input is $crash; replay it with: $build/fuzz_$t $crash"
    fi
    return 0
  fi
  echo "fuzz: $t ok, ${execs:-?} executions in ${seconds} s, $(find "$scratch/$t" -type f | wc -l) new inputs"
  if ((merge)); then
    "$build/fuzz_$t" -merge=1 -timeout=10 -rss_limit_mb=2048 -max_len=8192 "$corpus" "$scratch/$t" >>"$log" 2>&1
    echo "fuzz: $t corpus now $(find "$corpus" -type f | wc -l) files"
  fi
}
# Each fuzzer runs on one core: as many run at once as there are cores, each printing when all are done.
cores=$(nproc)
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= cores)); do wait -n || true; done
  fuzz_one "$t" >"$scratch/$t.out" 2>&1 &
done
wait
failed=()
for t in "${targets[@]}"; do
  cat "$scratch/$t.out"
  if [ -e "$scratch/$t.failed" ]; then failed+=("$t"); fi
done
end=$(date +%s)
echo "fuzz: build $((built - start)) s, fuzzing $((end - built)) s, total $((end - start)) s"
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all targets clean"
