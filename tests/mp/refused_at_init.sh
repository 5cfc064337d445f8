# Sourced by tests that start two ranks with different settings that must match (after free_port.sh, with
# $prog set to a program that makes a communicator from the environment and accepts --quick):
#   refused_at_init WHAT PATTERN "VARS of rank 0" "VARS of rank 1"     (VARS: NAME=VALUE words, for env)
# passes when init fails on both ranks and each one's output matches PATTERN (grep), a sentence naming the
# setting: not a hang, nor garbage later.
refused_at_init() {
  local what=$1 pattern=$2 port logs r vars
  port=$(free_port)
  logs=$(mktemp -d)
  for r in 0 1; do
    if [ "$r" = 0 ]; then vars=$3; else vars=$4; fi
    # shellcheck disable=SC2086  # VARS are words
    env -u COLLIE_RANK -u COLLIE_WORLD_SIZE COLLIE_RANK=$r COLLIE_WORLD_SIZE=2 COLLIE_ROOT=127.0.0.1:$port $vars \
      "$prog" --quick >"$logs/$r" 2>&1 &
  done
  if wait -n || wait -n; then echo "FAIL: ranks with $what started"; cat "$logs"/*; exit 1; fi
  for r in 0 1; do
    grep -q "$pattern" "$logs/$r" || { echo "FAIL: rank $r: no message on $what"; cat "$logs/$r"; exit 1; }
  done
  rm -rf "$logs"
  echo "PASS: $what refused at init on both ranks"
}
