#!/usr/bin/env python3
"""Read an interleaved fast-path A/B (scripts/fast-ab.sh OUTDIR): per binary, the median time of
each stage of the `fast path` debug lines (µs; the stage boundaries are the line's cumulative
fields) and how long the oldest new member waited for its path; then per round, every fresh
daemon's "critical → boosted" p99 (its bench extras): median and worst, and how many are ≤ 1 ms.
    python3 scripts/fast-ab-summary.py OUTDIR NAME...
"""
import glob
import json
import re
import statistics
import sys

STAGES = [("chain", "cool_us", "chain_us"), ("targets", "chain_us", "targets_us"),
          ("plan", "shaped_us", "candidates_us"), ("follow", "candidates_us", "followed_us"),
          ("add", "followed_us", "added_us"), ("path", None, "fast_us"),
          ("cpu", None, "cpu_us"), ("waited", None, "waited_us")]


def paths(out, name):
    rows = []
    for f in sorted(glob.glob(f"{out}/{name}-*.fast")):
        for line in open(f):
            rows.append({k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)})
    return rows


def p99s(out, name, r):
    try:
        with open(f"{out}/{name}-{r}.json") as f:
            records = json.load(f)["records"]
    except FileNotFoundError:
        return []
    return [x["extras"]["boost_p99_us"] for x in records
            if "boost_p99_us" in (x.get("extras") or {})]


def main(out, names):
    print("stage medians, µs (n = fast paths):")
    for name in names:
        rows = paths(out, name)
        med = {s: statistics.median([r[b] - (r[a] if a else 0) for r in rows])
               for s, a, b in STAGES} if rows else {}
        print(f"  {name}: n={len(rows)} " + " ".join(f"{s}={v:.0f}" for s, v in med.items()))
    rounds = sorted({int(m.group(1)) for f in glob.glob(f"{out}/*.json")
                     if (m := re.search(r"-(\d+)\.json$", f))})
    print("per round, each daemon's critical → boosted p99: median / worst (µs)")
    print("  round " + " ".join(f"{n:>12}" for n in names))
    every = {n: [] for n in names}
    for r in rounds:
        cells = []
        for n in names:
            v = p99s(out, n, r)
            every[n] += v
            cells.append(f"{statistics.median(v):.0f} / {max(v):.0f}" if v else "-")
        print(f"  {r:>5} " + " ".join(f"{c:>12}" for c in cells))
    for n in names:
        v = every[n]
        if v:
            print(f"  {n}: {len(v)} daemons, ≤ 1 ms for {sum(x <= 1000 for x in v)}, "
                  f"p99 {min(v) / 1000:.2f}–{max(v) / 1000:.2f} ms")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
