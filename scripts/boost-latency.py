#!/usr/bin/env python3
"""Issue 10's "critical -> boosted" per fresh daemon, from `uxsched bench --save` JSON reports.

Each repetition of a daemon mode starts a fresh daemon; its report's extras carry that daemon's
p50/p99 of the input wake-up -> boost written latency over the members it boosted
(`boost_p50_us`, `boost_p99_us`, `boosted_new`). Prints, per report and mode, every daemon's
p99 and how many are within the issue's 1 ms target.
    python3 scripts/boost-latency.py docs/results/2026-11-26/long-handles/*.json
"""
import json
import sys

TARGET_US = 1000.0


def main(paths):
    if not paths:
        sys.exit(__doc__)
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        by_mode = {}
        for rec in report["records"]:
            extras = rec.get("extras") or {}
            if "boost_p99_us" in extras:
                by_mode.setdefault(rec["mode"], []).append(extras)
        for mode, reps in by_mode.items():
            p99 = [e["boost_p99_us"] for e in reps]
            p50 = [e["boost_p50_us"] for e in reps]
            within = sum(1 for v in p99 if v <= TARGET_US)
            print(f"{path}: {mode}: {len(reps)} daemons, p50 {min(p50) / 1000:.2f}–"
                  f"{max(p50) / 1000:.2f} ms, p99 {min(p99) / 1000:.2f}–{max(p99) / 1000:.2f} ms, "
                  f"≤ 1 ms for {within} of {len(reps)}; p99s: "
                  + " ".join(f"{v / 1000:.2f}" for v in p99))


if __name__ == "__main__":
    main(sys.argv[1:])
