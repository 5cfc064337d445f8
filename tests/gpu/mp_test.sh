#!/usr/bin/env bash
# mp_test.sh COLLIE_RUN NP PROGRAM: skips (77, with the reason) without a GPU,
# else runs PROGRAM on NP processes sharing the machine's GPUs.
set -uo pipefail
run=$1 np=$2 prog=$3
"$prog" --probe
rc=$?
[ "$rc" = 0 ] || exit "$rc"
exec "$run" -np "$np" "$prog"
