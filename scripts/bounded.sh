# Sourced by the CI stages that run test binaries themselves rather than through ctest (whose --timeout bounds
# each test): `bounded CMD...` runs CMD under a wall-clock limit, COLLIE_STEP_TIMEOUT seconds (default 900).
# A hang then fails its stage naming the command, instead of stalling CI until the whole run is killed
# without a word. timeout signals the command's whole process group, so collie-run's ranks go too.
# Each step's time is printed after it, so that a CI log shows where the stage's minutes went.
bounded() {
  local limit=${COLLIE_STEP_TIMEOUT:-900} rc=0 t0=$SECONDS
  timeout -k 10 "$limit" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "TIMED OUT after $limit s: $*" >&2; fi
  echo "step: $((SECONDS - t0)) s, exit $rc: ${*:1:4}"
  return "$rc"
}
