#!/usr/bin/env bash
# Collectives under OpenMPI's mpirun: ranks come from OMPI_COMM_WORLD_RANK/SIZE,
# the rendezvous from COLLIE_ROOT. $1 = mpirun, $2 = collectives_mp; any further
# arguments go to mpirun (e.g. -x COLLIE_FAKE_NODES=2 -x UCX_TLS=sm,self to cut
# the job into fake nodes that talk over UCX).
set -euo pipefail
source "$(dirname "$0")/free_port.sh"
mpirun=$1 prog=$2
shift 2
port=$(free_port)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$mpirun" --oversubscribe -np 4 --mca btl self,tcp -x COLLIE_ROOT=127.0.0.1:$port \
  -x COLLIE_SECRET=00112233445566778899aabbccddeeff "$@" "$prog" --quick
echo "PASS: mpirun -np 4 $*"
