#!/usr/bin/env bash
# A/B of the fast path's plan: per binary, 6 fresh daemons with debug logs; per daemon the first batch's fast path line
out=$1
for r in 1 2 3; do for b in infg plan; do
  RUST_LOG=uxsched_daemon=debug /tmp/uxsched-$b bench worker --layout same-session --modes uxsched --reps 6 --duration 2s --keep-logs --save $out/round$r-$b.json > $out/round$r-$b.txt 2>&1
  d=$(sed -n 's/^uxsched bench: the runs. logs are kept in //p' $out/round$r-$b.txt | tail -1)
  for f in $d/daemon-uxsched/daemon*.log; do grep -m1 "fast path" $f | grep -o "candidates_us=.*" ; done > $out/round$r-$b.first-fast-path.txt
  rm -rf "$d"
done; done
