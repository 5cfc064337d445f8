# Sourced by the test scripts that choose a rendezvous port themselves.
# free_port prints a loopback port below the kernel's ephemeral range that no
# socket holds now. Ports inside that range are handed out to every outgoing
# connection (UCX's TCP lanes, other tests' bootstrap rings), so a port drawn
# there can be taken before rank 0 binds it: CI once saw "Address already in
# use" that way. Below the range, only another test drawing the same number can.
free_port() {
  local low _ p hex
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  [ "$low" -gt 12000 ] || low=32768  # an unusual range: keep to the usual default
  for _ in $(seq 100); do
    p=$((10000 + RANDOM % (low - 10000)))
    printf -v hex ':%04X ' "$p"
    # Column 2 of /proc/net/tcp{,6} is local_address:port in hex, in any state.
    if ! awk '{print $2" "}' /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q "$hex"; then
      echo "$p"
      return 0
    fi
  done
  echo "free_port: no free port found below $low" >&2
  return 1
}
