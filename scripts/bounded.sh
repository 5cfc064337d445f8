# Sourced by the CI stages that run test binaries themselves rather than through ctest (whose --timeout bounds
# each test): `bounded CMD...` runs CMD under a wall-clock limit, COLLIE_STEP_TIMEOUT seconds (default 900).
# A hang then fails its stage naming the command, instead of stalling CI until the whole run is killed
# without a word. timeout signals the command's whole process group, so collie-run's ranks go too.
bounded() {
  local limit=${COLLIE_STEP_TIMEOUT:-900} rc=0
  timeout -k 10 "$limit" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "TIMED OUT after $limit s: $*" >&2; fi
  return "$rc"
}
