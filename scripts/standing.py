#!/usr/bin/env python3
"""Where uxsched stands against issue 9's goal, cell by cell, from every kept bench report.

    scripts/standing.py [--json] DIR…      (e.g. scripts/standing.py docs/results)

Reads every `uxsched bench --save` report (*.json) under the DIRs (but folders named
`*dropped*`: runs of reverted changes), keeps for each scenario ×
layout the newest run that has `idle`, `stock`, `uxsched` and the most of the peers (ties: the
one with more samples), and prints one Markdown row per cell: whether stock hurts there, the best peer, `fifo`, uxsched,
and each part of the goal — p95 ≤ 1.10× idle, p99 ≤ 1.5× idle, background ≥ 0.95× stock,
separably ahead (non-overlapping 95 % bootstrap intervals of the p95 ratio) of every peer but
`fifo`. Only reads what `uxsched bench` computed; the intervals are the report's. The goal and
the separability rule are those of `Report::headline` and `Report::verdict`
(crates/bench/src/report.rs), which the kept reports of earlier code do not carry in their JSON,
hence their copy here: change both together.
"""
import json
import pathlib
import sys

PEERS = ("android", "s76", "schedqos")
GOAL_P95, GOAL_P99, GOAL_BG = 1.10, 1.5, 0.95
LAYOUTS = ("same-session", "no-autogroup", "units", "other-session")


def load(dirs):
    """(path, report) for every bench report under dirs; other JSON files are skipped."""
    for d in dirs:
        for path in sorted(pathlib.Path(d).rglob("*.json")):
            if any("dropped" in part for part in path.parts):
                continue  # a reverted change's runs: kept as evidence, not the standing
            try:
                report = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as e:
                sys.exit(f"{path}: not readable as JSON ({e}); fix or remove it")
            if isinstance(report, dict) and {"scenario", "layout", "modes"} <= report.keys():
                yield path, report


def newest(reports):
    """The newest usable report with the most peers per (scenario, layout)."""
    best = {}
    for path, r in reports:
        rows = {m["mode"]: m for m in r["modes"]}
        if not {"idle", "stock", "uxsched"} <= rows.keys() or rows["uxsched"].get("p95_ratio") is None:
            continue
        n = min(m["summary"]["n"] for m in r["modes"])
        key = (r["scenario"], r["layout"])
        # A run with the peers beats one without them (e.g. the daemon's modes only).
        rank = (sum(m in rows for m in PEERS), r["date_utc"], n)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, path, r, rows, n)
    return best


def commit_of(path):
    """The checkout bench-matrix.sh recorded beside the report, if any."""
    f = path.parent / "commit"
    return f.read_text().strip() if f.exists() else "?"


def cell(path, r, rows, n):
    ux, stock = rows["uxsched"], rows["stock"]
    peers = [(m, rows[m]) for m in PEERS if m in rows and rows[m].get("p95_ratio")]
    best = min(peers, key=lambda p: p[1]["p95_ratio"]["value"]) if peers else None
    u95, u99 = ux["p95_ratio"], ux["p99_ratio"]
    bg = ux.get("background_vs_stock")
    ahead = {m: u95["hi"] < row["p95_ratio"]["lo"] for m, row in peers}
    s95, s99 = stock["p95_ratio"], stock["p99_ratio"]
    return {
        "scenario": r["scenario"],
        "layout": r["layout"],
        "load": f"{r['load']}×{r['load_workers']}",
        "n": n,
        "date_utc": r["date_utc"],
        "commit": commit_of(path),
        "report": str(path),
        "stock_hurts": s95["lo"] > GOAL_P95 or s99["lo"] > GOAL_P99,
        "stock": (s95, s99),
        "best_peer": (best[0], best[1]["p95_ratio"], best[1]["p99_ratio"]) if best else None,
        "fifo": (rows["fifo"]["p95_ratio"], rows["fifo"]["p99_ratio"]) if "fifo" in rows else None,
        "uxsched": (u95, u99),
        "background": bg,
        "goal": {
            "p95": u95["value"] <= GOAL_P95,
            "p99": u99["value"] <= GOAL_P99,
            "background": bg is not None and bg >= GOAL_BG,
            "ahead_of_peers": bool(peers) and all(ahead.values()),
        },
        "ahead_of": ahead,
        "p99_samples": n // 100,
    }


def ratio_text(x, ci=True):
    """A ratio as "value [lo–hi]", or just the value."""
    return f"{x['value']:.2f} [{x['lo']:.2f}–{x['hi']:.2f}]" if ci else f"{x['value']:.2f}"


def markdown(cells):
    mark = lambda ok: "✓" if ok else "✗"
    print("| scenario, layout (load; n/mode) | stock p95 / p99 | stock hurts | best peer p95 / p99 "
          "| fifo p95 / p99 | **uxsched** p95 / p99 | bg | goal p95 · p99 · bg · ahead | run |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        s95, s99 = c["stock"]
        peer = c["best_peer"]
        peer_s = f"{peer[0]} {ratio_text(peer[1])} / {ratio_text(peer[2], False)}" if peer else "—"
        fifo = f"{ratio_text(c['fifo'][0], False)} / {ratio_text(c['fifo'][1], False)}" if c["fifo"] else "dropped"
        u95, u99 = c["uxsched"]
        bg = f"{c['background']:.2f}" if c["background"] is not None else "—"
        g = c["goal"]
        behind = [m for m, ok in c["ahead_of"].items() if not ok]
        ahead = mark(g["ahead_of_peers"]) + (f" (not: {', '.join(behind)})" if behind else "")
        few = " ⚠" if c["p99_samples"] < 10 else ""
        print(f"| {c['scenario']}, {c['layout']} ({c['load']}; {c['n']}{few}) "
              f"| {ratio_text(s95)} / {ratio_text(s99, False)} | {'yes' if c['stock_hurts'] else 'no'} | {peer_s} "
              f"| {fifo} | **{ratio_text(u95)} / {ratio_text(u99)}** | {bg} "
              f"| {mark(g['p95'])} · {mark(g['p99'])} · {mark(g['background'])} · {ahead} "
              f"| {c['date_utc'][:16]}, {c['commit']} |")
    met = sum(all(c["goal"][k] for k in ("p95", "p99", "background")) for c in cells)
    print(f"\n{len(cells)} cells; uxsched meets p95, p99 and background in {met}, and is "
          f"separably ahead of every peer in {sum(c['goal']['ahead_of_peers'] for c in cells)}. "
          "⚠: p99 rests on fewer than 10 samples.")


def main(argv):
    as_json = "--json" in argv
    dirs = [a for a in argv if a != "--json"]
    if not dirs:
        sys.exit("usage: scripts/standing.py [--json] DIR…")
    best = newest(load(dirs))
    order = lambda k: (k[0], LAYOUTS.index(k[1]) if k[1] in LAYOUTS else len(LAYOUTS))
    cells = [cell(*best[k][1:]) for k in sorted(best, key=order)]
    if as_json:
        json.dump(cells, sys.stdout, indent=1)
    else:
        markdown(cells)


if __name__ == "__main__":
    main(sys.argv[1:])
