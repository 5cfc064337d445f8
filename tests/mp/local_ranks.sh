# Sourced by the fault tests that start each rank as a process of its own by
# environment init (collie-run would stop the survivors as soon as one rank
# dies): a scratch folder for the ranks' output, a fresh rendezvous address and
# secret, and a trap that kills whatever is left on exit.
# Usage: source local_ranks.sh NRANKS; then start_rank R CMD [ARGS...].
ranks_out=$(mktemp -d)
pids=()
ranks_cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$ranks_out"
}
trap ranks_cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"
ranks_port=$(free_port) || exit 1
export COLLIE_ROOT=127.0.0.1:$ranks_port COLLIE_WORLD_SIZE=$1
export COLLIE_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
# Rank R runs CMD in the background; its output goes to $ranks_out/R, its pid to pids[R].
start_rank() {
  local r=$1
  shift
  COLLIE_RANK=$r "$@" >"$ranks_out/$r" 2>&1 &
  pids[r]=$!
}
