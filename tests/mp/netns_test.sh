#!/usr/bin/env bash
# Two fake hosts with really different addresses: two network namespaces joined
# by a veth pair, ranks 0,1 in one and 2,3 in the other, over UCX tcp.
# Fake nodes on loopback (collie-run --nodes) all share 127.0.0.1, so an address
# that is wrong but happens to work locally goes unnoticed there; this proves the
# bootstrap and UCX work between hosts with different addresses.
# Needs root and iproute2; where a namespace or veth cannot be made it skips (77).
# $1 = collectives_mp.
set -u
prog=$1
ns=(collieA$$ collieB$$) dev=(cva$$ cvb$$) addr=(10.251.1.1 10.251.1.2)
out=$(mktemp -d)
cleanup() {
  # Deleting a namespace deletes its veth end, and so the pair.
  for n in "${ns[@]}"; do ip netns delete "$n" 2>/dev/null; done
  rm -rf "$out"
}
trap cleanup EXIT
skip() {
  echo "skipped: $1"
  exit 77
}
# The namespaces are the part that needs privileges: any failure to build them is a skip, not a failure.
setup() {
  local err
  err=$("$@" 2>&1) || skip "'$*' failed${err:+: ${err%%$'\n'*}}"
}
command -v ip >/dev/null || skip "no ip command (install iproute2)"
setup ip netns add "${ns[0]}"
setup ip netns add "${ns[1]}"
setup ip link add "${dev[0]}" netns "${ns[0]}" type veth peer name "${dev[1]}" netns "${ns[1]}"
for h in 0 1; do
  setup ip -n "${ns[h]}" addr add "${addr[h]}/24" dev "${dev[h]}"
  setup ip -n "${ns[h]}" link set "${dev[h]}" up
  setup ip -n "${ns[h]}" link set lo up
done
# The kernel marks a veth running a moment after both ends are up, and UCX ignores a device until then.
running() { ip -n "${ns[0]}" link show "${dev[0]}" | grep -q "state UP" && ip -n "${ns[1]}" link show "${dev[1]}" | grep -q "state UP"; }
for ((i = 0; i < 50; ++i)); do running && break; sleep 0.1; done
running || skip "the veth pair never came up"

secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
pids=()
for r in 0 1 2 3; do
  h=$((r / 2))
  # Both namespaces share /dev/shm and the hostname: only COLLIE_HOSTID tells the hosts apart. The port is
  # fixed since nothing else listens in a fresh namespace.
  timeout 120 ip netns exec "${ns[h]}" env COLLIE_RANK=$r COLLIE_WORLD_SIZE=4 COLLIE_ROOT="${addr[0]}:29500" \
    COLLIE_SECRET="$secret" COLLIE_HOSTID="ns$h" COLLIE_SOCKET_IFNAME="${dev[h]}" COLLIE_TIMEOUT=60 \
    UCX_TLS=tcp UCX_NET_DEVICES="${dev[h]}" "$prog" --quick >"$out/$r" 2>&1 &
  pids+=($!)
done
fail=0
for r in 0 1 2 3; do
  rc=0
  wait "${pids[r]}" || rc=$?
  sed "s/^/[$r] /" "$out/$r"
  [ "$rc" = 0 ] || { echo "FAIL: rank $r exited with $rc"; fail=1; }
done
# Rank 0 reports the total; the others speak only of their failures.
grep -q "^rank 0: \([0-9]*\)/\1 collective cases exact on 4 ranks" "$out/0" ||
  { echo "FAIL: rank 0 does not report every case exact on 4 ranks"; fail=1; }
! grep -q "FAIL" "$out"/* || { echo "FAIL: a rank reports a wrong case"; fail=1; }
[ "$fail" = 0 ] && echo "PASS: 2 hosts (${addr[*]}) x 2 ranks over UCX tcp"
exit "$fail"
