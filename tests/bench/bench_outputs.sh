#!/usr/bin/env bash
# --json, --csv and --plot are well formed and carry the run: JSON parses and
# holds every row with figures for each implementation, CSV has one line per
# (size, implementation, placement) and the same number of fields on each line,
# SVG parses as XML with axes, a legend and one line per implementation and
# limit. Parsed with /usr/bin/python3 when present, else checked with grep.
# --summary ends the table with a line per size range: the ratio to the other implementation, and the time
# per call (small calls) or the share of the copy limit (larger ones).
# Memory traffic per rank (algorithms/memory_traffic.h) reaches the JSON with
# the values worked out by hand for ring and rd allreduce.
# $1 = collie-bench.
set -euo pipefail
bench=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bench" allreduce -np 3 -b 64 -e 64K -f 32 -n 2 -w 1 --limit --bare --summary --algo auto,ring \
  --json "$dir/r.json" --csv "$dir/r.csv" --plot "$dir/r.svg" >"$dir/out.txt"
cat "$dir/out.txt"
# 3 sizes (64 B, 2 KiB, 64 KiB); 2 implementations.
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 - "$dir" <<'PY'
import csv, json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
r = json.load(open(d + "/r.json"))
for key in ("command", "date", "settings", "machine", "versions", "implementations", "rows", "summary"):
    assert key in r, "json: no " + key
assert r["settings"]["nranks"] == 3 and r["settings"]["collective"] == "allreduce", r["settings"]
assert "-np 3" in r["command"], r["command"]
assert [i["label"] for i in r["implementations"]] == ["collie:tuner", "collie:ring"], r["implementations"]
assert r["reference"] == "collie:tuner", r["reference"]
assert [row["size"] for row in r["rows"]] == [64, 2048, 65536], [row["size"] for row in r["rows"]]
for row in r["rows"]:
    for label in ("collie:tuner", "collie:ring"):
        for place in ("out_of_place", "in_place"):
            f = row["results"][label][place]
            assert f["time_us"] > 0 and f["busbw_gbps"] > 0 and f["wrong"] == 0, f
            assert f["algorithm"] in ("ring", "rhd", "tree", "oneshot", "twoshot", "rd", "hier"), f
        assert row["results"]["collie:ring"][place]["algorithm"] == "ring", row
    assert len(row["limit_gbps"]) == 1 and min(row["limit_gbps"].values()) > 0, row  # host, or device with a GPU
    assert row["time_ratio_to_reference"]["collie:tuner"]["out_of_place"] == 1, row
    assert row["bare_us"]["out_of_place"] > 0, row
assert r["summary"]["wrong"] == 0
rows = list(csv.reader(open(d + "/r.csv")))
head = rows[0]
assert all(len(x) == len(head) for x in rows), "csv: ragged lines"
assert len(rows) == 1 + 3 * 2 * 2, len(rows)
col = {name: i for i, name in enumerate(head)}
for name in ("size", "implementation", "placement", "time_us", "busbw_gbps", "wrong", "limit_gbps", "command",
             "machine_host", "version_collie", "algorithm"):
    assert name in col, "csv: no column " + name
for x in rows[1:]:
    assert float(x[col["time_us"]]) > 0 and x[col["wrong"]] == "0", x
svg = ET.parse(d + "/r.svg").getroot()
ns = "{http://www.w3.org/2000/svg}"
lines = svg.findall(ns + "polyline")
assert len(lines) == 3, "svg: %d lines, want 2 implementations + 1 limit" % len(lines)
texts = " ".join(t.text or "" for t in svg.iter(ns + "text"))
for want in ("busbw (GB/s", "message size", "collie:tuner", "collie:ring", "limit", "64 KiB", "allreduce"):
    assert want in texts, "svg: no text " + want
print("PASS: json, csv and svg parsed")
PY
else
  grep -q '"rows": \[' "$dir/r.json" && grep -q '"summary": {"wrong": 0' "$dir/r.json"
  [ "$(wc -l <"$dir/r.csv")" = 13 ]
  [ "$(grep -c '<polyline' "$dir/r.svg")" = 3 ] && grep -q '</svg>' "$dir/r.svg"
  echo "PASS: structure checked with grep (no /usr/bin/python3)"
fi

# 1 KiB = 256 floats on 4 ranks. Ring: chunks of 64, 20 chunk passes per rank (a send 2, two
# receive-reduce-sends 3 each, a receive-reduce-copy-send 4, two receive-copy-sends 3 each, a receive 2):
# 20 x 64 x 4 = 5120 bytes, in place too. rd: a copy of the input (2 x 256) and two exchanges, each a send (2),
# a receive (2) and a reduce (3): 16 x 256 x 4 = 16384 bytes, 14336 in place (the copy onto itself is skipped).
# With the tuner beside them, the table ends with its pick and the fastest of the two, a line per size.
"$bench" allreduce -np 4 -b 1K -e 1K -n 1 -w 0 --limit --algo auto,ring,rd --json "$dir/t.json" >"$dir/t.txt"
grep -A2 "^# Picks, out of place: the tuner's algorithm, the fastest of the 2 algorithms" "$dir/t.txt" |
  grep -Eq '^# +1024  [a-z]+ +(ring|rd) +[0-9.]+$' || { echo "FAIL: no picks line for 1024 bytes"; cat "$dir/t.txt"; exit 1; }
