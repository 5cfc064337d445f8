#!/usr/bin/env python3
"""The direct kernels' tables from the JSON lines of `tests/gpu/run.sh perf` (gpu-logs/perf.jsonl), in Markdown.

  tests/gpu/perf_table.py gpu-logs/perf.jsonl > table.md

Sections: the machine; the ceilings (copies by the copy engine and the SMs, the allreduce with no
synchronisation); the launch floor; large calls against the byte floor (target: at least 80% of the floor
rate); small allreduces (targets: 6 us at 2 ranks, 9 us at 4, without graphs; 8 ranks beside the launch floor);
each rank's time inside the direct kernels and until its peers had come (the launch skew it saw);
one rank against NCCL (target: NCCL/Collie at least 1.0); the tuner's pick against the fastest Collie path
measured beside it. Every figure is the median of its loops, out of place unless named.
"""
import json
import sys
from collections import defaultdict

SMALL_SIZES = [8, 1024, 16384, 65536, 262144]
SMALL_TARGET_US = {2: 6.0, 4: 9.0}
FLOOR_TARGET_PERCENT = 80.0


def human(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def us(v):
    return "-" if v is None else f"{v:.2f}"


def main(path):
    machine, ceilings, floors, figures, notes, timings = None, [], [], [], [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            x = json.loads(line)
            if x.get("kind") == "machine":
                machine = x
            elif x.get("kind") == "ceiling":
                ceilings.append(x)
            elif x.get("kind") == "launch_floor":
                floors.append(x)
            elif x.get("kind") == "direct_timing":
                timings.append(x)
            elif "note" in x or "version" in x:
                notes.append(x)
            elif "figure" in x:
                # One thread driving several ranks through groups (collie-bench -g): rows of their own.
                if x.get("ranks_per_thread", 1) > 1:
                    x["implementation"] += f" (a thread, {x['ranks_per_thread']} ranks)"
                figures.append(x)
    out = []
    if machine:
        out += ["## Machine", "", ", ".join(f"{k} {v}" for k, v in machine.items() if k != "kind"), ""]
    if ceilings:
        out += ["## Ceilings", "", "| what | shape | bytes each | median us | p90 us | GB/s (read + written) | wrong |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for c in ceilings:
            shape = ", ".join(f"{k} {c[k]}" for k in ("streams", "ranks", "grids", "blocks") if k in c)
            out.append(f"| {c['what']} | {shape} | {human(c['bytes'])} | {c['median_us']:.1f} | {c['p90_us']:.1f} "
                       f"| {c['rate_gbps']:.0f} | {c['wrong']} |")
        out.append("")
    launch = {}
    if floors:
        ways = [w for w in ("launch", "as collie", "graph") if any(x["way"] == w for x in floors)]
        out += ["## Launch floor (us per call, the slowest of T threads)", "",
                "| threads | " + " | ".join(ways) + " |", "| ---: |" + " ---: |" * len(ways)]
        by = defaultdict(dict)
        for x in floors:
            by[x["threads"]][x["way"]] = x["us_per_call"]
        for t in sorted(by):
            out.append(f"| {t} | " + " | ".join(us(by[t].get(w)) for w in ways) + " |")
            launch[t] = by[t].get("as collie")
        out.append("")

    def ran(x):
        return "time_us" in x["figure"]

    def key(x):
        return (x["collective"], x["nranks"], x["graph_iters"], x["size"], x["placement"])

    rows = defaultdict(dict)
    for x in figures:
        rows[key(x)][x["implementation"]] = x
    # Large calls are the runs with the copy limit (--limit), so with a floor; small ones run without.
    def limited(k):
        return any(x.get("floor_us") is not None for x in rows[k].values())

    large = [k for k in rows if limited(k)]
    if large:
        out += [f"## Large calls (target: at least {FLOOR_TARGET_PERCENT:.0f}% of the floor rate)", "",
                "| collective | ranks | size | placement | path (algorithm) | median us | p90 us | busbw GB/s "
                "| floor us | % of floor | target |", "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        for k in sorted(large):
            for impl, x in sorted(rows[k].items()):
                f = x["figure"]
                if not ran(x):
                    if x["figure"].get("skipped") == "no in-place form":
                        continue
                    out.append(f"| {k[0]} | {k[1]} | {human(k[3])} | {k[4]} | {impl} | n/a: {f.get('skipped', '')} "
                               "| | | | | |")
                    continue
                p = x.get("floor_percent")
                meets = "-" if p is None else ("meets" if p >= FLOOR_TARGET_PERCENT else "below")
                out.append(f"| {k[0]} | {k[1]} | {human(k[3])} | {k[4]} | {impl} ({f.get('algorithm', '')}) "
                           f"| {f['time_us']:.1f} | {f['p90_us']:.1f} | {f['busbw_gbps']:.1f} "
                           f"| {us(x.get('floor_us'))} | {'-' if p is None else f'{p:.1f}'} | {meets} |")
        out.append("")
    small = [k for k in rows
             if k[0] == "allreduce" and k[3] in SMALL_SIZES and k[4] == "out_of_place" and k[1] > 1 and not limited(k)]
    if small:
        out += ["## Small allreduce, out of place (median us; targets 6 us at 2 ranks, 9 at 4, without graphs)", "",
                "| ranks | graphs | path | " + " | ".join(human(s) for s in SMALL_SIZES) + " | target | launch floor |",
                "| ---: | --- | --- |" + " ---: |" * len(SMALL_SIZES) + " --- | ---: |"]
        groups = sorted({(k[1], k[2]) for k in small})
        for n, g in groups:
            impls = sorted({i for k in small if (k[1], k[2]) == (n, g) for i in rows[k]})
            for impl in impls:
                cells, worst = [], 0.0
                for s in SMALL_SIZES:
                    k = ("allreduce", n, g, s, "out_of_place")
                    x = rows[k].get(impl) if k in small else None
                    if x is None or not ran(x):
                        cells.append("n/a" if x is not None else "-")
                        continue
                    cells.append(us(x["figure"]["time_us"]))
                    worst = max(worst, x["figure"]["time_us"])
                target = SMALL_TARGET_US.get(n)
                verdict = "-" if target is None or g else ("meets" if worst <= target else "above")
                out.append(f"| {n} | {'yes' if g else 'no'} | {impl} | " + " | ".join(cells) +
                           f" | {verdict} | {us(launch.get(n))} |")
        out.append("")
    # Part 4 of the direct kernels' issue: what an enqueue costs on the host beside the launch itself.
    enqueue = [k for k in small if not k[2]]
    if enqueue and any("issue_us" in x["figure"] for k in enqueue for x in rows[k].values()):
        out += ["## Host time inside a small allreduce call (its enqueue: us per call, no graphs, out of place)", "",
                "| ranks | path | " + " | ".join(human(s) for s in SMALL_SIZES) + " | launch floor |",
                "| ---: | --- |" + " ---: |" * len(SMALL_SIZES) + " ---: |"]
        for n in sorted({k[1] for k in enqueue}):
            for impl in sorted({i for k in enqueue if k[1] == n for i in rows[k]}):
                cells = []
                for s in SMALL_SIZES:
                    x = rows.get(("allreduce", n, 0, s, "out_of_place"), {}).get(impl)
                    cells.append(us(x["figure"].get("issue_us")) if x is not None and ran(x) else "-")
                out.append(f"| {n} | {impl} | " + " | ".join(cells) + f" | {us(launch.get(n))} |")
        out.append("")
    if timings:
        out += ["## Inside the direct kernels (COLLIE_KERNEL_TIMING; mean per launch, by the GPU's timer)", "",
                "| step | rank | launches | start to end us | until every peer had come us |",
                "| --- | ---: | ---: | ---: | ---: |"]
        for x in sorted(timings, key=lambda x: (x["step"], x["rank"])):
            out.append(f"| {x['step']} | {x['rank']} | {x['launches']} | {x['kernel_us']:.2f} "
                       f"| {x['until_peers_us']:.2f} |")
        out.append("")
    one = [k for k in rows if k[1] == 1 and "nccl" in rows[k] and k[4] == "out_of_place"]
    if one:
        out += ["## One rank: NCCL / Collie (target: at least 1.0)", "", "| size | Collie us | NCCL us | ratio |",
                "| ---: | ---: | ---: | ---: |"]
        for k in sorted(one):
            c = next((x for i, x in rows[k].items() if i.startswith("collie") and ran(x)), None)
            n = rows[k]["nccl"]
            if c is None or not ran(n):
                continue
            r = n["figure"]["time_us"] / c["figure"]["time_us"]
            out.append(f"| {human(k[3])} | {us(c['figure']['time_us'])} | {us(n['figure']['time_us'])} | {r:.2f} |")
        out.append("")
    picks = []
    tuners = ("collie:tuner", "collie:tuner+direct")  # the second: COLLIE_DIRECT_TUNE=1 (--algo auto_direct)

    def base(impl):  # without the group's suffix: a tuner driven by one thread is a tuner too
        return impl.split(" (a thread,")[0]

    for k, impls in sorted(rows.items()):
        for name in sorted(i for i in impls if base(i) in tuners):
            suffix = name[len(base(name)):]
            others = [x for i, x in impls.items() if i.startswith("collie:") and base(i) not in tuners
                      and i[len(base(i)):] == suffix and ran(x)]
            tuner = impls.get(name)
            if tuner is None or not ran(tuner) or not others:
                continue
            best = min(others, key=lambda x: x["figure"]["time_us"])
            ratio = tuner["figure"]["time_us"] / best["figure"]["time_us"]
            if ratio > 1.05:
                picks.append(f"| {k[0]} | {k[1]} | {'yes' if k[2] else 'no'} | {human(k[3])} | {k[4]} "
                             f"| {name[7:]} | {tuner['figure'].get('algorithm', '')} | {best['implementation']} "
                             f"| {ratio:.2f} |")
    out += ["## The tuner's pick against the fastest Collie path beside it (only where over 5% slower)", ""]
    out += (["| collective | ranks | graphs | size | placement | tuner | picked | fastest | time ratio |",
             "| --- | ---: | --- | ---: | --- | --- | --- | --- | ---: |"] + picks) if picks else ["none"]
    out.append("")
    if notes:
        out += ["## Notes", ""]
        seen = set()
        for x in notes:
            text = x.get("note") or f"{x['version']} {x['value']}"
            line = f"- {x['collective']}, {x['nranks']} ranks: {text}"
            if line not in seen:
                seen.add(line)
                out.append(line)
        out.append("")
    if not figures and not ceilings:
        print(f"perf_table: no figures in {path}", file=sys.stderr)
        return 1
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: tests/gpu/perf_table.py PERF.jsonl", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
