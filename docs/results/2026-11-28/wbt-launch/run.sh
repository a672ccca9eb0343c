#!/bin/bash
# Writeback throttling's latency target (queue/wbt_lat_usec of vda) at the kernel's rotational
# default (75 ms) and its non-rotational one (2 ms), one cold-launch run each under two writers;
# run from the repository root as root on a quiet machine; the device's own target is put back.
# BIN: the binary (default target/release/uxsched).
set -u
out=docs/results/2026-11-28/wbt-launch
orig=$(cat /sys/block/vda/queue/wbt_lat_usec)
trap 'echo "$orig" > /sys/block/vda/queue/wbt_lat_usec' EXIT
for w in 75000 2000; do
  echo $w > /sys/block/vda/queue/wbt_lat_usec
  echo "# wbt_lat_usec $(cat /sys/block/vda/queue/wbt_lat_usec) $(date -u +%T) $(cat /proc/loadavg)" > $out/launch-$w.txt
  ${BIN:-target/release/uxsched} bench launch --layout same-session --launches 6 --modes idle,stock,uxsched --reps 2 --duration 60s >> $out/launch-$w.txt 2>$out/launch-$w.err
done
