#!/usr/bin/env bash
# The system calls of the tracker's first fast path: a short worker/same-session run of the
# uxsched mode alone, strace attached to its first daemon; prints the calls between the
# `critical set received` and `fast path` debug lines the daemon wrote, then a count by call.
# strace slows the path several times over: read it for which calls, not for how long.
#   sudo scripts/strace-fast-path.sh [BINARY] >OUT      (BINARY: ./target/release/uxsched)
set -euo pipefail
bin=${1:-./target/release/uxsched}
trace=$(mktemp /var/tmp/strace-fast-path.XXXXXX)
(
  for _ in $(seq 1 600); do
    pid=$(pgrep -f "daemon --config /var/tmp/uxsched-bench-" | head -1 || true)
    [ -n "$pid" ] && break
    sleep 0.05
  done
  [ -n "$pid" ] && timeout 8 strace -f -tt -s 120 -p "$pid" -o "$trace" 2>/dev/null || true
) &
RUST_LOG=uxsched_daemon=debug "$bin" bench worker --layout same-session --modes uxsched \
  --reps 1 --duration 3s >/dev/null 2>&1
wait
echo "# $("$bin" --version 2>/dev/null || echo "$bin"), $(date -u +%FT%TZ), $(uname -r)"
first=$(grep -n 'critical set received' "$trace" | head -1 | cut -d: -f1 || true)
last=$(grep -n 'fast path' "$trace" | head -1 | cut -d: -f1 || true)
if [ -z "$first" ] || [ -z "$last" ]; then
  echo "no fast path in the trace ($trace kept)" >&2
  exit 1
fi
sed -n "${first},${last}p" "$trace" | cut -c1-200
echo "# calls by name:"
sed -n "${first},${last}p" "$trace" | sed -E 's/^[0-9]+ +[0-9:.]+ +(<\.\.\. )?([a-z_0-9]+).*/\2/' |
  sort | uniq -c | sort -rn
rm -f "$trace"
