#!/usr/bin/env bash
# Runs collie-bench with the given arguments and checks what it printed: exit
# status 0, at least one row, every #wrong cell 0 (or "-" where a placement did
# not run), and the footer's "Out of bounds values : 0 OK".
# $1 = collie-bench; the rest are its arguments. EXPECT_GROUPS (optional): column
# groups that must appear in the header (e.g. "mpi").
set -uo pipefail
bench=$1
shift
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
echo "+ collie-bench $*"
"$bench" "$@" >"$out" 2>"$err"
rc=$?
cat "$out"
if [ -s "$err" ]; then echo "--- stderr"; cat "$err"; fi
[ "$rc" = 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
# The names line is the one listing "#wrong"; its words line up with the cells of every row.
awk '
  /^#/ && /#wrong/ && !names { sub(/^#/, ""); n = split($0, h, " "); for (i = 1; i <= n; ++i) if (h[i] == "#wrong") w[i] = 1; names = 1; next }
  /^#/ { next }
  NF > 0 {
    rows++
    if (NF != n) { print "FAIL: row has " NF " cells, header " n ": " $0; bad = 1 }
    for (i in w) if ($i != "0" && $i != "-") { print "FAIL: #wrong " $i " in: " $0; bad = 1 }
  }
  END {
    if (!names) { print "FAIL: no header with #wrong"; exit 1 }
    if (rows == 0) { print "FAIL: no rows"; exit 1 }
    exit bad
  }' "$out" || exit 1
grep -q "^# Out of bounds values : 0 OK" "$out" || { echo "FAIL: no '0 OK' footer"; exit 1; }
for g in ${EXPECT_GROUPS:-}; do
  grep -q "^#.* $g out-of-place" "$out" || { echo "FAIL: no column group '$g'"; exit 1; }
done
echo "PASS"
