#!/bin/bash
# The launch under two writers with 20 launches per repetition (60 per mode), so that the p95
# is not the single slowest launch: modes idle, stock, uxsched-bfq. Run from the repository
# root as root on a quiet machine. BIN: the binary (default a copy of target/release/uxsched).
set -u
out=${OUT:-docs/results/2026-11-29/launch-final-60}
bin=${BIN:-$out/uxsched}
[ -x "$bin" ] || cp target/release/uxsched "$bin"
name=launch-write
echo "# vda: $(cat /sys/block/vda/queue/scheduler); $(date -u +%T); commit $(git describe --always --dirty); load $(cut -d' ' -f1-3 /proc/loadavg)" > $out/$name.txt
"$bin" bench launch --layout same-session --load write --launches 20 \
  --modes idle,stock,uxsched-bfq --reps 3 --duration 120s --save $out/$name.json >> $out/$name.txt 2>$out/$name.err
echo "# after: $(cat /sys/block/vda/queue/scheduler); $(date -u +%T); load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/$name.txt
