#!/bin/bash
# A cold launch under the two writers (`write`) with the session's last binary (grace kept):
# modes idle, stock, uxsched and uxsched-bfq (the opt-in switch), vda on its default
# mq-deadline. Run from the repository root as root on a quiet machine.
# BIN: the binary (default a copy of target/release/uxsched in OUT).
set -u
out=${OUT:-docs/results/2026-11-29/launch-final}
bin=${BIN:-$out/uxsched}
[ -x "$bin" ] || cp target/release/uxsched "$bin"
name=launch-write
echo "# vda: $(cat /sys/block/vda/queue/scheduler); $(date -u +%T); commit $(git describe --always --dirty); load $(cut -d' ' -f1-3 /proc/loadavg)" > $out/$name.txt
"$bin" bench launch --layout same-session --load write --launches 6 \
  --modes idle,stock,uxsched,uxsched-bfq --reps 3 --duration 60s --save $out/$name.json >> $out/$name.txt 2>$out/$name.err
echo "# after: $(cat /sys/block/vda/queue/scheduler); $(date -u +%T); load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/$name.txt
