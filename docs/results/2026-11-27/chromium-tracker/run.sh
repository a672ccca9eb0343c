#!/bin/sh
# Issue 30's Chromium check: `uxsched tracker watch` on Chromium's browser process while
# xdotool types into a focused <textarea>, with 12 CPU hogs. Needs root, Xvfb on :77 and
# Chromium started as user uxtest (README.md). usage: run.sh BROWSER_PID OUT_DIR [STORE]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${BIN:-target/release/uxsched}
pid=$1 out=$2 store=${3:-$2/store.sqlite}
mkdir -p "$out"
{ date -u +%FT%TZ; uname -r; nproc; chromium --version; git rev-parse --short HEAD; cat /proc/loadavg; } >"$out/env.txt"
stress-ng --cpu 12 --timeout 40s >/dev/null 2>&1 &
hogs=$!
sleep 2
"$bin" tracker watch --pid "$pid" --seconds 14 --store "$store" >"$out/watch.jsonl" 2>"$out/watch.err" &
watch=$!
sleep 2
"$here/roles.sh" >"$out/roles.txt"
DISPLAY=:77 xdotool type --delay 300 "the quick brown fox"
wait $watch
kill $hogs 2>/dev/null || true
wait $hogs 2>/dev/null || true
cat /proc/loadavg >>"$out/env.txt"
python3 "$here/analyse.py" "$out/watch.jsonl" "$out/roles.txt" | tee "$out/analysis.txt"
