#!/bin/bash
# How much of the background's writing may be at the disk at once, and what a cold launch pays
# for it (issue 33): mq-deadline's `async_depth` (requests a write may hold: every write, fsync's
# too, is limited by it; reads are not) and the queue's `max_sectors_kb` (the largest request),
# swept against the defaults and BFQ, each point one `uxsched bench launch` run under two writers
# (stock and uxsched beside idle). Run from the repository root as root on a quiet machine; the
# device's settings are put back at the end. BIN: the binary (default target/release/uxsched).
set -u
dev=${DEV:-vda}
out=${OUT:-docs/results/2026-11-28/write-depth}
q=/sys/block/$dev/queue
sched=$(sed -n 's/.*\[\(.*\)\].*/\1/p' $q/scheduler)
msk=$(cat $q/max_sectors_kb)
restore() {
  echo "$sched" > $q/scheduler
  echo "$msk" > $q/max_sectors_kb
  [ -e $q/iosched/async_depth ] && cat $q/nr_requests > $q/iosched/async_depth
}
trap restore EXIT
for point in "mq-deadline 0 $msk" "mq-deadline 8 $msk" "mq-deadline 8 512" "mq-deadline 4 256" \
             "mq-deadline 4 128" "mq-deadline 2 128" "bfq 0 $msk"; do
  set -- $point
  echo "$1" > $q/scheduler
  echo "$3" > $q/max_sectors_kb
  if [ "$1" = mq-deadline ]; then
    if [ "$2" = 0 ]; then cat $q/nr_requests > $q/iosched/async_depth; else echo "$2" > $q/iosched/async_depth; fi
    name=$1-ad$(cat $q/iosched/async_depth)-ms$3
  else
    name=$1-ms$3
  fi
  echo "# $dev: $(cat $q/scheduler) async_depth $(cat $q/iosched/async_depth 2>/dev/null || echo -) max_sectors_kb $(cat $q/max_sectors_kb) nr_requests $(cat $q/nr_requests); $(date -u +%T); load $(cut -d' ' -f1-3 /proc/loadavg)" > $out/$name.txt
  ${BIN:-target/release/uxsched} bench launch --layout same-session --load write --launches 6 \
    --modes idle,stock,uxsched --reps 3 --duration 60s --save $out/$name.json >> $out/$name.txt 2>$out/$name.err
done
