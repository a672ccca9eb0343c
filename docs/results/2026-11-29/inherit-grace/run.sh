#!/usr/bin/env bash
# How often a launch's inherited I/O class is put back before the launch is raised
# (README.md): sudo docs/results/2026-11-29/inherit-grace/run.sh UXSCHED [REPS]
# Each repetition: the daemon (mode uxsched, defaults), an app in front (app.py as nobody,
# focused) whose six `sh -c` launches fork `true` three times and exec `sleep 0.3`; then the
# daemon's log is read for "put back a setting the task inherited" and for launches.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$1
tmp=$(mktemp -d /tmp/inherit-grace.XXXXXX)
chmod 755 "$tmp"
trap 'kill "${d:-}" 2>/dev/null; rm -rf "$tmp"' EXIT
printf 'socket = "%s/s.sock"\njournal = "%s/j.sqlite"\n' "$tmp" "$tmp" >"$tmp/cfg.toml"
tot=0 launches=0 seen=0
for rep in $(seq "${2:-5}"); do
  "$B" daemon --mode uxsched --config "$tmp/cfg.toml" 2>"$tmp/d.log" &
  d=$!
  until "$B" status --socket "$tmp/s.sock" >/dev/null 2>&1; do sleep 0.05; done
  setsid setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 "$here/app.py" &
  a=$!
  sleep 0.1
  "$B" focus "$a" --socket "$tmp/s.sock" >/dev/null
  wait "$a"
  kill "$d"; wait "$d" || true
  read -r n l s < <(python3 "$here/count.py" "$tmp/d.log")
  tot=$((tot + n)) launches=$((launches + l)) seen=$((seen + s))
done
echo "$B: heirs put back: $tot, of them launches: $launches; launches seen: $seen"
