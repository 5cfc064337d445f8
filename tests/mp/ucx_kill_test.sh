#!/usr/bin/env bash
# A rank killed (SIGKILL) in the middle of a long collective across fake nodes:
# every survivor must get an error (collieRemoteError from UCX's peer-failure
# detection, or collieTimeout where the transport has none) within
# COLLIE_TIMEOUT, and destroy its communicator promptly: no hang.
# The ranks are started here (tests/mp/local_ranks.sh), not by collie-run.
# $1 = ucx_kill_mp, $2 = UCX_TLS, $3 = fake nodes, $4 = ranks, $5 = victim rank,
# $6 = "detects" when UCX must report the dead peer (collieRemoteError) to at
# least one survivor, rather than every survivor timing out.
#
# Collie sends no UCX puts: in UCX 1.13 a target answering a put from a rank
# that died aborts the process ("ucp_request.inl:346 Fatal: unexpected
# error"). So a survivor that exits other than cleanly fails this test.
set -euo pipefail
prog=$1 tls=$2 nodes=$3 np=$4 victim=$5 detects=${6:-}
source "$(dirname "$0")/local_ranks.sh" "$np"
out=$ranks_out
export COLLIE_TIMEOUT=${COLLIE_TIMEOUT:-8} UCX_TLS=$tls UCX_NET_DEVICES=lo
for ((r = 0; r < np; ++r)); do COLLIE_HOSTID=node$((r * nodes / np)) start_rank "$r" "$prog"; done
for ((i = 0; i < 300; ++i)); do
  grep -q looping "$out/$victim" && break
  sleep 0.1
done
grep -q looping "$out/$victim" || { echo "FAIL: rank $victim never got going"; cat "$out"/*; exit 1; }
sleep "0.$((RANDOM % 10))"  # somewhere inside one of the allreduces
kill -9 "${pids[$victim]}"
echo "killed rank $victim (UCX_TLS=$tls, $nodes fake nodes x $np ranks, COLLIE_TIMEOUT=$COLLIE_TIMEOUT)"
start=$SECONDS
fail=0 detected=0
for ((r = 0; r < np; ++r)); do
  [ "$r" = "$victim" ] && continue
  rc=0
  wait "${pids[$r]}" || rc=$?
  sed "s/^/[$r] /" "$out/$r"
  if [ "$rc" = 0 ]; then
    # Told by UCX itself: ranks of this machine also notice a dead process by its pid
    # (executor/host_executor.cc), which must not stand in for UCX's detection here.
    grep -q "returned remote process exited.*UCX endpoint to rank" "$out/$r" && detected=$((detected + 1))
  else
    echo "FAIL: rank $r exited with $rc"
    fail=1
  fi
done
echo "survivors done within $((SECONDS - start)) s of the kill: $detected were told by a UCX endpoint error"
if [ -n "$detects" ] && [ "$detected" = 0 ]; then
  echo "FAIL: no survivor was told of the dead peer by UCX"
  fail=1
fi
[ "$fail" = 0 ] && echo "PASS"
exit "$fail"