echo "PASS: the picks name the tuner's algorithm and the fastest"
traffic() {  # traffic FILE LABEL PLACE: the figure's traffic_bytes_per_rank in the JSON file
  tr -d '\n ' <"$1" | grep -o "\"collie:$2\":{\"out_of_place\":{[^}]*},\"in_place\":{[^}]*}" |
    grep -o "\"$3\":{[^}]*}" | grep -o '"traffic_bytes_per_rank":[0-9.e+]*' | cut -d: -f2
}
for want in "ring out_of_place 5120" "ring in_place 5120" "rd out_of_place 16384" "rd in_place 14336"; do
  set -- $want
  got=$(traffic "$dir/t.json" "$1" "$2")
  [ "$got" = "$3" ] || { echo "FAIL: $1 $2 traffic '$got', want $3"; exit 1; }
done
echo "PASS: traffic per rank as worked out by hand"
# Ranks as threads read large sends in place (128 KiB and up): 256 KiB = 65536 floats on 2 threads, ring chunks
# of 32768 floats (128 KiB). The send costs nothing, the receive-reduce-copy whose result the peer reads 3, the
# receive 2: 5 x 32768 x 4 = 655360 bytes, in place too (the causal order lets the first send be read in place);
# through slots it was 8 chunk passes.
"$bench" allreduce -t 2 -b 256K -e 256K -n 1 -w 0 --limit --algo ring --json "$dir/d.json" >"$dir/d.txt"
for want in "ring out_of_place 655360" "ring in_place 655360"; do
  set -- $want
  got=$(traffic "$dir/d.json" "$1" "$2")
  [ "$got" = "$3" ] || { echo "FAIL: threads, $1 $2 traffic '$got', want $3"; cat "$dir/d.txt"; exit 1; }
done
echo "PASS: sends read in place cost their sender no traffic"
# The summary: 64 B and 2 KiB are small, 64 KiB medium.
grep -Eq '^#   small  \(< 64 KiB\), 64 B to 2 KiB: collie:tuner [0-9.]+x (faster|slower) than collie:ring; [0-9.]+ to [0-9.]+ us per call$' "$dir/out.txt" &&
  grep -Eq '^#   medium \(64 KiB - 4 MiB\), 64 KiB: collie:tuner [0-9.]+x (faster|slower) than collie:ring; busbw [0-9]+% of the copy limit$' "$dir/out.txt" &&
  grep -q '^#   results checked: 0 wrong (OK)$' "$dir/out.txt" || { echo "FAIL: no summary by size range"; cat "$dir/out.txt"; exit 1; }
echo "PASS: the summary gives each size range"
# --reps and --jsonl: two runs append to one file, a line per (size, implementation, placement), then the notes
# and versions; each figure is the median of its loops, the p90 at least as long, and with --limit the byte floor
# is 2 x size per rank for allreduce and 3/2 x size for a 2-rank allgather (bench/cases.h, floorBytes).
if [ -x /usr/bin/python3 ]; then
  "$bench" allreduce -np 3 -b 1K -e 4K -f 4 -n 2 -w 1 --reps 3 --limit --jsonl "$dir/l.jsonl" >/dev/null
  "$bench" allgather -t 2 -b 2K -e 2K -n 2 -w 1 --reps 2 --limit --jsonl "$dir/l.jsonl" >/dev/null
  /usr/bin/python3 - "$dir/l.jsonl" <<'PY'
import json, sys
lines = [json.loads(x) for x in open(sys.argv[1])]
figures = [x for x in lines if "figure" in x]
assert len(figures) == 2 * 2 + 1 * 2, len(figures)
assert any("note" in x for x in lines) and any(x.get("version") == "collie" for x in lines)
for x in figures:
    f = x["figure"]
    assert f["wrong"] == 0 and f["time_us"] > 0 and f["p90_us"] >= f["time_us"], x
    # The host's time inside the calls: part of each call's time (no sync in it).
    assert 0 < f["issue_us"] <= f["time_us"] + 1e-3, x
    want = {"allreduce": 2.0, "allgather": 1.5}[x["collective"]] * x["size"]
    got = x["floor_us"] * 1e-6 * x["limit_gbps"] * 1e9
    assert abs(got - want) < 1e-6 * want, (got, want, x)
    assert abs(x["floor_percent"] - x["floor_us"] / f["time_us"] * 100) < 1e-6 * x["floor_percent"], x
    assert x["reps"] == (3 if x["collective"] == "allreduce" else 2), x
print("PASS: --reps and --jsonl")
PY
fi
