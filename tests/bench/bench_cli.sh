#!/usr/bin/env bash
# What collie-bench says when something cannot run: bad options (exit 2 and a
# reason), --vs nccl without a GPU or without NCCL (a note, the table still
# runs), --backend cuda before the CUDA executor works (a clear error naming
# collieCommInitRankConfig), --vs mpi in a build without MPI, a traffic file
# that does not fit, the sizes outside a program file's byte range.
# $1 = collie-bench, $2 = 1 when built with MPI.
set -uo pipefail
bench=$1 withMpi=$2
out=$(mktemp)
trap 'rm -f "$out" "$out.t" "$out.f"' EXIT
expect() {  # expect CODE TEXT ARGS...: exit status CODE and TEXT in stdout+stderr
  local code=$1 text=$2
  shift 2
  "$bench" "$@" >"$out" 2>&1
  local rc=$?
  if [ "$rc" != "$code" ] || ! grep -qF -- "$text" "$out"; then
    echo "FAIL: collie-bench $* -> exit $rc (want $code), output:"; cat "$out"; echo "(wanted: $text)"; exit 1
  fi
  echo "PASS: collie-bench $* -> $code, '$text'"
}
expect 2 "unknown collective 'allreduse'" allreduse
expect 2 "unknown option --frobnicate" allreduce --frobnicate 1
expect 2 "bad value for -d: float17" allreduce -d float17
expect 2 "-b is larger than -e" allreduce -b 1M -e 1K
expect 2 "--traffic applies to alltoallv" allreduce --traffic zipf
expect 2 "zipf:S takes one exponent" alltoallv --traffic zipf:x
expect 2 "has no algorithm 'ringg'" allreduce -np 2 --algo ringg
expect 2 "-r 5 is not a rank of 3" broadcast -np 3 -r 5
expect 0 "Usage: collie-bench" --help
printf '0 1\n1 0\n' >"$out.t"
expect 2 "expected 3 (one per rank)" alltoallv -np 3 --traffic "file:$out.t"

# Progress lines only when asked (stderr is not a terminal here).
"$bench" allreduce -np 2 -b 8 -e 64 -n 1 -w 0 >/dev/null 2>"$out"
if grep -q "rows done" "$out"; then echo "FAIL: progress without --progress"; cat "$out"; exit 1; fi
"$bench" allreduce -np 2 -b 8 -e 64 -n 1 -w 0 --progress >/dev/null 2>"$out"
[ "$(grep -c "rows done" "$out")" = 4 ] || { echo "FAIL: want 4 progress lines"; cat "$out"; exit 1; }
echo "PASS: --progress"

# NCCL: a GPU and libnccl.so.2 are needed; without them a note, and Collie's table.
if "$bench" allreduce -np 2 -b 1K -e 1K -n 2 -w 1 --vs nccl >"$out" 2>&1; then
  if grep -q "NCCL not run" "$out"; then
    # Here: no GPU, or no library; on a one-GPU machine NCCL itself refuses two ranks on one GPU.
    grep -qE "NCCL not run: (no usable GPU|cannot load libnccl.so.2|ncclCommInitRank.*refuses)" "$out" ||
      { echo "FAIL: unclear NCCL message"; cat "$out"; exit 1; }
    echo "PASS: --vs nccl explains why NCCL did not run: $(grep -m1 -o 'NCCL not run: .*' "$out")"
  else
    grep -q " nccl out-of-place" "$out" || { echo "FAIL: neither NCCL columns nor a reason"; cat "$out"; exit 1; }
    echo "PASS: --vs nccl ran NCCL"
  fi
else
  echo "FAIL: --vs nccl exited non-zero"; cat "$out"; exit 1
fi

# The CUDA backend: either it works, or the error names the call that refused it.
if "$bench" allreduce -np 2 -b 1K -e 1K -n 2 -w 1 --backend cuda >"$out" 2>&1; then
  grep -q "backend cuda" "$out" || { echo "FAIL: --backend cuda ran but the table does not say cuda"; exit 1; }
  echo "PASS: --backend cuda ran"
else
  grep -q -- "--backend cuda: cannot create a Collie communicator: collieCommInitRankConfig" "$out" ||
    { echo "FAIL: unclear --backend cuda error"; cat "$out"; exit 1; }
  echo "PASS: --backend cuda explains: $(grep -m1 -o 'collieCommInitRankConfig: .*' "$out")"
fi

if [ "$withMpi" != 1 ]; then
  expect 0 "this collie-bench was built without MPI" allreduce -np 2 -b 1K -e 1K -n 2 -w 1 --vs mpi
fi
# Under collie-run, MPI cannot join the processes: said, and Collie's table still runs.
run=$(dirname "$bench")/../tools/collie-run
if [ "$withMpi" = 1 ] && [ -x "$run" ]; then
  "$run" -np 2 "$bench" allreduce -b 1K -e 1K -n 2 -w 1 --vs mpi >"$out" 2>&1 ||
    { echo "FAIL: --vs mpi under collie-run exited non-zero"; cat "$out"; exit 1; }
  grep -q "MPI is not running in these processes" "$out" || { echo "FAIL: no MPI message"; cat "$out"; exit 1; }
  echo "PASS: --vs mpi under collie-run explains why MPI did not run"
fi

# A program file with a byte range (max_bytes): its sizes run, the others are n/a rather than the tuner's pick
# under the file's name; so is a count its 2 chunks do not divide (4 bytes: one float).
cat >"$out.f" <<'JSON'
{"collie_program": 1, "collective": "allreduce", "name": "halves", "nranks": 2, "chunks": 2, "max_bytes": 64,
 "ranks": [
  {"rank": 0, "steps": [
   {"op": "copy", "src": ["input", 0], "dst": ["output", 0], "count": 1},
   {"op": "sendRecvReduce", "send": 1, "recv": 1, "src": ["input", 1], "count": 1, "dst": ["output", 0],
    "recv_count": 1, "finalize": true},
   {"op": "sendRecv", "send": 1, "recv": 1, "src": ["output", 0], "count": 1, "dst": ["output", 1], "recv_count": 1}]},
  {"rank": 1, "steps": [
   {"op": "copy", "src": ["input", 1], "dst": ["output", 1], "count": 1},
   {"op": "sendRecvReduce", "send": 0, "recv": 0, "src": ["input", 0], "count": 1, "dst": ["output", 1],
    "recv_count": 1, "finalize": true},
   {"op": "sendRecv", "send": 0, "recv": 0, "src": ["output", 1], "count": 1, "dst": ["output", 0], "recv_count": 1}]}
 ]}
JSON
"$bench" allreduce -t 2 -b 4 -e 256 -f 4 -n 1 -w 0 --algo "file:$out.f" >"$out" 2>&1 ||
  { echo "FAIL: collie-bench --algo file with a byte range exited non-zero"; cat "$out"; exit 1; }
row() { grep -E "^ +$1 " "$out"; }
{ row 4 | grep -q "n/a" && row 16 | grep -vq "n/a" && row 64 | grep -vq "n/a" && row 256 | grep -q "n/a"; } ||
  { echo "FAIL: want 4 and 256 bytes n/a, 16 and 64 run"; cat "$out"; exit 1; }
echo "PASS: a program file runs the sizes of its byte range only"
