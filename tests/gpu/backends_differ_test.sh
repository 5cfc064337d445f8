#!/usr/bin/env bash
# Two ranks of one job on different backends (COLLIE_DEVICE=cuda on rank 0, host on rank 1): init refuses it
# on both, each naming the setting, instead of a hang or garbage later. Exit 77 (skip) without a usable GPU;
# scripts/fake_gpu.sh runs it on the fake CUDA runtime. The other settings that must match are tried without
# a GPU in tests/mp/env_init_test.sh. $1 = collectives_gpu_mp (asked whether a GPU is usable), $2 =
# collectives_mp of the same build.
set -euo pipefail
"$1" --probe || exit $?
prog=$2
source "$(dirname "$0")/../mp/free_port.sh"
source "$(dirname "$0")/../mp/refused_at_init.sh"
refused_at_init "different backends" "rank [01] runs the \(cuda\|host\) backend, rank [01] the \(cuda\|host\) one" \
  COLLIE_DEVICE=cuda COLLIE_DEVICE=host
