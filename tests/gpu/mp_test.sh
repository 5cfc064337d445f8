#!/usr/bin/env bash
# mp_test.sh COLLIE_RUN NP PROGRAM [COLLIE_RUN_ARGS...]: skips (77, with the
# reason) without a GPU, else runs PROGRAM on NP processes sharing the
# machine's GPUs (e.g. --nodes 2: across fake nodes).
set -uo pipefail
run=$1 np=$2 prog=$3
shift 3
"$prog" --probe
rc=$?
[ "$rc" = 0 ] || exit "$rc"
exec "$run" "$@" -np "$np" "$prog"
