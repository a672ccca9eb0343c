#!/usr/bin/env bash
# Ray's overhead per point against the local runner (docs/sweep.md, "On a cluster"): two fixed
# sweeps — the worked study's 54 points (scenarios/sweeps/mcfs-cut-rate.toml, ~56 ms each) and
# 64 tiny points (showcase, 100 ms simulated, ~1 ms each: Ray's own cost alone) — with `--jobs 2`
# and with `--ray auto` (a local Ray, 2 workers), REPS times interleaved. One line per run.
#   bash docs/results/2026-11-28/sim-sweep/ray-overhead.sh [REPS]
set -euo pipefail
root="$(cd "$(dirname "$0")/../../../.." && pwd)"
bin="$root/target/release/uxsched"
reps="${1:-3}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/tiny.toml" <<'TOML'
workloads = ["showcase"]
scheds = ["eevdf", "cfs", "mcfs", "vtcfs"]
cpus = [2, 4]
seeds = { from = 1, count = 8 }
duration = "100ms"
[output]
metrics = ["wakeup_latency.p99"]
TOML
echo "date: $(date -u '+%F %T UTC'); commit $(git -C "$root" rev-parse --short HEAD); $(nproc) CPUs"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sweep runner points run_s startup_s points_per_s per_point_ms_after_startup"
for r in $(seq 1 "$reps"); do
  for spec in "$root/scenarios/sweeps/mcfs-cut-rate.toml" "$tmp/tiny.toml"; do
  for runner in "--jobs 2" "--ray auto"; do
    out="$tmp/o-$r-$(basename "$spec" .toml)-${runner// /}"
    # shellcheck disable=SC2086
    "$bin" sim sweep "$spec" --out "$out" $runner --json 2>/dev/null > "$tmp/s.json"
    python3 - "$tmp/s.json" "$runner" "$(basename "$spec" .toml)" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
start = s.get("startup_s", 0.0)
after = s["run_s"] - start
print(f'{sys.argv[3]:>13} {sys.argv[2]:>10} {s["ran"]} {s["run_s"]:.2f} {start:.2f} {s["points_per_s"]:.1f} {1000 * after / s["ran"]:.1f}')
PY
  done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
