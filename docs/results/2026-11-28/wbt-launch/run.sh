#!/bin/bash
cd /work/main
for w in 75000 2000; do
  echo $w > /sys/block/vda/queue/wbt_lat_usec
  echo "# wbt_lat_usec $(cat /sys/block/vda/queue/wbt_lat_usec) $(date -u +%T) $(cat /proc/loadavg)" > docs/results/2026-11-28/wbt-launch/launch-$w.txt
  ${BIN:-target/release/uxsched} bench launch --layout same-session --launches 6 --modes idle,stock,uxsched --reps 2 --duration 60s >> docs/results/2026-11-28/wbt-launch/launch-$w.txt 2>docs/results/2026-11-28/wbt-launch/launch-$w.err
done
echo 75000 > /sys/block/vda/queue/wbt_lat_usec
echo done > /dev/null
