#!/usr/bin/env bash
# End-to-end checks of the collie-run launcher: environment of the ranks, output relaying, exit codes, failure
# propagation and signal forwarding. Usage: collie_run_test.sh path/to/collie-run
# shellcheck disable=SC2016  # rank scripts are single-quoted on purpose: they expand in the ranks
set -euo pipefail

if [[ $# -ne 1 || ! -x "$1" ]]; then
  echo "usage: $0 path/to/collie-run" >&2
  exit 2
fi
RUN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILURES=0

pass() { echo "PASS: $1"; }
fail() {
  echo "FAIL: $1"
  FAILURES=$((FAILURES + 1))
}

# Runs collie-run with the given arguments; sets RC, OUT (stdout) and ERR (stderr) and ELAPSED (seconds).
launch() {
  local start
  start=$(date +%s)
  RC=0
  "$RUN" "$@" >"$TMP/out" 2>"$TMP/err" || RC=$?
  ELAPSED=$(($(date +%s) - start))
  OUT=$(cat "$TMP/out")
  ERR=$(cat "$TMP/err")
}

# True when none of the pids recorded in $TMP/pid.* is alive any more.
ranks_gone() {
  local f pid
  for f in "$TMP"/pid.*; do
    [[ -e $f ]] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then return 1; fi
  done
  return 0
}

# --- every rank succeeds and sees a consistent environment ---
N=4
launch -np $N sh -c 'echo "rank=$COLLIE_RANK size=$COLLIE_WORLD_SIZE local=$COLLIE_LOCAL_RANK" \
  "root=$COLLIE_ROOT secret=$COLLIE_SECRET"'
if [[ $RC -ne 0 ]]; then
  fail "all ranks succeed: exit code $RC, stderr: $ERR"
else
  ok=1
  secrets=()
  roots=()
  for ((r = 0; r < N; r++)); do
    line=$(grep -E "^\[$r\] rank=$r size=$N local=$r root=127\.0\.0\.1:[0-9]+ secret=[0-9a-f]{32}$" <<<"$OUT" || true)
    if [[ -z $line ]]; then
      fail "rank $r output missing or malformed in: $OUT"
      ok=0
      continue
    fi
    secrets+=("${line##*secret=}")
    root=${line##*root=}
    roots+=("${root%% *}")
  done
  if [[ $ok -eq 1 ]]; then
    if [[ $(printf '%s\n' "${secrets[@]}" | sort -u | wc -l) -ne 1 ]]; then
      fail "COLLIE_SECRET differs between ranks: ${secrets[*]}"
    elif [[ $(printf '%s\n' "${roots[@]}" | sort -u | wc -l) -ne 1 ]]; then
      fail "COLLIE_ROOT differs between ranks: ${roots[*]}"
    elif [[ $(wc -l <<<"$OUT") -ne $N ]]; then
      fail "expected $N output lines, got: $OUT"
    elif read -r low _ </proc/sys/net/ipv4/ip_local_port_range && ((low > 11000 && ${roots[0]##*:} >= low)); then
      # Outgoing connections take ports inside the ephemeral range; the launcher's must lie below it.
      fail "COLLIE_ROOT port ${roots[0]##*:} lies in the ephemeral range (from $low)"
    else
      pass "all ranks succeed with rank, size, root and shared secret"
    fi
  fi
fi

# --- a second run gets a different secret ---
launch -np 1 sh -c 'echo "$COLLIE_SECRET"'
first=$OUT
launch -np 1 sh -c 'echo "$COLLIE_SECRET"'
if [[ $RC -eq 0 && $first != "$OUT" ]]; then
  pass "fresh secret per run"
else
  fail "secret repeated across runs or run failed: $first / $OUT"
fi

# --- one rank fails, the others are stopped quickly ---
rm -f "$TMP"/pid.*
launch -np 4 sh -c 'echo $$ > '"$TMP"'/pid.$COLLIE_RANK
  if [ "$COLLIE_RANK" = 2 ]; then sleep 0.5; exit 3; fi
  exec sleep 30'
if [[ $RC -ne 3 ]]; then
  fail "failing rank: expected exit code 3, got $RC (stderr: $ERR)"
elif [[ $ELAPSED -ge 10 ]]; then
  fail "failing rank: took ${ELAPSED}s to stop the others"
elif ! grep -q "collie-run: rank 2 exited with code 3; stopping the other ranks" <<<"$ERR"; then
  fail "failing rank: no report line in stderr: $ERR"
elif ! ranks_gone; then
  fail "failing rank: some ranks still alive after collie-run returned"
else
  pass "rank 2 exits 3 -> collie-run returns 3 in ${ELAPSED}s and stops the others"
fi

# --- a rank killed by SIGKILL ---
launch -np 3 sh -c 'if [ "$COLLIE_RANK" = 1 ]; then kill -KILL $$; fi; exec sleep 30'
if [[ $RC -eq 137 && $ELAPSED -lt 10 ]] && grep -q "rank 1 was killed by signal 9" <<<"$ERR"; then
  pass "rank killed by SIGKILL -> 137"
else
  fail "rank killed by SIGKILL: expected 137 quickly, got $RC after ${ELAPSED}s (stderr: $ERR)"
fi

# --- a rank that ignores SIGTERM is killed after the grace period ---
launch -np 2 sh -c 'if [ "$COLLIE_RANK" = 1 ]; then sleep 0.5; exit 5; fi; trap "" TERM; exec sleep 30'
if [[ $RC -eq 5 && $ELAPSED -lt 10 ]]; then
  pass "rank ignoring SIGTERM gets SIGKILL after the grace period (${ELAPSED}s)"
else
  fail "rank ignoring SIGTERM: expected 5 within 10s, got $RC after ${ELAPSED}s"
fi

# --- a background grandchild holding the output pipe does not keep collie-run waiting ---
rm -f "$TMP"/pid.*
launch -np 2 sh -c 'sleep 30 & echo $! > '"$TMP"'/pid.$COLLIE_RANK; echo started'
if [[ $RC -eq 0 && $ELAPSED -lt 10 && $OUT == *"[1] started"* ]]; then
  pass "returns when the ranks exit even if a grandchild keeps their output open"
else
  fail "grandchild holding the pipe: got $RC after ${ELAPSED}s, output: $OUT"
fi
for f in "$TMP"/pid.*; do kill "$(cat "$f")" 2>/dev/null || true; done

# --- SIGTERM to collie-run is forwarded ---
rm -f "$TMP"/pid.*
start=$(date +%s)
"$RUN" -np 3 sh -c 'echo $$ > '"$TMP"'/pid.$COLLIE_RANK; exec sleep 30' >"$TMP/out" 2>"$TMP/err" &
launcher=$!
for ((i = 0; i < 100; i++)); do
  [[ -s $TMP/pid.0 && -s $TMP/pid.1 && -s $TMP/pid.2 ]] && break
  sleep 0.1
done
kill -TERM "$launcher"
RC=0
wait "$launcher" || RC=$?
ELAPSED=$(($(date +%s) - start))
if [[ ! -s $TMP/pid.2 ]]; then
  fail "SIGTERM forwarding: ranks never started"
elif [[ $RC -ne 143 ]]; then
  fail "SIGTERM forwarding: expected 143, got $RC (stderr: $(cat "$TMP/err"))"
elif [[ $ELAPSED -ge 10 ]]; then
  fail "SIGTERM forwarding: took ${ELAPSED}s"
elif ! ranks_gone; then
  fail "SIGTERM forwarding: ranks still alive after collie-run returned"
else
  pass "SIGTERM to collie-run -> ranks gone, exit 143 in ${ELAPSED}s"
fi

# --- program that does not exist ---
launch -np 2 /nonexistent/collie-no-such-program
if [[ $RC -eq 127 ]] && grep -q "cannot run /nonexistent/collie-no-such-program" <<<"$ERR"; then
  pass "nonexistent program -> 127"
else
  fail "nonexistent program: expected 127 and a message, got $RC (stderr: $ERR)"
fi
launch collie-no-such-program-on-path
if [[ $RC -eq 127 ]]; then
  pass "program missing from PATH -> 127"
else
  fail "program missing from PATH: expected 127, got $RC"
fi

# --- program is searched on PATH and gets its arguments ---
launch -n 2 echo a 'b c'
if [[ $RC -eq 0 && $OUT == *"[0] a b c"* && $OUT == *"[1] a b c"* ]]; then
  pass "PATH search and arguments"
else
  fail "PATH search and arguments: got $RC, output: $OUT"
fi

# --- -x passes variables ---
launch -np 2 -x COLLIE_TEST_VAR=hello -x OTHER_VAR='x=y z' -- sh -c 'echo "v=$COLLIE_TEST_VAR o=$OTHER_VAR"'
if [[ $RC -eq 0 && $OUT == *"[0] v=hello o=x=y z"* && $OUT == *"[1] v=hello o=x=y z"* ]]; then
  pass "-x sets variables in every rank"
else
  fail "-x: got $RC, output: $OUT"
fi

# --- last line without newline still gets a prefix and a newline ---
launch -np 2 sh -c 'printf "first\nno-newline-$COLLIE_RANK"'
if [[ $RC -eq 0 ]] && grep -qx "\[0\] no-newline-0" "$TMP/out" && grep -qx "\[1\] no-newline-1" "$TMP/out" &&
  [[ $(tail -c 1 "$TMP/out" | od -An -c | tr -d ' ') == '\n' ]]; then
  pass "final line without newline is prefixed and terminated"
else
  fail "final line without newline: got $RC, output: $(od -c "$TMP/out" | head -5)"
fi

# --- stdout and stderr stay apart ---
launch -np 2 sh -c 'echo to-out; echo to-err >&2'
if [[ $RC -eq 0 && $OUT == *"[1] to-out"* && $OUT != *to-err* && $ERR == *"[1] to-err"* && $ERR != *to-out* ]]; then
  pass "stdout and stderr relayed separately"
else
  fail "stdout/stderr separation: out=$OUT err=$ERR"
fi

# --- a reader that goes away stops the ranks instead of leaving them running ---
start=$(date +%s)
set +e
timeout 20 "$RUN" -np 2 yes 2>/dev/null | head -n 3 >"$TMP/out"
RC=${PIPESTATUS[0]}
set -e
ELAPSED=$(($(date +%s) - start))
if [[ $RC -eq 141 && $ELAPSED -lt 10 && $(wc -l <"$TMP/out") -eq 3 ]]; then
  pass "closed stdout reader ends the run with the ranks' SIGPIPE (141)"
else
  fail "closed stdout reader: exit $RC after ${ELAPSED}s"
fi

# --- --no-prefix ---
launch -np 2 --no-prefix sh -c 'echo plain'
if [[ $RC -eq 0 && $OUT == $'plain\nplain' ]]; then
  pass "--no-prefix"
else
  fail "--no-prefix: got $RC, output: $OUT"
fi

# --- lines of different ranks never mix, even with much output ---
launch -np 4 sh -c 'i=0; while [ $i -lt 2000 ]; do
  echo "rank $COLLIE_RANK line $i abcdefghijklmnopqrstuvwxyz0123456789"; i=$((i+1)); done'
bad=$(grep -cvE '^\[([0-3])\] rank \1 line [0-9]+ abcdefghijklmnopqrstuvwxyz0123456789$' "$TMP/out" || true)
if [[ $RC -eq 0 && $bad -eq 0 && $(wc -l <"$TMP/out") -eq 8000 ]]; then
  pass "8000 lines from 4 ranks, none mixed"
else
  fail "heavy output: rc $RC, $bad malformed lines, $(wc -l <"$TMP/out") lines"
fi

# --- usage errors ---
usage_ok=1
for args in "-np 0 true" "-np 1025 true" "-np x true" "-np" "" "--bogus true" "-x NOVALUE true" "-x =v true"; do
  # shellcheck disable=SC2086
  launch $args
  if [[ $RC -ne 2 || -z $ERR ]]; then
    fail "usage error '$args': expected exit 2 and a message, got $RC"
    usage_ok=0
  fi
done
launch --help
if [[ $RC -ne 0 || $OUT != *COLLIE_SECRET* ]]; then
  fail "--help: got $RC, output: $OUT"
  usage_ok=0
fi
[[ $usage_ok -eq 1 ]] && pass "usage errors exit 2, --help exits 0"

# --- --help-env: the user settings; --all adds the developer and test ones (docs/environment.md is made of it) ---
env_ok=1
launch --help-env
if [[ $RC -ne 0 || $OUT != *"  COLLIE_TIMEOUT (default: 300)"* || $OUT == *COLLIE_DEV_* || $OUT == *COLLIE_TEST_* ]]
then
  fail "--help-env: got $RC, output: $OUT"
  env_ok=0
fi
launch --help-env --all
if [[ $RC -ne 0 || $OUT != *"  COLLIE_DEV_SYSTEM_FENCE"* || $OUT != *"  COLLIE_TEST_SEED"* ]]; then
  fail "--help-env --all: got $RC, output: $OUT"
  env_ok=0
fi
for args in "--all" "--help-env true"; do
  # shellcheck disable=SC2086
  launch $args
  if [[ $RC -ne 2 || -z $ERR ]]; then
    fail "usage error '$args': expected exit 2 and a message, got $RC"
    env_ok=0
  fi
done
[[ $env_ok -eq 1 ]] && pass "--help-env lists the user settings, --help-env --all every one"

# --- 1024 ranks is the documented maximum and works ---
launch -np 1024 true
if [[ $RC -eq 0 ]]; then
  pass "1024 ranks"
else
  fail "1024 ranks: got $RC (stderr: $(head -3 <<<"$ERR"))"
fi

if [[ $FAILURES -ne 0 ]]; then
  echo "$FAILURES check(s) failed"
  exit 1
fi
echo "all collie-run checks passed"
