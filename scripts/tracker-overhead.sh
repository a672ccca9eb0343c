#!/usr/bin/env bash
# The tracker's overhead (issue 10): in-kernel time of its BPF programs (kernel.bpf_stats_enabled)
# and the userspace CPU and peak RSS of `uxsched tracker watch`, while the accuracy fixture's
# pty case runs episodes and hackbench makes system-wide wake-ups.
#   sudo scripts/tracker-overhead.sh [SECONDS] [hackbench args…]   (default: 10 -g 2 -l 1000000)
# WATCH_WRAP="chrt -f 10" runs the tracker's userspace at a real-time priority.
# RATE=N replaces hackbench with `stress-ng --switch 1 --switch-freq N`: a paced load of about N
# context switches (wake-ups) per second, for the issue's fixed rates (10 k/s, 100 k/s); the
# rate actually seen system-wide is printed either way.
# DAEMON=1 measures the whole daemon instead (`uxsched daemon`, mode uxsched, its default rt lever,
# private socket/journal/store in a temporary directory, the fixture focused through the socket):
# its CPU share from /proc/<pid>/stat, peak RSS (VmHWM) and "critical → boosted" from `status`.
# BIN_DIR=DIR takes uxsched and uxsched-tracker-fixture from DIR (an A/B against another build).
# Needs a release build (cargo build --release -p uxsched -p uxsched-tracker) and root.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
shift || true
hb=("$@")
[ ${#hb[@]} -gt 0 ] || hb=(-g 2 -l 1000000)
bin=${BIN_DIR:-target/release}/uxsched
fix=${BIN_DIR:-target/release}/uxsched-tracker-fixture
tmp=$(mktemp -d)
prev=$(cat /proc/sys/kernel/bpf_stats_enabled)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sysctl -qw kernel.bpf_stats_enabled="$prev"
  rm -rf "$tmp"
}
trap cleanup EXIT
sysctl -qw kernel.bpf_stats_enabled=1
echo "start $(date -u +%FT%TZ)  loadavg $(cat /proc/loadavg)"

mkfifo "$tmp/go"
"$fix" pty-shell 100000 40 <"$tmp/go" >"$tmp/fix.out" &
pids+=($!)
fpid=$!
exec 3>"$tmp/go"
until grep -q ready "$tmp/fix.out"; do sleep 0.05; done
# Programs loaded before ours (another tracker, the daemon's) are not counted.
bpftool -j prog show | python3 -c 'import json,sys; print(" ".join(str(p["id"]) for p in json.load(sys.stdin)))' >"$tmp/before"
if [ -n "${DAEMON:-}" ]; then
  cat >"$tmp/d.toml" <<TOML
mode = "uxsched"
sources = ["explicit"]
socket = "$tmp/d.sock"
journal = "$tmp/journal.sqlite"
[tracker]
store = "$tmp/t.sqlite"
input_threads = ["uxs-input"]
display_threads = ["uxs-display"]
TOML
  "$bin" daemon --config "$tmp/d.toml" 2>"$tmp/watch.err" &
  pids+=($!)
  wpid=$!
  until [ -S "$tmp/d.sock" ]; do sleep 0.05; done
  "$bin" focus --socket "$tmp/d.sock" "$fpid"
  cpu() { awk '{print $14 + $15}' "/proc/$wpid/stat"; }
  # PERF=FILE records the daemon's call graphs over the measured window.
  [ -z "${PERF:-}" ] || { perf record -q -g -p "$wpid" -o "$PERF" -- sleep "$secs" >/dev/null 2>&1 & }
  # Per thread: "comm ticks" lines (a thread's comm has no spaces here).
  threads() { for t in /proc/"$wpid"/task/*; do awk '{print $2, $14 + $15}' "$t/stat"; done; }
else
  ${WATCH_WRAP:-} "$bin" tracker watch --pid "$fpid" --seconds "$((secs + 2))" --input uxs-input \
    --display uxs-display --store "$tmp/t.sqlite" >"$tmp/watch.out" 2>"$tmp/watch.err" &
  pids+=($!)
  wpid=$!
fi
sleep 1
echo go >&3

# Sum run time and count of the tracker programs this watch process loaded (new ids).
stats() {
  bpftool -j prog show | python3 -c '
import json, sys
before = set(open(sys.argv[1]).read().split()); t = n = w = 0
for p in json.load(sys.stdin):
    if p.get("name", "").startswith("ux_") and str(p["id"]) not in before:
        t += p.get("run_time_ns", 0); n += p.get("run_cnt", 0)
        if p.get("name") == "ux_waking": w += p.get("run_cnt", 0)
print(t, n, w)' "$tmp/before"
}
read -r t0 n0 w0 < <(stats)
s0=$(date +%s.%N)
[ -z "${DAEMON:-}" ] || { c0=$(cpu); threads >"$tmp/threads0"; }
if [ -n "${RATE:-}" ]; then
  timeout "$secs" stress-ng --switch 1 --switch-freq "$RATE" --timeout "${secs}s" >/dev/null 2>&1 || true
else
  timeout "$secs" hackbench "${hb[@]}" >/dev/null 2>&1 || true
fi
read -r t1 n1 w1 < <(stats)
s1=$(date +%s.%N)
if [ -n "${DAEMON:-}" ]; then
  c1=$(cpu)
  threads >"$tmp/threads1"
  hz=$(getconf CLK_TCK)
  python3 -c "import sys; c0,c1,hz,s0,s1=map(float,sys.argv[1:]); print(f'daemon: {100*(c1-c0)/hz/(s1-s0):.2f} % of one CPU (user + system, all its threads)')" "$c0" "$c1" "$hz" "$s0" "$s1"
  python3 - "$tmp/threads0" "$tmp/threads1" "$hz" "$s0" "$s1" <<'PY'
import sys
def load(p):
    d = {}
    for line in open(p):
        name, ticks = line.rsplit(maxsplit=1)
        d[name] = d.get(name, 0) + int(ticks)
    return d
a, b = load(sys.argv[1]), load(sys.argv[2])
hz, secs = float(sys.argv[3]), float(sys.argv[5]) - float(sys.argv[4])
parts = sorted(((b[k] - a.get(k, 0)) / hz / secs * 100, k) for k in b)
print("daemon threads:", ", ".join(f"{k} {v:.2f} %" for v, k in reversed(parts) if v > 0))
PY
  # Most of the resident set is the binary's code pages (file-backed, shared with the page
  # cache, more of them mapped the warmer that cache is); the daemon's own memory is anonymous.
  echo "daemon: peak RSS $(awk '/VmHWM/ {printf "%.1f MiB", $2 / 1024}' "/proc/$wpid/status"), of which anonymous now $(awk '/RssAnon/ {printf "%.1f MiB", $2 / 1024}' "/proc/$wpid/status")"
  "$bin" status --socket "$tmp/d.sock" --json | python3 -c '
import json, sys
s = json.load(sys.stdin); l = s.get("boost_latency")
if not l:
    print("daemon: critical → boosted: none recorded")
else:
    p50, p99, mx, n = (l[k] for k in ("p50_us", "p99_us", "max_us", "samples"))
    print(f"daemon: critical → boosted p50 {p50} µs, p99 {p99} µs, max {mx} µs over {n} new members")'
  kill -TERM "$wpid"
fi
wait "$wpid" || true
python3 - "$t0" "$n0" "$w0" "$t1" "$n1" "$w1" "$s0" "$s1" <<'EOF'
import sys
t0, n0, w0, t1, n1, w1 = map(int, sys.argv[1:7]); s0, s1 = map(float, sys.argv[7:9])
d = s1 - s0
print(f"over {d:.1f} s: {(w1 - w0) / d:,.0f} wake-ups/s system-wide (sched_waking), "
      f"{(n1 - n0) / d:,.0f} BPF program runs/s")
print(f"in-kernel BPF time: {100 * (t1 - t0) / 1e9 / d:.2f} % of one CPU, "
      f"{(t1 - t0) / max(n1 - n0, 1):.0f} ns per program run")
EOF
if [ -n "${DAEMON:-}" ]; then grep -E "WARN|ERROR" "$tmp/watch.err" || true; else cat "$tmp/watch.err"; fi
[ -n "${DAEMON:-}" ] || echo "episodes seen: $(grep -c '"end":"display"' "$tmp/watch.out" || true) snapshot lines with a resolved episode"
echo "end $(date -u +%FT%TZ)  loadavg $(cat /proc/loadavg)"
