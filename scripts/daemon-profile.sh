#!/usr/bin/env bash
# Where the daemon's CPU goes while an app is typed into: a one-rep `uxsched bench` run in the
# background, `perf record` with DWARF call stacks on its daemon for SECONDS, then the daemon's
# functions by inclusive share. How the inherited-I/O-class sweep was found to be half the
# daemon's CPU with Chromium in front (docs/results/README.md). Run as root.
#   sudo scripts/daemon-profile.sh OUT_DIR [SECONDS] [-- BENCH ARGS...]
# (default bench: chromium, same-session, 12 hogs; BIN: the binary, default target/release/uxsched)
set -euo pipefail
out=${1:?usage: daemon-profile.sh OUT_DIR [SECONDS] [-- BENCH ARGS...]}
secs=${2:-7}
shift $(( $# >= 2 ? 2 : 1 ))
[[ ${1:-} == -- ]] && shift
args=("$@")
(( ${#args[@]} )) || args=(chromium --layout same-session --load cpu --load-workers 12)
bin=${BIN:-target/release/uxsched}
command -v perf >/dev/null || { echo "daemon-profile.sh: needs perf (apt-get install linux-perf)" >&2; exit 1; }
mkdir -p "$out"
"$bin" bench "${args[@]}" --modes uxsched --reps 1 --duration 10s >"$out/bench.txt" 2>&1 &
bench=$!
pid=
for _ in $(seq 120); do
	pid=$(pgrep -n -f "$bin daemon" || true)
	[[ -n $pid ]] && break
	sleep 0.5
done
[[ -n $pid ]] || { echo "daemon-profile.sh: no daemon started (see $out/bench.txt)" >&2; wait "$bench" || true; exit 1; }
sleep 3 # the app in front and typed into
perf record -q -F 499 --call-graph dwarf,16384 -p "$pid" -o "$out/perf.data" -- sleep "$secs"
wait "$bench" || true
perf report -i "$out/perf.data" --children --sort sym --stdio -g none 2>/dev/null |
	grep -E '%.*uxsched_' | cut -c1-160 >"$out/functions.txt"
grep -o 'daemon_cpu_pct=[0-9.]*' "$out/bench.txt" || true
echo "daemon-profile.sh: the daemon's functions by inclusive share in $out/functions.txt"
