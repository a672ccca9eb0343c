#!/usr/bin/env python3
"""Markdown tables of a `scripts/bench-matrix.sh` directory, for docs/results/README.md.

    scripts/matrix-table.py OUTDIR

One table per scenario: a row per cell (layout and mode set), a column per mode, each entry
"p95× / p99× idle" with the p95 ratio's 95 % bootstrap interval, then the background cost
(throughput / stock's). Only formats what `uxsched bench --save` computed: no statistics here.
"""
import json
import pathlib
import sys


def fmt(row):
    p95, p99 = row.get("p95_ratio"), row.get("p99_ratio")
    if p95 is None:  # idle: absolute figures
        s = row["summary"]
        return f"{s['p95']:.2f} / {s['p99']:.2f} ms"
    text = f"{p95['value']:.2f}× [{p95['lo']:.2f}–{p95['hi']:.2f}] / {p99['value']:.2f}×"
    bg = row.get("background_vs_stock")
    if bg is not None and row["mode"] != "stock":
        text += f", bg {bg:.2f}"
    return text


def missing(report, mode):
    """A mode the run dropped (e.g. a model starved past its deadline) says so."""
    for w in report["warnings"]:
        if w.startswith(f"mode {mode} was dropped"):
            return "dropped: " + w.split(": ", 1)[1]
    return ""


def main(outdir):
    reports = []
    for path in sorted(pathlib.Path(outdir).glob("*.json")):
        report = json.loads(path.read_text())
        reports.append((path.stem, report))
    by_scenario = {}
    for name, r in reports:
        by_scenario.setdefault(r["scenario"], []).append((name, r))
    for scenario, cells in by_scenario.items():
        modes = []
        for _, r in cells:
            for row in r["modes"]:
                if row["mode"] not in modes:
                    modes.append(row["mode"])
        print(f"\n#### {scenario}: p95× [95 % CI] / p99× idle, bg = background vs stock\n")
        print("| cell (layout, load, date UTC) | n/mode | " + " | ".join(modes) + " |")
        print("|---" * (len(modes) + 2) + "|")
        for name, r in cells:
            rows = {row["mode"]: row for row in r["modes"]}
            n = min(row["summary"]["n"] for row in r["modes"])
            head = f"{r['layout']}, {r['load']}×{r['load_workers']}, {r['date_utc'][11:16]}"
            cols = [fmt(rows[m]) if m in rows else missing(r, m) for m in modes]
            print(f"| {head} | {n} | " + " | ".join(cols) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/matrix-table.py OUTDIR")
    main(sys.argv[1])
