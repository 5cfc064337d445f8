#!/usr/bin/env bash
# A CUDA rank process killed right after init (tests/gpu/faults_gpu_mp.cc), run as the host fault tests are
# (tests/mp/faults_test.sh: survivors fail in time, no process or shm segment left). Exit 77 (skip) without a
# usable GPU. $1 = faults_gpu_mp, $2 = ranks, $3 = victim.
set -euo pipefail
prog=$1 np=${2:-3} victim=${3:-1}
"$prog" --probe || exit $?
# A long timeout: the survivors must fail because the victim's process is gone, not because they waited it out.
COLLIE_TIMEOUT=${COLLIE_TIMEOUT:-60} exec bash "$(dirname "$0")/../mp/faults_test.sh" "$prog" before "$np" "$victim"
