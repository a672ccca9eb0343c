#!/usr/bin/env bash
# The launch watcher's CPU over a fork+exec storm (10,000 `/bin/true` from a shell) and a
# thread storm (python creating 20,000 short threads), with an app in front:
#   sudo docs/results/2026-11-29/watcher-cost/run.sh UXSCHED
set -u
B=$1
tmp=$(mktemp -d /tmp/watcher-cost.XXXXXX); trap 'rm -rf "$tmp"' EXIT
printf 'socket = "%s/s.sock"\njournal = "%s/j.sqlite"\n' "$tmp" "$tmp" >"$tmp/cfg.toml"
"$B" daemon --mode uxsched --config $tmp/cfg.toml 2>$tmp/d.log &
D=$!
until "$B" status --socket $tmp/s.sock >/dev/null 2>&1; do sleep 0.05; done
setsid setpriv --reuid=65534 --regid=65534 --clear-groups sleep 120 &
A=$!
"$B" focus $A --socket $tmp/s.sock >/dev/null
sleep 0.5
T=$(grep -l uxsched-launch /proc/$D/task/*/comm | head -1 | xargs dirname)
cpu() { awk '{print $14+$15}' $T/stat; }
c0=$(cpu); t0=$(date +%s.%N)
bash -c 'for i in $(seq 10000); do /bin/true; done'
c1=$(cpu); t1=$(date +%s.%N)
/usr/bin/python3 -c '
import threading
for i in range(20000):
    t = threading.Thread(target=lambda: None); t.start(); t.join()'
c2=$(cpu); t2=$(date +%s.%N)
echo "$(basename $B): fork+exec storm $(echo "$t1 - $t0" | bc | cut -c1-5) s, watcher $((c1-c0)) ticks; thread storm $(echo "$t2 - $t1" | bc | cut -c1-5) s, watcher $((c2-c1)) ticks (HZ $(getconf CLK_TCK))"
kill $A; kill $D; wait $D 2>/dev/null
