#!/usr/bin/env bash
# Smoke test of collie-sim: each subcommand runs and exits 0. $1 = the collie-sim binary.
# verify runs to 16 ranks with two counts (uneven and prime) to stay at a few seconds; 64 ranks and the
# full set are verifier_test's job (VerifiedForOneTo64Ranks) and collie-sim verify's default.
set -euo pipefail
# Checks read all of a pipe (grep >/dev/null, not grep -q, which would stop at the match and leave the writer to
# end on SIGPIPE, a failure under pipefail).
sim="$1"
run() {
  echo "+ collie-sim $*"
  "$sim" "$@" > /tmp/collie_sim_smoke.$$ || { cat /tmp/collie_sim_smoke.$$; rm -f /tmp/collie_sim_smoke.$$; exit 1; }
  tail -n 4 /tmp/collie_sim_smoke.$$
}
trap 'rm -f /tmp/collie_sim_smoke.$$' EXIT
run list
run show allreduce ring -n 4 --picture
run verify --max-ranks 16 --counts n-1,13
run compare allreduce --topo h100-nvlink -b 8 -e 1G -f 8
run predict allreduce ring --topo h100-16x8-400g --bytes 1G
# predict's traffic line: ring allreduce at 4 ranks reads and writes 20/4 of the buffer per rank (6n-4 chunk passes).
"$sim" predict allreduce ring --topo host -n 4 --bytes 1M | grep "traffic  *5242880 bytes .*, 3.33 x busbw's bytes" >/dev/null ||
  { echo "collie-sim predict: no traffic line of 5242880 bytes, 3.33 x busbw's"; exit 1; }
# With its sends read in place (chunks of 256 KiB, over the 128 KiB default): 5n-5 = 15 chunk passes.
"$sim" predict allreduce ring --topo host -n 4 --bytes 1M |
  grep -q "in place  *3932160 bytes .*sends of 131072 bytes and up .*, 2.50 x busbw's bytes" ||
  { echo "collie-sim predict: no in-place traffic line of 3932160 bytes, 2.50 x busbw's"; exit 1; }
# export writes a program file: ring allreduce on 4 ranks in 4 chunks, each rank's first step a send.
"$sim" export allreduce ring -n 4 | grep '"chunks": 4,' >/dev/null ||
  { echo "collie-sim export: ring allreduce on 4 ranks is not in 4 chunks"; exit 1; }
[ "$("$sim" export allreduce ring -n 4 | grep -c '^    {"rank": [0-3], "scratch": 0, "steps": \[$')" = 4 ] ||
  { echo "collie-sim export: not one program per rank"; exit 1; }
# What export wrote verifies and shows; with one finalize mark taken out, verify names the element.
file=$(mktemp --suffix=.json)
trap 'rm -f "$file"' EXIT
"$sim" export allreduce ring -n 4 >"$file"
"$sim" verify "$file" | grep ": allreduce 'ring' on 4 ranks, 4 chunks: verified at counts 4, 8, 12, in and out" >/dev/null ||
  { echo "collie-sim verify FILE: the exported ring does not verify"; exit 1; }
"$sim" show "$file" --count 8 --rank 1 | grep "count 8 (4 chunks)" >/dev/null || { echo "collie-sim show FILE: no header"; exit 1; }
# The simulator takes the file as an algorithm, with the built-in ring's figures; not on another rank count.
[ "$("$sim" predict allreduce "file:$file" --topo h100-nvlink -n 4 --bytes 64M | sed -n 2p)" = \
  "$("$sim" predict allreduce ring --topo h100-nvlink -n 4 --bytes 64M | sed -n 2p)" ] ||
  { echo "collie-sim predict file: not the built-in ring's time"; exit 1; }
# compare puts the file in a column of its own beside the built-in algorithms, with the ring's time; n/a at a
# size whose count its 4 chunks do not divide (8 bytes: 2 floats).
row=$("$sim" compare allreduce "file:$file" --topo h100-nvlink -n 4 -b 64M -e 64M | sed -n 3p)
[ "$(echo "$row" | awk '{print $2}')" = "$(echo "$row" | awk '{print $(NF-2)}')" ] ||
  { echo "collie-sim compare file: not the built-in ring's time: $row"; exit 1; }
"$sim" compare allreduce "file:$file" --topo h100-nvlink -n 4 -b 8 -e 8 | sed -n 3p | grep ' n/a ' >/dev/null ||
  { echo "collie-sim compare file: a count the chunks do not divide is not n/a"; exit 1; }
set +e
"$sim" predict allreduce "file:$file" --topo h100-nvlink -n 8 --bytes 64M >/dev/null 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || { echo "collie-sim predict: a 4-rank file on 8 ranks gave $rc"; exit 1; }
sed -i '0,/,"finalize":true/s///' "$file"
set +e
why=$("$sim" verify "$file")
rc=$?
set -e
[ "$rc" = 1 ] && echo "$why" | grep "^FAILED .*: count 4 out of place: .*output was never finalized at element" >/dev/null ||
  { echo "collie-sim verify FILE: a broken file gave $rc, '$why'"; exit 1; }
# A file cannot hold all-to-all-v: status 1 and the reason.
set +e
why=$("$sim" export alltoallv pairwise -n 3 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" = 1 ] && echo "$why" | grep "per-peer counts" >/dev/null || { echo "collie-sim export alltoallv: $rc, '$why'"; exit 1; }
# Direct programs (algorithms/program.h, "Direct steps"): shown aligned at their barriers, verified, predicted with
# their barriers; a file cannot hold them.
"$sim" show allreduce direct_twoshot -n 4 --picture | grep "^bar  *==== *==== *==== *====$" >/dev/null ||
  { echo "collie-sim show: direct_twoshot's barriers are not one row"; exit 1; }
run verify allreduce direct_twoshot --max-ranks 16 --counts n-1,13
"$sim" predict allreduce direct_twoshot --topo h100-nvlink --bytes 1M | grep "2 barriers per rank" >/dev/null ||
  { echo "collie-sim predict: direct_twoshot's barriers are not printed"; exit 1; }
set +e
why=$("$sim" export allreduce direct_twoshot -n 3 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" = 1 ] && echo "$why" | grep "direct steps" >/dev/null || { echo "collie-sim export direct_twoshot: $rc, '$why'"; exit 1; }
# Bad arguments are refused with status 2, not a crash.
for bad in "" "frobnicate" "show allreduce ring" "show allreduce nope -n 4" "predict allreduce ring --topo nowhere.topo --bytes 8" \
  "compare allreduce --topo h100-nvlink -b 1X" "verify --max-ranks 65" "export allreduce ring" "export allreduce ring -n 65"; do
  set +e
  # shellcheck disable=SC2086
  "$sim" $bad > /dev/null 2>&1
  rc=$?
  set -e
  if [ "$rc" -ne 2 ]; then
    echo "collie-sim $bad: exit status $rc, expected 2"
    exit 1
  fi
done
echo "PASS"
