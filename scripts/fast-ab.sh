#!/usr/bin/env bash
# Interleaved A/B of the tracker's fast path: short worker/same-session runs of the uxsched mode
# alone (4 fresh daemons × 2 s each), binaries taking turns round by round, with the daemons'
# `fast path` debug lines kept. The stages of each path and every daemon's "critical → boosted"
# are then read by scripts/fast-ab-summary.py. About 40 s per binary and round on 2 CPUs.
#   sudo scripts/fast-ab.sh ROUNDS OUTDIR NAME=BINARY...
# Writes OUTDIR/NAME-ROUND.{txt,json,fast}: the report, its `--save` samples, the debug lines.
set -euo pipefail
rounds=${1:?usage: scripts/fast-ab.sh ROUNDS OUTDIR NAME=BINARY...}
out=${2:?usage: scripts/fast-ab.sh ROUNDS OUTDIR NAME=BINARY...}
shift 2
[ $# -ge 1 ] || { echo "name at least one NAME=BINARY" >&2; exit 2; }
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for pair in "$@"; do
    name=${pair%%=*} bin=${pair#*=}
    RUST_LOG=uxsched_daemon=debug "$bin" bench worker --layout same-session --modes uxsched \
      --reps 4 --duration 2s --keep-logs --save "$out/$name-$r.json" >"$out/$name-$r.txt" 2>&1 || {
      echo "round $r, $name: the bench failed (see $out/$name-$r.txt)" >&2; exit 1; }
    kept=$(sed -n 's/^uxsched bench: the runs. logs are kept in //p' "$out/$name-$r.txt")
    [ -n "$kept" ] || { echo "round $r, $name: no kept logs named in $out/$name-$r.txt" >&2; exit 1; }
    grep -h 'fast path' "$kept"/daemon-uxsched/daemon*.log >"$out/$name-$r.fast" || true
    rm -rf "$kept"
  done
done
