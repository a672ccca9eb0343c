#!/usr/bin/env bash
# "Critical → boosted" when the user types from before the focus (docs/mechanisms.md, "The loop
# and cgroup moves"): runs the tracker_chain test (`crates/daemon/tests/tracker_chain.rs`: a
# three-process chain relaying inputs that start before the daemon is told of the focus) ROUNDS
# times with HOGS busy loops in this session, and prints each run's latency summary (the
# daemon's `status`: samples, p50, p99, max in µs). The focus pass's cgroup moves overlap the
# first inputs there, which the bench (it types after the focus is answered) never does.
#   sudo scripts/chain-boost.sh [ROUNDS] [HOGS] [TEST_BINARY...]     (default: 6 4 this tree's)
# With several test binaries (target/release/deps/tracker_chain-* built from the commits to
# compare) each round runs each once, interleaved. A test binary starts the daemon fixture at the
# path it was built with (its tree's target/release/uxsched-daemon-fixture), so build each commit
# in a worktree of its own and pass the test binary from there; a copied test binary would run
# whatever fixture that path holds now. Stops the hogs on exit.
set -euo pipefail
rounds=${1:-6}
hogs=${2:-4}
shift $(($# < 2 ? $# : 2))
cd "$(dirname "$0")/.."
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  bin=$(cargo test --release --offline -q -p uxsched-daemon --test tracker_chain --no-run \
    --message-format=json 2>/dev/null | grep -o '"executable":"[^"]*tracker_chain[^"]*"' | tail -1 | cut -d'"' -f4)
  bins=("$bin")
fi
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq "$hogs"); do
  (while :; do :; done) &
  pids+=($!)
done
echo "# $(date -u +%FT%TZ) tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +dirty), kernel $(uname -r), $(nproc) CPUs, $hogs hogs in this session"
for i in $(seq "$rounds"); do
  for b in "${bins[@]}"; do
    out=$("$b" --include-ignored --nocapture --test-threads 1 2>&1 || true)
    line=$(grep -o "critical → boosted: .*" <<<"$out" || grep -m1 -E "panicked|FAILED" <<<"$out" || echo "no summary")
    echo "round $i $(basename "$b"): $line"
  done
done
