#!/usr/bin/env bash
# A/B of two builds of uxsched on one bench cell, interleaved: A B A B … (issue 10's lever and
# priority choices were made this way). Each round runs `BIN bench ARGS… --modes idle,uxsched`
# once per binary and prints the uxsched row: p50/p95/p99 (ms), p95 and p99 × idle (with the
# 95 % CI), background vs stock when measured, and the daemon's "critical → boosted" extras.
#   sudo scripts/ab-bench.sh ROUNDS BIN_A BIN_B -- SCENARIO [bench options…]
# e.g. build the old commit in a worktree, copy both binaries aside (a rebuild must not change
# them mid-run), then:
#   sudo scripts/ab-bench.sh 3 /tmp/uxsched-a /tmp/uxsched-b -- painting --layout units --reps 2
# Compare the two binaries' rows across rounds only; one round is one sample.
# MODES=idle,stock,uxsched adds stock, so the row's background is measured against it.
set -euo pipefail
rounds=${1:?usage: scripts/ab-bench.sh ROUNDS BIN_A BIN_B -- SCENARIO [options…]}
a=${2:?BIN_A}
b=${3:?BIN_B}
shift 3
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "no bench arguments after --" >&2; exit 2; }
for bin in "$a" "$b"; do
  [ -x "$bin" ] || { echo "$bin is not an executable" >&2; exit 2; }
done
printf '%-5s %-28s %s\n' round binary "uxsched row (p50 p90 p95 p99 max ms, p95×idle [CI], p99×idle [CI], bg, extras)"
for r in $(seq "$rounds"); do
  for bin in "$a" "$b"; do
    row=$("$bin" bench "$@" --modes "${MODES:-idle,uxsched}" 2>/dev/null | grep -E '^uxsched ' || true)
    [ -n "$row" ] || row="(no uxsched row: rerun by hand to see the error)"
    printf '%-5s %-28s %s\n' "$r" "$(basename "$bin")" "$(echo "$row" | tr -s ' ' | cut -d' ' -f3-)"
  done
done
